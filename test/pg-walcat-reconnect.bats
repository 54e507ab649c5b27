#!/usr/bin/env bats
# pg-walcat after a reconnect: the downstream may still apply, and
# acknowledge, what the stream before the new header carried, past where the
# new stream starts. That acknowledgement is the run's own, not a position
# "this stream never wrote". And a new pipeline started from a checkpoint
# file that lags the target: pg-apply says no more than the stream carried.

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src
	cluster_start tgt
	both "CREATE TABLE t (id serial PRIMARY KEY, v text)"
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

@test "a checkpoint file behind the target (pg-apply killed between its commit and the file): the next pipeline starts from the file, pg-apply never acknowledges past what the stream carried, and it runs on" {
	local ckpt=$BATS_TEST_TMPDIR/applied.lsn end pid apid rc=0 arc=0
	new_slot lag_slot
	psql_at src -c "INSERT INTO t (v) VALUES ('first')"
	end=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	# Nothing confirmed on the slot: the next stream carries all of it again.
	pg-walcat -d "$src_URL" --slot lag_slot --publication pub --endpos "$end" 2>/dev/null |
		pg-apply -d "$tgt_URL" --checkpoint "$ckpt" 2>/dev/null
	cp "$ckpt" "$ckpt.behind"
	# About 2 MB more, applied: the target is ahead of the copy kept.
	psql_at src -c "INSERT INTO t (v) SELECT repeat(md5(g::text), 8) FROM generate_series(1, 8000) g"
	end=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	pg-walcat -d "$src_URL" --slot lag_slot --publication pub --endpos "$end" 2>/dev/null |
		pg-apply -d "$tgt_URL" --checkpoint "$ckpt" 2>/dev/null
	[ "$(psql_at tgt -c "SELECT count(*) FROM t")" = 8001 ]
	(($(lsn_num "$(head -n 1 "$ckpt")") > $(lsn_num "$(head -n 1 "$ckpt.behind")")))
	# As after a kill -9 of pg-apply between its commit and the file.
	mv "$ckpt.behind" "$ckpt"
	# pg-apply reads the header at once, the rest after 3 s: pg-walcat, its
	# output blocked on the full pipe, reads the file many times meanwhile.
	pg-walcat -d "$src_URL" --slot lag_slot --publication pub --ack-file "$ckpt" --status-interval 100ms \
		2>"$BATS_TEST_TMPDIR/walcat.err" 3>&- |
		{ IFS= read -r line; printf '%s\n' "$line"; sleep 3; exec cat; } |
		pg-apply -d "$tgt_URL" --checkpoint "$ckpt" 2>"$BATS_TEST_TMPDIR/apply.err" 3>&- &
	apid=$!
	echo "$apid" >>"$BATS_TEST_TMPDIR/pids"
	wait_until 20 pgrep -f "pg-walcat.*lag_slot"
	pid=$(pgrep -f "pg-walcat.*lag_slot")
	sleep 4
	psql_at src -c "INSERT INTO t (v) VALUES ('after')"
	wait_until 30 sql_is tgt 8002 "SELECT count(*) FROM t" ||
		{ cat "$BATS_TEST_TMPDIR/walcat.err" "$BATS_TEST_TMPDIR/apply.err"; return 1; }
	kill -0 "$pid"
	kill -TERM "$pid"
	wait "$apid" || arc=$?
	cat "$BATS_TEST_TMPDIR/walcat.err"
	! grep -q "cannot come from" "$BATS_TEST_TMPDIR/walcat.err"
	[ "$arc" -eq 0 ]
	# The file caught up with the target, and the slot with the file.
	[ "$(head -n 1 "$ckpt")" = "$(psql_at tgt -c "SELECT applied_lsn FROM pgsync.job")" ]
}
