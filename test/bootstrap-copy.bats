#!/usr/bin/env bats
# The initial copy end to end: pg-slot create --export-snapshot holding the
# snapshot, pg_dump --section=pre-data, pg-snapshot-dump | pg-apply --jobs N,
# pg_dump --section=post-data, then pg-walcat from the slot into pg-apply.
# Checks that source and target end identical (ordered per-table checksums),
# that pgsync.table_sync tells the truth, and how the loader fails.

load lib/cluster

setup_file() {
	cluster_start src
	cluster_start tgt
}

teardown_file() {
	cluster_stop_all
}

# hold_snapshot SLOT: create SLOT with an exported snapshot, held until
# release_snapshot; sets SLOT_NAME, SLOT_LSN and SNAP.
hold_snapshot() {
	local fifo=$BATS_TEST_TMPDIR/hold.$1
	mkfifo "$fifo"
	pg-slot create -d "$src_URL" --slot "$1" --export-snapshot <"$fifo" >"$fifo.out" 2>"$fifo.err" &
	HOLDER=$!
	exec 7>"$fifo"
	wait_until 20 test -s "$fifo.out"
	IFS=$'\t' read -r SLOT_NAME SLOT_LSN SNAP <"$fifo.out"
}

release_snapshot() {
	exec 7>&-
	wait "$HOLDER"
}

# The installed pg_dump dumps servers up to its own major version only.
need_pg_dump() {
	local mine server
	mine=$(pg_dump --version | sed 's/[^0-9]*\([0-9]*\).*/\1/')
	server=$(psql_at src -c "SHOW server_version_num")
	((server < (mine + 1) * 10000)) || skip "pg_dump $mine cannot dump PostgreSQL ${server:0:2}"
}

# schema SECTION PG_DUMP_OPTION...: pg_dump a section at the held snapshot
# into the target.
schema() {
	local section=$1
	shift
	pg_dump -d "$src_URL" --section="$section" --snapshot="$SNAP" "$@" |
		psql -X -q -v ON_ERROR_STOP=1 -d "$tgt_URL" >/dev/null
}

