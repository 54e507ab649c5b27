#!/usr/bin/env bats
# pgsync bootstrap in chunks of keys the target server orders: text, a
# composite (text, int) key whose chunk bounds fall inside runs of equal
# leading values, numeric and timestamptz keys, under a load that moves rows
# between chunks; pg-apply places each key of the catch-up among the chunks
# by asking the target. Killed with -9 mid-copy and resumed, the resumed
# attempt inserts only what the chunks done before did not hold
# (pg_stat_user_tables.n_tup_ins), and every table is identical after
# pgsync run. A text key whose collation the target has no equal of (the
# same name, another locale) is copied in one piece, and the log says why.
#
# Least-privilege roles on both sides (lp_source_role, lp_target_role).

load lib/cluster
load pgsync-helpers
load chunked-helpers

readonly CK_JOB=kk CK_SLOT=kk_slot CK_NTABLES=6
readonly CK_TABLES="t_text t_tc t_num t_ts t_mv t_coll"
readonly KT=public.t_text,public.t_tc,public.t_num,public.t_ts,public.t_mv,public.t_coll
# The load changes only non-key columns of these (see load.sql).
readonly NO_INSERTS="public.t_text public.t_num public.t_ts public.t_coll"

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src <<-'SQL'
		CREATE COLLATION mine (locale = 'C.UTF-8');
		CREATE TABLE t_text (k text PRIMARY KEY, v int);
		INSERT INTO t_text SELECT 'k' || g || E'\t\\ ' || g, g FROM generate_series(1, 12000) g;
		-- 3 leading values, 12 chunks or more: bounds inside their runs
		CREATE TABLE t_tc (a text, b int, v text, PRIMARY KEY (a, b));
		INSERT INTO t_tc SELECT 'grp' || g % 3, g, 'c' || g FROM generate_series(1, 12000) g;
		CREATE TABLE t_num (k numeric PRIMARY KEY, v text);
		INSERT INTO t_num SELECT g / 7.0, 'n' || g FROM generate_series(-4000, 4000) g;
		CREATE TABLE t_ts (k timestamptz PRIMARY KEY, v int);
		INSERT INTO t_ts SELECT '2026-01-01 00:00:00.5+02'::timestamptz + g * interval '1 minute', g FROM generate_series(1, 6000) g;
		CREATE TABLE t_mv (k text PRIMARY KEY, v int);
		INSERT INTO t_mv SELECT 'm' || g, g FROM generate_series(1, 6000) g;
		CREATE TABLE t_coll (k text COLLATE mine PRIMARY KEY, v int);
		INSERT INTO t_coll SELECT 'c' || g, g FROM generate_series(1, 5000) g;
		ANALYZE;
		CREATE PUBLICATION kk_pub FOR TABLE t_text, t_tc, t_num, t_ts, t_mv, t_coll;
	SQL
	psql_at tgt -c "CREATE DATABASE kk"
	export tgt_URL="$tgt_URL dbname=kk"
	# The same name on the target, another locale: not the source's order.
	psql_at tgt -c "CREATE COLLATION mine (locale = 'C')"
	lp_source_role kk_src public.t_text public.t_tc public.t_num public.t_ts public.t_mv public.t_coll
	lp_target_role kk_tgt kk
	job_conf kk kk_slot kk_pub "$KT" resources.snapshot_mode=chunked \
		resources.chunk_rows=1000 resources.chunk_bytes=64kB resources.chunk_group_seconds=1 \
		resources.max_parallel_copies=2 >/dev/null
	# Rows that move between chunks (to the end and back, into another run
	# of the composite key), and updates of the others' non-key columns.
	cat >"$BATS_FILE_TMPDIR/load.sql" <<-'SQL'
		\set k random(1, 6000)
		UPDATE t_mv SET k = 'z' || k WHERE k = 'm' || :k;
		UPDATE t_mv SET k = substr(k, 2) WHERE k = 'zm' || (:k + 7);
		UPDATE t_tc SET a = 'grp' || ((b + 1) % 3) WHERE b = :k * 2;
		UPDATE t_text SET v = v + 1 WHERE k = 'k' || :k || E'\t\\ ' || :k;
		UPDATE t_num SET v = v || '.' WHERE k = (:k - 3000) / 7.0;
		UPDATE t_ts SET v = v + 1 WHERE k = '2026-01-01 00:00:00.5+02'::timestamptz + :k * interval '1 minute';
		UPDATE t_coll SET v = v + 1 WHERE k = 'c' || :k;
	SQL
}

