#!/usr/bin/env bats
# Under pgsync run, a target restart is ridden out by pg-apply itself: the
# same pg-apply process goes on (the pipeline is not restarted, nothing read
# ahead is read again), and pgsync status counts the reconnect. The job runs
# as the guide's least-privilege source role and a target role that is not a
# superuser.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE rc_a (id bigserial PRIMARY KEY, v text);
		INSERT INTO rc_a (v) SELECT 'a' || g FROM generate_series(1, 200) g;
		CREATE PUBLICATION rc_pub FOR TABLE rc_a"
	lp_source_role rc_src rc_a
	lp_target_role rc_tgt
	job_conf rc rc_slot rc_pub public.rc_a >/dev/null
	pgs rc bootstrap
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

# The pg-apply below the last started run.
apply_pid() {
	local p
	for p in $(descendants "$RUN_PID"); do
		[[ $(cat "/proc/$p/comm" 2>/dev/null) != pg-apply ]] || echo "$p"
	done
}

@test "a target restart while run streams: the same pg-apply reconnects, the job goes on, and status counts the reconnect" {
	start_run rc
	wait_until 60 state_is rc STREAMING
	psql_at src -c "INSERT INTO rc_a (v) SELECT 'b' || g FROM generate_series(1, 200) g"
	wait_until 60 applied_reaches rc
	local before
	before=$(apply_pid)
	[ -n "$before" ]
	cluster_restart tgt --mode immediate
	psql_at src -c "INSERT INTO rc_a (v) SELECT 'c' || g FROM generate_series(1, 200) g; DELETE FROM rc_a WHERE id % 7 = 0"
	wait_until 90 applied_reaches rc
	same_tables rc_a
	[ "$(apply_pid)" = "$before" ]
	run pgs rc status --json
	echo "$output" | jq -e '.heartbeat.reconnects >= 1'
	run pgs rc status --prometheus
	[[ $output == *'pgsync_reconnects_total{pgsync_job="rc"} '[1-9]* ]]
	grep -q "pg-apply: reconnected to the target" "$(current_run_log)"
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}
