#!/usr/bin/env bats
# Recovery paths as the operations guide's least-privilege roles take them:
# a source role with LOGIN, REPLICATION, CONNECT, USAGE and SELECT on the
# published tables only (nothing on their sequences) and a target role that
# is not a superuser. An interrupted bootstrap is retried by the same roles
# with no privilege the first attempt did not need.

# The interrupted bootstrap is a resources.snapshot_timeout of 3 s, which
# must not expire before the copy starts: on a machine busy with other test
# files the steps before it can take longer. It runs alone (test/run-bats).
# run-bats: serial

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE pv_orders (id bigserial PRIMARY KEY, note text, created timestamptz DEFAULT now());
		CREATE INDEX pv_orders_note ON pv_orders (note);
		INSERT INTO pv_orders (note) SELECT 'order ' || g FROM generate_series(1, 2000) g;
		ANALYZE pv_orders;
		CREATE TABLE pv_lock (id int PRIMARY KEY, name text);
		INSERT INTO pv_lock SELECT g, 'l' || g FROM generate_series(1, 10) g;
		CREATE PUBLICATION pv_pub FOR TABLE pv_orders, pv_lock"
	lp_source_role pv_src pv_orders pv_lock
	lp_target_role pv_tgt
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

none_alive() {
	local p
	for p in "$@"; do
		! kill -0 "$p" 2>/dev/null || return 1
	done
}

# pv_lock exists, empty, in the target with a trigger that holds its load,
# so that the copy is still running when the bootstrap is interrupted, after
# pv_orders was created by it.
hold_copy() {
	psql_at tgt -c "CREATE TABLE pv_lock (id int PRIMARY KEY, name text);
		GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON pv_lock TO pv_tgt;
		CREATE FUNCTION pv_slow() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN PERFORM pg_sleep(120); RETURN NULL; END';
		CREATE TRIGGER pv_slow BEFORE INSERT ON pv_lock FOR EACH STATEMENT EXECUTE FUNCTION pv_slow();
		ALTER TABLE pv_lock ENABLE ALWAYS TRIGGER pv_slow"
}

release_copy() {
	psql_at tgt -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'" \
		-c "DROP TRIGGER pv_slow ON pv_lock" >/dev/null
}

@test "a bootstrap of a bigserial table interrupted by snapshot_timeout is retried by the least-privilege role with no privilege the first attempt did not need" {
	hold_copy
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock resources.snapshot_timeout=3s >/dev/null
	run pgs pv check
	[ "$status" -eq 0 ]
	run pgs pv bootstrap
	release_copy
	[ "$status" -eq 1 ]
	[[ $output == *"resources.snapshot_timeout (3.000 s) expired"* ]]
	# The interrupted attempt created pv_orders and still owes its keys.
	[ "$(psql_at tgt -c "SELECT string_agg(table_name, ' ') FROM pgsync.pending_definitions")" = pv_orders ]
	# Building them takes the table's owner, which check tests.
	psql_at tgt -c "CREATE ROLE pv_other; ALTER TABLE pv_orders OWNER TO pv_other"
	run pgs pv check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  target: public.pv_orders is owed its keys and indexes by an interrupted bootstrap, which builds them as the table's owner; fix: ALTER TABLE public.pv_orders OWNER TO pv_tgt on the target, or run bootstrap as its owner"* ]]
	psql_at tgt -c "ALTER TABLE pv_orders OWNER TO pv_tgt"
	run pgs pv check
	[[ $output == *"ok    target: public.pv_orders is owed its keys and indexes by an interrupted bootstrap"* ]]
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock >/dev/null
	run pgs pv bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"permission denied"* ]]
	same_tables pv_orders pv_lock
	[ "$(psql_at tgt -c "SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'pv_orders'")" = "pv_orders_note pv_orders_pkey" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.pending_definitions")" = 0 ]
	[ "$(job_state pv)" = CATCHING_UP ]
}

