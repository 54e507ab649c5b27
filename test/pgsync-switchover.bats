#!/usr/bin/env bats
# pgsync switchover: refusals (not streaming, lag over --max-lag, missing
# privileges), a switchover stopped in each step leaves the source writable
# and the job streaming, one killed outright leaves a fence that
# --undo-fence puts back exactly; the switchover itself against a workload
# that keeps writing as the fenced roles (new sessions and one long-lived
# session), after which nothing written on the source is missing on the
# target, inserts with default keys succeed on the target, run has stopped
# and refuses to resume, and --undo-fence restores the roles' own settings;
# --no-fence. The source role has the guide's privileges only, the fencing
# is done by a separate role with CREATEROLE, pg_signal_backend and (needed
# from PostgreSQL 16 on) ADMIN OPTION on the fenced roles, the target role
# is no superuser.

load lib/cluster
load pgsync-helpers

readonly -a KEYED=(sw_serial sw_ident '"SwCaps"')

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE sw_serial (id serial PRIMARY KEY, v text);
		CREATE TABLE sw_ident (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
		CREATE TABLE \"SwCaps\" (id bigserial PRIMARY KEY, v text);
		CREATE TABLE sw_plain (k int PRIMARY KEY, v text);
		CREATE TABLE sw_other (id serial PRIMARY KEY, v text);
		INSERT INTO sw_serial (v) SELECT 'seed' FROM generate_series(1, 50);
		INSERT INTO sw_ident (v) SELECT 'seed' FROM generate_series(1, 50);
		INSERT INTO \"SwCaps\" (v) SELECT 'seed' FROM generate_series(1, 50);
		INSERT INTO sw_plain SELECT g, 'seed' FROM generate_series(1, 50) g;
		INSERT INTO sw_other (v) SELECT 'seed' FROM generate_series(1, 5);
		CREATE PUBLICATION sw_pub FOR TABLE sw_serial, sw_ident, \"SwCaps\", sw_plain;
		CREATE PUBLICATION sw2_pub FOR TABLE sw_other;
		CREATE ROLE sw_repl LOGIN REPLICATION;
		GRANT SELECT ON ALL TABLES IN SCHEMA public TO sw_repl;
		GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO sw_repl;
		CREATE ROLE sw_admin LOGIN CREATEROLE;
		GRANT pg_signal_backend TO sw_admin;
		CREATE ROLE sw_app LOGIN;
		CREATE ROLE sw_app2 LOGIN;
		GRANT sw_app, sw_app2 TO sw_admin WITH ADMIN OPTION;
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO sw_app, sw_app2;
		GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO sw_app, sw_app2;
		ALTER ROLE sw_app2 IN DATABASE postgres SET default_transaction_read_only = off"
	psql_at tgt -c "CREATE ROLE sw_tgt LOGIN; GRANT CREATE ON DATABASE postgres TO sw_tgt; GRANT CREATE ON SCHEMA public TO sw_tgt"
	job_conf sw sw_slot sw_pub public.sw_serial,public.sw_ident,public.SwCaps,public.sw_plain \
		switchover.fence_roles=sw_app,sw_app2 >/dev/null
	job_conf sw2 sw2_slot sw2_pub public.sw_other >/dev/null
	export SRC_URL="$src_URL user=sw_repl" TGT_URL="$tgt_URL user=sw_tgt"
	export PGSYNC_SOURCE_ADMIN_URL="$src_URL user=sw_admin"
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

teardown() {
	[[ ! -d $BATS_FILE_TMPDIR/workload ]] || touch "$BATS_FILE_TMPDIR/workload/stop"
	[[ -z ${WALCAT:-} ]] || kill -CONT "$WALCAT" 2>/dev/null || true
}

# role_setting ROLE: its own default_transaction_read_only in the source
# database ("" for none).
role_setting() {
	psql_at src -c "SELECT c FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
		CROSS JOIN LATERAL unnest(s.setconfig) c
		WHERE r.rolname = '$1' AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND c LIKE 'default_transaction_read_only=%'"
}

# The roles as they were before any fence.
roles_unfenced() {
	[ "$(role_setting sw_app)" = "" ]
	[ "$(role_setting sw_app2)" = "default_transaction_read_only=off" ]
}

# app_writes ROLE: a new session of ROLE can insert on the source.
app_writes() {
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$src_URL user=$1" -c "INSERT INTO sw_plain VALUES ((SELECT max(k) + 1 FROM sw_plain), 'app')"
}

# pause_stream / resume_stream: stop and continue the job's pg-walcat, so
# that the target falls behind while run and pg-apply stay alive.
# Only among this run's own processes: another run of this file elsewhere
# on the machine has a pg-walcat of the same slot name.
pause_stream() {
	local p
	WALCAT=""
	for p in $(descendants "$(<"$(current_run_log).pid")"); do
		if [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == *pg-walcat*"--slot sw_slot "* ]]; then WALCAT=$p; fi
	done
	[ -n "$WALCAT" ]
	kill -STOP "$WALCAT"
}

