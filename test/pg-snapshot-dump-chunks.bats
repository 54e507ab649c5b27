#!/usr/bin/env bats
# The chunked copy's data path: pg-snapshot-dump --chunked at the snapshot of
# a temporary slot, groups cut by --group-seconds, --done resumes, and
# pg-apply recording each chunk in pgsync.table_chunk with its rows. The
# source role has the guide's privileges only; the target role is no
# superuser.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	lp_roles_for_tests chunk_src chunk_tgt
}

teardown_file() {
	cluster_stop_all
}

# group PUB DUMP_OPTION...: one group: a temporary slot holding a snapshot,
# the target's chunks as --done, pg-snapshot-dump --chunked | pg-apply.
# Sets LI (the group's position), DUMP_RC and APPLY_RC.
group() {
	local pub=$1 fifo=$BATS_TEST_TMPDIR/hold.$RANDOM
	shift
	mkfifo "$fifo"
	pg-slot create -d "$SRC_URL" --slot "tmp_$RANDOM" --temporary --export-snapshot <"$fifo" >"$fifo.out" 2>"$fifo.err" &
	local holder=$!
	exec 7>"$fifo"
	wait_until 30 test -s "$fifo.out"
	local slot snap
	IFS=$'\t' read -r slot LI snap <"$fifo.out"
	done_file >"$BATS_TEST_TMPDIR/done" 2>/dev/null || : >"$BATS_TEST_TMPDIR/done"
	DUMP_RC=0 APPLY_RC=0
	{ pg-snapshot-dump -d "$SRC_URL" --snapshot "$snap" --position "$LI" --slot chunkjob \
		--publication "$pub" --chunked --done "$BATS_TEST_TMPDIR/done" "$@" 2>>"$BATS_TEST_TMPDIR/dump.err" ||
		echo $? >"$BATS_TEST_TMPDIR/dump.rc"; } |
		pg-apply -d "$TGT_URL" --jobs 2 2>>"$BATS_TEST_TMPDIR/apply.err" || APPLY_RC=$?
	[ -e "$BATS_TEST_TMPDIR/dump.rc" ] && DUMP_RC=$(cat "$BATS_TEST_TMPDIR/dump.rc") && rm "$BATS_TEST_TMPDIR/dump.rc"
	exec 7>&-
	wait "$holder" || true
}

# done_file: the target's chunks as --done lines (COPY text: the values
# here need no escaping).
done_file() {
	psql_at tgt -c "SELECT concat_ws(E'\t', schema_name, table_name, coalesce(cardinality(key_columns), 0),
			array_to_string(key_columns, E'\t'),
			CASE WHEN key_columns IS NOT NULL THEN array_to_string(coalesce(lo, array_fill('\N'::text, ARRAY[cardinality(key_columns)])), E'\t') END,
			CASE WHEN key_columns IS NOT NULL THEN array_to_string(coalesce(hi, array_fill('\N'::text, ARRAY[cardinality(key_columns)])), E'\t') END)
		FROM pgsync.table_chunk WHERE job = 'chunkjob'"
}

# rows_of URL TABLE: the table's rows in key order.
rows_of() {
	psql -X -qAt -d "$1" -c "SELECT x::text FROM $2 x ORDER BY 1"
}

