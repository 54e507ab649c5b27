#!/usr/bin/env bats
# The end-to-end flows under valgrind memcheck: no invalid reads or writes, no
# uninitialised values, no definitely or indirectly lost memory, on the happy
# paths, the reconnect path and the error paths. Still-reachable memory at
# exit (libpq, the logging state) is not a leak.
#
# Skipped when the programs are a sanitizer build (make sanitize): valgrind
# cannot run those, and ASan/UBSan cover the same ground there.

load lib/cluster
load lib/slot

setup_file() {
	cluster_start src --set logical_decoding_work_mem=64kB
	cluster_start tgt
	local schema="CREATE TABLE vg_t (id int PRIMARY KEY, t text, b bytea, j jsonb, a int[], big text);
		ALTER TABLE vg_t ALTER COLUMN big SET STORAGE EXTERNAL;
		CREATE TABLE vg_snap (id bigint PRIMARY KEY, v text);
		CREATE TABLE vg_full (a int, b text);
		ALTER TABLE vg_full REPLICA IDENTITY FULL;"
	psql_at src -c "$schema" -c "CREATE PUBLICATION vg_pub FOR TABLE vg_t, vg_full" \
		-c "CREATE PUBLICATION vg_snap_pub FOR TABLE vg_snap"
	psql_at tgt -c "$schema"
}

teardown_file() {
	cluster_stop_all
}

setup() {
	if nm "$PGSYNC_BIN/pg-apply" 2>/dev/null | grep -q '__asan_init\|__ubsan_handle'; then
		skip "the programs are a sanitizer build: valgrind cannot run them"
	fi
	command -v valgrind >/dev/null || skip "valgrind is not installed (scripts/install-deps)"
}

# vg NAME PROGRAM ARGS...: run under memcheck, its report in vg-NAME.log.
# Exit 99 is memcheck's ("errors found"); anything else is the program's.
vg() {
	local name=$1
	shift
	valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --track-origins=yes \
		--log-file="$BATS_TEST_TMPDIR/vg-$name.log" "$@"
}

# vg_exec: the same, replacing the calling shell, for `vg_exec ... &` so that
# $! is the process itself and a signal sent to it reaches the program.
vg_exec() {
	local name=$1
	shift
	exec valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --track-origins=yes \
		--log-file="$BATS_TEST_TMPDIR/vg-$name.log" "$@"
}

# The memcheck reports of this test must all be empty.
clean_reports() {
	local f bad=0
	for f in "$BATS_TEST_TMPDIR"/vg-*.log; do
		if [[ -s $f ]]; then
			echo "--- $f"
			head -n 40 "$f"
			bad=1
		fi
	done
	return $bad
}

# on_target SQL VALUE: the query's result is VALUE.
on_target() {
	[[ $(psql_at tgt -c "$1") == "$2" ]]
}

workload() {
	psql_at src <<'SQL'
INSERT INTO vg_t SELECT g, E'tab\there ' || g, decode(md5(g::text), 'hex'), jsonb_build_object('g', g),
  ARRAY[g, NULL], (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 100) i)
  FROM generate_series(1, 300) g;
UPDATE vg_t SET t = NULL WHERE id % 3 = 0;
UPDATE vg_t SET id = id + 1000 WHERE id % 7 = 0;
DELETE FROM vg_t WHERE id % 5 = 0;
INSERT INTO vg_full VALUES (1, 'a'), (2, NULL);
UPDATE vg_full SET b = 'b' WHERE a = 1;
DELETE FROM vg_full WHERE a = 2;
SELECT pg_logical_emit_message(true, 'vg', 'x');
BEGIN;
INSERT INTO vg_t SELECT g, 'streamed', NULL, NULL, NULL, NULL FROM generate_series(5001, 8000) g;
SAVEPOINT s;
INSERT INTO vg_t SELECT g, 'gone', NULL, NULL, NULL, NULL FROM generate_series(9001, 9500) g;
ROLLBACK TO s;
COMMIT;
SQL
}