resume_stream() {
	kill -CONT "$WALCAT"
}

# more_than N COMMAND...: COMMAND prints a number above N.
more_than() {
	local n=$1
	shift
	(($("$@") > n))
}

lines() {
	if [[ -f $1 ]]; then grep -c . "$1" || true; else echo 0; fi
}

rows_long() {
	psql_at src -c "SELECT count(*) FROM sw_ident WHERE v = 'long'"
}

# still_streaming: after a failed switchover, the job is as before.
still_streaming() {
	[ "$(job_state sw)" = STREAMING ]
	run_alive
	roles_unfenced
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.fence")" = 0 ]
	app_writes sw_app
	app_writes sw_app2
	wait_until 60 applied_reaches sw
}

@test "switchover refuses a job that is not streaming, naming what to do" {
	pgs sw bootstrap
	run pgs sw switchover
	[ "$status" -eq 3 ]
	[[ $output == *"error: job sw is CATCHING_UP, not STREAMING: start pgsync run and wait until pgsync status shows STREAMING"* ]]
	roles_unfenced
}

@test "switchover refuses when the lag is over --max-lag, and with a fence it cannot set" {
	start_run sw
	wait_until 60 state_is sw STREAMING
	pause_stream
	psql_at src -c "INSERT INTO sw_plain SELECT g, repeat('x', 100) FROM generate_series(1000, 2000) g"
	run pgs sw switchover --max-lag 64kB
	resume_stream
	[ "$status" -eq 3 ]
	[[ $output == *"error: job sw is "*" bytes behind the source, more than --max-lag 65536: wait until pgsync status shows less lag, or raise --max-lag"* ]]
	run pgs sw switchover --max-lag 12parsecs
	[ "$status" -eq 2 ]
	[[ $output == *'invalid size "12parsecs" for switchover.max_lag'* ]]
	wait_until 60 applied_reaches sw

	psql_at src -c "REVOKE pg_signal_backend FROM sw_admin"
	run pgs sw switchover
	psql_at src -c "GRANT pg_signal_backend TO sw_admin"
	[ "$status" -eq 3 ]
	[[ $output == *"error: cannot fence the source: role sw_admin cannot terminate the sessions of other roles: GRANT pg_signal_backend TO sw_admin"* ]]
	[[ $output == *"nothing was changed"* || $output != *fence\ is\ undone* ]]

	PGSYNC_SOURCE_ADMIN_URL="$src_URL user=sw_repl" run pgs sw switchover
	[ "$status" -eq 3 ]
	[[ $output == *"error: cannot fence the source: role sw_repl cannot change the settings of role sw_app (ALTER ROLE ... SET): ALTER ROLE sw_repl CREATEROLE"* ]]

	psql_at src -c "ALTER ROLE sw_app SUPERUSER"
	run pgs sw switchover
	psql_at src -c "ALTER ROLE sw_app NOSUPERUSER"
	[ "$status" -eq 3 ]
	[[ $output == *"role sw_app in switchover.fence_roles is a superuser, which pgsync never fences"* ]]
	still_streaming
}

@test "a switchover that times out waiting for the target, or is stopped there, undoes its fence" {
	pause_stream
	psql_at src -c "INSERT INTO sw_plain VALUES (5000, 'behind')"
	run pgs sw switchover --timeout 2s
	[ "$status" -eq 1 ]
	[[ $output == *"within --timeout 2.000 s"* ]]
	[[ $output == *"the fence is undone: the source's roles are writable again and the job goes on streaming"* ]]
	roles_unfenced

	pgs_bg "$BATS_FILE_TMPDIR/sw.term.log" sw switchover
	wait_until 60 grep -q "waiting for the target to apply" "$BATS_FILE_TMPDIR/sw.term.log"
	[ "$(role_setting sw_app)" = "default_transaction_read_only=on" ]
	kill -TERM "$BG_PID"
	bg_wait "$BATS_FILE_TMPDIR/sw.term.log" 60
	resume_stream
	[ "$BG_STATUS" -eq 1 ]
	grep -q "stopped by SIGTERM in step waiting for the target" "$BATS_FILE_TMPDIR/sw.term.log"
	grep -q "the fence is undone" "$BATS_FILE_TMPDIR/sw.term.log"
	still_streaming
}

