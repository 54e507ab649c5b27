#!/usr/bin/env bats
# What an operator sees of a job while it works and after it stopped: the
# log holds no row value even at --log debug, and status tells a live
# process from a dead one by the process and its progress, not by the age
# of the heartbeat alone: right after kill -9 or Ctrl-C of a bootstrap it
# is interrupted (no connection, no time left, no table "copying"), and a
# run whose apply waits on a lock another session holds, or backs off
# while the target restarts, is alive and connected.
#
# Least-privilege roles on both sides (lp_source_role, lp_target_role); a
# schema and a table with capitals and a bigserial key, a text key, two
# publications.

load lib/cluster
load pgsync-helpers
load chunked-helpers

readonly CK_JOB=ob CK_SLOT=ob_slot
readonly OT='Obs.Items,public.t_words'

setup_file() {
	cluster_start src
	cluster_start tgt
	# Values no log line may show: the keys (the chunk bounds come from
	# them) and the other columns, each recognisable.
	psql_at src <<-'SQL'
		CREATE SCHEMA "Obs";
		CREATE TABLE "Obs"."Items" ("Id" bigserial PRIMARY KEY, "Note" text);
		ALTER SEQUENCE "Obs"."Items_Id_seq" RESTART WITH 7770000001;
		INSERT INTO "Obs"."Items" ("Note") SELECT 'rowval-note-' || g FROM generate_series(1, 12000) g;
		CREATE TABLE t_words (w text PRIMARY KEY, n int);
		INSERT INTO t_words SELECT 'rowval-key-' || lpad(g::text, 6, '0'), g FROM generate_series(1, 8000) g;
		ANALYZE;
		CREATE PUBLICATION ob_items FOR TABLE "Obs"."Items";
		CREATE PUBLICATION ob_words FOR TABLE t_words;
	SQL
	lp_source_role ob_src Obs.Items public.t_words
	lp_target_role ob_tgt
	job_conf ob ob_slot "ob_items, ob_words" "$OT" resources.snapshot_mode=chunked \
		resources.chunk_rows=200 resources.chunk_bytes=64kB resources.chunk_group_seconds=1 \
		resources.max_parallel_copies=2 >/dev/null
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

reset_job() {
	if run_alive; then stop_run KILL; fi
	pgs ob cleanup --yes >/dev/null 2>&1 || true
	psql_at tgt -c 'DROP TABLE IF EXISTS "Obs"."Items", public.t_words' 2>/dev/null || true
	rm -rf "$BATS_FILE_TMPDIR/ob.state"
}

# no_row_values FILE: FILE holds no value of the tables' rows.
no_row_values() {
	! grep -n -E 'rowval-|777[0-9]{7}' "$1"
}

@test "--log debug of a chunked bootstrap: chunks and parts are described, no line holds a row value or a chunk bound" {
	reset_job
	run pgs ob --log debug bootstrap
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/debug.log"
	[ "$status" -eq 0 ]
	no_row_values "$BATS_TEST_TMPDIR/debug.log"
	# The debug lines are there, and both tables were copied in chunks.
	grep -q 'debug: part [0-9]* of [0-9]* of Obs.Items: a range of "Id" in "Obs"."Items", ' "$BATS_TEST_TMPDIR/debug.log"
	(($(psql_at tgt -c "SELECT count(DISTINCT table_name) FROM pgsync.table_chunk WHERE job = 'ob' AND key_columns IS NOT NULL") == 2))
	# The same in JSON, with the run that follows.
	run pgs ob --json --log debug status
	[ "$status" -eq 0 ]
	start_run ob --json --log debug
	wait_until 30 state_is ob STREAMING
	psql_at src -c "INSERT INTO \"Obs\".\"Items\" (\"Note\") VALUES ('rowval-streamed')"
	psql_at src -c "UPDATE t_words SET n = n + 1 WHERE w = 'rowval-key-000007'"
	wait_until 30 same_tables Obs.Items t_words
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	no_row_values "$(current_run_log)"
}

# heartbeat_every DURATION: the job's safety.heartbeat_interval from now on.
heartbeat_every() {
	sed -i "s/^safety.heartbeat_interval = .*/safety.heartbeat_interval = $1/" "$BATS_FILE_TMPDIR/ob.conf"
}

# status_json: the job's status document in $BATS_TEST_TMPDIR/status.json.
status_json() {
	pgs ob status --json >"$BATS_TEST_TMPDIR/status.json"
}

js() {
	jq -r "$1" "$BATS_TEST_TMPDIR/status.json"
}

# interrupted_now: status right after the bootstrap ended says so.
interrupted_now() {
	status_json
	cat "$BATS_TEST_TMPDIR/status.json"
	[ "$(js .connection_state)" = disconnected ]
	[ "$(js .snapshot.chunks.eta_seconds)" = null ]
	[ "$(js '[.snapshot.tables[] | select(.state == "copying")] | length')" = 0 ]
	[ "$(js '[.snapshot.tables[] | select(.state == "interrupted")] | length')" -ge 1 ]
	[ "$(js .action)" = "pgsync bootstrap" ]
	run pgs ob status --prometheus
	[[ $output == *$'\npgsync_connected{pgsync_job="ob"} 0\n'* ]]
	[[ $output != *"pgsync_snapshot_eta_seconds{"* ]]
	[ "$(js .heartbeat.alive)" = false ]
}

@test "status right after kill -9 of a chunked bootstrap: interrupted, not connected, no time left, the process gone" {
	reset_job
	# Ten seconds: three intervals without a heartbeat are long after the kill.
	heartbeat_every 10s
	catalog_ready
	slow_chunks
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ob bootstrap
	wait_until 120 chunks_at_least 4
	status_json
	[ "$(js .connection_state)" = connected ]
	kill -KILL "$BG_PID"
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 60
	interrupted_now
	run pgs ob status
	echo "$output"
	[[ $output == *"connection:      disconnected (pid "*", STALE: the process is gone)"* ]]
}

@test "status right after Ctrl-C of a chunked bootstrap: interrupted, not connected, no time left" {
	reset_job
	heartbeat_every 10s
	catalog_ready
	slow_chunks
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ob bootstrap
	wait_until 120 chunks_at_least 4
	kill -INT "$BG_PID"
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 60
	cat "$BATS_TEST_TMPDIR/bs.log"
	[ "$BG_STATUS" -eq 1 ]
	interrupted_now
	# Continued, the copy completes.
	run pgs ob bootstrap
	[ "$status" -eq 0 ]
}

heartbeat_older_than() {
	status_json
	[[ $(js .heartbeat.age_seconds) > 0 ]] && (($(js '.heartbeat.age_seconds | floor') >= $1))
}

# alive_and_connected: status says the run is alive and connected, however
# old its heartbeat.
alive_and_connected() {
	status_json
	jq -c '{connection_state, action, last_error, heartbeat}' "$BATS_TEST_TMPDIR/status.json"
	[ "$(js .connection_state)" = connected ]
	[ "$(js .heartbeat.stale)" = false ]
	[ "$(js .heartbeat.alive)" = true ]
	[ "$(js .action)" = null ]
	run pgs ob status --prometheus
	[[ $output == *$'\npgsync_connected{pgsync_job="ob"} 1\n'* ]]
	[[ $output == *$'\npgsync_heartbeat_stale{pgsync_job="ob"} 0\n'* ]]
}

# running_job: the job bootstrapped and streaming, with a heartbeat a second.
running_job() {
	heartbeat_every 1s
	if ! state_is ob CATCHING_UP && ! state_is ob STREAMING; then
		reset_job
		run pgs ob bootstrap
		[ "$status" -eq 0 ]
	fi
	start_run ob
	# This run's STREAMING, not the one a stopped run left.
	wait_until 60 grep -q "caught up with .*: state STREAMING" "$(current_run_log)"
}

lock_held() {
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE c.relname = 't_words' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ]
}

