#!/usr/bin/env bats
# pg-verify's hashing: databases of one encoding whose servers hash a probe
# alike are compared with hashtextextended() (logged with the reason), and
# find a changed, a missing and an extra row with their keys, over several
# levels of ranges too; --hash md5 gives the same verdicts on the same
# data; a UTF8 source against a LATIN1 target falls back to md5 (the reason
# logged) and finds non-ASCII text identical, then a changed non-ASCII row;
# a key of a nondeterministic ICU collation is hashed by its bytes; NULL
# and an empty string differ; a bad --hash is a usage error.

load lib/cluster
load pgsync-helpers
load lib/snapshots
bats_require_minimum_version 1.5.0

readonly FAST_LOG="both databases are UTF8 and the servers hash alike: rows hashed with hashtextextended"

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at tgt -c "CREATE DATABASE pvl ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	export LATIN1_URL=${tgt_URL/dbname=postgres/dbname=pvl}
	# pg-verify runs as a role that can only read the tables, as pgsync
	# verify's connections do: the probe and the hashes need no more.
	local url
	psql_at src -c "CREATE ROLE hv LOGIN"
	psql_at tgt -c "CREATE ROLE hv LOGIN"
	for url in "$src_URL" "$tgt_URL" "$LATIN1_URL"; do
		psql -X -v ON_ERROR_STOP=1 -q -d "$url" -c "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO hv"
	done
}

teardown_file() {
	cluster_stop_all
}

teardown() {
	snapshots_release
}

# verify TABLES [OPTIONS...]: pg-verify, as role hv, of the public tables
# TABLES (names separated by spaces) of src and of $TGT (default: tgt's
# database postgres), at fresh snapshots; the keys in $BATS_TEST_TMPDIR/keys.
verify() {
	local tgt=${TGT:-$tgt_URL} t
	snapshots_release
	: >"$BATS_TEST_TMPDIR/tables"
	for t in $1; do printf 'public\t%s\n' "$t" >>"$BATS_TEST_TMPDIR/tables"; done
	shift
	snapshots "$src_URL" "$tgt"
	rm -rf "$BATS_TEST_TMPDIR/keys"
	mkdir -p "$BATS_TEST_TMPDIR/keys"
	run --separate-stderr pg-verify --source "$src_URL user=hv" --target "$tgt user=hv" --source-snapshot "$SSNAP" \
		--target-snapshot "$TSNAP" --tables "$BATS_TEST_TMPDIR/tables" --keys-dir "$BATS_TEST_TMPDIR/keys" "$@"
	printf 'exit %s\n%s\n--- stderr\n%s\n' "$status" "$output" "$stderr"
}

# keys N: the keys file of the Nth table, sorted.
keys() {
	sort "$BATS_TEST_TMPDIR/keys/$1.keys"
}