@test "a switchover that cannot read the sequences undoes its fence" {
	psql_at src -c "REVOKE SELECT ON SEQUENCE sw_serial_id_seq FROM sw_repl"
	run pgs sw switchover
	psql_at src -c "GRANT SELECT ON SEQUENCE sw_serial_id_seq TO sw_repl"
	[ "$status" -eq 1 ]
	[[ $output == *"cannot read the source's sequences"*"the fence is undone"* ]]
	still_streaming
}

@test "a switchover --verify that finds a difference undoes its fence and exits 5" {
	psql_at tgt -c "UPDATE sw_plain SET v = 'changed behind pgsync' WHERE k = 7"
	run pgs sw switchover --verify
	psql_at tgt -c "UPDATE sw_plain SET v = 'seed' WHERE k = 7"
	[ "$status" -eq 5 ]
	[[ $output == *"public.sw_plain: "*" 1 differing"* ]]
	[[ $output == *"the target's tables differ from the source's"*"the fence is undone"* ]]
	still_streaming
}

@test "a switchover killed outright has its fence undone by its guard; with the guard killed too, status names --undo-fence, which restores it exactly" {
	pause_stream
	psql_at src -c "INSERT INTO sw_plain VALUES (6000, 'behind')"
	pgs_bg "$BATS_FILE_TMPDIR/sw.kill.log" sw switchover
	wait_until 60 grep -q "waiting for the target to apply" "$BATS_FILE_TMPDIR/sw.kill.log"
	[ "$(role_setting sw_app)" = "default_transaction_read_only=on" ]
	kill -KILL "$BG_PID"
	wait_until 60 grep -q "switchover of job sw was killed: its guard undid the fence of 2 roles" "$BATS_FILE_TMPDIR/sw.kill.log" || {
		cat "$BATS_FILE_TMPDIR/sw.kill.log"
		return 1
	}
	wait_until 30 sql_is tgt 0 "SELECT count(*) FROM pgsync.fence"
	roles_unfenced

	pgs_bg "$BATS_FILE_TMPDIR/sw.kill2.log" sw switchover
	wait_until 60 grep -q "waiting for the target to apply" "$BATS_FILE_TMPDIR/sw.kill2.log"
	local kids
	kids=$(pgrep -P "$BG_PID" | tr '\n' ' ')
	kill -KILL "$BG_PID" $kids 2>/dev/null || true
	bg_wait "$BATS_FILE_TMPDIR/sw.kill2.log" 60
	resume_stream
	[ "$(role_setting sw_app)" = "default_transaction_read_only=on" ]
	[ "$(role_setting sw_app2)" = "default_transaction_read_only=on" ]
	run pgs sw status
	[ "$status" -eq 0 ]
	[[ $output == *"state:           STREAMING"* ]]
	[[ $output == *"action:          pgsync switchover --undo-fence"* ]]
	[[ $output == *"fenced roles:    sw_app, sw_app2"* ]]
	run pgs sw switchover --undo-fence
	[ "$status" -eq 0 ]
	[[ $output == *"undid the fence of 2 roles"* ]]
	still_streaming
}

# fence_waits_on_lock: the fencing role's session waits for a lock.
fence_waits_on_lock() {
	[ "$(psql_at src -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'sw_admin' AND wait_event_type = 'Lock'")" = 1 ]
}

@test "a switchover stopped in the middle of its fence, one role set and the next one's setting held by another session, undoes what it had set" {
	# A session that changes sw_app2's setting (to what it already is) and
	# keeps its transaction open holds that catalog row, so the fence stops
	# after sw_app, in the middle of its statements.
	mkfifo "$BATS_FILE_TMPDIR/holder"
	PGAPPNAME=sw_holder psql -X -q -v ON_ERROR_STOP=1 -d "$src_URL" <"$BATS_FILE_TMPDIR/holder" >"$BATS_FILE_TMPDIR/holder.log" 2>&1 &
	local holder=$!
	exec 7>"$BATS_FILE_TMPDIR/holder"
	echo "BEGIN; ALTER ROLE sw_app2 IN DATABASE postgres SET default_transaction_read_only = off; SELECT 'held';" >&7
	# Only the holder's own session: under load a session of an earlier
	# test (a slow verify, say) can still be idle in a transaction here.
	wait_until 60 sql_is src 1 "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND application_name = 'sw_holder'"

	pgs_bg "$BATS_FILE_TMPDIR/sw.fence.log" sw switchover
	wait_until 60 fence_waits_on_lock
	[ "$(role_setting sw_app)" = "default_transaction_read_only=on" ]
	kill -TERM "$BG_PID"
	echo "COMMIT;" >&7
	exec 7>&-
	wait "$holder"
	bg_wait "$BATS_FILE_TMPDIR/sw.fence.log" 60
	cat "$BATS_FILE_TMPDIR/sw.fence.log"
	[ "$BG_STATUS" -ne 0 ]
	grep -q "the fence is undone" "$BATS_FILE_TMPDIR/sw.fence.log"
	still_streaming
}

