#!/usr/bin/env bats
# pg-apply keeps its target connection itself: a target restarted (fast or
# immediate), down for a while, a terminated apply backend, a deadlock, a
# serialization failure, in the middle of a transaction or between two,
# under load. pg-apply reconnects, asks the target what it committed and
# applies again what it read since, so the tables end identical, nothing is
# applied twice, the reconnects are counted in pgsync.job_runtime, and the
# slot is never confirmed past what the target committed (test/chaos-sampler
# watches).
#
# As the guide's roles: the source role has LOGIN, REPLICATION and SELECT
# only; the target role owns its database and tables but is no superuser.

load lib/cluster
bats_require_minimum_version 1.5.0

TABLES="pgbench_accounts pgbench_branches pgbench_tellers pgbench_history Orders Lines"

schema() {
	cat <<'SQL'
CREATE TABLE "Orders" (id bigserial PRIMARY KEY, "Note" text, qty int);
CREATE TABLE "Lines" (id bigserial PRIMARY KEY, order_id bigint, "Note" text);
SQL
}

setup_file() {
	cluster_start src
	cluster_start tgt
	pgbench -i -q -I dtpg -s 1 "$src_URL" >/dev/null 2>&1
	# pgbench's updates of the accounts left out change nothing: fewer rows
	# to copy into each job's target and to compare.
	psql_at src -c "DELETE FROM pgbench_accounts WHERE aid > 10000" -c "VACUUM pgbench_accounts" >/dev/null
	schema | psql_at src >/dev/null
	psql_at src <<'SQL'
CREATE PUBLICATION pub FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history, "Orders", "Lines";
CREATE ROLE reader LOGIN REPLICATION;
GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history, "Orders", "Lines" TO reader;
SQL
	psql_at tgt -c "CREATE ROLE applier LOGIN"
	psql_at tgt -c "CREATE DATABASE tmpl OWNER applier"
	pgbench -i -q -I dtp "$(tgt_db tmpl applier)" >/dev/null 2>&1
	schema | psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db tmpl applier)" >/dev/null
	cc -O1 -o "$BATS_FILE_TMPDIR/chaos-sampler" "$PGSYNC_ROOT/test/chaos-sampler.c" \
		-I "$(pg_config --includedir)" -L "$(pg_config --libdir)" -lpq
}

# A failed test must not leave its pipeline or load running.
teardown() {
	kill_test_pids
	# A test that stopped the target must not leave it stopped.
	psql_at tgt -c "SELECT 1" >/dev/null 2>&1 || cluster_start tgt
}

teardown_file() {
	cluster_stop_all
}

src_reader() {
	echo "${src_URL/user=postgres/user=reader}"
}

# new_job NAME: slot NAME, target database NAME (owned by applier) holding
# the source rows as of the slot's creation.
new_job() {
	pg-slot create -d "$(src_reader)" --slot "$1" >/dev/null 2>&1
	psql_at tgt -c "CREATE DATABASE $1 TEMPLATE tmpl OWNER applier"
	pg_dump -a -d "$src_URL" $(printf -- '-t "%s" ' $TABLES) |
		psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db "$1" applier)" >/dev/null
}

# start JOB [pg-apply options]: the live pipeline pg-walcat | pg-apply, both
# acknowledging through the checkpoint file, and the sampler. Sets wpid,
# apid, spid.
start() {
	local job=$1 cp=$BATS_TEST_TMPDIR/cp fifo=$BATS_TEST_TMPDIR/fifo
	shift
	mkfifo "$fifo"
	pg-walcat -d "$(src_reader)" --slot "$job" --publication pub --ack-file "$cp" --status-interval 1s \
		>"$fifo" 2>"$BATS_TEST_TMPDIR/w.log" 3>&- &
	wpid=$!
	pg-apply -d "$(tgt_db "$job" applier)" --checkpoint "$cp" --heartbeat-interval 1s "$@" \
		<"$fifo" 2>"$BATS_TEST_TMPDIR/a.log" 3>&- &
	apid=$!
	"$BATS_FILE_TMPDIR/chaos-sampler" "$src_URL" "$(tgt_db "$job")" "$job" "$job" "$cp" \
		"$BATS_TEST_TMPDIR/violations" >"$BATS_TEST_TMPDIR/samples" 2>/dev/null 3>&- &
	spid=$!
	echo "$wpid $apid $spid" >"$BATS_TEST_TMPDIR/pids"
}

# load_on: pgbench on the source until load_off (rate-limited: a live load).
load_on() {
	pgbench -n -c 2 -T 600 -R 200 "$src_URL" >/dev/null 2>&1 3>&- &
	lpid=$!
	echo "$lpid" >>"$BATS_TEST_TMPDIR/pids"
}

load_off() {
	kill -TERM "$lpid" 2>/dev/null || true
	wait "$lpid" || true
}

