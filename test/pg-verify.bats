#!/usr/bin/env bats
# pg-verify run directly on two clusters, each side at an exported
# snapshot: tables whose names hold a dot, a comma, a double quote, a TAB,
# a space and capitals, in a schema with a dot in its name, read from
# pg-snapshot-dump --list-tables lines; identical data is identical (exit
# 0); a row missing, one extra and one differing are counted and their keys
# written (exit 5); a table without a key counts duplicates; a large table
# with a few hundred differing rows is cut over several levels, more than
# 256 differing ranges are counted from the ranges. The source role has
# only the guide's privileges, the target database is LATIN1 (so the rows
# are hashed with md5; test/pg-verify-hash.bats has the other hash).

load lib/cluster
load pgsync-helpers
load lib/snapshots
bats_require_minimum_version 1.5.0

# The tables, the same on both sides (names as SQL identifiers).
readonly PV_SQL="
	CREATE SCHEMA \"s.x\";
	CREATE TABLE \"s.x\".\"a.b\" (id int PRIMARY KEY, v text);
	CREATE TABLE \"s.x\".\"c,d\" (id int PRIMARY KEY, v text, \"x,y\" int);
	CREATE TABLE \"s.x\".\"q\"\"x\" (k1 int, k2 text, v text, PRIMARY KEY (k1, k2));
	CREATE TABLE \"s.x\".\"Mixed Case\" (\"Id\" serial PRIMARY KEY, \"Val\" text, n numeric, t timestamptz);
	CREATE TABLE \"s.x\".\"tab	name\" (id int PRIMARY KEY);
	CREATE TABLE \"s.x\".\"no key\" (a int, b text);
	CREATE TABLE public.big (id bigint PRIMARY KEY, v text);
	INSERT INTO \"s.x\".\"a.b\" SELECT g, 'a' || g FROM generate_series(1, 20) g;
	INSERT INTO \"s.x\".\"c,d\" SELECT g, 'c' || g, g FROM generate_series(1, 30) g;
	INSERT INTO \"s.x\".\"q\"\"x\" SELECT g, E'k\\\\\"' || g, 'q' || g FROM generate_series(1, 10) g;
	INSERT INTO \"s.x\".\"Mixed Case\" (\"Val\", n, t) SELECT E'caf\\u00e9 ' || g, g / 3.0, '2024-03-01 12:00+01' FROM generate_series(1, 15) g;
	INSERT INTO \"s.x\".\"tab	name\" SELECT generate_series(1, 5);
	INSERT INTO \"s.x\".\"no key\" SELECT g % 4, 'n' || (g % 4) FROM generate_series(1, 12) g;
	INSERT INTO public.big SELECT g, md5(g::text) FROM generate_series(1, 120000) g;"

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at tgt -c "CREATE DATABASE pv ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	export tgt_URL="$tgt_URL dbname=pv"
	lp_source_role_for_tests src pv_src
	psql_at tgt -c "CREATE ROLE pv_tgt LOGIN; ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO pv_tgt;
		ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO pv_tgt"
	both "$PV_SQL"
	psql_at src -c "CREATE PUBLICATION pv_pub FOR TABLE \"s.x\".\"a.b\", \"s.x\".\"c,d\", \"s.x\".\"q\"\"x\",
		\"s.x\".\"Mixed Case\", \"s.x\".\"tab	name\", \"s.x\".\"no key\", public.big"
	export SRC_URL=${src_URL/user=postgres/user=pv_src} TGT_URL=${tgt_URL/user=postgres/user=pv_tgt}
	# The tables as pgsync gives them: --list-tables lines, in its order.
	pg-snapshot-dump -d "$SRC_URL" --publication pv_pub --list-tables >"$BATS_FILE_TMPDIR/tables"
}

teardown_file() {
	cluster_stop_all
}

teardown() {
	snapshots_release
}

# verify [OPTIONS...]: pg-verify on the file's tables at fresh snapshots,
# the keys in $BATS_TEST_TMPDIR/keys.
verify() {
	snapshots "$src_URL" "$tgt_URL"
	mkdir -p "$BATS_TEST_TMPDIR/keys"
	run --separate-stderr pg-verify --source "$SRC_URL" --target "$TGT_URL" --source-snapshot "$SSNAP" \
		--target-snapshot "$TSNAP" --tables "${TABLES_FILE:-$BATS_FILE_TMPDIR/tables}" \
		--keys-dir "$BATS_TEST_TMPDIR/keys" "$@"
	printf 'exit %s\n%s\n--- stderr\n%s\n' "$status" "$output" "$stderr"
}