@test "switchover against a workload writing as the fenced roles: nothing lands on the source after the final position" {
	local work=$BATS_FILE_TMPDIR/workload
	mkdir -p "$work"
	# New sessions as sw_app, one insert each, and one long-lived session
	# of sw_app2 started before the fence (only terminating it stops it).
	(
		while [[ ! -e $work/stop ]]; do
			if psql -X -qAt -v ON_ERROR_STOP=1 -d "$src_URL user=sw_app" \
				-c "INSERT INTO sw_serial (v) VALUES ('load') RETURNING id" >>"$work/ok" 2>>"$work/err"; then :; else
				echo x >>"$work/failed"
			fi
		done
	) 3>&- &
	local loop=$!
	(
		while [[ ! -e $work/stop ]]; do
			echo "INSERT INTO sw_ident (v) VALUES ('long');"
			sleep 0.01
		done | psql -X -q -d "$src_URL user=sw_app2" >/dev/null 2>"$work/long.err"
	) 3>&- &
	local long=$!
	wait_until 60 more_than 10 rows_long
	wait_until 60 more_than 10 lines "$work/ok"

	run pgs sw switchover
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"outage window:   "*" s (from fencing to done)"* ]]
	[[ $output == *"sequences set:   3"* ]]
	[[ $output == *"final position:  "* ]]
	# The workload goes on trying, and fails.
	local failed
	failed=$(lines "$work/failed")
	wait_until 60 more_than $((failed + 20)) lines "$work/failed"
	touch "$work/stop"
	wait "$loop" || true
	wait "$long" || true
	grep -q "read-only transaction" "$work/err"
	# run stopped by itself, cleanly.
	wait_run 60
	[ "$RUN_STATUS" -eq 0 ]
	grep -q "job sw was switched over: stream stopped" "$(current_run_log)"
	# Everything on the source is on the target: no write after the final
	# position (run, stopped, would not have carried it).
	same_tables sw_serial sw_ident SwCaps sw_plain || {
		for t in sw_serial sw_ident; do
			echo "$t on the source: $(psql_at src -c "SELECT count(*) || ' rows, last ' || max(id) FROM $t")"
			echo "$t on the target: $(psql_at tgt -c "SELECT count(*) || ' rows, last ' || max(id) FROM $t")"
		done
		return 1
	}
	[ "$(job_state sw)" = SWITCHED_OVER ]
	[ "$(job_field sw "switchover_lsn IS NOT NULL AND switched_over_at IS NOT NULL")" = t ]
	[ "$(job_field sw "switchover_lsn <= applied_lsn")" = t ]

	# The target takes inserts with default keys on every keyed table.
	local t
	for t in "${KEYED[@]}"; do
		psql_at tgt -c "INSERT INTO $t (v) VALUES ('after')" || {
			echo "insert into $t failed on the target"
			return 1
		}
	done

	# An application role with exactly the grants of the cutover steps
	# (doc/operations.md, Cutover, step 4), no superuser and no owner:
	# the database and the schema's by their owner (here the superuser),
	# the tables' and the sequences' by their owner, pgsync's target role.
	psql_at tgt -c "CREATE ROLE sw_tapp LOGIN"
	psql_at tgt -c "GRANT CONNECT ON DATABASE postgres TO sw_tapp; GRANT USAGE ON SCHEMA public TO sw_tapp"
	psql -X -q -v ON_ERROR_STOP=1 -d "$TGT_URL" \
		-c "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO sw_tapp" \
		-c "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO sw_tapp"
	[ "$(psql_at tgt -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'sw_tapp'")" = f ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_class WHERE relowner = 'sw_tapp'::regrole")" = 0 ]
	local id
	for t in "${KEYED[@]}"; do
		id=$(psql -X -qAt -v ON_ERROR_STOP=1 -d "$tgt_URL user=sw_tapp" -c "INSERT INTO $t (v) VALUES ('app') RETURNING id") || {
			echo "the application role cannot insert into $t with a default key"
			return 1
		}
		psql -X -qAt -v ON_ERROR_STOP=1 -d "$tgt_URL user=sw_tapp" \
			-c "UPDATE $t SET v = 'app2' WHERE id = $id" -c "DELETE FROM $t WHERE id = $id - 1" || {
			echo "the application role cannot update or delete in $t"
			return 1
		}
	done
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$tgt_URL user=sw_tapp" \
		-c "INSERT INTO sw_plain VALUES ((SELECT max(k) + 1 FROM sw_plain), 'app')" \
		-c "UPDATE sw_plain SET v = 'app2' WHERE k = 1" -c "DELETE FROM sw_plain WHERE k = 2"

	run pgs sw status
	[[ $output == *"state:           SWITCHED_OVER"* ]]
	[[ $output == *"action:          point the application at the target; pgsync switchover --undo-fence lifts the source's fence"* ]]
	# Nothing consumes the slot any more: it only holds WAL.
	[[ $output == *"; pgsync cleanup --yes drops replication slot sw_slot, which retains "[0-9]*" bytes of WAL on the source"$'\n'* ]]
	run pgs sw status --json
	[[ $(jq -r '.switchover.final_lsn != null and (.switchover.fenced_roles | length) == 2' <<<"$output") == true ]]

	run pgs sw run
	[ "$status" -eq 3 ]
	[[ $output == *"error: job sw was switched over: the target takes the application's writes and is not replicated into again"* ]]
	run pgs sw switchover
	[ "$status" -eq 3 ]
	[[ $output == *"job sw was switched over already"* ]]

	run pgs sw switchover --undo-fence
	[ "$status" -eq 0 ]
	roles_unfenced
	app_writes sw_app
}

