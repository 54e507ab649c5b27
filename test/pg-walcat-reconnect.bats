#!/usr/bin/env bats
# pg-walcat after a reconnect: the downstream may still apply, and
# acknowledge, what the stream before the new header carried, past where the
# new stream starts. That acknowledgement is the run's own, not a position
# "this stream never wrote".

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src
	psql_at src -c "CREATE TABLE t (id serial PRIMARY KEY, v text)"
	psql_at src -c "CREATE PUBLICATION pub FOR TABLE t"
}

teardown() {
	kill_test_pids
}

teardown_file() {
	cluster_stop_all
}

# write_ack FILE LSN SLOT: a checkpoint file as pg-apply writes it.
write_ack() {
	local sysid
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	printf '%s\nsysid=%s\nslot=%s\n' "$2" "$sysid" "$3" >"$1.tmp"
	mv "$1.tmp" "$1"
}

# lines_at_least FILE PATTERN N: for wait_until, which runs it again each time.
lines_at_least() {
	(($(grep -c "$2" "$1") >= $3))
}

@test "an acknowledgement of what the stream before a reconnect carried, past the new stream's start, is taken, not refused as never written" {
	local ack=$BATS_TEST_TMPDIR/ack out=$BATS_TEST_TMPDIR/out first last pid rc=0
	new_slot rc_slot
	# The second transaction is large, so that the new stream takes a while
	# to carry it again: the acknowledgement below comes in that window.
	psql_at src -c "INSERT INTO t (v) VALUES ('row 1')"
	psql_at src -c "INSERT INTO t (v) SELECT repeat(md5(g::text), 4) FROM generate_series(1, 200000) g"
	psql_at src -c "INSERT INTO t (v) VALUES ('row 3')"
	pg-walcat -d "$src_URL" --slot rc_slot --publication pub --ack-file "$ack" --status-interval 100ms \
		>"$out" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	echo "$pid" >>"$BATS_TEST_TMPDIR/pids"
	wait_until 20 lines_at_least "$out" '^COMMIT' 3 || { cat "$BATS_TEST_TMPDIR/err"; return 1; }
	first=$(awk -F'\t' '$1 == "COMMIT" { print $4; exit }' "$out")
	last=$(awk -F'\t' '$1 == "COMMIT" { e = $4 } END { print e }' "$out")
	# The downstream has the first transaction; pg-walcat confirms it.
	write_ack "$ack" "$first" rc_slot
	wait_until 20 sql_is src "$first" "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'rc_slot'"
	# The source restarts: the new stream starts at the first transaction's end.
	cluster_restart src --mode immediate
	wait_until 60 lines_at_least "$out" '^PGCS' 2
	kill -STOP "$pid"
	# Meanwhile the downstream applied the rest of the old stream: the
	# new stream (stopped a moment) has not carried it again yet.
	write_ack "$ack" "$last" rc_slot
	kill -CONT "$pid"
	wait_until 20 sql_is src "$last" "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'rc_slot'"
	kill -0 "$pid"
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$BATS_TEST_TMPDIR/err"; return 1; }
	! grep -q "cannot come from" "$BATS_TEST_TMPDIR/err"
}