@test "valgrind: pg-walcat --endpos now | pg-apply (every change kind, TOAST, a streamed transaction) has no memory errors or leaks" {
	psql_at src -c "SELECT 1 FROM pg_create_logical_replication_slot('vg_slot', 'pgoutput')"
	workload
	vg walcat pg-walcat -d "$src_URL" --slot vg_slot --publication vg_pub --endpos now \
		--ack-file "$BATS_TEST_TMPDIR/ack" |
		vg apply pg-apply -d "$tgt_URL" --checkpoint "$BATS_TEST_TMPDIR/ack"
	local codes=("${PIPESTATUS[@]}")
	clean_reports
	[ "${codes[0]}" -eq 0 ]
	[ "${codes[1]}" -eq 0 ]
	[ "$(table_checksum "$src_URL" vg_t)" = "$(table_checksum "$tgt_URL" vg_t)" ]
	[ "$(table_checksum "$src_URL" vg_full)" = "$(table_checksum "$tgt_URL" vg_full)" ]
}

@test "valgrind: pg-walcat reconnecting after its walsender is terminated has no memory errors or leaks" {
	psql_at src -c "SELECT 1 FROM pg_create_logical_replication_slot('vg_reconnect', 'pgoutput')"
	local fifo=$BATS_TEST_TMPDIR/pipe
	mkfifo "$fifo"
	vg_exec walcat pg-walcat -d "$src_URL" --slot vg_reconnect --publication vg_pub \
		--ack-file "$BATS_TEST_TMPDIR/ack" --status-interval 200ms >"$fifo" 2>"$BATS_TEST_TMPDIR/walcat.err" &
	local wpid=$!
	vg_exec apply pg-apply -d "$tgt_URL" --checkpoint "$BATS_TEST_TMPDIR/ack" <"$fifo" 2>"$BATS_TEST_TMPDIR/apply.err" &
	local apid=$!
	wait_until 60 slot_active vg_reconnect
	psql_at src -c "INSERT INTO vg_full VALUES (10, 'before')"
	psql_at src -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'vg_reconnect'"
	psql_at src -c "INSERT INTO vg_full VALUES (11, 'after')"
	# Back and caught up: the row written after the reconnect is on the target.
	wait_until 60 on_target "SELECT count(*) FROM vg_full WHERE a = 11" 1
	kill -TERM "$wpid"
	local wrc=0 arc=0
	wait "$wpid" || wrc=$?
	wait "$apid" || arc=$?
	cat "$BATS_TEST_TMPDIR/walcat.err" "$BATS_TEST_TMPDIR/apply.err"
	clean_reports
	grep -q 'reconnecting' "$BATS_TEST_TMPDIR/walcat.err"
	[ "$wrc" -eq 0 ]
	[ "$arc" -eq 0 ]
}

@test "valgrind: pg-apply reconnecting after its apply backend is terminated, applying again what it had read, has no memory errors or leaks" {
	psql_at src -c "SELECT 1 FROM pg_create_logical_replication_slot('vg_tgtloss', 'pgoutput')"
	local fifo=$BATS_TEST_TMPDIR/pipe
	mkfifo "$fifo"
	vg_exec walcat pg-walcat -d "$src_URL" --slot vg_tgtloss --publication vg_pub \
		--ack-file "$BATS_TEST_TMPDIR/ack" --status-interval 200ms >"$fifo" 2>"$BATS_TEST_TMPDIR/walcat.err" &
	local wpid=$!
	vg_exec apply pg-apply -d "$tgt_URL" --checkpoint "$BATS_TEST_TMPDIR/ack" <"$fifo" 2>"$BATS_TEST_TMPDIR/apply.err" &
	local apid=$!
	psql_at src -c "INSERT INTO vg_full VALUES (20, 'before')"
	wait_until 120 on_target "SELECT count(*) FROM vg_full WHERE a = 20" 1
	# The apply session (it holds the job's lock), between transactions: the
	# next one finds it gone, reconnects and applies that one again.
	psql_at tgt -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = 7442718 AND granted"
	psql_at src -c "INSERT INTO vg_full VALUES (21, 'after')"
	wait_until 120 on_target "SELECT count(*) FROM vg_full WHERE a = 21" 1
	kill -TERM "$wpid"
	local wrc=0 arc=0
	wait "$wpid" || wrc=$?
	wait "$apid" || arc=$?
	cat "$BATS_TEST_TMPDIR/walcat.err" "$BATS_TEST_TMPDIR/apply.err"
	clean_reports
	grep -q 'reconnected to the target' "$BATS_TEST_TMPDIR/apply.err"
	[ "$wrc" -eq 0 ]
	[ "$arc" -eq 0 ]
}