# covers TABLE: the table's chunks tile its key space: one starts unbounded,
# one ends unbounded, every other start is the end of exactly one other
# chunk, and the rows recorded are the rows the target has.
covers() {
	local bad
	bad=$(psql_at tgt -c "WITH c AS (SELECT lo, hi, rows FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$1')
		SELECT (SELECT count(*) FROM c WHERE lo IS NULL) <> 1 OR (SELECT count(*) FROM c WHERE hi IS NULL) <> 1
			OR EXISTS (SELECT lo FROM c WHERE lo IS NOT NULL EXCEPT ALL SELECT hi FROM c WHERE hi IS NOT NULL)
			OR EXISTS (SELECT hi FROM c WHERE hi IS NOT NULL EXCEPT ALL SELECT lo FROM c WHERE lo IS NOT NULL)
			OR (SELECT sum(rows) FROM c) <> (SELECT count(*) FROM $1)")
	[ "$bad" = f ] || { echo "chunks of $1 do not tile its key space" >&2; return 1; }
}

@test "a chunked copy loads identical tables: int, composite, uuid, numeric, timestamp keys cut into chunks, text-key (no --key-collations) and empty tables in one piece" {
	psql_at src <<'SQL' >/dev/null
CREATE TABLE c_int (id int PRIMARY KEY, v text);
INSERT INTO c_int SELECT g, md5(g::text) FROM generate_series(1, 20000) g;
CREATE TABLE c_comp (a int, b bigint, v text, PRIMARY KEY (a, b));
INSERT INTO c_comp SELECT g / 5000, g, 'c' || g FROM generate_series(1, 20000) g;
CREATE TABLE c_uuid (id uuid PRIMARY KEY, v int);
INSERT INTO c_uuid SELECT md5(g::text)::uuid, g FROM generate_series(1, 20000) g;
CREATE TABLE c_text (k text PRIMARY KEY, v int);
INSERT INTO c_text SELECT md5(g::text), g FROM generate_series(1, 20000) g;
CREATE TABLE c_num (k numeric PRIMARY KEY, v int);
INSERT INTO c_num SELECT g / 3.0, g FROM generate_series(-10000, 10000) g;
CREATE TABLE c_ts (d date, t timestamp, v int, PRIMARY KEY (d, t));
INSERT INTO c_ts SELECT date '2026-01-01' + g / 1000, timestamp '2026-01-01' + g * interval '1 second', g FROM generate_series(1, 20000) g;
CREATE TABLE c_empty (id int PRIMARY KEY);
CREATE TABLE c_single (id int PRIMARY KEY, v text);
INSERT INTO c_single VALUES (7, 'seven');
ANALYZE;
CREATE PUBLICATION pub_mix FOR TABLE c_int, c_comp, c_uuid, c_text, c_num, c_ts, c_empty, c_single;
SQL
	psql_at tgt <<'SQL' >/dev/null
CREATE TABLE c_int (id int, v text);
CREATE TABLE c_comp (a int, b bigint, v text);
CREATE TABLE c_uuid (id uuid, v int);
CREATE TABLE c_text (k text, v int);
CREATE TABLE c_num (k numeric, v int);
CREATE TABLE c_ts (d date, t timestamp, v int);
CREATE TABLE c_empty (id int);
CREATE TABLE c_single (id int, v text);
SQL
	group pub_mix --chunk-rows 3000 --jobs 3
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	for t in c_int c_comp c_uuid c_text c_num c_ts c_empty c_single; do
		[ "$(rows_of "$src_URL" $t)" = "$(rows_of "$tgt_URL" $t)" ]
	done
	for t in c_int c_comp c_uuid c_num c_ts; do covers $t; done
	# the bounds of a key the server orders are keys of the table
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk c WHERE table_name = 'c_num' AND hi IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM c_num WHERE k = c.hi[1]::numeric)")" = 0 ]
	(($(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE table_name = 'c_num'") > 1))
	# chunks of at most --chunk-rows, recorded at the group's position
	[ "$(psql_at tgt -c "SELECT count(*) FILTER (WHERE (key_columns IS NOT NULL AND rows > 3000) OR lsn <> '$LI'), count(DISTINCT lsn) FROM pgsync.table_chunk")" = "0|1" ]
	# a boundary inside the run of equal leading values of the composite key
	[ "$(psql_at tgt -c "SELECT count(*) > 0 FROM pgsync.table_chunk WHERE table_name = 'c_comp'
		AND hi IS NOT NULL AND EXISTS (SELECT 1 FROM c_comp WHERE a = hi[1]::int AND b > hi[2]::bigint)")" = t ]
	# text keys, empty tables and small ones: one piece, no key columns
	[ "$(psql_at tgt -c "SELECT string_agg(table_name || ':' || rows, ' ' ORDER BY table_name) FROM pgsync.table_chunk
		WHERE key_columns IS NULL")" = "c_empty:0 c_single:1 c_text:20000" ]
	grep -q 'public.c_text is copied in one piece, not in key chunks: key column "k": no --key-collations line' "$BATS_TEST_TMPDIR/dump.err"
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE state = 'done'")" = 8 ]
	# the job's position stays where it was: the section's is the chunks'
	[ "$(psql_at tgt -c "SELECT coalesce(applied_lsn::text, 'none') FROM pgsync.job WHERE job = 'chunkjob'")" = none ]
	# nothing is left: a second group copies nothing, only says so
	group pub_mix --chunk-rows 3000 --jobs 3
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	[ "$(psql_at tgt -c "SELECT count(DISTINCT lsn) FROM pgsync.table_chunk")" = 1 ]
	[ "$(rows_of "$src_URL" c_int)" = "$(rows_of "$tgt_URL" c_int)" ]
	[ "$(rows_of "$src_URL" c_num)" = "$(rows_of "$tgt_URL" c_num)" ]
}

@test "the worked example of a chunk section loads as formats/stream-v1.md says" {
	psql_at tgt -c "CREATE SCHEMA ex; CREATE TABLE ex.users (id int, name text, bio text); CREATE TABLE ex.log (line text)" >/dev/null
	sed 's/\tpublic\t/\tex\t/' "$PGSYNC_ROOT/formats/example-chunks.pgcs" | pg-apply -d "$TGT_URL" --job example
	[ "$(psql_at tgt -c "SELECT string_agg(id || ':' || coalesce(name, 'NULL'), ' ' ORDER BY id) FROM ex.users")" = '3:Grace 4:\N is not NULL' ]
	[ "$(psql_at tgt -c "SELECT string_agg(table_name || ':' || coalesce(lo::text, '-') || ':' || coalesce(hi::text, '-') || ':' || rows, ' '
		ORDER BY table_name, lo::text[] NULLS FIRST) FROM pgsync.table_chunk WHERE job = 'example'")" = "log:-:-:1 users:{2}:{4}:2 users:{4}:-:0" ]
}


# in_chunks LSN TABLE OTHER: rows of TABLE on the target inside the chunks
# recorded at LSN that OTHER (a table on the target) lacks, plus those of
# OTHER inside them that TABLE lacks: 0 when TABLE is OTHER there.
in_chunks() {
	psql_at tgt -c "WITH c AS (SELECT lo, hi FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$2' AND lsn = '$1'),
			a AS (SELECT x.* FROM $2 x JOIN c ON (c.lo IS NULL OR x.id > c.lo[1]::bigint) AND (c.hi IS NULL OR x.id <= c.hi[1]::bigint)),
			b AS (SELECT x.* FROM $3 x JOIN c ON (c.lo IS NULL OR x.id > c.lo[1]::bigint) AND (c.hi IS NULL OR x.id <= c.hi[1]::bigint))
		SELECT (SELECT count(*) FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM b) d)
			+ (SELECT count(*) FROM (SELECT * FROM b EXCEPT ALL SELECT * FROM a) d)"
}

