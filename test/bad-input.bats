#!/usr/bin/env bats
# Bad input never loses data: malformed, truncated or foreign streams and
# checkpoint files, and misuse of the programs, stop with an error that names
# what is wrong, and nothing already committed or acknowledged is undone: the
# target keeps what it had, its checkpoint stays, and the slot is confirmed no
# further than the target has committed. A clean run afterwards completes
# the target exactly.

bats_require_minimum_version 1.5.0
load lib/cluster
load lib/slot

setup_file() {
	cluster_start src
	cluster_start tgt
	local schema="CREATE TABLE bi_t (id int PRIMARY KEY, v text);
		CREATE TABLE bi_counter (id int PRIMARY KEY, n bigint NOT NULL);
		CREATE TABLE fz_users (id int PRIMARY KEY, name text, bio text);"
	psql_at src -c "$schema" -c "CREATE PUBLICATION bi_pub FOR TABLE bi_t, bi_counter"
	psql_at tgt -c "$schema"
}

teardown_file() {
	cluster_stop_all
}

# A failed test must not leave what it started in the background running.
teardown() {
	kill_test_pids
}

src() { psql_at src "$@"; }
tgt() { psql_at tgt "$@"; }

applied() {
	tgt -c "SELECT applied_lsn FROM pgsync.job WHERE job = '$1'"
}

# Three transactions for slot $1, each inserting rows $2.. and bumping the
# counter (a transaction applied twice shows in it), streamed to FILE $3.
three_transactions() {
	local slot=$1 base=$2 file=$3 i
	src -c "SELECT 1 FROM pg_create_logical_replication_slot('$slot', 'pgoutput')" >/dev/null
	src -c "INSERT INTO bi_counter VALUES ($base, 0) ON CONFLICT DO NOTHING" >/dev/null
	for i in 0 1 2; do
		src -c "BEGIN" -c "INSERT INTO bi_t SELECT g, 'v' || g FROM generate_series($((base + i * 10)), $((base + i * 10 + 9))) g" \
			-c "UPDATE bi_counter SET n = n + 1 WHERE id = $base" -c "COMMIT" >/dev/null
	done
	pg-walcat -d "$src_URL" --slot "$slot" --publication bi_pub --endpos now >"$file" 2>/dev/null
	[ "$(grep -c '^COMMIT	' "$file")" = 4 ]
}

# Line number of the Nth COMMIT in FILE.
commit_line() {
	grep -n '^COMMIT	' "$2" | sed -n "${1}p" | cut -d: -f1
}

# The end LSN of the Nth COMMIT in FILE.
commit_end() {
	grep '^COMMIT	' "$2" | sed -n "${1}p" | cut -f4
}

same_rows() {
	[ "$(table_checksum "$src_URL" bi_t)" = "$(table_checksum "$tgt_URL" bi_t)" ]
	[ "$(table_checksum "$src_URL" bi_counter)" = "$(table_checksum "$tgt_URL" bi_counter)" ]
}