# checksums URL SCHEMA_LIKE: one "schema.table md5" line per table, in one session.
checksums() {
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" <<SQL
SET extra_float_digits = 3;
SELECT format('SELECT %L, md5(coalesce(string_agg(x::text, E''\\n'' ORDER BY x::text COLLATE "C"), '''')) FROM %I.%I x',
              schemaname || '.' || tablename, schemaname, tablename)
  FROM pg_tables WHERE schemaname LIKE '$2' ORDER BY schemaname, tablename
\gexec
SQL
}

sync_state() {
	psql_at tgt -c "SELECT string_agg(table_name || ':' || state || ':' || rows_copied, ' ' ORDER BY table_name)
		FROM pgsync.table_sync WHERE job = '$1'"
}

@test "bootstrap while pgbench writes the whole time ends with source and target identical" {
	need_pg_dump
	pgbench -i -s 2 -q -d "$src_URL" >/dev/null 2>&1
	psql_at src -c "CREATE PUBLICATION bench_pub FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	pgbench -n -c 2 -R 200 -T 120 -d "$src_URL" >/dev/null 2>&1 &
	local bench=$! cp=$BATS_TEST_TMPDIR/applied.lsn
	sleep 1
	hold_snapshot bench_slot
	schema pre-data -t 'pgbench_*'
	# accounts (200000 rows) is cut into block ranges (ctid, the default on
	# 14+; key ranges before) copied by 4 workers while pgbench updates rows
	pg-snapshot-dump -d "$src_URL" --snapshot "$SNAP" --position "$SLOT_LSN" --slot "$SLOT_NAME" \
		--publication bench_pub --jobs 4 --split-rows 30000 --frame-size 1MB 2>"$BATS_TEST_TMPDIR/dump.err" |
		pg-apply -d "$tgt_URL" --jobs 4 --checkpoint "$cp" 2>"$BATS_TEST_TMPDIR/apply.err"
	grep -q 'copying 4 tables in 11 parts with 4 workers' "$BATS_TEST_TMPDIR/dump.err"
	schema post-data -t 'pgbench_*'
	release_snapshot
	[ "$(head -n 1 "$cp")" = "$SLOT_LSN" ]
	[[ $(sync_state bench_slot) == "pgbench_accounts:done:200000 pgbench_branches:done:2 pgbench_history:done:"[0-9]*" pgbench_tellers:done:20" ]]
	# writes went on during the copy: the slot has them
	sleep 1
	kill -TERM "$bench"
	wait "$bench" || true
	[ "$(psql_at src -c "SELECT count(*) > 0 FROM pgbench_history")" = t ]
	pg-walcat -d "$src_URL" --slot bench_slot --publication bench_pub --endpos now --ack-file "$cp" 2>/dev/null |
		pg-apply -d "$tgt_URL" --checkpoint "$cp" 2>>"$BATS_TEST_TMPDIR/apply.err"
	same_tables pgbench_accounts pgbench_branches pgbench_tellers pgbench_history
	[ "$(psql_at src -c "SELECT count(*) FROM pgbench_history")" = "$(psql_at tgt -c "SELECT count(*) FROM pgbench_history")" ]
	psql_at src -c "SELECT pg_drop_replication_slot('bench_slot')" >/dev/null
}

@test "empty, one-row, TOASTed, keyless and key-split tables load identical, each marked done with its row count" {
	need_pg_dump
	psql_at src <<'SQL'
CREATE SCHEMA mix;
CREATE TABLE mix.empty (id int PRIMARY KEY, v text);
CREATE TABLE mix.one (id int PRIMARY KEY, v text);
INSERT INTO mix.one VALUES (1, E'tab\tnewline\n\\N');
CREATE TABLE mix.toast (id int PRIMARY KEY, doc text, blob bytea);
INSERT INTO mix.toast SELECT g, (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 20000) i),
  decode(repeat(md5(g::text), 5000), 'hex') FROM generate_series(1, 5) g;
CREATE TABLE mix.nokey (a int, b text, c numeric);
INSERT INTO mix.nokey SELECT g % 7, 'k' || g, g / 3.0 FROM generate_series(1, 30000) g;
CREATE TABLE mix.split (id uuid PRIMARY KEY, n int, at timestamptz);
INSERT INTO mix.split SELECT md5(g::text)::uuid, g, '2024-01-01'::timestamptz + g * interval '1 minute' FROM generate_series(1, 30000) g;
ANALYZE;
CREATE PUBLICATION mix_pub FOR TABLE mix.empty, mix.one, mix.toast, mix.nokey, mix.split;
SQL
	hold_snapshot mix_slot
	schema pre-data -n mix
	pg-snapshot-dump -d "$src_URL" --snapshot "$SNAP" --position "$SLOT_LSN" --slot "$SLOT_NAME" \
		--publication mix_pub --jobs 3 --split-rows 8000 --split-by key --log-level debug 2>"$BATS_TEST_TMPDIR/dump.err" |
		pg-apply -d "$tgt_URL" --jobs 3 2>"$BATS_TEST_TMPDIR/apply.err"
	schema post-data -n mix
	release_snapshot
	# --split-by key: the uuid key was sampled into ranges, the keyless table cut by ctid
	grep -q 'part 6 of 6 of mix.split: a range of "id" in "mix"."split", ' "$BATS_TEST_TMPDIR/dump.err"
	grep -q 'part 6 of 6 of mix.nokey: a range of the blocks of "mix"."nokey", ' "$BATS_TEST_TMPDIR/dump.err"
	same_tables mix.empty mix.one mix.toast mix.nokey mix.split
	[ "$(sync_state mix_slot)" = "empty:done:0 nokey:done:30000 one:done:1 split:done:30000 toast:done:5" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'mix_slot'
		AND started_at IS NOT NULL AND finished_at >= started_at AND bytes_copied > 0")" = 4 ]
	[ "$(psql_at tgt -c "SELECT applied_lsn FROM pgsync.job WHERE job = 'mix_slot'")" = "$SLOT_LSN" ]
	psql_at src -c "SELECT pg_drop_replication_slot('mix_slot')" >/dev/null
}

@test "200 schemas of 5 small tables each: all 1000 tables load identical and are marked done" {
	need_pg_dump
	psql_at src <<'SQL' >/dev/null
DO $$
BEGIN
  FOR s IN 1..200 LOOP
    EXECUTE format('CREATE SCHEMA tenant%s', s);
    FOR t IN 1..5 LOOP
      EXECUTE format('CREATE TABLE tenant%s.t%s (id int PRIMARY KEY, name text, at date)', s, t);
      EXECUTE format('INSERT INTO tenant%s.t%s SELECT g, %L || g, date %L + g FROM generate_series(1, %s) g',
                     s, t, 'n' || s || '_' || t || '_', '2024-01-01', 20 + t);
    END LOOP;
  END LOOP;
END $$;
SQL
	psql_at src -c "SELECT format('CREATE PUBLICATION tenants_pub FOR TABLE %s',
		string_agg(format('%I.%I', schemaname, tablename), ', ')) FROM pg_tables WHERE schemaname LIKE 'tenant%'" | psql_at src
	hold_snapshot tenants_slot
	schema pre-data -n 'tenant*'
	pg-snapshot-dump -d "$src_URL" --snapshot "$SNAP" --position "$SLOT_LSN" --slot "$SLOT_NAME" \
		--publication tenants_pub --jobs 4 -q | pg-apply -d "$tgt_URL" --jobs 4 2>"$BATS_TEST_TMPDIR/apply.err"
	release_snapshot
	grep -q 'snapshot loaded: 1000 tables, 23000 rows' "$BATS_TEST_TMPDIR/apply.err"
	diff <(checksums "$src_URL" 'tenant%') <(checksums "$tgt_URL" 'tenant%')
	[ "$(checksums "$tgt_URL" 'tenant%' | wc -l)" -eq 1000 ]
	[ "$(psql_at tgt -c "SELECT count(*), sum(rows_copied) FROM pgsync.table_sync WHERE job = 'tenants_slot' AND state = 'done'")" = "1000|23000" ]
	psql_at src -c "SELECT pg_drop_replication_slot('tenants_slot')" >/dev/null
}

@test "a worker killed mid-copy fails the bootstrap: the table is not marked done and no position is recorded" {
	need_pg_dump
	psql_at src -c "CREATE TABLE kill_big (id int PRIMARY KEY, pad text);
		INSERT INTO kill_big SELECT g, repeat('k', 300) FROM generate_series(1, 150000) g;
		CREATE TABLE kill_small (id int PRIMARY KEY); INSERT INTO kill_small VALUES (1);
		ANALYZE kill_big; CREATE PUBLICATION kill_pub FOR TABLE kill_big, kill_small"
	hold_snapshot kill_slot
	schema pre-data -t kill_big -t kill_small
	local errd=$BATS_TEST_TMPDIR/dump.err erra=$BATS_TEST_TMPDIR/apply.err st=$BATS_TEST_TMPDIR/status
	# The pipe is held until the kill, so the dump's workers are inside their COPY.
	( (s=0; pg-snapshot-dump -d "$src_URL" --snapshot "$SNAP" --position "$SLOT_LSN" --slot "$SLOT_NAME" \
		--publication kill_pub --jobs 2 --split-rows 50000 --frame-size 64kB 2>"$errd" || s=$?; echo "dump=$s" >>"$st") |
		(while [ ! -e "$BATS_TEST_TMPDIR/go" ]; do sleep 0.1; done; cat) | (s=0; pg-apply -d "$tgt_URL" --jobs 2 2>"$erra" || s=$?; echo "apply=$s" >>"$st") ) &
	local pipeline=$!
	wait_until 20 eval '[ -n "$(psql_at src -c "SELECT 1 FROM pg_stat_activity WHERE application_name = '"'pg-snapshot-dump'"' AND query LIKE '"'COPY%kill_big%'"' LIMIT 1")" ]'
	psql_at src -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'pg-snapshot-dump' AND query LIKE 'COPY%kill_big%' LIMIT 1" >/dev/null
	touch "$BATS_TEST_TMPDIR/go"
	wait "$pipeline"
	release_snapshot
	grep -qx 'dump=1' "$st"
	grep -qx 'apply=1' "$st"
	grep -q '^pg-snapshot-dump: error: cannot copy public.kill_big (part [1-4] of 4): ' "$errd"
	grep -q '^pg-apply: error: -:[0-9]*: truncated: the stream ends inside ' "$erra"
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'kill_slot' AND table_name = 'kill_big' AND state = 'done'")" = 0 ]
	[ "$(psql_at tgt -c "SELECT applied_lsn IS NULL FROM pgsync.job WHERE job = 'kill_slot'")" = t ]
	[ "$(psql_at tgt -c "SELECT count(*) < 150000 FROM kill_big")" = t ]
	psql_at src -c "SELECT pg_drop_replication_slot('kill_slot')" >/dev/null
}

@test "loader errors name the table and the stream line: missing table and bad value exit 5, truncation exits 1" {
	psql_at src -c "CREATE TABLE ld_ok (id int PRIMARY KEY, v text); INSERT INTO ld_ok SELECT g, 'v' || g FROM generate_series(1, 100) g;
		CREATE TABLE ld_missing (id int PRIMARY KEY); INSERT INTO ld_missing VALUES (1);
		CREATE TABLE ld_type (id int PRIMARY KEY, v text); INSERT INTO ld_type SELECT g, CASE WHEN g = 42 THEN 'secret-value' ELSE g::text END FROM generate_series(1, 50) g"
	psql_at tgt -c "CREATE TABLE ld_ok (id int PRIMARY KEY, v text); CREATE TABLE ld_type (id int PRIMARY KEY, v int)"
	local s=$BATS_TEST_TMPDIR/s.pgcs line
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.ld_ok --table public.ld_missing -q >"$s"
	run pg-apply -d "$tgt_URL" --job ld1 "$s"
	[ "$status" -eq 5 ]
	line=$(grep -n $'^COPY\tpublic\tld_missing\t' "$s" | cut -d: -f1)
	[[ $output == *"pg-apply: error: $s:$line: cannot load public.ld_missing: relation \"public.ld_missing\" does not exist (SQLSTATE 42P01)"* ]]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'ld1' AND table_name = 'ld_missing' AND state = 'done'")" = 0 ]

	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.ld_type -q >"$s"
	run pg-apply -d "$tgt_URL" --job ld2 "$s"
	[ "$status" -eq 5 ]
	line=$(grep -n $'^ROW\t42\t' "$s" | cut -d: -f1)
	[[ $output == *"pg-apply: error: $s:$line: cannot load public.ld_type: invalid input syntax for type integer: \"...\" (SQLSTATE 22P02)"* ]]
	[[ $output != *secret-value* ]]
	[ "$(psql_at tgt -c "SELECT count(*) FROM ld_type")" = 0 ]

	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.ld_ok -q | head -n 50 >"$s"
	run pg-apply -d "$tgt_URL" --job ld3 "$s"
	[ "$status" -eq 1 ]
	[[ $output == *"pg-apply: error: $s:50: truncated: the stream ends inside a frame of public.ld_ok"* ]]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'ld3' AND state = 'done'")" = 0 ]
	[ "$(psql_at tgt -c "SELECT applied_lsn IS NULL FROM pgsync.job WHERE job = 'ld3'")" = t ]
}

@test "a malformed frame is rejected with exit 5 naming the line, and its rows are rolled back" {
	psql_at tgt -c "CREATE TABLE ld_frame (id int PRIMARY KEY, v text)"
	local s=$BATS_TEST_TMPDIR/bad.pgcs
	printf 'PGCS\t1\t1\t1\t-\t0/10\nSNAPSHOT\t0/10\tx\t1\nCOPY\tpublic\tld_frame\t2\tid\tv\nROW\t1\ta\nROW\t2\tb\nENDCOPY\t3\n' >"$s"
	run pg-apply -d "$tgt_URL" --job ld4 "$s"
	[ "$status" -eq 5 ]
	[[ $output == *"pg-apply: error: $s:6: ENDCOPY of public.ld_frame counts 3 rows, the frame has 2"* ]]
	printf 'PGCS\t1\t1\t1\t-\t0/10\nSNAPSHOT\t0/10\tx\t1\nCOPY\tpublic\tld_frame\t2\tid\tv\nROW\t1\ta\nINSERT\tpublic\tld_frame\t2\tb\n' >"$s"
	run pg-apply -d "$tgt_URL" --job ld4 "$s"
	[ "$status" -eq 5 ]
	[[ $output == *"pg-apply: error: $s:5: expected ROW or ENDCOPY in the frame of public.ld_frame"* ]]
	[ "$(psql_at tgt -c "SELECT count(*) FROM ld_frame")" = 0 ]
	printf 'PGCS\t1\t1\t1\t-\t0/10\nSNAPSHOT\t0/10\tx\t1\nCOPY\tpublic\tld_frame\t2\tid\tv\nROW\t1\ta\nENDCOPY\t1\nTABLEDONE\tpublic\tld_frame\t1\t4\nSNAPSHOTDONE\t0/20\n' >"$s"
	run pg-apply -d "$tgt_URL" --job ld4 "$s"
	[ "$status" -eq 5 ]
	[[ $output == *"pg-apply: error: $s:7: SNAPSHOTDONE position differs from its SNAPSHOT"* ]]
	[ "$(psql_at tgt -c "SELECT applied_lsn IS NULL FROM pgsync.job WHERE job = 'ld4'")" = t ]
}

@test "fuzz regression: a frame error names a table whose name holds a newline on one line, as the stream writes it" {
	local s=$BATS_TEST_TMPDIR/nl.pgcs
	printf 'PGCS\t1\t1\t1\t-\t0/10\nSNAPSHOT\t0/10\tx\t1\nCOPY\tpublic\tld\\nnl\t1\tid\nROW\t1\nENDCOPY\t2\n' >"$s"
	run pg-apply -d "$tgt_URL" --job ld_nl "$s"
	[ "$status" -eq 5 ]
	[[ $output == *"pg-apply: error: $s:5: ENDCOPY of public.ld\\nnl counts 2 rows, the frame has 1"* ]]
	[ "$(grep -c . <<<"$output")" = "$(grep -c 'pg-apply: ' <<<"$output")" ]
	[ "$(psql_at tgt -c "SELECT applied_lsn IS NULL FROM pgsync.job WHERE job = 'ld_nl'")" = t ]
}

@test "the loader's memory stays bounded by --jobs, not by the size of the copy" {
	psql_at src -c "CREATE TABLE mem_big (id int PRIMARY KEY, pad text);
		INSERT INTO mem_big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 400000) g"
	psql_at tgt -c "CREATE TABLE mem_big (id int, pad text)"
	local s=$BATS_TEST_TMPDIR/mem.pgcs kb
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.mem_big -q >"$s"
	[ "$(stat -c %s "$s")" -gt $((80 * 1024 * 1024)) ]
	/usr/bin/time -f '%M' -o "$BATS_TEST_TMPDIR/rss" pg-apply -d "$tgt_URL" --job mem1 --jobs 2 --log-level warning "$s"
	kb=$(tail -n 1 "$BATS_TEST_TMPDIR/rss")
	echo "# pg-apply peak RSS ${kb} kB for $(($(stat -c %s "$s") / 1048576)) MB" >&3
	# 2 workers x (8 + 1) chunks of 1 MB, the reader's, the input buffer, libpq
	[ "$kb" -lt 60000 ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM mem_big")" = 400000 ]
}

@test "SIGTERM stops pg-apply while a loader waits on a locked target table: exit 1, nothing marked done" {
	psql_at src -c "CREATE TABLE lk_t (id int PRIMARY KEY); INSERT INTO lk_t SELECT generate_series(1, 1000)"
	psql_at tgt -c "CREATE TABLE lk_t (id int PRIMARY KEY)"
	local s=$BATS_TEST_TMPDIR/lk.pgcs errf=$BATS_TEST_TMPDIR/apply.err
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.lk_t -q >"$s"
	PGAPPNAME=bats_locker psql -X -q -d "$tgt_URL" -c "BEGIN; LOCK TABLE lk_t; SELECT pg_sleep(60)" >/dev/null 2>&1 &
	local locker=$!
	wait_until 10 eval '[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'bats_locker'"' AND wait_event = '"'PgSleep'"'")" = 1 ]'
	# timeout passes our SIGTERM on; it only matters if pg-apply hangs
	timeout -k 5 40 pg-apply -d "$tgt_URL" --job lk1 --jobs 2 "$s" 2>"$errf" &
	local pid=$!
	wait_until 20 eval '[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'pg-apply'"' AND wait_event_type = '"'Lock'"'")" = 1 ]'
	kill -TERM "$pid"
	local st=0
	wait "$pid" || st=$?
	psql_at tgt -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bats_locker'" >/dev/null
	wait "$locker" || true
	[ "$st" -eq 1 ]
	grep -q "^pg-apply: error: $s: interrupted inside the snapshot section: the copy is incomplete$" "$errf"
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'lk1' AND state = 'done'")" = 0 ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM lk_t")" = 0 ]
	# no loader session is left behind
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-apply'")" = 0 ]
}

@test "a table whose TABLEDONE is read before its last frame commits is marked done in that frame's transaction" {
	local t
	for t in fd_a fd_b fd_c; do
		psql_at src -c "CREATE TABLE $t (id int PRIMARY KEY, v text); INSERT INTO $t SELECT g, md5(g::text) FROM generate_series(1, 3000) g"
		psql_at tgt -c "CREATE TABLE $t (id int PRIMARY KEY, v text)"
	done
	local s=$BATS_TEST_TMPDIR/fd.pgcs
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.fd_a --table public.fd_b --table public.fd_c -q >"$s"
	# The lock holds every frame's COPY back until the reader has read the
	# whole stream, each TABLEDONE included.
	PGAPPNAME=bats_locker psql -X -q -d "$tgt_URL" -c "BEGIN; LOCK TABLE fd_a, fd_b, fd_c; SELECT pg_sleep(60)" >/dev/null 2>&1 &
	local locker=$!
	wait_until 10 eval '[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'bats_locker'"' AND wait_event = '"'PgSleep'"'")" = 1 ]'
	pg-apply -d "$tgt_URL" --job fd1 --jobs 3 --log-level warning "$s" &
	local pid=$!
	wait_until 20 eval '[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'pg-apply'"' AND wait_event_type = '"'Lock'"'")" = 3 ]'
	psql_at tgt -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bats_locker'" >/dev/null
	wait "$locker" || true
	wait "$pid"
	[ "$(sync_state fd1)" = "fd_a:done:3000 fd_b:done:3000 fd_c:done:3000" ]
	# The rows and the done state of a table share a transaction id. (The
	# loader's final flush rewrites one table_sync row, so one may differ.)
	for t in fd_a fd_b fd_c; do
		[ "$(psql_at tgt -c "SELECT count(DISTINCT xmin::text) FROM $t")" = 1 ]
	done
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync s WHERE job = 'fd1' AND finished_at >= started_at
		AND xmin::text = (SELECT min(x.xmin::text) FROM pg_class c, LATERAL (SELECT xmin FROM fd_a WHERE c.relname = 'fd_a'
			UNION ALL SELECT xmin FROM fd_b WHERE c.relname = 'fd_b' UNION ALL SELECT xmin FROM fd_c WHERE c.relname = 'fd_c') x
			WHERE c.relname = s.table_name AND c.relnamespace = 'public'::regnamespace)")" -ge 2 ]
}

# Kept last: it changes the target's defaults for the time of the test.
@test "a loaded section is flushed before pg-apply records its position: an immediate stop right after loses no row" {
	local cp=$BATS_TEST_TMPDIR/dur.lsn
	psql_at src <<'SQL'
CREATE SCHEMA dur;
CREATE TABLE dur.t (id int PRIMARY KEY, v text);
INSERT INTO dur.t SELECT g, md5(g::text) FROM generate_series(1, 20000) g;
CREATE PUBLICATION dur_pub FOR TABLE dur.t;
SQL
	psql_at tgt -c "CREATE SCHEMA dur" -c "CREATE TABLE dur.t (id int, v text)"
	# no commit on the target waits for a flush unless it asks for one, and
	# the WAL writer sleeps: only the loader's own flush can save the frames
	psql_at tgt -c "ALTER DATABASE postgres SET synchronous_commit = off" \
		-c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c "SELECT pg_reload_conf()" >/dev/null
	pg-snapshot-dump -d "$src_URL" --own-snapshot --publication dur_pub --jobs 2 --frame-size 64kB -q |
		pg-apply -d "$tgt_URL" --job dur_job --jobs 2 --checkpoint "$cp" --log-level warning
	cluster_restart tgt --mode immediate
	psql_at tgt -c "ALTER DATABASE postgres RESET synchronous_commit" \
		-c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null
	[ -s "$cp" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM dur.t")" = 20000 ]
	[ "$(sync_state dur_job)" = "t:done:20000" ]
}
