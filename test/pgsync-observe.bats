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
		resources.chunk_rows=1000 resources.chunk_bytes=64kB resources.chunk_group_seconds=1 \
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
	grep -q 'debug: part [0-9]* of [0-9]* of Obs.Items: a range of its key' "$BATS_TEST_TMPDIR/debug.log"
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
