# Exported snapshots held open for pg-verify tests: load with
# `load lib/snapshots`; call snapshots_release from teardown.

HOLD_FDS=() HOLD_PIDS=()

# snapshots SRC TGT: a session on each side (conninfo) holding an exported
# snapshot until snapshots_release; sets SSNAP and TSNAP.
snapshots() {
	local side url fd
	for side in src tgt; do
		if [[ $side == src ]]; then url=$1; else url=$2; fi
		rm -f "$BATS_TEST_TMPDIR/$side.in" "$BATS_TEST_TMPDIR/$side.snap"
		mkfifo "$BATS_TEST_TMPDIR/$side.in"
		psql -X -qAt -d "$url" <"$BATS_TEST_TMPDIR/$side.in" >"$BATS_TEST_TMPDIR/$side.snap" &
		HOLD_PIDS+=("$!")
		exec {fd}>"$BATS_TEST_TMPDIR/$side.in"
		HOLD_FDS+=("$fd")
		printf 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;\nSELECT pg_export_snapshot();\n' >&"$fd"
	done
	wait_until 20 test -s "$BATS_TEST_TMPDIR/src.snap"
	wait_until 20 test -s "$BATS_TEST_TMPDIR/tgt.snap"
	SSNAP=$(<"$BATS_TEST_TMPDIR/src.snap") TSNAP=$(<"$BATS_TEST_TMPDIR/tgt.snap")
}

# snapshots_release: end the sessions, and their snapshots.
snapshots_release() {
	local fd
	for fd in "${HOLD_FDS[@]}"; do exec {fd}>&-; done
	wait "${HOLD_PIDS[@]}" 2>/dev/null || true
	HOLD_FDS=() HOLD_PIDS=()
}