@test "a corrupt line inside a transaction exits 5 naming file and line; earlier commits stay applied and checkpointed, the slot is confirmed no further, a clean rerun completes the target" {
	local good=$BATS_TEST_TMPDIR/good.pgcs bad=$BATS_TEST_TMPDIR/bad.pgcs ck=$BATS_TEST_TMPDIR/ck
	three_transactions bi_corrupt 1000 "$good"
	# A bad escape (trailing lone backslash) right after the last BEGIN.
	local at
	at=$(grep -n '^BEGIN	' "$good" | tail -n 1 | cut -d: -f1)
	sed "${at}a INSERT\tpublic\tbi_t\t999999\tbroken\\\\" "$good" >"$bad"
	sed -n "$((at + 1))p" "$bad" | grep -q 'broken\\$'
	run --separate-stderr pg-apply -d "$tgt_URL" --checkpoint "$ck" --max-batch-bytes 1 "$bad"
	echo "$stderr"
	[ "$status" -eq 5 ]
	[[ $stderr == *"pg-apply: error: $bad:$((at + 1)): bad escape sequence in INSERT value 2"* ]]
	# Everything before the broken transaction was committed and checkpointed.
	local end2
	end2=$(commit_end 3 "$good")
	[ "$(applied bi_corrupt)" = "$end2" ]
	[ "$(head -n 1 "$ck")" = "$end2" ]
	[ "$(tgt -c "SELECT n FROM bi_counter WHERE id = 1000")" = 2 ]
	[ "$(tgt -c "SELECT count(*) FROM bi_t WHERE id >= 1000 AND id < 2000")" = 20 ]
	# Confirming from the checkpoint moves the slot exactly there.
	pg-ack -d "$src_URL" --slot bi_corrupt --from "$ck" -q
	[ "$(confirmed bi_corrupt)" = "$end2" ]
	# The producer resends from there; nothing is lost, nothing applied twice.
	pg-walcat -d "$src_URL" --slot bi_corrupt --publication bi_pub --ack-file "$ck" --endpos now 2>/dev/null |
		pg-apply -d "$tgt_URL" --checkpoint "$ck"
	same_rows
	[ "$(tgt -c "SELECT n FROM bi_counter WHERE id = 1000")" = 3 ]
}

@test "a stream cut inside a transaction exits 1 naming it; that transaction is not applied, applied_lsn and the checkpoint stay at the previous commit" {
	local good=$BATS_TEST_TMPDIR/good.pgcs cut=$BATS_TEST_TMPDIR/cut.pgcs ck=$BATS_TEST_TMPDIR/ck
	three_transactions bi_cut 2000 "$good"
	local last_commit
	last_commit=$(commit_line 4 "$good")
	head -n "$((last_commit - 1))" "$good" >"$cut"
	local xid
	xid=$(grep '^BEGIN	' "$good" | tail -n 1 | cut -f2)
	run --separate-stderr pg-apply -d "$tgt_URL" --checkpoint "$ck" --max-batch-bytes 1 "$cut"
	echo "$stderr"
	[ "$status" -eq 1 ]
	[[ $stderr == *"pg-apply: error: $cut: stream truncated in transaction $xid at line $last_commit"* ]]
	local end2
	end2=$(commit_end 3 "$good")
	[ "$(applied bi_cut)" = "$end2" ]
	[ "$(head -n 1 "$ck")" = "$end2" ]
	[ "$(tgt -c "SELECT n FROM bi_counter WHERE id = 2000")" = 2 ]
	# A line cut in the middle (no LF) is the same: nothing of it applies.
	head -n "$((last_commit - 1))" "$good" | head -c -2 >"$cut"
	run --separate-stderr pg-apply -d "$tgt_URL" --checkpoint "$ck" "$cut"
	[ "$status" -eq 1 ]
	[[ $stderr == *"stream truncated"* ]]
	[ "$(tgt -c "SELECT n FROM bi_counter WHERE id = 2000")" = 2 ]
	# The whole stream again: the first two are skipped, the third applied once.
	pg-apply -d "$tgt_URL" --checkpoint "$ck" "$good"
	[ "$(tgt -c "SELECT n FROM bi_counter WHERE id = 2000")" = 3 ]
	[ "$(applied bi_cut)" = "$(commit_end 4 "$good")" ]
}