@test "switchover --no-fence leaves the roles alone and reports in JSON" {
	pgs sw2 bootstrap
	start_run sw2
	wait_until 60 state_is sw2 STREAMING
	psql_at src -c "INSERT INTO sw_other (v) VALUES ('last')"
	run pgs sw2 --json switchover --no-fence --verify
	echo "$output"
	[ "$status" -eq 0 ]
	local report
	report=$(grep '^{"job"' <<<"$output")
	[ "$(jq -r '.state, .fenced, .sequences_set, (.steps | length > 0)' <<<"$report" | tr '\n' ' ')" = "SWITCHED_OVER false 1 true " ]
	[[ $(jq -r '.outage_seconds >= 0 and (.final_lsn | test("^[0-9A-F]+/[0-9A-F]+$")) and .rows_verified == 6' <<<"$report") == true ]]
	roles_unfenced
	wait_run 60
	[ "$RUN_STATUS" -eq 0 ]
	same_tables sw_other
	psql_at tgt -c "INSERT INTO sw_other (v) VALUES ('after')"
}

@test "check names the privileges the fencing role lacks, and passes once it has them" {
	run pgs sw check
	[[ $output == *"ok    source: role sw_admin can fence sw_app, sw_app2 for pgsync switchover"* ]]
	psql_at src -c "REVOKE pg_signal_backend FROM sw_admin; ALTER ROLE sw_admin NOCREATEROLE"
	run pgs sw check
	psql_at src -c "GRANT pg_signal_backend TO sw_admin; ALTER ROLE sw_admin CREATEROLE"
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: switchover: role sw_admin cannot change the settings of role sw_app (ALTER ROLE ... SET); fix: ALTER ROLE sw_admin CREATEROLE"* ]]
	[[ $output == *"FAIL  source: switchover: role sw_admin cannot terminate the sessions of other roles; fix: GRANT pg_signal_backend TO sw_admin"* ]]
	# From PostgreSQL 16 on, CREATEROLE alone no longer lets a role alter
	# another: it needs ADMIN OPTION on it.
	if (($(psql_at src -c "SHOW server_version_num") >= 160000)); then
		psql_at src -c "REVOKE ADMIN OPTION FOR sw_app FROM sw_admin"
		run pgs sw check
		psql_at src -c "GRANT sw_app TO sw_admin WITH ADMIN OPTION"
		[ "$status" -eq 3 ]
		[[ $output == *"FAIL  source: switchover: role sw_admin cannot change the settings of role sw_app (ALTER ROLE ... SET); fix: GRANT sw_app TO sw_admin WITH ADMIN OPTION"* ]]
	fi
	PGSYNC_SOURCE_ADMIN_URL="$src_URL user=sw_admin dbname=template1" run pgs sw check
	[[ $output == *"FAIL  source: switchover: PGSYNC_SOURCE_ADMIN_URL connects to database template1, the source is postgres; fix: let PGSYNC_SOURCE_ADMIN_URL name database postgres"* ]]
}
