#!/usr/bin/env bats
# The progress of a long bootstrap: on a terminal a bar redrawn in place
# with rows, rate and time left; elsewhere a plain line every
# PGSYNC_PROGRESS_SECONDS; and pgsync status tells the same time left, from
# the same figures (lib/pgsync/progress.sh). The target's
# pgsync.table_chunk gets a trigger that makes each chunk take 50 ms, so
# that a small copy lasts long enough to be watched.

load lib/cluster
load pgsync-helpers
load chunked-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src <<-'SQL'
		CREATE TABLE "Progress" (id bigserial PRIMARY KEY, v text);
		INSERT INTO "Progress" (v) SELECT md5(g::text) FROM generate_series(1, 60000) g;
		ANALYZE "Progress";
		CREATE PUBLICATION pr_pub FOR TABLE "Progress";
	SQL
	export TGT_URL=$tgt_URL
	catalog_ready
	slow_chunks
}

teardown_file() {
	cluster_stop_all
}

# new_job NAME: a chunked job of 250-row chunks: 240 chunks of 50 ms on
# two connections, a copy of about 6 s, long enough for several redraws
# however busy the machine.
new_job() {
	job_conf "$1" "$1_slot" pr_pub public.Progress resources.snapshot_mode=chunked \
		resources.chunk_rows=250 resources.max_parallel_copies=2 >/dev/null
}

@test "on a terminal, bootstrap redraws one progress line with a bar, rows, rate and time left, and clears it when the copy ends" {
	new_job pr_tty
	# script(1) gives pgsync a terminal; what it wrote is in the typescript.
	run script -qec "env PGSYNC_SOURCE_URL='$src_URL' PGSYNC_TARGET_URL='$tgt_URL' TMPDIR='$BATS_FILE_TMPDIR' \
		pgsync -c '$BATS_FILE_TMPDIR/pr_tty.conf' bootstrap" "$BATS_TEST_TMPDIR/typescript"
	echo "$output" | tail -n 5
	[ "$status" -eq 0 ]
	local ts=$BATS_TEST_TMPDIR/typescript
	# Redrawn in place: carriage returns, the line cleared, no newline between.
	(($(grep -c $'\r\033\[Kcopying \[[#-]*\] ' "$ts") >= 1))
	(($(grep -o 'copying \[[#-]*\] ' "$ts" | wc -l) >= 2))
	grep -Eq 'copying \[[#-]{20}\] +[0-9]+%  [0-9]+ of [0-9]+ rows  [0-9]+ rows/s  ETA [0-9]+:[0-9]{2}' "$ts"
	# The bootstrap's own lines after it start on a cleared line.
	grep -q $'\r\033\[Kpgsync: bootstrap of job pr_tty complete' <(tr -d '\n' <"$ts" | sed 's/\r\x1b\[K/\n&/g') ||
		grep -q 'bootstrap of job pr_tty complete' "$ts"
	[ "$(psql_at tgt -c 'SELECT count(*) FROM "Progress"')" = 60000 ]
	pgs pr_tty cleanup --yes >/dev/null 2>&1
}

@test "not on a terminal, bootstrap logs a plain progress line every PGSYNC_PROGRESS_SECONDS, and status tells the same time left" {
	new_job pr_plain
	psql_at tgt -c 'DROP TABLE "Progress"'
	PGSYNC_PROGRESS_SECONDS=1 pgs_bg "$BATS_TEST_TMPDIR/bs.log" pr_plain bootstrap
	wait_until 60 grep -q 'copy progress: .*rows/s, about [0-9]* s left' "$BATS_TEST_TMPDIR/bs.log"
	run pgs pr_plain status --json
	[ "$status" -eq 0 ]
	local eta_status eta_line
	eta_status=$(jq -r '.snapshot.chunks.eta_seconds // empty' <<<"$output")
	eta_line=$(grep -o 'about [0-9]* s left' "$BATS_TEST_TMPDIR/bs.log" | tail -n 1 | tr -dc 0-9)
	echo "status $eta_status s, the last line $eta_line s"
	[ -n "$eta_status" ]
	# One figure read a moment apart: within the second or two between.
	((eta_status - eta_line <= 3 && eta_line - eta_status <= 3))
	jq -e '.snapshot.chunks.rows_estimate >= 50000' <<<"$output"
	# The dashboard's "time left" panel reads this series.
	run pgs pr_plain status --prometheus
	grep -Eq '^pgsync_snapshot_eta_seconds\{pgsync_job="pr_plain"\} [0-9]+$' <<<"$output"
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 120
	[ "$BG_STATUS" -eq 0 ]
	# No bar and no terminal codes in a file.
	! grep -q $'\033' "$BATS_TEST_TMPDIR/bs.log"
	grep -Eq 'pgsync: copy progress: [0-9]+% \([0-9]+ of [0-9]+ rows\), [0-9]+ rows/s, about [0-9]+ s left$' "$BATS_TEST_TMPDIR/bs.log"
	pgs pr_plain cleanup --yes >/dev/null 2>&1
}