@test "a stream from another source system for a job with progress exits 4; target, applied_lsn and checkpoint stay" {
	local good=$BATS_TEST_TMPDIR/good.pgcs other=$BATS_TEST_TMPDIR/other.pgcs ck=$BATS_TEST_TMPDIR/ck
	three_transactions bi_foreign 3000 "$good"
	pg-apply -d "$tgt_URL" --checkpoint "$ck" "$good"
	local before rows
	before=$(applied bi_foreign)
	rows=$(tgt -c "SELECT count(*) FROM bi_t")
	# Same slot name, another system identifier: the data would be foreign.
	sed '1s/^\(PGCS\t1\t\)[0-9]*/\11234567890123456789/' "$good" | sed 's/\tv30\([0-9]\)$/\tforeign/' >"$other"
	run --separate-stderr pg-apply -d "$tgt_URL" --checkpoint "$ck" "$other"
	echo "$stderr"
	[ "$status" -eq 4 ]
	[[ $stderr == *"another server than the job's: system identifier 1234567890123456789, the job's is "*"resync required"* ]]
	[ "$(applied bi_foreign)" = "$before" ]
	[ "$(head -n 1 "$ck")" = "$before" ]
	[ "$(tgt -c "SELECT count(*) FROM bi_t")" = "$rows" ]
	[ "$(tgt -c "SELECT count(*) FROM bi_t WHERE v = 'foreign'")" = 0 ]
}

@test "pg-walcat refuses an ack file of another slot (exit 4) and a garbage one (exit 1 naming it), and confirms nothing" {
	src -c "SELECT 1 FROM pg_create_logical_replication_slot('bi_ack', 'pgoutput')"
	src -c "INSERT INTO bi_t VALUES (4000, 'x')"
	local before
	before=$(confirmed bi_ack)
	local sysid
	sysid=$(src -c "SELECT system_identifier FROM pg_control_system()")
	printf '%s\nsysid=%s\ntimeline=1\nslot=some_other_slot\n' "$(src -c 'SELECT pg_current_wal_lsn()')" "$sysid" \
		>"$BATS_TEST_TMPDIR/other.lsn"
	run --separate-stderr pg-walcat -d "$src_URL" --slot bi_ack --publication bi_pub \
		--ack-file "$BATS_TEST_TMPDIR/other.lsn" --endpos now
	echo "$stderr"
	[ "$status" -eq 4 ]
	[[ $stderr == *other.lsn* ]]
	printf 'not an lsn\n' >"$BATS_TEST_TMPDIR/garbage.lsn"
	run --separate-stderr pg-walcat -d "$src_URL" --slot bi_ack --publication bi_pub \
		--ack-file "$BATS_TEST_TMPDIR/garbage.lsn" --endpos now
	echo "$stderr"
	[ "$status" -eq 1 ]
	[[ $stderr == *"pg-walcat: error: "*garbage.lsn* ]]
	[ "$(confirmed bi_ack)" = "$before" ]
}

@test "pg-ack refuses a checkpoint of another slot and a position behind the slot (exit 4), and never moves the slot backwards" {
	src -c "SELECT 1 FROM pg_create_logical_replication_slot('bi_pgack', 'pgoutput')"
	src -c "INSERT INTO bi_t VALUES (5000, 'x')"
	local now before sysid
	now=$(src -c "SELECT pg_current_wal_flush_lsn()")
	pg-ack -d "$src_URL" --slot bi_pgack --lsn "$now" -q
	before=$(confirmed bi_pgack)
	[ "$before" = "$now" ]
	sysid=$(src -c "SELECT system_identifier FROM pg_control_system()")
	printf '%s\nsysid=%s\ntimeline=1\nslot=not_bi_pgack\n' "$now" "$sysid" >"$BATS_TEST_TMPDIR/other.lsn"
	run --separate-stderr pg-ack -d "$src_URL" --slot bi_pgack --from "$BATS_TEST_TMPDIR/other.lsn"
	echo "$stderr"
	[ "$status" -eq 4 ]
	run --separate-stderr pg-ack -d "$src_URL" --slot bi_pgack --lsn 0/1
	echo "$stderr"
	[ "$status" -eq 4 ]
	[[ $stderr == *"has already confirmed $before, past 0/1"* ]]
	[ "$(confirmed bi_pgack)" = "$before" ]
}