# same_verdicts: the lines and keys of this run equal those of the run
# saved by save_verdicts.
save_verdicts() {
	SAVED_STATUS=$status SAVED_OUTPUT=$output
	SAVED_KEYS=$(for f in "$BATS_TEST_TMPDIR"/keys/*.keys; do echo "== ${f##*/}"; sort "$f"; done)
}
same_verdicts() {
	[ "$status" -eq "$SAVED_STATUS" ]
	[ "$output" = "$SAVED_OUTPUT" ]
	[ "$(for f in "$BATS_TEST_TMPDIR"/keys/*.keys; do echo "== ${f##*/}"; sort "$f"; done)" = "$SAVED_KEYS" ]
}

tgt_sql() {
	psql -X -v ON_ERROR_STOP=1 -qAt -d "${TGT:-$tgt_URL}" -c "$1" >/dev/null
}

@test "same encodings: hashtextextended, and a changed, a missing and an extra row found with their keys; --hash md5 gives the same verdicts" {
	both "CREATE TABLE public.h1 (id int PRIMARY KEY, v text, n numeric);
		CREATE TABLE public.h2 (k1 int, k2 text, v text, PRIMARY KEY (k1, k2));
		CREATE TABLE public.h3 (a int, b text);
		INSERT INTO public.h1 SELECT g, 'v' || g, g / 7.0 FROM generate_series(1, 500) g;
		INSERT INTO public.h2 SELECT g, 'k' || g, 'w' || g FROM generate_series(1, 50) g;
		INSERT INTO public.h3 SELECT g % 5, 'n' || (g % 5) FROM generate_series(1, 20) g"
	verify "h1 h2 h3"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = $'public.h1\t500\t500\t0\t0\t0\t1' ]
	[ "${lines[1]}" = $'public.h2\t50\t50\t0\t0\t0\t1' ]
	[ "${lines[2]}" = $'public.h3\t20\t20\t0\t0\t0\t1' ]
	[[ $stderr == *"pg-verify: $FAST_LOG"$'\n'* ]]
	[ "$(grep -c 'rows hashed with' <<<"$stderr")" -eq 1 ]

	tgt_sql "DELETE FROM public.h1 WHERE id = 17; INSERT INTO public.h1 VALUES (9001, 'extra', 0);
		UPDATE public.h1 SET n = n + 0.5 WHERE id = 250; UPDATE public.h2 SET v = 'changed' WHERE k1 = 33;
		DELETE FROM public.h3 WHERE ctid = (SELECT min(ctid) FROM public.h3 WHERE a = 2)"
	verify "h1 h2 h3"
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.h1\t500\t500\t1\t1\t1\t1' ]
	[ "${lines[1]}" = $'public.h2\t50\t50\t0\t0\t1\t1' ]
	[ "${lines[2]}" = $'public.h3\t20\t19\t1\t0\t0\t1' ]
	[ "$(keys 0)" = $'differing\t"250"\nmissing\t"17"\nonly\t"9001"' ]
	[ "$(keys 1)" = $'differing\t"(33,k33)"' ]
	[ -z "$(keys 2)" ]
	[[ $stderr == *"pg-verify: $FAST_LOG"* ]]
	save_verdicts

	verify "h1 h2 h3" --hash md5
	same_verdicts
	[[ $stderr == *"pg-verify: --hash md5: rows hashed with md5"$'\n'* ]]
	[[ $stderr != *hashtextextended* ]]
}

@test "hashtextextended over several levels of ranges: 200 differing rows each listed, 2,000 missing counted from the ranges; md5 agrees" {
	both "CREATE TABLE public.hbig (id bigint PRIMARY KEY, v text);
		INSERT INTO public.hbig SELECT g, md5(g::text) FROM generate_series(1, 120000) g"
	tgt_sql "UPDATE public.hbig SET v = 'x' WHERE id % 600 = 7"
	verify hbig --log-level debug
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.hbig\t120000\t120000\t0\t0\t200\t1' ]
	[ "$(keys 0)" = "$(seq 7 600 120000 | sed 's/.*/differing\t"&"/' | sort)" ]
	[[ $stderr == *"pg-verify: $FAST_LOG"* ]]
	[[ $stderr == *"public.hbig: ranges of 3 hex digits: "*" differ, with "* ]]
	[[ $stderr == *"public.hbig: ranges of 6 hex digits: "* ]]
	save_verdicts
	verify hbig --hash md5
	same_verdicts

	tgt_sql "UPDATE public.hbig SET v = md5(id::text) WHERE id % 600 = 7; DELETE FROM public.hbig WHERE id % 60 = 1"
	verify hbig
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.hbig\t120000\t118000\t2000\t0\t0\t0' ]
	[ -z "$(keys 0)" ]
	save_verdicts
	verify hbig --hash md5
	same_verdicts
}

@test "NULL on the source and an empty string on the target in a non-key column differ, with either hash" {
	both "CREATE TABLE public.hnull (id int PRIMARY KEY, v text, w text);
		INSERT INTO public.hnull SELECT g, 'v' || g, NULL FROM generate_series(1, 10) g"
	tgt_sql "UPDATE public.hnull SET w = '' WHERE id = 4"
	verify hnull
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.hnull\t10\t10\t0\t0\t1\t1' ]
	[ "$(keys 0)" = $'differing\t"4"' ]
	[[ $stderr == *"pg-verify: $FAST_LOG"* ]]
	verify hnull --hash md5
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.hnull\t10\t10\t0\t0\t1\t1' ]
	[ "$(keys 0)" = $'differing\t"4"' ]
}

@test "a UTF8 source against a LATIN1 target: md5 with the reason, non-ASCII text identical, then a changed non-ASCII row found" {
	local sql="CREATE TABLE public.hl (k text PRIMARY KEY, v text);
		INSERT INTO public.hl VALUES (E'Sm\\u00f8rrebr\\u00f8d', E'caf\\u00e9'), (E'Stra\\u00dfe', E'na\\u00efve \\u00a3 \\u00bf'),
			('plain', 'ascii'), (E'\\u00c6ble', E'\\u00e9t\\u00e9')"
	psql_at src -c "$sql" >/dev/null
	TGT=$LATIN1_URL
	tgt_sql "$sql"
	[ "$(psql -X -qAt -d "$LATIN1_URL" -c "SELECT current_setting('server_encoding'), octet_length(v) FROM public.hl WHERE k = 'plain' OR v LIKE 'caf%' ORDER BY 2")" = $'LATIN1|4\nLATIN1|5' ]
	verify hl
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = $'public.hl\t4\t4\t0\t0\t0\t1' ]
	[[ $stderr == *"pg-verify: the databases' encodings differ (UTF8, LATIN1): rows hashed with md5"$'\n'* ]]
	[[ $stderr != *hashtextextended* ]]
	tgt_sql "UPDATE public.hl SET v = E'caf\\u00e8' WHERE v = E'caf\\u00e9'"
	verify hl
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.hl\t4\t4\t0\t0\t1\t1' ]
	[ "$(keys 0)" = $'differing\t"Smørrebrød"' ]
	[[ $stderr == *"encodings differ (UTF8, LATIN1): rows hashed with md5"* ]]
}

