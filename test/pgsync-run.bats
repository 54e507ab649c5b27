#!/usr/bin/env bats
# pgsync run and status against real servers: streaming into identical
# tables, CATCHING_UP -> STREAMING, clean stops on SIGTERM and SIGINT, ERROR
# -> CATCHING_UP, retries then ERROR (exit 1), the WAL retention monitor
# (warn, stop -> PAUSED), stale heartbeats, and the status interfaces. The
# job runs as the guide's least-privilege source role and a target role that
# is not a superuser.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE rn_a (id int PRIMARY KEY, name text, n bigint);
		CREATE TABLE rn_b (k text PRIMARY KEY, v jsonb);
		CREATE TABLE rn_noise (id bigserial PRIMARY KEY, pad text);
		INSERT INTO rn_a SELECT g, 'a' || g, g FROM generate_series(1, 1000) g;
		INSERT INTO rn_b SELECT 'k' || g, jsonb_build_object('g', g) FROM generate_series(1, 100) g;
		CREATE PUBLICATION rn_pub FOR TABLE rn_a, rn_b"
	# As the guide's least-privilege roles.
	lp_source_role rn_src rn_a rn_b
	lp_target_role rn_tgt
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b >/dev/null
	pgs rn bootstrap
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

# WAL that the job's slot retains but that is not published (about 3 MB).
make_unpublished_wal() {
	psql_at src -c "INSERT INTO rn_noise (pad) SELECT repeat('x', 1000) FROM generate_series(1, 3000)"
}

log_has() {
	grep -qF -- "$2" "$BATS_FILE_TMPDIR/$1.run.log"
}