@test "a slot dropped and recreated under the same name: pg-walcat with the job's ack file exits 4 rather than stream over the gap" {
	local good=$BATS_TEST_TMPDIR/good.pgcs ck=$BATS_TEST_TMPDIR/ck
	three_transactions bi_recreated 6000 "$good"
	pg-apply -d "$tgt_URL" --checkpoint "$ck" "$good"
	src -c "SELECT pg_drop_replication_slot('bi_recreated')"
	src -c "INSERT INTO bi_t VALUES (6999, 'lost while no slot existed')"
	src -c "SELECT 1 FROM pg_create_logical_replication_slot('bi_recreated', 'pgoutput')"
	run --separate-stderr pg-walcat -d "$src_URL" --slot bi_recreated --publication bi_pub --ack-file "$ck" --endpos now
	echo "$stderr"
	[ "$status" -eq 4 ]
	[[ $stderr == *"resync required"* ]]
}

@test "a slot dropped and recreated under the same name: pg-apply refuses a stream that starts past its applied position (exit 4) and applies nothing" {
	local good=$BATS_TEST_TMPDIR/good.pgcs next=$BATS_TEST_TMPDIR/next.pgcs ck=$BATS_TEST_TMPDIR/ck
	three_transactions bi_gap 7000 "$good"
	pg-apply -d "$tgt_URL" --checkpoint "$ck" "$good"
	local before
	before=$(applied bi_gap)
	src -c "SELECT pg_drop_replication_slot('bi_gap')"
	src -c "INSERT INTO bi_t VALUES (7999, 'lost while no slot existed')"
	src -c "SELECT 1 FROM pg_create_logical_replication_slot('bi_gap', 'pgoutput')"
	src -c "INSERT INTO bi_t VALUES (7998, 'after the new slot')"
	pg-walcat -d "$src_URL" --slot bi_gap --publication bi_pub --endpos now >"$next" 2>/dev/null
	run --separate-stderr pg-apply -d "$tgt_URL" --checkpoint "$ck" "$next"
	echo "$stderr"
	[ "$status" -eq 4 ]
	[ "$(applied bi_gap)" = "$before" ]
	[ "$(tgt -c "SELECT count(*) FROM bi_t WHERE id = 7998")" = 0 ]
}

@test "a target table dropped by mistake stops pg-apply naming it; earlier commits stay, and after it is recreated a rerun completes the target" {
	local good=$BATS_TEST_TMPDIR/good.pgcs ck=$BATS_TEST_TMPDIR/ck
	src -c "CREATE TABLE bi_extra (id int PRIMARY KEY, v text)" -c "ALTER PUBLICATION bi_pub ADD TABLE bi_extra"
	tgt -c "CREATE TABLE bi_extra (id int PRIMARY KEY, v text)"
	three_transactions bi_dropped 8000 "$good"
	src -c "INSERT INTO bi_extra VALUES (1, 'x')"
	pg-walcat -d "$src_URL" --slot bi_dropped --publication bi_pub --endpos now >"$good" 2>/dev/null
	tgt -c "DROP TABLE bi_extra"
	run --separate-stderr pg-apply -d "$tgt_URL" --checkpoint "$ck" --max-batch-bytes 1 "$good"
	echo "$stderr"
	[ "$status" -ne 0 ]
	[[ $stderr == *"pg-apply: error: "*bi_extra* ]]
	local end3
	end3=$(commit_end 4 "$good")
	[ "$(applied bi_dropped)" = "$end3" ]
	[ "$(head -n 1 "$ck")" = "$end3" ]
	tgt -c "CREATE TABLE bi_extra (id int PRIMARY KEY, v text)"
	pg-apply -d "$tgt_URL" --checkpoint "$ck" "$good"
	[ "$(table_checksum "$src_URL" bi_extra)" = "$(table_checksum "$tgt_URL" bi_extra)" ]
	[ "$(tgt -c "SELECT n FROM bi_counter WHERE id = 8000")" = 3 ]
}