tq() {
	psql -X -qAt -d "$(tgt_db "$1")" -c "$2"
}

applied_of() {
	tq "$1" "SELECT coalesce(applied_lsn, '0/0') FROM pgsync.job WHERE job = '$1'" 2>/dev/null
}

# advanced JOB LSN: the target applied up to LSN (false while it is down).
advanced() {
	local a
	a=$(applied_of "$1") && [[ -n $a ]] &&
		[ "$(psql_at src -c "SELECT '$a'::pg_lsn >= '$2'::pg_lsn")" = t ]
}

# progress JOB: wait until the target applies what the source has now, and
# a transaction after it (an idle source would move the slot only at its
# next keepalive).
progress() {
	local now
	psql_at src -c "UPDATE pgbench_tellers SET filler = filler WHERE tid = 10" >/dev/null
	now=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	wait_until 90 advanced "$1" "$now"
}

reconnects_of() {
	tq "$1" "SELECT reconnects FROM pgsync.job_runtime WHERE job = '$1'" 2>/dev/null
}

reconnects_at_least() {
	local n
	n=$(reconnects_of "$1") && [[ -n $n ]] && ((n >= $2))
}

# finish JOB RECONNECTS: the load stopped, the target catches up: tables
# identical, pg-apply still the same process, at least RECONNECTS counted,
# the sampler saw nothing acknowledged early.
finish() {
	local job=$1 n=$2
	wait_until 120 same_tables_in "$job" $TABLES
	kill -0 "$apid"
	wait_until 30 reconnects_at_least "$job" "$n"
	kill -TERM "$spid"
	wait "$spid"
	cat "$BATS_TEST_TMPDIR/samples"
	[ ! -s "$BATS_TEST_TMPDIR/violations" ] || { cat "$BATS_TEST_TMPDIR/violations"; false; }
	[[ $(<"$BATS_TEST_TMPDIR/samples") == "samples "* ]]
	kill -TERM "$apid" "$wpid"
	wait "$apid"
	wait "$wpid"
	# A reconnect is a warning and an info line, never an error.
	! grep -q "error:" "$BATS_TEST_TMPDIR/a.log"
	grep -q "reconnected to the target" "$BATS_TEST_TMPDIR/a.log"
}

# big_txn JOB ROWS: one source transaction: ROWS orders, then ROWS lines,
# tagged with JOB. Only it writes "Lines".
big_txn() {
	psql_at src <<SQL
BEGIN;
INSERT INTO "Orders" ("Note", qty) SELECT '$1', g FROM generate_series(1, $2) g;
INSERT INTO "Lines" (order_id, "Note") SELECT g, '$1' FROM generate_series(1, $2) g;
COMMIT;
SQL
}

# hold JOB: a target session holds a lock on "Lines", so the apply session
# stops in the middle of the big transaction, its orders sent. Until release.
hold() {
	psql -X -q -d "$(tgt_db "$1") application_name=bats_holder" \
		-c 'BEGIN' -c 'LOCK TABLE "Lines" IN SHARE MODE' -c 'SELECT pg_sleep(600)' >/dev/null 2>&1 3>&- &
	hpid=$!
	echo "$hpid" >>"$BATS_TEST_TMPDIR/pids"
	holder=$1
	wait_until 30 lock_held "$1"
}

lock_held() {
	[ "$(tq "$1" "SELECT count(*) FROM pg_locks WHERE relation = '\"Lines\"'::regclass AND mode = 'ShareLock' AND granted")" = 1 ]
}

idle_in_txn() {
	[ "$(tq "$1" "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND application_name = 'psql'")" = 1 ]
}

# release: end the holding session (gone already when the target restarted).
release() {
	tq "$holder" "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bats_holder'" >/dev/null
	wait "$hpid" 2>/dev/null || true
}

# apply_waits_on_lock JOB: the apply session waits for hold's lock.
apply_waits_on_lock() {
	[ "$(tq "$1" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-apply' AND wait_event_type = 'Lock'")" = 1 ]
}

# branch_race JOB SQL: another target session, fed on descriptor 5, runs SQL
# (a transaction that updates branch 1 and stays open); then one source
# transaction updates teller 1 and branch 1, and its apply waits for that
# session's row lock. The caller ends the other session's transaction.
branch_race() {
	local fifo=$BATS_TEST_TMPDIR/other
	mkfifo "$fifo"
	psql -X -q -d "$(tgt_db "$1")" <"$fifo" >"$BATS_TEST_TMPDIR/other.log" 2>&1 3>&- &
	echo "$!" >>"$BATS_TEST_TMPDIR/pids"
	exec 5>"$fifo"
	echo "$2" >&5
	wait_until 30 idle_in_txn "$1"
	psql_at src <<'SQL'
BEGIN;
UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1;
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;
COMMIT;
SQL
	wait_until 60 apply_waits_on_lock "$1"
}