# The lock or the role limit a failed test left would hold up the next.
teardown() {
	psql_at tgt -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query LIKE 'BEGIN; LOCK TABLE public.t_words%' AND pid <> pg_backend_pid()" >/dev/null 2>&1 || true
	psql_at tgt -c "ALTER ROLE ob_tgt CONNECTION LIMIT -1" >/dev/null 2>&1 || true
}

@test "status of a run whose apply waits on a lock another session holds: alive, connected, and who holds the lock" {
	running_job
	# The application's session on the target holds the table.
	psql_at tgt -c "BEGIN; LOCK TABLE public.t_words IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120)" >/dev/null 2>&1 &
	local holder=$!
	wait_until 30 lock_held
	psql_at src -c "UPDATE t_words SET n = n + 1 WHERE w = 'rowval-key-000003'"
	# Three heartbeat intervals and more without one.
	wait_until 30 heartbeat_older_than 5
	alive_and_connected
	run pgs ob status
	echo "$output"
	local lockpid
	lockpid=$(psql_at tgt -c "SELECT pid FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK TABLE public.t_words%'")
	[[ $output == *"connection:      connected (pid "*", alive: waiting on a lock held by pid $lockpid)"* ]]
	[ "$(js ".heartbeat.blocked_by == [$lockpid]")" = true ]
	psql_at tgt -c "SELECT pg_terminate_backend($lockpid)" >/dev/null
	wait "$holder" || true
	wait_until 30 same_tables Obs.Items t_words
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "status of a run that rides out a target restart: alive and connected while pg-apply backs off" {
	running_job
	# Restarted, the target turns the job's role away for a while (too
	# many connections, which pg-apply retries), as a target that is slow
	# to come back would; status reads it as the superuser meanwhile.
	psql_at tgt -c "ALTER ROLE ob_tgt CONNECTION LIMIT 0" >/dev/null
	cluster_restart tgt --mode fast
	# A change to apply: pg-apply's own session needs the target.
	psql_at src -c "UPDATE t_words SET n = n + 1 WHERE w = 'rowval-key-000005'"
	TGT_URL=$tgt_URL wait_until 30 heartbeat_older_than 5
	run_alive || { cat "$(current_run_log)"; return 1; }
	TGT_URL=$tgt_URL alive_and_connected
	TGT_URL=$tgt_URL run pgs ob status
	echo "$output"
	[[ $output == *"connection:      connected (pid "*", alive: busy or waiting for the target)"* ]]
	psql_at tgt -c "ALTER ROLE ob_tgt CONNECTION LIMIT -1" >/dev/null
	psql_at src -c "UPDATE t_words SET n = n + 1 WHERE w = 'rowval-key-000004'"
	wait_until 90 same_tables Obs.Items t_words
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "text log lines of pgsync and of its programs: one form, each beginning with its UTC time; an error in the documented form" {
	reset_job
	local t0 t1 line
	t0=$(date -u +%Y-%m-%dT%H:%M:%S)
	run pgs ob bootstrap
	t1=$(date -u +%Y-%m-%dT%H:%M:%S.999Z)
	[ "$status" -eq 0 ]
	# pgsync's own lines (bin/pgsync) and its programs' (lib/base/log.c)
	# alike: "TIME PROGRAM: [LEVEL: ]MESSAGE".
	[ -z "$(grep -vE "^$LOG_TIME_RE(pgsync|pg-[a-z-]+): " <<<"$output")" ]
	grep -qE "^$LOG_TIME_RE""pgsync: bootstrap of job ob complete" <<<"$output"
	grep -qE "^$LOG_TIME_RE""pg-snapshot-dump: copying " <<<"$output"
	grep -qE "^$LOG_TIME_RE""pg-apply: " <<<"$output"
	# Each time is the line's own: within the bootstrap.
	while IFS= read -r line; do
		[[ ! ${line:0:24} < $t0 && ! ${line:0:24} > $t1 ]] || { echo "out of the bootstrap's time: $line"; return 1; }
	done <<<"$output"
	# An error is "PROGRAM: error: MESSAGE", from pgsync and from a program.
	TGT_URL="host=$BATS_TEST_TMPDIR port=1 user=nobody dbname=x" run pgs ob status
	[ "$status" -eq 1 ]
	[[ ${lines[0]} == "pgsync: error: cannot read the target (host=$BATS_TEST_TMPDIR port=1 user=nobody dbname=x): "* ]]
	run pg-slot show -d "host=$BATS_TEST_TMPDIR port=1 user=nobody dbname=x" --slot ob_slot
	[[ ${lines[0]} == "pg-slot: error: cannot connect to the source (host=$BATS_TEST_TMPDIR port=1 user=nobody dbname=x): "* ]]
}