holder_has_xid() {
	[[ $(psql_at src -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rn_hold' AND backend_xid IS NOT NULL") == 1 ]]
}

heartbeat_running() {
	[[ $(psql_at tgt -c "SELECT stopped_at IS NULL FROM pgsync.job_runtime WHERE job = 'rn'") == t ]]
}

@test "run streams inserts, updates, deletes and truncates into identical tables and becomes STREAMING" {
	start_run rn
	wait_until 20 state_is rn STREAMING
	psql_at src -c "INSERT INTO rn_a SELECT g, 'a' || g, g FROM generate_series(1001, 3000) g;
		UPDATE rn_a SET name = NULL, n = n * 2 WHERE id % 7 = 0;
		DELETE FROM rn_a WHERE id % 11 = 0;
		UPDATE rn_b SET v = v || '{\"u\": true}' WHERE k LIKE 'k1%';
		TRUNCATE rn_b;
		INSERT INTO rn_b VALUES ('after truncate', '[1, 2]')"
	wait_until 30 same_tables rn_a rn_b
	[ "$(job_state rn)" = STREAMING ]
	[ "$(psql_at tgt -c "SELECT connection_state FROM pgsync.job_runtime WHERE job = 'rn'")" = connected ]
}

@test "status --json while running: connected, fresh heartbeat, no action, every documented field" {
	run pgs rn status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '
		.format_version == 1 and .job == "rn" and .state == "STREAMING" and
		.resync_required == false and .resync_reason == null and .action == null and
		.last_error == null and .connection_state == "connected" and
		(.positions | has("consistent_lsn") and has("applied_lsn") and has("received_lsn") and has("source_current_lsn")) and
		(.lag.bytes | type == "number") and (.lag.seconds | type == "number") and (.lag | has("last_applied_commit_time")) and
		.snapshot.tables_total == 2 and .snapshot.tables_done == 2 and .snapshot.rows == 1100 and
		(.snapshot.bytes > 0) and (.snapshot.tables | length == 2) and .snapshot.tables[0].table == "public.rn_a" and
		(.snapshot.tables[0] | has("state") and has("rows") and has("bytes") and has("rows_estimate") and has("started_at") and has("finished_at")) and
		.slot.name == "rn_slot" and .slot.owned == true and .slot.exists == true and .slot.active == true and
		(.slot.active_pid | type == "number") and .slot.wal_status == "reserved" and .slot.invalidation_reason == null and
		(.slot.retained_bytes | type == "number") and (.slot.lag_bytes | type == "number") and
		(.slot | has("restart_lsn") and has("confirmed_flush_lsn")) and
		.wal_retention.alarm_bytes == 10737418240 and .wal_retention.action == "warn" and .wal_retention.alarm == false and
		.source.reachable == true and .source.error == null and .source.system_identifier == .source.job_system_identifier and
		(.source.connection | startswith("host=")) and .source.timeline == 1 and
		.heartbeat.stale == false and .heartbeat.stopped_at == null and .heartbeat.connection_state == "connected" and
		.heartbeat.interval_s == 1 and (.heartbeat.age_seconds < 3) and .heartbeat.version == "0.1.0" and
		(.heartbeat | has("pid") and has("host") and has("state") and has("source_version") and has("received_lsn") and
		 has("applied_lsn") and has("lag_bytes") and has("transactions") and has("changes") and
		 has("transactions_per_sec") and has("rows_per_sec") and has("reconnects") and has("rss_bytes") and
		 has("last_apply_at") and has("last_commit_time") and has("heartbeat_at") and has("started_at")) and
		has("created_at") and has("updated_at")'
}

@test "status prints a readable summary and --prometheus the node_exporter text format" {
	run pgs rn status
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "job:             rn" ]
	[ "${lines[1]}" = "state:           STREAMING" ]
	[ "${lines[2]}" = "action:          -" ]
	[[ ${lines[4]} == "connection:      connected (pid "* ]]
	[[ ${lines[6]} == "snapshot:        2/2 tables, 1100 rows, "* ]]
	[[ ${lines[7]} == "slot:            rn_slot (owned, active, wal_status reserved): retains "* ]]
	run pgs rn status --prometheus
	[ "$status" -eq 0 ]
	[[ $output == *$'# HELP pgsync_state Job state: 1 for the current state, 0 for the others.\n# TYPE pgsync_state gauge\n'* ]]
	[[ $output == *$'\npgsync_state{pgsync_job="rn",state="STREAMING"} 1\n'* ]]
	[[ $output == *$'\npgsync_state{pgsync_job="rn",state="ERROR"} 0\n'* ]]
	[[ $output == *$'\npgsync_resync_required{pgsync_job="rn"} 0\n'* ]]
	[[ $output == *$'\npgsync_heartbeat_stale{pgsync_job="rn"} 0\n'* ]]
	[[ $output == *$'\npgsync_snapshot_tables_done{pgsync_job="rn"} 2\n'* ]]
	[[ $output == *$'\n# TYPE pgsync_transactions_total counter\npgsync_transactions_total{pgsync_job="rn"} '* ]]
	# Every sample line is "name{labels} number".
	echo "$output" | grep -v '^#' | grep -qvE '^pgsync_[a-z_]+\{pgsync_job="rn"(,state="[A-Z_]+")?\} -?[0-9.e+]+$' && return 1
	[ "$(echo "$output" | grep -c '^# TYPE ')" = "$(echo "$output" | grep -c '^# HELP ')" ]
}

runtime_conn() {
	[[ $(psql_at tgt -c "SELECT connection_state || '/' || reconnects FROM pgsync.job_runtime WHERE job = 'rn'") == "$1" ]]
}

@test "the heartbeat reports the source connection: reconnecting while the source is down, then connected, with the reconnections counted" {
	runtime_conn connected/0
	# A lost walsender: pg-walcat streams again within its first backoff.
	psql_at src -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'rn_slot'" >/dev/null
	wait_until 20 runtime_conn connected/1
	# A source that is down: the heartbeat goes on and says so.
	cluster_stop src --mode fast
	wait_until 20 runtime_conn reconnecting/1
	run pgs rn status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.connection_state == "reconnecting" and .heartbeat.reconnects == 1 and .source.reachable == false'
	run pgs rn status --prometheus
	[[ $output == *$'\npgsync_connected{pgsync_job="rn"} 0\n'* ]]
	cluster_start src
	wait_until 60 runtime_conn connected/2
	run pgs rn status --prometheus
	[[ $output == *$'\npgsync_connected{pgsync_job="rn"} 1\n'* ]]
	[[ $output == *$'\npgsync_reconnects_total{pgsync_job="rn"} 2\n'* ]]
	# And nothing was lost on the way.
	psql_at src -c "INSERT INTO rn_a VALUES (100001, 'after the outage', 1)"
	wait_until 20 applied_reaches rn
	same_tables rn_a rn_b
}

@test "a second run of the same job is refused while the first holds the job" {
	run pgs rn run
	[ "$status" -eq 3 ]
	[[ $output == *"pgsync: error: job rn is busy: another pgsync holds"* ]]
}

@test "SIGTERM stops run cleanly: exit 0, state kept, stop recorded, status asks for run" {
	STOP_STRICT=1 stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	log_has rn "pgsync: job rn stopped cleanly (state STREAMING); pgsync run resumes it"
	[ "$(job_state rn)" = STREAMING ]
	[ "$(psql_at tgt -c "SELECT stopped_at IS NOT NULL FROM pgsync.job_runtime WHERE job = 'rn'")" = t ]
	[ "$(psql_at src -c "SELECT active FROM pg_replication_slots WHERE slot_name = 'rn_slot'")" = f ]
	run pgs rn status --json
	echo "$output" | jq -e '.action == "pgsync run" and .connection_state == "disconnected" and .heartbeat.stale == false'
}

@test "changes made while stopped arrive after a restart: CATCHING_UP until the WAL end seen at connect, then STREAMING" {
	psql_at src -c "UPDATE rn_a SET n = n + 1; INSERT INTO rn_b VALUES ('while stopped', 'null')"
	end=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	start_run rn
	wait_until 30 same_tables rn_a rn_b
	wait_until 20 state_is rn STREAMING
	log_has rn "state CATCHING_UP until"
	# run records STREAMING in the job's row a moment before it logs why.
	wait_until 10 log_has rn "caught up with"
	caught=$(grep -o 'caught up with [0-9A-F/]*' "$BATS_FILE_TMPDIR/rn.run.log" | awk '{print $4}')
	[ "$(psql_at src -c "SELECT '$caught'::pg_lsn >= '$end'::pg_lsn")" = t ]
}

@test "SIGINT stops run cleanly with exit 0" {
	stop_run INT
	[ "$RUN_STATUS" -eq 0 ]
	log_has rn "pgsync: stopping job rn on SIGINT"
	[ "$(job_state rn)" = STREAMING ]
}

@test "SIGTERM the moment run starts its programs stops it within seconds, every time, leaving no process behind" {
	# A signal that reaches a child between fork and exec used to be
	# swallowed: the child then waited for ever to open the stream's FIFO,
	# and its stderr relay for a writer (a stop took 30 s to for ever, and
	# mostly on a busy machine, so this tries several times).
	local i pid left
	for ((i = 0; i < 8; i++)); do
		start_run rn
		pid=$RUN_PID
		wait_until 30 grep -q "streaming slot" "$(current_run_log)"
		kill -TERM "$pid"
		bg_wait "$(current_run_log)" 10
		[ "$BG_STATUS" -eq 0 ]
		left=$(descendants "$pid")
		[ -z "$left" ]
	done
}

@test "ERROR becomes CATCHING_UP when run starts, then STREAMING; last_error is cleared once streaming" {
	psql_at tgt -c "UPDATE pgsync.job SET state = 'ERROR', last_error = 'earlier failure' WHERE job = 'rn'"
	start_run rn
	wait_until 20 state_is rn STREAMING
	log_has rn "state CATCHING_UP until"
	[ "$(job_field rn "last_error IS NULL")" = t ]
	stop_run TERM
}

@test "a runtime error is retried with backoff, then ERROR with last_error and exit 1" {
	# 53100 (disk_full) is a runtime error: it may pass, so run retries it.
	psql_at tgt -c "CREATE FUNCTION rn_fail() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''target trigger refuses'' USING ERRCODE = ''53100''; END';
		CREATE TRIGGER rn_fail BEFORE INSERT ON rn_b FOR EACH ROW EXECUTE FUNCTION rn_fail();
		ALTER TABLE rn_b ENABLE ALWAYS TRIGGER rn_fail"
	psql_at src -c "INSERT INTO rn_b VALUES ('refused', '1')"
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b safety.max_retries=1 >/dev/null
	start_run rn
	wait_run 60
	psql_at tgt -c "DROP TRIGGER rn_fail ON rn_b"
	[ "$RUN_STATUS" -eq 1 ]
	log_has rn "retry 1 of 1 in 1 s"
	log_has rn "pgsync: error: job rn stopped: pg-apply exited with status 1: "
	log_has rn "gave up after 1 retries without progress; pgsync run"
	[ "$(job_state rn)" = ERROR ]
	[[ $(job_field rn last_error) == "pg-apply exited with status 1: "*"target trigger refuses"*"(after 1 retries)" ]]
	run pgs rn status --json
	echo "$output" | jq -e '.state == "ERROR" and .action == "pgsync run" and (.last_error | contains("target trigger refuses"))'
	# The cause gone, run picks up where it stopped.
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b >/dev/null
	start_run rn
	wait_until 30 same_tables rn_a rn_b
	stop_run TERM
}

@test "a target trigger that refuses a change (P0001) stops run at once with exit 5, not retried" {
	psql_at tgt -c "CREATE FUNCTION rn_refuse() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''target trigger refuses''; END';
		CREATE TRIGGER rn_refuse BEFORE INSERT ON rn_b FOR EACH ROW EXECUTE FUNCTION rn_refuse();
		ALTER TABLE rn_b ENABLE ALWAYS TRIGGER rn_refuse"
	psql_at src -c "INSERT INTO rn_b VALUES ('refused again', '1')"
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b safety.max_retries=3 >/dev/null
	start_run rn
	wait_run 60
	psql_at tgt -c "DROP TRIGGER rn_refuse ON rn_b"
	[ "$RUN_STATUS" -eq 5 ]
	! log_has rn "retry 1 of 3"
	[ "$(job_state rn)" = ERROR ]
	[[ $(job_field rn last_error) == *"target trigger refuses"*"SQLSTATE P0001"* ]]
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b >/dev/null
	start_run rn
	wait_until 30 same_tables rn_a rn_b
	stop_run TERM
}

@test "a stale heartbeat: a killed process is flagged after three intervals without a recorded stop" {
	start_run rn
	wait_until 20 state_is rn STREAMING
	wait_until 10 heartbeat_running
	# Kill the whole job at once, as a power loss would: nobody records a
	# stop. Freeze the tree first, so that no process sees another one die
	# (a program whose log reader or input vanished would stop cleanly).
	kill -STOP "$RUN_PID"
	kids=$(descendants "$RUN_PID")
	kill -STOP $kids 2>/dev/null || true
	kill -KILL $kids "$RUN_PID" 2>/dev/null || true
	wait_run 10
	run pgs rn status --json
	echo "$output" | jq -e '.heartbeat.stopped_at == null'
	sleep 3.5
	run pgs rn status --json
	echo "$output" | jq -e '.heartbeat.stale == true and .connection_state == "disconnected" and .action == "pgsync run" and .heartbeat.age_seconds > 3'
	# On the job's host, status sees that the process is gone.
	run pgs rn status
	[[ $output == *"STALE: the process is gone"* ]]
	run pgs rn status --prometheus
	[[ $output == *'pgsync_heartbeat_stale{pgsync_job="rn"} 1'* ]]
}

@test "the WAL monitor logs retained WAL every interval and warns above the alarm (action warn)" {
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b safety.wal_retention_alarm_bytes=1MB >/dev/null
	make_unpublished_wal
	start_run rn
	wait_until 20 log_has rn "wal monitor: slot rn_slot retains"
	wait_until 20 log_has rn "pgsync: warning: WAL retention alarm: slot rn_slot retains"
	log_has rn "above safety.wal_retention_alarm_bytes = 1048576 (safety.wal_retention_action = warn)"
	run_alive
	run pgs rn status --json
	echo "$output" | jq -e '.wal_retention.alarm_bytes == 1048576'
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "wal_retention_action = stop pauses the job: PAUSED, exit 3, and run refuses until the alarm is raised" {
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b safety.wal_retention_alarm_bytes=1MB safety.wal_retention_action=stop >/dev/null
	make_unpublished_wal
	run pgs rn run
	[ "$status" -eq 3 ]
	[[ $output == *"pgsync: error: job rn paused: WAL retention alarm: slot rn_slot retains "*" bytes of WAL, above safety.wal_retention_alarm_bytes = 1048576; paused by safety.wal_retention_action = stop"* ]]
	[ "$(job_state rn)" = PAUSED ]
	slot_exists rn_slot
	run pgs rn status --json
	echo "$output" | jq -e '.state == "PAUSED" and .wal_retention.alarm == true and (.action | contains("safety.wal_retention_alarm_bytes"))'
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b >/dev/null
	start_run rn
	wait_until 20 state_is rn STREAMING
	stop_run TERM
}

@test "the monitor pauses a streaming job when retention crosses the alarm (action stop)" {
	# The alarm sits 3 MB above what the slot retains now (an earlier test
	# may have left WAL behind its restart point). A transaction held open
	# on the source pins the slot's restart point (decoding must start
	# before it), so the WAL written after it is retained however quickly
	# pg-walcat confirms: 3.4 MB of unpublished WAL at a time until the
	# monitor pauses the job.
	local held i
	held=$(psql_at src -c "SELECT pg_current_wal_lsn() - restart_lsn FROM pg_replication_slots WHERE slot_name = 'rn_slot'")
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b safety.wal_retention_alarm_bytes=$((held / 1048576 + 3))MB \
		safety.wal_retention_action=stop >/dev/null
	start_run rn
	wait_until 20 state_is rn STREAMING
	PGAPPNAME=rn_hold psql_at src -c "BEGIN; INSERT INTO rn_noise (pad) VALUES ('held open');
		SELECT pg_sleep(120); COMMIT" >/dev/null 2>&1 &
	wait_until 10 holder_has_xid
	for ((i = 0; i < 10; i++)); do
		run_alive || break
		make_unpublished_wal
		sleep 1
	done
	psql_at src -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'rn_hold'" >/dev/null
	wait_run 30
	[ "$RUN_STATUS" -eq 3 ]
	[ "$(job_state rn)" = PAUSED ]
	log_has rn "paused by safety.wal_retention_action = stop"
	job_conf rn rn_slot rn_pub public.rn_a,public.rn_b >/dev/null
}

@test "--json logs relay every program's lines as JSON objects" {
	start_run rn --json
	wait_until 20 state_is rn STREAMING
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	jq -e -s 'all(has("time") and has("program") and has("level") and has("msg")) and
		(map(.program) | index("pg-walcat") != null and index("pg-apply") != null and index("pgsync") != null)' \
		"$BATS_FILE_TMPDIR/rn.run.log"
}

@test "a job whose schema, table and column names have capitals and \$ bootstraps and streams" {
	psql_at src -c "CREATE SCHEMA \"McS\";
		CREATE TABLE \"McS\".\"Orders\$\" (\"Id\" int PRIMARY KEY, \"Note\" text);
		INSERT INTO \"McS\".\"Orders\$\" SELECT g, 'n' || g FROM generate_series(1, 50) g;
		CREATE PUBLICATION mc_pub FOR TABLE \"McS\".\"Orders\$\""
	lp_source_role rn_src 'McS.Orders$'
	job_conf mc mc_slot mc_pub 'McS.Orders$' >/dev/null
	run pgs mc bootstrap
	[ "$status" -eq 0 ]
	same_tables 'McS.Orders$'
	start_run mc
	wait_until 20 state_is mc STREAMING
	psql_at src -c "INSERT INTO \"McS\".\"Orders\$\" SELECT g, 'n' || g FROM generate_series(51, 80) g;
		UPDATE \"McS\".\"Orders\$\" SET \"Note\" = 'changed' WHERE \"Id\" % 3 = 0;
		DELETE FROM \"McS\".\"Orders\$\" WHERE \"Id\" % 5 = 0"
	wait_until 30 same_tables 'McS.Orders$'
	[ "$(psql_at tgt -c "SELECT count(*) FROM \"McS\".\"Orders\$\"")" = 64 ]
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}