# kill_apply_backend JOB: terminate the apply session (the one holding the
# job's advisory lock), not the metadata session.
kill_apply_backend() {
	[ "$(tq "$1" "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND classid = 7442718 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")" = 1 ]
}

kill_meta_backend() {
	[ "$(tq "$1" "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pg-apply' AND datname = current_database() AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 7442718)")" = 1 ]
}

tagged() {
	tq "$1" "SELECT (SELECT count(*) FROM \"Orders\" WHERE \"Note\" = '$1') || ' ' || (SELECT count(*) FROM \"Lines\" WHERE \"Note\" = '$1')"
}

# ------------------------------------------------------------------ restarts

@test "the target restarted fast, then immediately, under load: pg-apply reconnects and the tables end identical" {
	new_job restarts
	start restarts
	load_on
	progress restarts
	cluster_restart tgt --mode fast
	progress restarts
	cluster_restart tgt --mode immediate
	progress restarts
	load_off
	finish restarts 2
}

@test "a large transaction being applied when the target restarts immediately is applied again, once" {
	new_job midtxn
	start midtxn
	load_on
	progress midtxn
	hold midtxn
	big_txn midtxn 20000
	wait_until 60 apply_waits_on_lock midtxn
	cluster_restart tgt --mode immediate
	release
	progress midtxn
	load_off
	[ "$(tagged midtxn)" = "20000 20000" ]
	finish midtxn 1
}

@test "the apply backend terminated in the middle of a transaction and between transactions, under load" {
	new_job term
	start term
	load_on
	progress term
	hold term
	big_txn term 20000
	wait_until 60 apply_waits_on_lock term
	kill_apply_backend term
	release
	progress term
	[ "$(tagged term)" = "20000 20000" ]
	wait_until 30 reconnects_at_least term 1
	# Between transactions: nothing is being applied when it goes, the next
	# transaction finds it gone.
	load_off
	progress term
	kill_apply_backend term
	pgbench -n -t 20 -c 2 "$src_URL" >/dev/null 2>&1
	progress term
	wait_until 30 reconnects_at_least term 2
	# The metadata session alone (the heartbeat's): opened again, with its
	# settings, at a later heartbeat.
	kill_meta_backend term
	wait_until 30 reconnects_at_least term 3
	pgbench -n -t 20 -c 2 "$src_URL" >/dev/null 2>&1
	progress term
	finish term 3
}

@test "the target down for 10 s under load: pg-apply waits for it and continues" {
	new_job down
	start down
	load_on
	progress down
	cluster_stop tgt --mode fast
	# The outage itself, not a wait for a condition: several reconnect
	# attempts fall in it.
	sleep 10
	cluster_start tgt
	progress down
	load_off
	finish down 1
	grep -q "reconnecting to the target in .* (attempt 2 of 10)" "$BATS_TEST_TMPDIR/a.log"
}

@test "a deadlock with another session on the target is retried like a lost connection" {
	new_job dead
	start dead --no-merge-updates
	progress dead
	# The other session waits longest to look for deadlocks: the apply
	# session finds it and is the one cancelled.
	branch_race dead "SET deadlock_timeout = '60s'; BEGIN; UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1;"
	echo "UPDATE pgbench_tellers SET tbalance = tbalance WHERE tid = 1; ROLLBACK;" >&5
	exec 5>&-
	progress dead
	grep -q "deadlock detected.*(SQLSTATE 40P01): reconnecting" "$BATS_TEST_TMPDIR/a.log"
	finish dead 1
}

@test "a serialization failure on a target whose role runs serializable is retried: applied once, tables identical" {
	new_job ser
	# The target's administrator makes every transaction of the apply role
	# serializable. pg-apply opens its transactions with a plain BEGIN, so
	# they take that level, and a row another session changes under them
	# is a real serialization failure (40001), not a wait.
	psql_at tgt -c "ALTER ROLE applier IN DATABASE ser SET default_transaction_isolation = 'serializable'"
	[ "$(psql -X -qAt -d "$(tgt_db ser applier)" -c "SHOW transaction_isolation")" = serializable ]
	start ser --no-merge-updates
	progress ser
	# The apply transaction has its snapshot (the tellers' row changed in
	# it) and waits for the branch row; the other session commits a new
	# version of that row, which the snapshot cannot see.
	branch_race ser "BEGIN; UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1;"
	echo "COMMIT;" >&5
	exec 5>&-
	progress ser
	grep -q "could not serialize access due to concurrent update (SQLSTATE 40001): reconnecting" "$BATS_TEST_TMPDIR/a.log"
	# Applied again after the failure, once: the teller's +1 is there once.
	[ "$(tq ser "SELECT tbalance FROM pgbench_tellers WHERE tid = 1")" = "$(psql_at src -c "SELECT tbalance FROM pgbench_tellers WHERE tid = 1")" ]
	finish ser 1
}

# ------------------------------------------------------------------ limits

@test "--max-retries attempts spent: pg-apply exits 1 naming the limit and the last error" {
	new_job spent
	start spent --max-retries 2
	progress spent
	cluster_stop tgt --mode fast
	local rc=0
	wait "$apid" || rc=$?
	cluster_start tgt
	[ "$rc" -eq 1 ]
	grep -q "error: cannot reconnect to the target in 2 attempts (--max-retries): cannot connect to the target" "$BATS_TEST_TMPDIR/a.log"
}

@test "--no-loop: a lost target session ends pg-apply with exit 1, as before" {
	new_job noloop
	start noloop --no-loop
	progress noloop
	kill_apply_backend noloop
	# Noticed at the next change.
	psql_at src -c "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1"
	local rc=0
	wait "$apid" || rc=$?
	[ "$rc" -eq 1 ]
	grep -q "error: not reconnecting (--no-loop)" "$BATS_TEST_TMPDIR/a.log"
	! grep -q "reconnected to the target" "$BATS_TEST_TMPDIR/a.log"
}

@test "a transaction larger than what pg-apply keeps to apply again: exit 1 when the target is lost in it, and a rerun completes" {
	new_job huge
	# 64kB batches: pg-apply keeps 1MB of stream to apply again; the
	# transaction is about 3MB, its orders alone 1.5MB.
	start huge --max-batch-bytes 64kB
	progress huge
	hold huge
	big_txn huge 40000
	wait_until 60 apply_waits_on_lock huge
	kill_apply_backend huge
	release
	local rc=0
	wait "$apid" || rc=$?
	[ "$rc" -eq 1 ]
	grep -q "error: lost the target connection: .*more than pg-apply keeps to apply again (twice --max-batch-bytes): not reconnecting" "$BATS_TEST_TMPDIR/a.log"
	[ "$(tagged huge)" = "0 0" ]
	kill -TERM "$wpid" "$spid" 2>/dev/null || true
	wait "$wpid" || true
	wait "$spid" || true
	[ ! -s "$BATS_TEST_TMPDIR/violations" ]
	rm -f "$BATS_TEST_TMPDIR/fifo"
	start huge --max-batch-bytes 64kB
	progress huge
	[ "$(tagged huge)" = "40000 40000" ]
	wait_until 60 same_tables_in huge $TABLES
	kill -TERM "$apid" "$wpid" "$spid"
	wait "$apid"
}

# ------------------------------------------------------ asynchronous commits

# order_on JOB QTY: the target holds the order "lost" QTY.
order_on() {
	[ "$(tq "$1" "SELECT count(*) FROM \"Orders\" WHERE \"Note\" = 'lost' AND qty = $2")" = 1 ]
}

# Kept last: it makes the target's WAL writer sleep for the time of the test.
@test "commits the target lost in an immediate restart (asynchronous, not yet flushed) are applied again from the window and were never confirmed" {
	local i lost=0 confirmable kept
	new_job lost
	# pg-apply commits with synchronous_commit off, as a subscription does.
	# The WAL writer sleeps: its commits stay in the target's WAL buffers
	# until pg-apply has them flushed, a second later. No heartbeat: its
	# synchronous commit would flush them sooner.
	psql_at tgt -c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c "SELECT pg_reload_conf()" >/dev/null
	start lost --heartbeat-interval 0
	progress lost
	# Written once pg-apply knows a commit flushed: here by its own flush.
	wait_until 30 test -s "$BATS_TEST_TMPDIR/cp"
	for ((i = 1; i <= 3 && lost == 0; i++)); do
		psql_at src -c "INSERT INTO \"Orders\" (\"Note\", qty) VALUES ('lost', $i)" >/dev/null
		wait_until 30 order_on lost "$i"
		confirmable=$(head -n 1 "$BATS_TEST_TMPDIR/cp")
		cluster_restart tgt --mode immediate
		# The checkpoint file never says more than the restarted target holds.
		kept=$(applied_of lost)
		[ "$(psql_at src -c "SELECT '$confirmable'::pg_lsn <= '$kept'::pg_lsn")" = t ]
		# The next change finds the session gone.
		psql_at src -c "INSERT INTO \"Orders\" (\"Note\", qty) VALUES ('lost', $((i + 100)))" >/dev/null
		wait_until 60 order_on lost "$((i + 100))"
		order_on lost "$i"
		# Lost only when the WAL writer did not happen to write it first.
		! grep -q "which it had not flushed yet: applying them again" "$BATS_TEST_TMPDIR/a.log" || lost=1
	done
	psql_at tgt -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null
	((lost == 1))
	finish lost 1
}