teardown_file() {
	stop_load
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

# The load runs before bootstrap starts, at a rate that leaves no 50 ms
# without a change: the catch-up's changes come from the moments between
# the slot and the chunks' snapshots, which a fast machine makes short.
start_load() {
	pgbench -n -c 1 -R 300 -T 600 -f "$BATS_FILE_TMPDIR/load.sql" -d "$src_URL" >/dev/null 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/load1.pid"
	wait_until 20 sql_is src t "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'pgbench'"
}

reset_job() {
	if run_alive; then stop_run KILL; fi
	pgs kk cleanup --yes >/dev/null 2>&1 || true
	psql_at tgt -c "DROP TABLE IF EXISTS t_text, t_tc, t_num, t_ts, t_mv, t_coll" \
		-c "DELETE FROM pgsync.pending_definitions" 2>/dev/null || true
	rm -rf "$BATS_FILE_TMPDIR/kk.state"
}

@test "text, composite (text, int), numeric and timestamptz keys are copied in chunks under load that moves rows between them; a text key the target cannot order alike in one piece; tables identical" {
	reset_job
	start_load
	run pgs kk bootstrap
	stop_load
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *'public.t_coll is copied in one piece, not in key chunks: key column "k": no collation on the target has provider c, locale C.UTF-8/C.UTF-8 and version '*', as its collation public.mine on the source'* ]]
	# The catch-up asked the target where the keys of the changes lie.
	[[ $output =~ keys\ placed\ by\ the\ target,\ [0-9.]+\ us\ each ]]
	echo "# ${BASH_REMATCH[0]}" >&3
	run psql_at tgt -c "SELECT table_name, count(*) > 1, bool_and(key_columns IS NOT NULL) FROM pgsync.table_chunk
		WHERE job = 'kk' GROUP BY 1 ORDER BY 1"
	echo "$output"
	[[ $output == *"t_text|t|t"* && $output == *"t_tc|t|t"* && $output == *"t_num|t|t"* ]]
	[[ $output == *"t_ts|t|t"* && $output == *"t_mv|t|t"* && $output == *"t_coll|f|f"* ]]
	# Chunks of the composite key that begin and end inside one run.
	(($(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'kk' AND table_name = 't_tc'
		AND lo[1] = hi[1]") > 0))
	# Bounds are keys as the source prints them: the text key's with its
	# tab and backslash, decoded.
	(($(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'kk' AND table_name = 't_text'
		AND strpos(hi[1], E'\t\\\\ ') > 0") > 0))
	all_identical
}

@test "kill -9 of a chunked copy of server-ordered keys under load: bootstrap again inserts only the chunks not done, tables identical" {
	reset_job
	catalog_ready
	slow_chunks
	start_load
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" kk bootstrap
	wait_until 120 chunks_at_least 22
	kill -KILL "$BG_PID"
	echo "# kill -9 of pgsync after $(chunks_done) chunks" >&3
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 120
	cat "$BATS_TEST_TMPDIR/bs.log"
	[ "$BG_STATUS" -ne 0 ]
	slot_exists kk_slot
	[ "$(job_state kk)" = SNAPSHOTTING ]
	before_resume
	resume
	resumed_inserted_only_the_rest
	stop_load
	all_identical
}