# line TABLE: the output line of TABLE (its name as pg-verify prints it).
line() {
	local l
	for l in "${lines[@]}"; do
		[[ $l == "$1"$'\t'* ]] && { printf '%s\n' "$l"; return; }
	done
	return 1
}

# keys TABLE: its keys file, sorted (N from its line in the tables file).
keys() {
	local n
	n=$(awk -F '\t' -v t="$1" '$1 "." $2 == t { print NR - 1; exit }' "${TABLES_FILE:-$BATS_FILE_TMPDIR/tables}")
	sort "$BATS_TEST_TMPDIR/keys/$n.keys"
}

tgt_sql() {
	psql_at tgt -c "$1" >/dev/null
}

@test "names with a dot, a comma, a quote, a TAB, a space and capitals in a dotted schema: identical, exit 0" {
	# The list carries the names exactly, a TAB in its escaped form.
	grep -qF $'s.x\ttab\\tname\t' "$BATS_FILE_TMPDIR/tables"
	verify --jobs 3
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 7 ]
	[ "$(line 's.x.a.b')" = $'s.x.a.b\t20\t20\t0\t0\t0\t1' ]
	[ "$(line 's.x.c,d')" = $'s.x.c,d\t30\t30\t0\t0\t0\t1' ]
	[ "$(line 's.x.q"x')" = $'s.x.q"x\t10\t10\t0\t0\t0\t1' ]
	[ "$(line 's.x.Mixed Case')" = $'s.x.Mixed Case\t15\t15\t0\t0\t0\t1' ]
	[ "$(line 's.x.tab\tname')" = $'s.x.tab\\tname\t5\t5\t0\t0\t0\t1' ]
	[ "$(line 's.x.no key')" = $'s.x.no key\t12\t12\t0\t0\t0\t1' ]
	[ "$(line 'public.big')" = $'public.big\t120000\t120000\t0\t0\t0\t1' ]
	# In the order of the tables file.
	[ "$(printf '%s\n' "${lines[@]}" | cut -f 1)" = "$(awk -F '\t' '{ print $1 "." $2 }' "$BATS_FILE_TMPDIR/tables")" ]
	[ -z "$(cat "$BATS_TEST_TMPDIR"/keys/*.keys)" ]
	[[ $stderr == *"pg-verify: 7 tables compared: identical"* ]]
	[[ $stderr == *"pg-verify: the databases' encodings differ (UTF8, LATIN1): rows hashed with md5"* ]]
}