@test "an interrupted copy leaves its tables marked interrupted, not copying, and the copy records the row estimates" {
	hold_copy_again() {
		psql_at tgt -c "CREATE TRIGGER pv_slow BEFORE INSERT ON pv_lock FOR EACH STATEMENT EXECUTE FUNCTION pv_slow();
			ALTER TABLE pv_lock ENABLE ALWAYS TRIGGER pv_slow"
	}
	hold_copy_again
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock resources.snapshot_timeout=3s >/dev/null
	run pgs pv bootstrap --restart-snapshot
	release_copy
	echo "$output"
	[ "$status" -eq 1 ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'pv' AND state = 'copying'")" = 0 ]
	[ "$(psql_at tgt -c "SELECT rows_estimate FROM pgsync.table_sync WHERE job = 'pv' AND table_name = 'pv_orders'")" = 2000 ]
	run pgs pv status --json
	echo "$output" | jq -e '.snapshot.tables | map(select(.table == "public.pv_lock"))[0].state == "interrupted"'
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock >/dev/null
	run pgs pv bootstrap
	[ "$status" -eq 0 ]
	same_tables pv_orders pv_lock
}

@test "lag not yet known is null in status --json and left out of --prometheus" {
	[ "$(job_field pv "applied_commit_time IS NULL")" = t ]
	run pgs pv status --json
	echo "$output" | jq -e '.lag.seconds == null'
	run pgs pv status --prometheus
	[[ $output != *"pgsync_lag_seconds{"* ]]
}

@test "pgsync started in the background from a script stops on SIGINT" {
	local log=$BATS_FILE_TMPDIR/bg.log
	(
		export PGSYNC_SOURCE_URL=$SRC_URL PGSYNC_TARGET_URL=$TGT_URL TMPDIR=$(pgs_tmpdir)
		# A script's background job: SIGINT ignored from the start.
		bash -c 'pgsync -c "$1" run >"$2" 2>&1 & echo $! >"$2.pid"; wait $!; echo $? >"$2.status"' \
			script "$BATS_FILE_TMPDIR/pv.conf" "$log"
	) 3>&- &
	wait_until 10 test -s "$log.pid"
	wait_until 30 state_is pv STREAMING
	kill -INT "$(<"$log.pid")"
	bg_wait "$log" 60 || { cat "$log"; ps -ef --forest | grep -A3 pgsync | head -30; false; }
	[ "$BG_STATUS" -eq 0 ]
	grep -q "pgsync: stopping job pv on SIGINT" "$log"
}

@test "kill -9 of only pgsync run is not recorded as a clean stop: no stopped_at, and the heartbeat turns stale" {
	start_run pv
	wait_until 30 state_is pv STREAMING
	wait_until 10 eval '[[ $(psql_at tgt -c "SELECT stopped_at IS NULL FROM pgsync.job_runtime WHERE job = '"'pv'"'") == t ]]'
	kids=$(descendants "$RUN_PID")
	kill -KILL "$RUN_PID"
	wait_until 30 none_alive $kids
	[ "$(psql_at tgt -c "SELECT stopped_at IS NULL FROM pgsync.job_runtime WHERE job = 'pv'")" = t ]
	wait_until 30 eval 'pgs pv status --json | jq -e ".heartbeat.stale == true and .connection_state == \"disconnected\"" >/dev/null'
}

@test "a change over resources.max_message_bytes is not retried: ERROR at once, and the action names the key to raise" {
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock resources.max_message_bytes=1kB >/dev/null
	psql_at src -c "INSERT INTO pv_orders (note) VALUES (repeat('large ', 2000))"
	start_run pv
	wait_run 60
	cat "$(current_run_log)"
	[ "$RUN_STATUS" -eq 1 ]
	! grep -q "retry 1 of" "$(current_run_log)"
	grep -q "pgsync: error: job pv stopped: .*(resources.max_message_bytes); raise resources.max_message_bytes, then pgsync run" "$(current_run_log)"
	[ "$(job_state pv)" = ERROR ]
	run pgs pv status --json
	echo "$output" | jq -e '.action == "raise resources.max_message_bytes, then pgsync run"'
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock >/dev/null
	start_run pv
	wait_until 60 same_tables pv_orders pv_lock
	stop_run TERM
}

@test "cleanup --yes removes the job's files in the state directory, spool/ included" {
	[ -d "$BATS_FILE_TMPDIR/pv.state/spool" ]
	run pgs pv cleanup --yes
	[ "$status" -eq 0 ]
	[ ! -e "$BATS_FILE_TMPDIR/pv.state/spool" ]
	[ ! -e "$BATS_FILE_TMPDIR/pv.state/applied.lsn" ]
	slot_gone pv_slot
}

@test "bootstrap --restart-snapshot by the least-privilege role copies again" {
	psql_at src -c "INSERT INTO pv_orders (note) VALUES ('after the first copy')"
	run pgs pv bootstrap --restart-snapshot
	[ "$status" -eq 0 ]
	same_tables pv_orders pv_lock
}