@test "valgrind: pg-slot --export-snapshot, pg-snapshot-dump (2 workers, split ranges) | pg-apply have no memory errors or leaks" {
	psql_at src -c "INSERT INTO vg_snap SELECT g, md5(g::text) FROM generate_series(1, 20000) g"
	mkfifo "$BATS_TEST_TMPDIR/hold"
	vg_exec slot pg-slot create -d "$src_URL" --slot vg_snap_slot --export-snapshot \
		<"$BATS_TEST_TMPDIR/hold" >"$BATS_TEST_TMPDIR/slot.out" &
	local holder=$!
	exec 7>"$BATS_TEST_TMPDIR/hold"
	wait_until 60 test -s "$BATS_TEST_TMPDIR/slot.out"
	local slot consistent snapshot
	IFS=$'\t' read -r slot consistent snapshot <"$BATS_TEST_TMPDIR/slot.out"
	vg dump pg-snapshot-dump -d "$src_URL" --snapshot "$snapshot" --position "$consistent" --slot vg_snap_slot \
		--publication vg_snap_pub --jobs 2 --split-rows 5000 -q |
		vg apply pg-apply -d "$tgt_URL" -j 2
	local codes=("${PIPESTATUS[@]}")
	exec 7>&-
	local hrc=0
	wait "$holder" || hrc=$?
	clean_reports
	[ "${codes[0]}" -eq 0 ]
	[ "${codes[1]}" -eq 0 ]
	[ "$hrc" -eq 0 ]
	[ "$(table_checksum "$src_URL" vg_snap)" = "$(table_checksum "$tgt_URL" vg_snap)" ]
	vg show pg-slot show -d "$src_URL" --slot vg_snap_slot --json >/dev/null
	vg drop pg-slot drop -d "$src_URL" --slot vg_snap_slot
	clean_reports
}

@test "valgrind: pg-ack confirming a position, and finding it already confirmed, has no memory errors or leaks" {
	psql_at src -c "SELECT 1 FROM pg_create_logical_replication_slot('vg_ack', 'pgoutput')"
	psql_at src -c "INSERT INTO vg_full VALUES (100, 'ack')"
	local now
	now=$(psql_at src -c "SELECT pg_current_wal_flush_lsn()")
	vg ack pg-ack -d "$src_URL" --slot vg_ack --lsn "$now"
	[ "$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'vg_ack'")" = "$now" ]
	vg again pg-ack -d "$src_URL" --slot vg_ack --lsn "$now"
	vg dry pg-ack -d "$src_URL" --slot vg_ack --lsn "$now" --dry-run
	clean_reports
	psql_at src -c "SELECT pg_drop_replication_slot('vg_ack')"
}

@test "valgrind: pg-apply rejecting malformed streams (unknown record, bad field, truncated transaction, overlong line) has no memory errors or leaks" {
	local hdr=$'PGCS\t1\t7442718406132410263\t1\tvg_bad\t0/1000000'
	local rel=$'RELATION\tpublic\tvg_full\t1\tf\t2\ta\t23\t-1\t-\tb\t25\t-1\t-'
	local begin=$'BEGIN\t9\t0/1000100\t2026-11-30 14:03:07.123456+00'
	run vg unknown pg-apply -d "$tgt_URL" < <(printf '%s\n' "$hdr" "$rel" "$begin" $'BOGUS\tx')
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"-:4: "* ]]
	run vg badfield pg-apply -d "$tgt_URL" < <(printf '%s\n' "$hdr" "$rel" "$begin" $'INSERT\tpublic\tvg_full\t1')
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"-:4: "* ]]
	run vg truncated pg-apply -d "$tgt_URL" < <(printf '%s\n' "$hdr" "$rel" "$begin" $'INSERT\tpublic\tvg_full\t1\tx')
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *"truncated in transaction 9"* ]]
	run vg toolong pg-apply -d "$tgt_URL" --max-message-bytes 1kB \
		< <(printf '%s\n' "$hdr" "$rel" "$begin" "INSERT	public	vg_full	1	$(head -c 3000 /dev/zero | tr '\0' x)")
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"longer than --max-message-bytes"* ]]
	clean_reports
	[ "$(psql_at tgt -c "SELECT count(*) FROM vg_full WHERE a = 1 AND b = 'x'")" = 0 ]
}