# Found by test/fuzz/streamread_fuzz.c: a one-byte field holding NUL matched
# strchr()'s terminator and was taken as a valid kind or identity.
@test "fuzz regression: a DELETE whose old-row kind is a NUL byte exits 5 and deletes nothing" {
	tgt -c "INSERT INTO fz_users VALUES (2, 'kept', NULL) ON CONFLICT DO NOTHING"
	run --separate-stderr pg-apply -d "$tgt_URL" "$PGSYNC_ROOT/test/corpus/fuzz-delete-kind-nul.pgcs"
	echo "$stderr"
	[ "$status" -eq 5 ]
	[[ $stderr == *"fuzz-delete-kind-nul.pgcs:4: malformed old-row kind in DELETE"* ]]
	[ "$(tgt -c "SELECT name FROM fz_users WHERE id = 2")" = kept ]
}

@test "fuzz regression: a RELATION whose replica identity is a NUL byte exits 5" {
	run --separate-stderr pg-apply -d "$tgt_URL" "$PGSYNC_ROOT/test/corpus/fuzz-relation-identity-nul.pgcs"
	echo "$stderr"
	[ "$status" -eq 5 ]
	[[ $stderr == *"fuzz-relation-identity-nul.pgcs:2: malformed replica identity in RELATION"* ]]
	[ "$(tgt -c "SELECT count(*) FROM fz_users WHERE id = 3")" = 0 ]
}

@test "an invalid connection string is a usage error (exit 2) in every program, without echoing it" {
	local p
	for p in "pg-apply" "pg-walcat --slot s --publication p" "pg-ack --slot s --lsn 0/1" \
		"pg-slot show --slot s" "pg-snapshot-dump --own-snapshot --table public.t"; do
		run --separate-stderr $p -d "host=x password=hunter2 bogus"
		[ "$status" -eq 2 ] || { echo "$p: exit $status: $stderr"; return 1; }
		[[ $stderr == *"error: invalid connection string given to -d"* ]] || { echo "$p: $stderr"; return 1; }
		[[ $stderr != *hunter2* ]]
	done
}

# cmdline PID: the process's command line as ps shows it.
cmdline() {
	tr '\0' ' ' <"/proc/$1/cmdline"
}

@test "the password of -d is blanked in the program's own command line; the connection still works" {
	local fifo=$BATS_TEST_TMPDIR/in pid line
	mkfifo "$fifo"
	pg-apply -d "$tgt_URL password=hunter2" --job pw_job <"$fifo" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	echo "$pid" >>"$BATS_TEST_TMPDIR/pids"
	exec 7>"$fifo"
	printf 'PGCS\t1\t9\t1\t-\t0/100\n' >&7
	wait_until 10 bash -c "[ \"\$(psql -X -qAt -d '$tgt_URL' -c \"SELECT count(*) FROM pgsync.job WHERE job = 'pw_job'\")\" = 1 ]"
	line=$(cmdline "$pid")
	[[ $line != *hunter2* ]] || { echo "visible: $line"; return 1; }
	[[ $line == *"password=*******"* ]]
	exec 7>&-
	wait "$pid"
	# A URL, in pg-walcat while it streams.
	src -c "SELECT pg_create_logical_replication_slot('pw_slot', 'pgoutput')" >/dev/null
	local url host port
	host=$(src -c "SHOW unix_socket_directories" | cut -d, -f1)
	port=$(src -c "SHOW port")
	url="postgresql://$(src -c "SELECT current_user"):hunter2@/postgres?host=$host&port=$port"
	pg-walcat -d "$url" --slot pw_slot --publication bi_pub >/dev/null 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	echo "$pid" >>"$BATS_TEST_TMPDIR/pids"
	wait_until 10 bash -c "[ \"\$(psql -X -qAt -d '$src_URL' -c \"SELECT active FROM pg_replication_slots WHERE slot_name = 'pw_slot'\")\" = t ]"
	line=$(cmdline "$pid")
	[[ $line != *hunter2* ]] || { echo "visible: $line"; return 1; }
	[[ $line == *":*******@"* ]]
	kill -TERM "$pid"
	wait "$pid"
	src -c "SELECT pg_drop_replication_slot('pw_slot')" >/dev/null
}