@test "a row missing, one extra and one differing (also in a column named with a comma) on the target: exit 5, each counted with its key, no value shown" {
	# The column named with a comma is one of the columns compared.
	tgt_sql "DELETE FROM \"s.x\".\"a.b\" WHERE id = 2; INSERT INTO \"s.x\".\"c,d\" VALUES (100, 'extra');
		UPDATE \"s.x\".\"c,d\" SET \"x,y\" = 0 WHERE id = 7; UPDATE \"s.x\".\"q\"\"x\" SET v = 'secret' WHERE k1 = 3"
	verify
	tgt_sql "INSERT INTO \"s.x\".\"a.b\" VALUES (2, 'a2'); DELETE FROM \"s.x\".\"c,d\" WHERE id = 100;
		UPDATE \"s.x\".\"c,d\" SET \"x,y\" = 7 WHERE id = 7; UPDATE \"s.x\".\"q\"\"x\" SET v = 'q3' WHERE k1 = 3"
	[ "$status" -eq 5 ]
	[ "$(line 's.x.a.b')" = $'s.x.a.b\t20\t19\t1\t0\t0\t1' ]
	[ "$(line 's.x.c,d')" = $'s.x.c,d\t30\t31\t0\t1\t1\t1' ]
	[ "$(line 's.x.q"x')" = $'s.x.q"x\t10\t10\t0\t0\t1\t1' ]
	[ "$(line 's.x.Mixed Case')" = $'s.x.Mixed Case\t15\t15\t0\t0\t0\t1' ]
	[ "$(keys 's.x.a.b')" = $'missing\t"2"' ]
	[ "$(keys 's.x.c,d')" = $'differing\t"7"\nonly\t"100"' ]
	[ "$(keys 's.x.q"x')" = $'differing\t"(3,\\"k\\\\\\\\\\"\\"3\\")"' ]
	[[ $output$stderr != *secret* && $(cat "$BATS_TEST_TMPDIR"/keys/*.keys) != *secret* ]]
	[[ $stderr == *"pg-verify: 7 tables compared: different"* ]]
}

@test "a table without a key: a duplicate row less on the target is one missing, no key listed" {
	tgt_sql "DELETE FROM \"s.x\".\"no key\" WHERE ctid = (SELECT min(ctid) FROM \"s.x\".\"no key\" WHERE a = 1)"
	verify
	tgt_sql "INSERT INTO \"s.x\".\"no key\" VALUES (1, 'n1')"
	[ "$status" -eq 5 ]
	[ "$(line 's.x.no key')" = $'s.x.no key\t12\t11\t1\t0\t0\t1' ]
	[ -z "$(keys 's.x.no key')" ]
}

@test "a large table with 200 rows differing is cut over several levels and each key listed; more than 256 differing ranges are counted" {
	tgt_sql "UPDATE public.big SET v = 'x' WHERE id % 600 = 7"
	verify --log-level debug
	[ "$status" -eq 5 ]
	[ "$(line 'public.big')" = $'public.big\t120000\t120000\t0\t0\t200\t1' ]
	[ "$(keys 'public.big')" = "$(seq 7 600 120000 | sed 's/.*/differing\t"&"/' | sort)" ]
	# 200 rows in some 195 of 4096 ranges of some 30 rows each: more than
	# 4096 rows, cut again, then few enough.
	[[ $stderr == *"public.big: ranges of 3 hex digits: "*" differ, with "* ]]
	[[ $stderr == *"public.big: ranges of 6 hex digits: "* ]]
	teardown
	tgt_sql "UPDATE public.big SET v = md5(id::text) WHERE id % 600 = 7; DELETE FROM public.big WHERE id % 60 = 1"
	verify
	tgt_sql "INSERT INTO public.big SELECT g, md5(g::text) FROM generate_series(1, 120000) g WHERE g % 60 = 1"
	[ "$status" -eq 5 ]
	[ "$(line 'public.big')" = $'public.big\t120000\t118000\t2000\t0\t0\t0' ]
	[ -z "$(keys 'public.big')" ]
}

@test "a table missing on the target is its error line (exit 1), the others compared; a bad tables file is a usage error" {
	TABLES_FILE=$BATS_TEST_TMPDIR/t2
	printf 's.x\tc,d\npublic\tnope\n' >"$TABLES_FILE"
	verify --jobs 1
	[ "$status" -eq 1 ]
	[ "${lines[0]}" = $'s.x.c,d\t30\t30\t0\t0\t0\t1' ]
	[ "${lines[1]}" = $'error\ttable public.nope does not exist on the source' ]
	psql_at src -c "CREATE TABLE public.src_only (id int PRIMARY KEY)"
	printf 'public\tsrc_only\n' >"$TABLES_FILE"
	teardown
	verify
	[ "$status" -eq 1 ]
	[[ ${lines[0]} == $'error\ttarget: relation "public.src_only" does not exist (SQLSTATE 42P01)'* ]]
	printf 'just-one-field\n' >"$TABLES_FILE"
	teardown
	verify
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: --tables file \"$TABLES_FILE\" line 1: expected schema<TAB>table"* ]]
}

@test "usage: both connections, both snapshots and the table file are required; a bad connection string or snapshot name is refused" {
	run --separate-stderr pg-verify --source host=/nonexistent --source-snapshot 00000003-00000002-1 \
		--target-snapshot 00000003-00000002-1 --tables /nonexistent
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: --source and --target are required"$'\n'"usage: pg-verify "* ]]
	run --separate-stderr pg-verify --source nonsense --target host=/nonexistent
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: invalid connection string given to --source: expected KEY=VALUE pairs or a postgresql:// URL"* ]]
	run --separate-stderr pg-verify --source host=/x --target host=/x --source-snapshot "x'; DROP" \
		--target-snapshot 00000003-00000002-1 --tables /nonexistent
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: invalid --source-snapshot \"x'; DROP\": expected an exported snapshot name"* ]]
	run --separate-stderr pg-verify --source host=/x --target host=/x --source-snapshot 00000003-00000002-1 \
		--target-snapshot 00000003-00000002-1 --tables "$BATS_TEST_TMPDIR/none"
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: cannot open --tables file \"$BATS_TEST_TMPDIR/none\": No such file or directory" ]]
}
