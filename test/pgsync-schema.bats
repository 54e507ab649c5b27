#!/usr/bin/env bats
# Schema changes on the source, each row of the operations guide's table,
# against a running job on real servers: column added, column dropped,
# column type changed (fits / does not fit), table added to the publication,
# and additive changes made on the target first. The job runs as the guide's
# least-privilege source role and a target role that is not a superuser.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE sc_a (id int PRIMARY KEY, name text, gone text DEFAULT 'kept default', strict text NOT NULL DEFAULT 's');
		CREATE TABLE sc_n (id int PRIMARY KEY, n int);
		INSERT INTO sc_a (id, name) SELECT g, 'n' || g FROM generate_series(1, 100) g;
		INSERT INTO sc_n SELECT g, g FROM generate_series(1, 100) g;
		CREATE PUBLICATION sc_pub FOR TABLE sc_a, sc_n"
	# As the guide's least-privilege roles.
	lp_source_role sc_src sc_a sc_n
	lp_target_role sc_tgt
	job_conf sc sc_slot sc_pub public.sc_a,public.sc_n safety.max_retries=0 >/dev/null
	pgs sc bootstrap
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

@test "column added on the source: the next change stops the job with ERROR naming the column (exit 5)" {
	start_run sc
	wait_until 20 state_is sc STREAMING
	psql_at src -c "ALTER TABLE sc_a ADD COLUMN added int"
	psql_at src -c "INSERT INTO sc_a (id, name, added) VALUES (101, 'with added', 7)"
	wait_run 30
	[ "$RUN_STATUS" -eq 5 ]
	[ "$(job_state sc)" = ERROR ]
	[[ $(job_field sc last_error) == *'column "added" of public.sc_a does not exist on the target'* ]]
	grep -q 'pgsync: error: job sc stopped: pg-apply exited with status 5: column "added" of public.sc_a does not exist on the target' "$(current_run_log)"
	[ "$(psql_at tgt -c "SELECT count(*) FROM sc_a WHERE id = 101")" = 0 ]
	run pgs sc status --json
	echo "$output" | jq -e '.state == "ERROR" and .action == "pgsync run" and (.last_error | contains("\"added\""))'
}

@test "column added: after the DDL on the target, run resumes and nothing is lost" {
	psql_at tgt -c "ALTER TABLE sc_a ADD COLUMN added int"
	start_run sc
	wait_until 30 same_tables sc_a sc_n
	wait_until 20 state_is sc STREAMING
	[ "$(psql_at tgt -c "SELECT added FROM sc_a WHERE id = 101")" = 7 ]
}

@test "column dropped on the source: replication continues and new rows get the target's default" {
	psql_at src -c "ALTER TABLE sc_a DROP COLUMN gone"
	psql_at src -c "INSERT INTO sc_a (id, name) VALUES (102, 'after drop'); UPDATE sc_a SET name = 'updated after drop' WHERE id = 1"
	wait_until 20 target_has_row 102
	[ "$(psql_at tgt -c "SELECT gone FROM sc_a WHERE id = 102")" = "kept default" ]
	[ "$(psql_at tgt -c "SELECT name || '|' || gone FROM sc_a WHERE id = 1")" = "updated after drop|kept default" ]
	run_alive
	[ "$(job_state sc)" = STREAMING ]
}

target_has_row() {
	[[ $(psql_at tgt -c "SELECT count(*) FROM sc_a WHERE id = $1") == 1 ]]
}

@test "column type changed: values that still convert keep flowing" {
	psql_at src -c "ALTER TABLE sc_n ALTER COLUMN n TYPE bigint"
	psql_at src -c "INSERT INTO sc_n VALUES (101, 2147483647)"
	wait_until 20 same_tables sc_n
	run_alive
}