@test "a key of a nondeterministic ICU collation is hashed by its bytes: a key changed only in case is missing and extra, with either hash" {
	[[ $(psql_at src -c "SELECT count(*) FROM pg_collation WHERE collname = 'und-x-icu'") == 1 ]] ||
		skip "this server has no ICU collations"
	both "CREATE COLLATION public.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
		CREATE TABLE public.hci (k text COLLATE public.ci PRIMARY KEY, v text);
		INSERT INTO public.hci VALUES ('abc', '1'), ('Def', '2'), (E'\\u00e9t\\u00e9', '3'), ('x', '4')"
	verify hci
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = $'public.hci\t4\t4\t0\t0\t0\t1' ]
	[[ $stderr == *"pg-verify: $FAST_LOG"* ]]
	# Equal in the collation, other bytes: another key.
	tgt_sql "UPDATE public.hci SET k = 'ABC' WHERE k = 'abc'; UPDATE public.hci SET k = E'\\u00c9T\\u00c9' WHERE v = '3';
		UPDATE public.hci SET v = '5' WHERE k = 'def'"
	[ "$(psql_at tgt -c "SELECT count(*) FROM public.hci WHERE k = 'abc'")" = 1 ]
	verify hci
	[ "$status" -eq 5 ]
	[ "${lines[0]}" = $'public.hci\t4\t4\t2\t2\t1\t1' ]
	[ "$(keys 0)" = $'differing\t"Def"\nmissing\t"abc"\nmissing\t"été"\nonly\t"ABC"\nonly\t"ÉTÉ"' ]
	[[ $stderr == *"pg-verify: $FAST_LOG"* ]]
	save_verdicts
	verify hci --hash md5
	same_verdicts
}

@test "usage: --hash takes auto or md5" {
	run --separate-stderr pg-verify --source host=/x --target host=/x --source-snapshot 00000003-00000002-1 \
		--target-snapshot 00000003-00000002-1 --tables /nonexistent --hash fast
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: invalid --hash \"fast\": expected auto or md5"$'\n'"usage: pg-verify "* ]]
	run --separate-stderr pg-verify --hash
	[ "$status" -eq 2 ]
	[[ $stderr == "pg-verify: error: option --hash needs a value"$'\n'"usage: pg-verify "* ]]
	run --separate-stderr pg-verify --help
	[ "$status" -eq 0 ]
	[[ $output == *"[--hash auto|md5]"* && $output == *"--hash=auto|md5"* ]]
}
