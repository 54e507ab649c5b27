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

# both SQL: run on the source and the target (tables the test creates).
both() {
	psql_at src -c "$1" >/dev/null
	psql_at tgt -c "$1" >/dev/null
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

@test "a chunked copy loads identical tables: int, composite, uuid keys cut into chunks, text-key and empty tables in one piece" {
	psql_at src <<'SQL' >/dev/null
CREATE TABLE c_int (id int PRIMARY KEY, v text);
INSERT INTO c_int SELECT g, md5(g::text) FROM generate_series(1, 20000) g;
CREATE TABLE c_comp (a int, b bigint, v text, PRIMARY KEY (a, b));
INSERT INTO c_comp SELECT g / 5000, g, 'c' || g FROM generate_series(1, 20000) g;
CREATE TABLE c_uuid (id uuid PRIMARY KEY, v int);
INSERT INTO c_uuid SELECT md5(g::text)::uuid, g FROM generate_series(1, 20000) g;
CREATE TABLE c_text (k text PRIMARY KEY, v int);
INSERT INTO c_text SELECT md5(g::text), g FROM generate_series(1, 20000) g;
CREATE TABLE c_empty (id int PRIMARY KEY);
CREATE TABLE c_single (id int PRIMARY KEY, v text);
INSERT INTO c_single VALUES (7, 'seven');
ANALYZE;
CREATE PUBLICATION pub_mix FOR TABLE c_int, c_comp, c_uuid, c_text, c_empty, c_single;
SQL
	psql_at tgt <<'SQL' >/dev/null
CREATE TABLE c_int (id int, v text);
CREATE TABLE c_comp (a int, b bigint, v text);
CREATE TABLE c_uuid (id uuid, v int);
CREATE TABLE c_text (k text, v int);
CREATE TABLE c_empty (id int);
CREATE TABLE c_single (id int, v text);
SQL
	group pub_mix --chunk-rows 3000 --jobs 3
	[ "$DUMP_RC" = 0 ] && [ "$APPLY_RC" = 0 ]
	for t in c_int c_comp c_uuid c_text c_empty c_single; do
		[ "$(rows_of "$src_URL" $t)" = "$(rows_of "$tgt_URL" $t)" ]
	done
	for t in c_int c_comp c_uuid; do covers $t; done
	# chunks of at most --chunk-rows, recorded at the group's position
	[ "$(psql_at tgt -c "SELECT count(*) FILTER (WHERE (key_columns IS NOT NULL AND rows > 3000) OR lsn <> '$LI'), count(DISTINCT lsn) FROM pgsync.table_chunk")" = "0|1" ]
	# a boundary inside the run of equal leading values of the composite key
	[ "$(psql_at tgt -c "SELECT count(*) > 0 FROM pgsync.table_chunk WHERE table_name = 'c_comp'
		AND hi IS NOT NULL AND EXISTS (SELECT 1 FROM c_comp WHERE a = hi[1]::int AND b > hi[2]::bigint)")" = t ]
	# text keys, empty tables and small ones: one piece, no key columns
	[ "$(psql_at tgt -c "SELECT string_agg(table_name || ':' || rows, ' ' ORDER BY table_name) FROM pgsync.table_chunk
		WHERE key_columns IS NULL")" = "c_empty:0 c_single:1 c_text:20000" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE state = 'done'")" = 6 ]
	# the job's position stays where it was: the section's is the chunks'
	[ "$(psql_at tgt -c "SELECT coalesce(applied_lsn::text, 'none') FROM pgsync.job WHERE job = 'chunkjob'")" = none ]
	# nothing is left: a second group copies nothing, only says so
	group pub_mix --chunk-rows 3000 --jobs 3
	[ "$DUMP_RC" = 0 ] && [ "$APPLY_RC" = 0 ]
	[ "$(psql_at tgt -c "SELECT count(DISTINCT lsn) FROM pgsync.table_chunk")" = 1 ]
	[ "$(rows_of "$src_URL" c_int)" = "$(rows_of "$tgt_URL" c_int)" ]
}

@test "the worked example of a chunk section loads as formats/stream-v1.md says" {
	psql_at tgt -c "CREATE SCHEMA ex; CREATE TABLE ex.users (id int, name text, bio text); CREATE TABLE ex.log (line text)" >/dev/null
	sed 's/\tpublic\t/\tex\t/' "$PGSYNC_ROOT/formats/example-chunks.pgcs" | pg-apply -d "$TGT_URL" --job example
	[ "$(psql_at tgt -c "SELECT string_agg(id || ':' || coalesce(name, 'NULL'), ' ' ORDER BY id) FROM ex.users")" = '3:Grace 4:\N is not NULL' ]
	[ "$(psql_at tgt -c "SELECT string_agg(table_name || ':' || coalesce(lo::text, '-') || ':' || coalesce(hi::text, '-') || ':' || rows, ' '
		ORDER BY table_name, lo::text[] NULLS FIRST) FROM pgsync.table_chunk WHERE job = 'example'")" = "log:-:-:1 users:{2}:{4}:2 users:{4}:-:0" ]
}