@test "column type changed: a value that does not fit stops the job (exit 5) and nothing of its transaction is applied" {
	before=$(table_checksum "$tgt_URL" sc_n)
	psql_at src -c "BEGIN; INSERT INTO sc_n VALUES (102, 5); INSERT INTO sc_n VALUES (103, 2147483648); COMMIT"
	wait_run 30
	[ "$RUN_STATUS" -eq 5 ]
	[ "$(job_state sc)" = ERROR ]
	[[ $(job_field sc last_error) == "pg-apply exited with status 5: "*"out of range for type integer (column \"n\", SQLSTATE 22003)" ]]
	# Never truncated or rounded to fit, and the whole transaction waits.
	[ "$(table_checksum "$tgt_URL" sc_n)" = "$before" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM sc_n WHERE id IN (102, 103)")" = 0 ]
	# Fixed on the target, run applies it exactly.
	psql_at tgt -c "ALTER TABLE sc_n ALTER COLUMN n TYPE bigint"
	start_run sc
	wait_until 30 same_tables sc_n
}

@test "a dropped NOT NULL column without a default on the target stops the job (exit 5)" {
	psql_at tgt -c "ALTER TABLE sc_a ALTER COLUMN strict DROP DEFAULT"
	psql_at src -c "ALTER TABLE sc_a DROP COLUMN strict"
	psql_at src -c "INSERT INTO sc_a (id, name) VALUES (104, 'needs strict')"
	wait_run 30
	[ "$RUN_STATUS" -eq 5 ]
	[[ $(job_field sc last_error) == *'"strict"'*"violates not-null constraint"*"SQLSTATE 23502)" ]]
	psql_at tgt -c "ALTER TABLE sc_a ALTER COLUMN strict SET DEFAULT 'target default'"
	start_run sc
	wait_until 20 target_has_row 104
}

@test "an additive change made on the target first is harmless" {
	psql_at tgt -c "ALTER TABLE sc_a ADD COLUMN later text"
	psql_at src -c "INSERT INTO sc_a (id, name) VALUES (105, 'before the source change')"
	psql_at src -c "ALTER TABLE sc_a ADD COLUMN later text"
	psql_at src -c "INSERT INTO sc_a (id, name, later) VALUES (106, 'after', 'l')"
	wait_until 20 target_has_row 106
	[ "$(psql_at tgt -c "SELECT later FROM sc_a WHERE id = 106")" = l ]
	run_alive
}

@test "a table added to the publication: its first change makes the job RESYNC_REQUIRED (exit 4)" {
	psql_at src -c "CREATE TABLE sc_new (id int PRIMARY KEY, v text)"
	psql_at src -c "ALTER PUBLICATION sc_pub ADD TABLE sc_new"
	psql_at src -c "INSERT INTO sc_new VALUES (1, 'never snapshotted')"
	wait_run 30
	[ "$RUN_STATUS" -eq 4 ]
	[ "$(job_state sc)" = RESYNC_REQUIRED ]
	[[ $(job_field sc last_error) == *"table public.sc_new is not part of this job's snapshot"* ]]
	run pgs sc run
	[ "$status" -eq 4 ]
}

@test "the documented fix for an added table: add it to replication.tables, cleanup, bootstrap --restart-snapshot" {
	job_conf sc sc_slot sc_pub public.sc_a,public.sc_n,public.sc_new safety.max_retries=0 >/dev/null
	lp_source_role sc_src sc_new
	run pgs sc cleanup --yes
	[ "$status" -eq 0 ]
	run pgs sc bootstrap --restart-snapshot
	[ "$status" -eq 0 ]
	same_tables sc_n sc_new
	# sc_a keeps the columns the source dropped: compare the shared ones.
	q="SELECT string_agg(concat_ws(':', id, name, added, later), ',' ORDER BY id) FROM sc_a"
	[ "$(psql_at src -c "$q")" = "$(psql_at tgt -c "$q")" ]
	start_run sc
	psql_at src -c "INSERT INTO sc_new VALUES (2, 'streamed')"
	wait_until 30 same_tables sc_new
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}