# xmin_of ROLE FILE: in the background, the oldest backend_xmin of ROLE's
# source sessions, written to FILE as soon as there is one.
xmin_of() {
	(wait_until 120 sql_is src t "SELECT count(*) > 0 FROM pg_stat_activity
		WHERE usename = '$1' AND backend_xmin IS NOT NULL" &&
		psql_at src -c "SELECT min(backend_xmin::text::bigint) FROM pg_stat_activity
			WHERE usename = '$1' AND backend_xmin IS NOT NULL" >"$2") &
}

# block_target TABLE: hold an exclusive lock on the target's TABLE for 3 s
# (the loader waits, so the group's time runs out while its chunks are in
# flight); returns once the lock is held.
block_target() {
	psql_at tgt -c "BEGIN; LOCK TABLE $1 IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT" >/dev/null &
	wait_until 30 sql_is tgt 1 "SELECT count(*) FROM pg_locks WHERE relation = '$1'::regclass AND mode = 'AccessExclusiveLock' AND granted"
}

@test "--group-seconds 1: several groups at growing positions, each chunk as the source was at its group's snapshot, the xmin of the copy moving on between groups" {
	psql_at src <<'SQL' >/dev/null
CREATE TABLE g_big (id bigint PRIMARY KEY, v text);
INSERT INTO g_big SELECT g, md5(g::text) FROM generate_series(1, 200000) g;
ANALYZE g_big;
CREATE PUBLICATION pub_g FOR TABLE g_big;
SQL
	psql_at tgt -c "CREATE TABLE g_big (id bigint, v text); CREATE TABLE g_before (id bigint, v text); CREATE TABLE g_after (id bigint, v text)" >/dev/null
	psql_at src -c "COPY g_big TO STDOUT" | psql_at tgt -c "COPY g_before FROM STDIN"
	# group 1: its time is up while the loader waits on the lock
	block_target g_big
	xmin_of chunk_src "$BATS_TEST_TMPDIR/xmin1"
	# the table grows at the end during the group, after its snapshot
	(wait_until 60 sql_is src t "SELECT count(*) > 0 FROM pg_replication_slots WHERE temporary" &&
		psql_at src -c "INSERT INTO g_big SELECT g, 'during' FROM generate_series(200001, 200500) g") >/dev/null &
	local grower=$!
	group pub_g --chunk-rows 5000 --jobs 2 --frame-size 64kB --group-seconds 1
	local l1=$LI
	wait "$grower"
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	grep -q "the group's 1 s are up" "$BATS_TEST_TMPDIR/dump.err"
	[ "$(psql_at tgt -c "SELECT state FROM pgsync.table_sync WHERE table_name = 'g_big'")" = copying ]
	local first
	first=$(psql_at tgt -c "SELECT count(*) FROM g_big")
	((first > 0 && first < 200000))
	# between groups no session of the copy holds a snapshot on the source
	wait_until 60 sql_is src 0 "SELECT count(*) FROM pg_stat_activity WHERE usename = 'chunk_src' AND backend_xmin IS NOT NULL"
	# the source changes between the groups, all over the key space, and grows at the end
	psql_at src -c "UPDATE g_big SET v = 'changed' WHERE id % 1000 = 0; INSERT INTO g_big SELECT g, 'new' FROM generate_series(200501, 201000) g" >/dev/null
	psql_at src -c "COPY g_big TO STDOUT" | psql_at tgt -c "COPY g_after FROM STDIN"
	# group 2, cut again; then the rest
	block_target g_big
	xmin_of chunk_src "$BATS_TEST_TMPDIR/xmin2"
	group pub_g --chunk-rows 5000 --jobs 2 --frame-size 64kB --group-seconds 1
	local l2=$LI n=2
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	while [ "$(psql_at tgt -c "SELECT state FROM pgsync.table_sync WHERE table_name = 'g_big'")" != done ]; do
		((n++ < 20))
		group pub_g --chunk-rows 5000 --jobs 2 --frame-size 64kB --group-seconds 1
		[ "$DUMP_RC" = 0 ]
		[ "$APPLY_RC" = 0 ]
	done
	# positions grow from group to group
	[ "$(psql_at tgt -c "SELECT '$l1'::pg_lsn < '$l2'::pg_lsn AND '$l2'::pg_lsn <= '$LI'::pg_lsn")" = t ]
	[ "$(psql_at tgt -c "SELECT count(DISTINCT lsn) >= 2 FROM pgsync.table_chunk")" = t ]
	# the oldest snapshot of the second group is newer than the first's
	wait_until 30 test -s "$BATS_TEST_TMPDIR/xmin1" -a -s "$BATS_TEST_TMPDIR/xmin2"
	(($(cat "$BATS_TEST_TMPDIR/xmin2") > $(cat "$BATS_TEST_TMPDIR/xmin1")))
	covers g_big
	[ "$(psql_at tgt -c "SELECT count(*) FROM g_big WHERE v = 'during'")" = "$(psql_at tgt -c "SELECT CASE WHEN hi IS NULL AND lsn = '$l1' THEN 0 ELSE 500 END
		FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = 'g_big' AND hi IS NULL")" ]
	# each chunk holds the rows as they were at its own group's snapshot
	[ "$(in_chunks "$l1" g_big g_before)" = 0 ]
	for l in $(psql_at tgt -c "SELECT DISTINCT lsn FROM pgsync.table_chunk WHERE lsn <> '$l1'"); do
		[ "$(in_chunks "$l" g_big g_after)" = 0 ]
	done
	# and the first group's chunks missed the changes the stream brings later
	[ "$(psql_at tgt -c "SELECT count(*) > 0 FROM g_big x JOIN g_after y USING (id) WHERE x.v IS DISTINCT FROM y.v")" = t ]
}

# whole_chunks TABLE: every chunk recorded holds exactly its rows on the
# target, and the target holds no row outside the recorded chunks.
whole_chunks() {
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk c WHERE c.job = 'chunkjob' AND c.table_name = '$1'
		AND c.rows <> (SELECT count(*) FROM $1 x WHERE (c.lo IS NULL OR x.id > c.lo[1]::int) AND (c.hi IS NULL OR x.id <= c.hi[1]::int))")" = 0 ]
	[ "$(psql_at tgt -c "SELECT (SELECT count(*) FROM $1) = (SELECT coalesce(sum(rows), 0) FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$1')")" = t ]
}

# inserted TABLE: the target's n_tup_ins of TABLE once no loader session is
# left and the count has settled.
inserted() {
	wait_until 60 sql_is tgt 0 "SELECT count(*) FROM pg_stat_activity WHERE usename = 'chunk_tgt'"
	local a b=x
	until [ "$a" = "$b" ]; do
		a=$b
		sleep 0.5
		b=$(psql_at tgt -c "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = '$1'")
	done
	echo "$b"
}

# resume_and_check TABLE PUB: copy the rest with --done; the result is the
# source's, and the target inserted only the rows not in the chunks done.
resume_and_check() {
	local before done_rows
	before=$(inserted "$1")
	done_rows=$(psql_at tgt -c "SELECT coalesce(sum(rows), 0) FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$1'")
	((done_rows > 0))
	group "$2" --chunk-rows 2000 --jobs 2
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	[ "$(rows_of "$src_URL" "$1")" = "$(rows_of "$tgt_URL" "$1")" ]
	covers "$1"
	wait_until 60 sql_is tgt "$(($(psql_at src -c "SELECT count(*) FROM $1") - done_rows))" \
		"SELECT n_tup_ins - $before FROM pg_stat_user_tables WHERE relname = '$1'"
}

# start_group PUB: a temporary slot holding a snapshot; sets LI, SNAP, HOLDER.
start_group() {
	local fifo=$BATS_TEST_TMPDIR/hold.$RANDOM
	mkfifo "$fifo"
	pg-slot create -d "$SRC_URL" --slot "tmp_$RANDOM" --temporary --export-snapshot <"$fifo" >"$fifo.out" 2>"$fifo.err" &
	HOLDER=$!
	exec 8>"$fifo"
	wait_until 30 test -s "$fifo.out"
	local slot
	IFS=$'\t' read -r slot LI SNAP <"$fifo.out"
}

end_group() {
	exec 8>&-
	wait "$HOLDER" || true
}

# complete_chunks FILE: the chunk frames that FILE has whole.
# parts_explain SQL: the plan of SQL on the source, one line.
parts_explain() {
	psql_at src -c "EXPLAIN (COSTS OFF) $1" | tr '\n' ' '
}

@test "partitioned tables in chunks: a root via publish_via_partition_root cut by its key over all its partitions, leaves cut each under its own name" {
	# Two levels, one partition sub-partitioned by hash; the root's key holds
	# the partition keys of both levels. p_root is published via its root,
	# p_leaf by its leaves; p_none has no partition; p_uuid is cut by a
	# sample of its root.
	psql_at src <<'SQL' >/dev/null
CREATE TABLE p_root (id bigint, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (id);
CREATE TABLE p_root_1 PARTITION OF p_root FOR VALUES FROM (MINVALUE) TO (10000);
CREATE TABLE p_root_2 PARTITION OF p_root FOR VALUES FROM (10000) TO (MAXVALUE) PARTITION BY HASH (k);
CREATE TABLE p_root_2a PARTITION OF p_root_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p_root_2b PARTITION OF p_root_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO p_root SELECT g, g % 7, md5(g::text) FROM generate_series(1, 20000) g;
CREATE TABLE p_leaf (LIKE p_root) PARTITION BY RANGE (id);
ALTER TABLE p_leaf ADD PRIMARY KEY (id, k);
CREATE TABLE p_leaf_1 PARTITION OF p_leaf FOR VALUES FROM (MINVALUE) TO (10000);
CREATE TABLE p_leaf_2 PARTITION OF p_leaf FOR VALUES FROM (10000) TO (MAXVALUE) PARTITION BY HASH (k);
CREATE TABLE p_leaf_2a PARTITION OF p_leaf_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p_leaf_2b PARTITION OF p_leaf_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO p_leaf SELECT * FROM p_root;
CREATE TABLE p_none (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE p_uuid (id uuid PRIMARY KEY, v int) PARTITION BY HASH (id);
CREATE TABLE p_uuid_0 PARTITION OF p_uuid FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p_uuid_1 PARTITION OF p_uuid FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO p_uuid SELECT md5(g::text)::uuid, g FROM generate_series(1, 12000) g;
ANALYZE;
CREATE PUBLICATION pub_proot FOR TABLE p_root, p_none, p_uuid WITH (publish_via_partition_root = true);
CREATE PUBLICATION pub_pleaf FOR TABLE p_leaf;
SQL
	psql_at src -c "GRANT SELECT ON ALL TABLES IN SCHEMA public TO chunk_src" >/dev/null
	psql_at tgt <<'SQL' >/dev/null
CREATE TABLE p_root (id bigint, k int, v text) PARTITION BY RANGE (id);
CREATE TABLE p_root_1 PARTITION OF p_root FOR VALUES FROM (MINVALUE) TO (10000);
CREATE TABLE p_root_2 PARTITION OF p_root FOR VALUES FROM (10000) TO (MAXVALUE) PARTITION BY HASH (k);
CREATE TABLE p_root_2a PARTITION OF p_root_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p_root_2b PARTITION OF p_root_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE p_leaf (LIKE p_root) PARTITION BY RANGE (id);
CREATE TABLE p_leaf_1 PARTITION OF p_leaf FOR VALUES FROM (MINVALUE) TO (10000);
CREATE TABLE p_leaf_2 PARTITION OF p_leaf FOR VALUES FROM (10000) TO (MAXVALUE) PARTITION BY HASH (k);
CREATE TABLE p_leaf_2a PARTITION OF p_leaf_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p_leaf_2b PARTITION OF p_leaf_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE p_none (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE p_uuid (id uuid, v int) PARTITION BY HASH (id);
CREATE TABLE p_uuid_0 PARTITION OF p_uuid FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p_uuid_1 PARTITION OF p_uuid FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SQL
	group pub_proot --chunk-rows 2000 --jobs 2
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	group pub_pleaf --chunk-rows 2000 --jobs 2
	[ "$DUMP_RC" = 0 ]
	[ "$APPLY_RC" = 0 ]
	for t in p_root p_leaf p_uuid p_none; do
		[ "$(rows_of "$src_URL" $t)" = "$(rows_of "$tgt_URL" $t)" ]
	done
	# The roots published via the root: chunks under the root's name by its
	# whole key; the leaves of the other under their own names, by theirs.
	run psql_at tgt -c "SELECT table_name, count(*) > 1, bool_and(key_columns::text = CASE WHEN table_name = 'p_uuid' THEN '{id}' ELSE '{id,k}' END)
		FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name LIKE 'p\_%' GROUP BY 1 ORDER BY 1"
	echo "$output"
	[ "$output" = "p_leaf_1|t|t
p_leaf_2a|t|t
p_leaf_2b|t|t
p_none|f|
p_root|t|t
p_uuid|t|t" ]
	for t in p_root p_uuid p_leaf_1 p_leaf_2a p_leaf_2b; do covers $t; done
	# A root's range is read from the root (as pg-snapshot-dump reads it:
	# the row comparison and its leading column's range) through the key
	# index of each partition that can hold it, never by a scan of a whole
	# partition; the others are pruned.
	local plan
	plan=$(parts_explain "SELECT id, k, v FROM p_root WHERE (ROW(id, k) > ROW('12000'::bigint, '2147483647'::integer)
		AND ROW(id, k) <= ROW('13000'::bigint, '2147483647'::integer) AND id >= '12000'::bigint AND id <= '13000'::bigint) ORDER BY id, k")
	echo "# $plan" >&3
	[[ $plan == *"Index Scan on p_root_2a_pkey"* || $plan == *"Index Scan using p_root_2a_pkey"* ]]
	[[ $plan == *"Index Scan on p_root_2b_pkey"* || $plan == *"Index Scan using p_root_2b_pkey"* ]]
	[[ $plan != *"Seq Scan"* && $plan != *p_root_1_pkey* ]]
	plan=$(parts_explain "SELECT min(id)::int8, max(id)::int8 FROM p_root WHERE ROW(id, k) > ROW('12000'::bigint, '2147483647'::integer) AND id >= '12000'::bigint")
	echo "# $plan" >&3
	[[ $plan != *"Seq Scan"* ]]
	# p_leaf's publication now publishes via its root: its leaves' chunks
	# hold the same rows as the root would be cut into, so the copy refuses
	# to continue rather than copy them twice.
	psql_at src -c "CREATE PUBLICATION pub_pleaf_root FOR TABLE p_leaf WITH (publish_via_partition_root = true)" >/dev/null
	local before
	before=$(rows_of "$tgt_URL" p_leaf)
	group pub_pleaf_root --chunk-rows 2000
	grep "publish_via_partition_root changed" "$BATS_TEST_TMPDIR/dump.err"
	[ "$DUMP_RC" = 5 ]
	[[ $(<"$BATS_TEST_TMPDIR/dump.err") == *"--done has chunks of public.p_leaf_1, a partition or partitioned table whose rows this copy copies under another name"* ]]
	[ "$(rows_of "$tgt_URL" p_leaf)" = "$before" ]
}

complete_chunks() {
	grep -c '^ENDCOPY' "$1" || true
}

@test "kill -9 of pg-snapshot-dump mid-group leaves only whole chunks; --done then copies only the rest, identical" {
	psql_at src -c "CREATE TABLE k_dump (id int PRIMARY KEY, v text); INSERT INTO k_dump SELECT g, md5(g::text) FROM generate_series(1, 60000) g;
		ANALYZE k_dump; CREATE PUBLICATION pub_kd FOR TABLE k_dump" >/dev/null
	psql_at tgt -c "CREATE TABLE k_dump (id int, v text)" >/dev/null
	local t=$BATS_TEST_TMPDIR table=k_dump
	mkfifo "$t/out"
	start_group
	pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --slot chunkjob --publication pub_kd \
		--chunked --chunk-rows 2000 --jobs 2 >"$t/out" 2>"$t/dump.err" &
	local dump=$!
	# the reader takes 20000 lines, then holds the pipe: the dump blocks mid-group
	{ (head -n 20000 | tee "$t/seen"; echo "$BASHPID" >"$t/holder"; exec sleep 600) <"$t/out" |
		pg-apply -d "$TGT_URL" --jobs 2 2>"$t/apply.err" && echo 0 >"$t/apply.rc" || echo $? >"$t/apply.rc"; } &
	wait_until 60 test -s "$t/holder"
	local whole
	whole=$(complete_chunks "$t/seen")
	((whole > 0))
	wait_until 60 sql_is tgt "$whole" "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$table'"
	kill -9 "$dump"
	kill "$(cat "$t/holder")"
	wait_until 60 test -s "$t/apply.rc"
	[ "$(cat "$t/apply.rc")" = 1 ]
	grep -q 'truncated' "$t/apply.err"
	end_group
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$table'")" = "$whole" ]
	whole_chunks k_dump
	resume_and_check k_dump pub_kd
}

@test "kill -9 of pg-apply mid-group leaves only whole chunks; --done then copies only the rest, identical" {
	psql_at src -c "CREATE TABLE k_apply (id int PRIMARY KEY, v text); INSERT INTO k_apply SELECT g, md5(g::text) FROM generate_series(1, 60000) g;
		ANALYZE k_apply; CREATE PUBLICATION pub_ka FOR TABLE k_apply" >/dev/null
	psql_at tgt -c "CREATE TABLE k_apply (id int, v text)" >/dev/null
	local t=$BATS_TEST_TMPDIR table=k_apply
	start_group
	pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --slot chunkjob --publication pub_ka \
		--chunked --chunk-rows 2000 --jobs 2 >"$t/group.pgcs" 2>"$t/dump.err"
	end_group
	head -n 25000 "$t/group.pgcs" >"$t/seen"
	(cat "$t/seen"; echo "$BASHPID" >"$t/holder"; exec sleep 600) | pg-apply -d "$TGT_URL" --jobs 2 2>"$t/apply.err" &
	local apply=$! whole
	whole=$(complete_chunks "$t/seen")
	((whole > 0))
	wait_until 60 sql_is tgt "$whole" "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$table'"
	kill -9 "$apply"
	wait_until 60 test -s "$t/holder"
	kill "$(cat "$t/holder")"
	wait "$apply" || true
	whole_chunks k_apply
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'chunkjob' AND table_name = '$table'")" = "$whole" ]
	resume_and_check k_apply pub_ka
}

@test "bad --done files and chunk options: one line each, exit 2 for usage, 5 for chunks that cannot be the table's" {
	psql_at src -c "CREATE TABLE bad_t (id int PRIMARY KEY, v text); INSERT INTO bad_t SELECT g, 'x' FROM generate_series(1, 100) g;
		CREATE TABLE bad_n (k numeric PRIMARY KEY); INSERT INTO bad_n SELECT g / 2.0 FROM generate_series(1, 100) g;
		CREATE PUBLICATION pub_bad FOR TABLE bad_t; CREATE PUBLICATION pub_bad_n FOR TABLE bad_n" >/dev/null
	local t=$BATS_TEST_TMPDIR
	run pg-snapshot-dump -d "$SRC_URL" --own-snapshot --publication pub_bad --chunk-rows 10
	[ "$status" = 2 ]
	[[ $output == *"--done, --key-collations, --chunk-rows and --group-seconds are for --chunked"* ]]
	run pg-snapshot-dump -d "$SRC_URL" --own-snapshot --publication pub_bad --chunked
	[ "$status" = 2 ]
	[[ $output == *"--chunked needs --snapshot and --position from a slot"* ]]
	run pg-snapshot-dump -d "$SRC_URL" --snapshot x --position 0/1 --publication pub_bad --chunked --group-seconds -1
	[ "$status" = 2 ]
	[[ $output == *'invalid --group-seconds "-1"'* ]]
	printf 'public\tbad_t\t1\tid\t5\n' >"$t/short"
	run pg-snapshot-dump -d "$SRC_URL" --snapshot x --position 0/1 --publication pub_bad --chunked --done "$t/short"
	[ "$status" = 2 ]
	[[ $output == *'--done file "'*'" line 1: expected schema, table'* ]]
	[ "${#lines[@]}" = 1 ]
	run pg-snapshot-dump -d "$SRC_URL" --snapshot x --position 0/1 --publication pub_bad --chunked --done "$t/absent"
	[ "$status" = 2 ]
	[[ $output == *'cannot open --done file "'*'/absent": No such file or directory'* ]]
	# The key collations file: the second line is short a field.
	printf 'public\tbad_t\tv\tC\t\\N\npublic\tbad_t\tv\tC\n' >"$t/colls"
	run pg-snapshot-dump -d "$SRC_URL" --snapshot x --position 0/1 --publication pub_bad --chunked --key-collations "$t/colls"
	[ "$status" = 2 ]
	[[ $output == *'--key-collations file "'*'" line 2: expected schema, table, column'* ]]
	[ "${#lines[@]}" = 1 ]
	run pg-snapshot-dump -d "$SRC_URL" --snapshot x --position 0/1 --publication pub_bad --chunked --key-collations "$t"
	[ "$status" = 2 ]
	[[ $output == *'cannot read --key-collations file "'*'": Is a directory'* ]]
	printf 'public\tbad_t\t1\tid\t\\N\t5\npublic\tbad_t\t1\tid\t3\t9\n' >"$t/overlap"
	start_group
	run pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --publication pub_bad --chunked --done "$t/overlap" -q
	[ "$status" = 5 ]
	[[ $output == *"--done has overlapping chunks of public.bad_t"* ]]
	# A chunk unbounded above, and one inside it.
	printf 'public\tbad_t\t1\tid\t10\t\\N\npublic\tbad_t\t1\tid\t20\t30\n' >"$t/overlap2"
	run pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --publication pub_bad --chunked --done "$t/overlap2" -q
	[ "$status" = 5 ]
	[[ $output == *"--done has overlapping chunks of public.bad_t"* ]]
	# a key the source orders: the overlap is found in its order (5.5 > 3)
	printf 'public\tbad_n\t1\tk\t\\N\t5.5\npublic\tbad_n\t1\tk\t3\t9\n' >"$t/overlap_n"
	run pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --publication pub_bad_n --chunked --done "$t/overlap_n" -q
	[ "$status" = 5 ]
	[[ $output == *"--done has overlapping chunks of public.bad_n"* ]]
	printf 'public\tbad_t\t1\tother\t\\N\t5\n' >"$t/otherkey"
	run pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --publication pub_bad --chunked --done "$t/otherkey" -q
	[ "$status" = 5 ]
	[[ $output == *"--done has a chunk of public.bad_t by (other) that does not fit its chunk key (id)"* ]]
	printf 'public\tbad_t\t1\tid\t\\N\tnot-a-number\n' >"$t/badvalue"
	run pg-snapshot-dump -d "$SRC_URL" --snapshot "$SNAP" --position "$LI" --publication pub_bad --chunked --done "$t/badvalue" -q
	[ "$status" = 5 ]
	end_group
}

@test "a target that publishes all its tables can still delete a job's chunks (cleanup, a restart)" {
	psql_at tgt -c "CREATE PUBLICATION tgt_all FOR ALL TABLES" >/dev/null
	psql_at tgt -c "CREATE TABLE pub_x (id int, name text, bio text); CREATE TABLE pub_log (line text)" >/dev/null
	sed 's/\tpublic\tusers\t/\tpublic\tpub_x\t/; s/\tpublic\tlog\t/\tpublic\tpub_log\t/' "$PGSYNC_ROOT/formats/example-chunks.pgcs" |
		pg-apply -d "$TGT_URL" --job pubjob
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'pubjob'")" = 3 ]
	psql_at tgt -c "DELETE FROM pgsync.job WHERE job = 'pubjob'" >/dev/null
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'pubjob'")" = 0 ]
	psql_at tgt -c "DROP PUBLICATION tgt_all" >/dev/null
}
