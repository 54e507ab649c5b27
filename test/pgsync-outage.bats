#!/usr/bin/env bats
# pgsync run rides out outages of the target and of the source for as long
# as safety.max_retries retries back off, with state, connection_state and
# last_error telling the truth, and stops with ERROR and last_error when the
# retries are spent. The job runs as the guide's least-privilege source role
# and a target role that is not a superuser.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE ou_a (id bigserial PRIMARY KEY, v text);
		CREATE TABLE ou_b (k text PRIMARY KEY, n int);
		INSERT INTO ou_a (v) SELECT 'a' || g FROM generate_series(1, 500) g;
		INSERT INTO ou_b SELECT 'k' || g, g FROM generate_series(1, 50) g;
		CREATE PUBLICATION ou_pub FOR TABLE ou_a, ou_b"
	lp_source_role ou_src ou_a ou_b
	lp_target_role ou_tgt
	job_conf ou ou_slot ou_pub public.ou_a,public.ou_b >/dev/null
	pgs ou bootstrap
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

writes() {
	psql_at src -c "INSERT INTO ou_a (v) SELECT 'w' || g FROM generate_series(1, $1) g;
		UPDATE ou_b SET n = n + 1 WHERE n % 3 = 0; DELETE FROM ou_a WHERE id % 17 = 0"
}

last_error_like() {
	[[ $(job_field ou "coalesce(last_error, '')") == $1 ]]
}

# The run last started streams (the job row may still say STREAMING from an
# earlier run).
run_streams() {
	grep -q "caught up with .*: state STREAMING" "$(current_run_log)"
}

caught_up() {
	applied_reaches ou && same_tables ou_a ou_b
}

@test "a target outage of 20 s while run streams is retried: the job goes on, nothing is lost, STREAMING again with last_error cleared" {
	start_run ou
	wait_until 30 state_is ou STREAMING
	writes 200
	wait_until 30 caught_up
	cluster_stop tgt --mode fast
	writes 300
	# The outage's length is the scenario, not a check.
	sleep 20
	run_alive
	writes 100
	cluster_start tgt
	wait_until 90 caught_up
	wait_until 30 state_is ou STREAMING
	wait_until 30 last_error_like ""
	run_alive
	[ "$(psql_at tgt -c "SELECT connection_state FROM pgsync.job_runtime WHERE job = 'ou'")" = connected ]
}

@test "a source outage is retried: last_error and connection_state say so while it lasts, and clear when the source answers" {
	run_alive
	cluster_stop src --mode fast
	wait_until 30 last_error_like "the source (host=*) does not answer since *: *pg-walcat reconnects for up to 31 s"
	wait_until 30 eval '[[ $(psql_at tgt -c "SELECT connection_state FROM pgsync.job_runtime WHERE job = '"'ou'"'") == reconnecting ]]'
	run pgs ou status --json
	echo "$output" | jq -e '.connection_state == "reconnecting" and .source.reachable == false and (.last_error | contains("does not answer"))'
	run_alive
	cluster_start src
	writes 50
	wait_until 90 caught_up
	wait_until 30 state_is ou STREAMING
	wait_until 30 last_error_like ""
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "a source outage longer than the retries' backoff: ERROR, last_error names the source, exit 1; run resumes once it answers" {
	job_conf ou ou_slot ou_pub public.ou_a,public.ou_b safety.max_retries=2 >/dev/null
	start_run ou
	wait_until 30 run_streams
	cluster_stop src --mode fast
	wait_run 60
	[ "$RUN_STATUS" -eq 1 ]
	grep -q "pgsync: error: job ou stopped: the source (host=.*) did not answer for [0-9]* s: .*; gave up after 2 retries" "$(current_run_log)"
	[ "$(job_state ou)" = ERROR ]
	last_error_like "the source (host=*) did not answer for * s: * (after 2 retries)"
	cluster_start src
	writes 10
	job_conf ou ou_slot ou_pub public.ou_a,public.ou_b >/dev/null
	start_run ou
	wait_until 60 caught_up
	wait_until 30 state_is ou STREAMING
	stop_run TERM
}

@test "a target outage longer than the retries' backoff ends run with exit 1 and the reason in the log" {
	job_conf ou ou_slot ou_pub public.ou_a,public.ou_b safety.max_retries=2 >/dev/null
	start_run ou
	wait_until 30 run_streams
	cluster_stop tgt --mode fast
	wait_run 60
	cat "$(current_run_log)"
	[ "$RUN_STATUS" -eq 1 ]
	grep -q "gave up after 2 retries without progress" "$(current_run_log)"
	cluster_start tgt
	job_conf ou ou_slot ou_pub public.ou_a,public.ou_b >/dev/null
	writes 10
	start_run ou
	wait_until 60 caught_up
	stop_run TERM
}
