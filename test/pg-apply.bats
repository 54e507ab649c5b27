#!/usr/bin/env bats
# pg-apply against a real target, fed hand-written streams. In the heredocs
# "→" stands for TAB, as in formats/stream-v1.md. Every test uses its own
# tables and job (slot) names, so tests are independent of each other.

# One of the longest files: started first (test/run-bats).
# run-bats: slow 2

load lib/cluster
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start tgt
}

# A failed test must not leave its pg-apply running.
teardown() {
	kill_test_pids
}

teardown_file() {
	cluster_stop_all
}

T0='2026-11-30 14:03:07.123456+00'

# pgapply [pg-apply options...] < heredoc: the heredoc with → as TAB, applied.
pgapply() {
	sed 's/→/\t/g' | pg-apply -d "$tgt_URL" "$@"
}

# A stream file from a heredoc.
pgcs() {
	sed 's/→/\t/g' >"$1"
}

q() {
	psql_at tgt -c "$1"
}

# q_is SQL VALUE: the query returns VALUE (for wait_until).
q_is() {
	[ "$(q "$1")" = "$2" ]
}

applied_lsn() {
	q "SELECT applied_lsn FROM pgsync.job WHERE job = '$1'"
}

# ---------------------------------------------------------------- options

@test "--help prints the usage on stdout and exits 0" {
	run --separate-stderr pg-apply --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: pg-apply [-d CONNINFO] [--job NAME] [--checkpoint FILE] [-j N]" ]]
	[[ $output == *"--max-batch-bytes=SIZE"* ]]
	[ -z "$stderr" ]
}

@test "--version prints program, suite and version" {
	run pg-apply --version
	[ "$status" -eq 0 ]
	[ "$output" = "pg-apply (pgsync) 0.1.0" ]
}

@test "an unknown option, a bad number or a missing file is a usage error (exit 2)" {
	run --separate-stderr pg-apply --frobnicate
	[ "$status" -eq 2 ]
	[[ $stderr == *"unknown option --frobnicate"*"usage: pg-apply"* ]]
	run --separate-stderr pg-apply --max-batch-bytes 12XB
	[ "$status" -eq 2 ]
	[[ $stderr == *'invalid --max-batch-bytes "12XB": expected a size from 1 to 1TB'* ]]
	run --separate-stderr pg-apply --jobs 0
	[ "$status" -eq 2 ]
	run --separate-stderr pg-apply --synchronous-commit sometimes
	[ "$status" -eq 2 ]
	[[ $stderr == *'invalid --synchronous-commit "sometimes": expected off, local, remote_write, on or remote_apply'* ]]
	run --separate-stderr pg-apply -d "$tgt_URL" /nonexistent/stream.pgcs
	[ "$status" -eq 2 ]
	[[ $stderr == *'cannot open "/nonexistent/stream.pgcs"'* ]]
}

# ---------------------------------------------------------------- applying

@test "the worked example of the format spec applies and records its position" {
	q "CREATE TABLE public.users (id int PRIMARY KEY, name text, bio text)"
	run pg-apply -d "$tgt_URL" --checkpoint "$BATS_TEST_TMPDIR/cp" "$PGSYNC_ROOT/formats/example-basic.pgcs"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT id, name, bio IS NULL FROM public.users")" = "1|Ada L.|t" ]
	[ "$(q "SELECT applied_lsn, source_sysid, source_timeline, slot, state, applied_commit_time
		FROM pgsync.job WHERE job = 'app_slot'")" = "0/1A03000|7442718406132410263|1|app_slot|STREAMING|2026-11-30 14:03:09.5+00" ]
	[ "$(cat "$BATS_TEST_TMPDIR/cp")" = "$(printf '0/1A03000\nsysid=7442718406132410263\ntimeline=1\nslot=app_slot')" ]
}

@test "the spec's snapshot and change examples concatenate into one consistent target" {
	local db=examples_cat
	q "CREATE DATABASE $db"
	local url="$tgt_URL dbname=$db"
	psql -X -q -d "$url" -c "CREATE TABLE public.users (id int PRIMARY KEY, name text, bio text)"
	run pg-apply -d "$url" <(cat "$PGSYNC_ROOT/formats/example-snapshot.pgcs" "$PGSYNC_ROOT/formats/example-basic.pgcs")
	[ "$status" -eq 0 ]
	[ "$(psql -X -qAt -d "$url" -c "SELECT id, name, coalesce(bio, '<null>') FROM public.users ORDER BY id")" = "$(printf '1|Ada L.|<null>\n3|Grace|<null>\n4|\\N is not NULL|')" ]
	[ "$(psql -X -qAt -d "$url" -c "SELECT state, rows_copied FROM pgsync.table_sync WHERE job = 'app_slot'")" = "done|2" ]
	[ "$(psql -X -qAt -d "$url" -c "SELECT applied_lsn FROM pgsync.job WHERE job = 'app_slot'")" = "0/1A03000" ]
	# Replaying the whole archive (snapshot included) onto it changes nothing.
	local before
	before=$(psql -X -qAt -d "$url" -c "SELECT xmin, * FROM public.users ORDER BY id")
	run pg-apply -d "$url" <(cat "$PGSYNC_ROOT/formats/example-snapshot.pgcs" "$PGSYNC_ROOT/formats/example-basic.pgcs")
	[ "$status" -eq 0 ]
	[[ $output == *"snapshot at 0/1A00000 is already applied (position 0/1A03000): skipped"* ]]
	[ "$(psql -X -qAt -d "$url" -c "SELECT xmin, * FROM public.users ORDER BY id")" = "$before" ]
}

@test "replaying an applied stream changes nothing and says so" {
	local before
	before=$(q "SELECT xmin, * FROM public.users")
	run pg-apply -d "$tgt_URL" "$PGSYNC_ROOT/formats/example-basic.pgcs"
	[ "$status" -eq 0 ]
	[[ $output == *"applied 0 transactions, skipped 3 already applied; position 0/1A03000"* ]]
	[ "$(q "SELECT xmin, * FROM public.users")" = "$before" ]
}

@test "an archive overlapping the applied position applies only the transactions after it" {
	q "CREATE TABLE ov (id int PRIMARY KEY)"
	run pgapply <<EOF
PGCS→1→11→1→ov_slot→0/100
RELATION→public→ov→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→ov→1
COMMIT→1→0/200→0/210→$T0
BEGIN→2→0/300→$T0
INSERT→public→ov→2
COMMIT→2→0/300→0/310→$T0
EOF
	[ "$status" -eq 0 ]
	# Transaction 2 again (it would violate the key), then 3.
	run pgapply <<EOF
PGCS→1→11→1→ov_slot→0/210
RELATION→public→ov→1→d→1→id→23→-1→k
BEGIN→2→0/300→$T0
INSERT→public→ov→2
COMMIT→2→0/300→0/310→$T0
BEGIN→3→0/400→$T0
INSERT→public→ov→3
COMMIT→3→0/400→0/410→$T0
EOF
	[ "$status" -eq 0 ]
	[[ $output == *"applied 1 transactions, skipped 1 already applied; position 0/410"* ]]
	[ "$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM ov")" = "1,2,3" ]
}

@test "NULL, empty string, literal \\N, tab, newline, CR, backslash and UTF-8 stay distinct" {
	q "CREATE TABLE vals (id int PRIMARY KEY, v text, b bytea)"
	run pgapply <<EOF
PGCS→1→12→1→vals_slot→0/100
RELATION→public→vals→1→d→3→id→23→-1→k→v→25→-1→-→b→17→-1→-
BEGIN→1→0/200→$T0
INSERT→public→vals→1→\\N→\\N
INSERT→public→vals→2→→\\\\x
INSERT→public→vals→3→\\\\N→\\\\x00ff
INSERT→public→vals→4→a\\tb\\nc\\rd\\\\e→\\\\x0a
INSERT→public→vals→5→Grüße, 日本→\\\\x5c4e
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	run q "SELECT id, v IS NULL, coalesce(encode(convert_to(v, 'UTF8'), 'hex'), '-'), coalesce(encode(b, 'hex'), '-') FROM vals ORDER BY id"
	[ "${lines[0]}" = "1|t|-|-" ]
	[ "${lines[1]}" = "2|f||" ]
	[ "${lines[2]}" = "3|f|5c4e|00ff" ]
	[ "${lines[3]}" = "4|f|6109620a630d645c65|0a" ]
	[ "${lines[4]}" = "5|f|$(printf 'Grüße, 日本' | od -An -tx1 | tr -d ' \n')|5c4e" ]
}

@test "UPDATE with an old key moves the row, and an unchanged TOASTed value keeps its value" {
	q "CREATE TABLE mv (id int PRIMARY KEY, name text, doc text)"
	q "INSERT INTO mv VALUES (1, 'a', repeat('x', 100000))"
	run pgapply <<EOF
PGCS→1→13→1→mv_slot→0/100
RELATION→public→mv→1→d→3→id→23→-1→k→name→25→-1→-→doc→25→-1→-
BEGIN→1→0/200→$T0
UPDATE→public→mv→K→1→\\N→\\N→2→b→\\U
UPDATE→public→mv→N→2→c→\\U
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT id, name, length(doc) FROM mv")" = "2|c|100000" ]
}

@test "a GENERATED ALWAYS identity column the source set to DEFAULT: exit 5 naming the ALTER that lets it apply, then the rerun applies it" {
	q "CREATE TABLE ga_key (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)"
	q "CREATE TABLE ga_col (code text PRIMARY KEY, n bigint GENERATED ALWAYS AS IDENTITY, v text)"
	q "INSERT INTO ga_key OVERRIDING SYSTEM VALUE VALUES (1, 'a'); INSERT INTO ga_col OVERRIDING SYSTEM VALUE VALUES ('a', 5, 'x')"
	# UPDATE ... SET id = DEFAULT on the source: the old key comes too.
	pgcs "$BATS_TEST_TMPDIR/key.pgcs" <<EOF
PGCS→1→15→1→ga_slot→0/100
RELATION→public→ga_key→1→d→2→id→23→-1→k→v→25→-1→-
RELATION→public→ga_col→2→d→3→code→25→-1→k→n→20→-1→-→v→25→-1→-
BEGIN→1→0/200→$T0
UPDATE→public→ga_key→N→1→b
UPDATE→public→ga_col→N→a→5→y
COMMIT→1→0/200→0/210→$T0
BEGIN→2→0/300→$T0
UPDATE→public→ga_key→K→1→\\N→9→c
COMMIT→2→0/300→0/310→$T0
BEGIN→3→0/400→$T0
UPDATE→public→ga_col→N→a→77→z
COMMIT→3→0/400→0/410→$T0
EOF
	run pg-apply -d "$tgt_URL" --job ga "$BATS_TEST_TMPDIR/key.pgcs"
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *'cannot apply update to public.ga_key: it changes column "id", GENERATED ALWAYS AS IDENTITY on the target, which an UPDATE can only set to DEFAULT (source transaction 2, commit LSN 0/300): ALTER TABLE "public"."ga_key" ALTER COLUMN "id" SET GENERATED BY DEFAULT on the target, then rerun'* ]]
	# Nothing of the batch is in (the three share one target transaction).
	[ "$(q "SELECT id || v FROM ga_key")" = 1a ]
	[ "$(q "SELECT n || v FROM ga_col")" = 5x ]
	q "ALTER TABLE ga_key ALTER COLUMN id SET GENERATED BY DEFAULT"
	run pg-apply -d "$tgt_URL" --job ga "$BATS_TEST_TMPDIR/key.pgcs"
	echo "$output"
	[ "$status" -eq 5 ]
	# n outside the key: the row is found by its key and its unchanged n.
	[[ $output == *"cannot apply update to public.ga_col: no row on the target matches key (code) of source transaction 3 (commit LSN 0/400), or its row there holds another value in a column that is GENERATED ALWAYS AS IDENTITY on the target"* ]]
	[ "$(q "SELECT id || v FROM ga_key")" = 1a ]
	q "ALTER TABLE ga_col ALTER COLUMN n SET GENERATED BY DEFAULT"
	run pg-apply -d "$tgt_URL" --job ga "$BATS_TEST_TMPDIR/key.pgcs"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT id || v FROM ga_key")" = 9c ]
	[ "$(q "SELECT n || v FROM ga_col")" = 77z ]
	[ "$(applied_lsn ga)" = 0/410 ]
}

@test "replica identity full matches all old values, json and point included, and changes one of two identical rows" {
	q "CREATE TABLE rf (a int, j json, p point, t text)"
	q "INSERT INTO rf VALUES (1, '{\"x\": 1}', '(1,2)', 'dup'), (1, '{\"x\": 1}', '(1,2)', 'dup'), (2, NULL, NULL, NULL), (3, '[]', '(0,0)', 'gone')"
	run pgapply <<EOF
PGCS→1→14→1→rf_slot→0/100
RELATION→public→rf→1→f→4→a→23→-1→k→j→114→-1→k→p→600→-1→k→t→25→-1→k
BEGIN→1→0/200→$T0
UPDATE→public→rf→O→1→{"x": 1}→(1,2)→dup→1→{"x": 1}→(1,2)→changed
UPDATE→public→rf→O→2→\\N→\\N→\\N→2→\\N→\\N→was null
DELETE→public→rf→O→3→[]→(0,0)→gone
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(a || ':' || coalesce(t, '-'), ',' ORDER BY a, t) FROM rf")" = "1:changed,1:dup,2:was null" ]
}

@test "TRUNCATE truncates all named tables, with restart identity and cascade as flagged" {
	q "CREATE TABLE tp (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY)"
	q "CREATE TABLE tc (id int REFERENCES tp)"
	q "CREATE TABLE tq (id int)"
	q "INSERT INTO tp DEFAULT VALUES; INSERT INTO tp DEFAULT VALUES; INSERT INTO tc VALUES (1); INSERT INTO tq VALUES (1)"
	run pgapply <<EOF
PGCS→1→15→1→tr_slot→0/100
RELATION→public→tp→1→d→1→id→23→-1→k
RELATION→public→tq→2→d→1→id→23→-1→-
BEGIN→1→0/200→$T0
TRUNCATE→cascade,restart_identity→public→tp→public→tq
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT (SELECT count(*) FROM tp) + (SELECT count(*) FROM tc) + (SELECT count(*) FROM tq)")" = 0 ]
	q "INSERT INTO tp DEFAULT VALUES"
	[ "$(q "SELECT id FROM tp")" = 1 ]
}

# 50 one-row transactions into table TABLE, commit LSNs from 0/1000 on.
small_txns() {
	local table=$1 slot=$2
	printf 'PGCS\t1\t16\t1\t%s\t0/100\n' "$slot"
	printf 'RELATION\tpublic\t%s\t1\td\t1\tid\t23\t-1\tk\n' "$table"
	for i in $(seq 1 50); do
		printf 'BEGIN\t%d\t0/%X\t%s\n' "$i" $((4096 * i)) "$T0"
		printf 'INSERT\tpublic\t%s\t%d\n' "$table" "$i"
		printf 'COMMIT\t%d\t0/%X\t0/%X\t%s\n' "$i" $((4096 * i)) $((4096 * i + 16)) "$T0"
	done
}

@test "small source transactions share one target transaction; --max-batch-bytes splits only between them" {
	q "CREATE TABLE b1 (id int PRIMARY KEY); CREATE TABLE b2 (id int PRIMARY KEY)"
	# From files: a pipe that runs dry would commit early, as it should.
	small_txns b1 b1_slot >"$BATS_TEST_TMPDIR/b1"
	small_txns b2 b2_slot >"$BATS_TEST_TMPDIR/b2"
	pg-apply -d "$tgt_URL" --max-batch-delay 1h "$BATS_TEST_TMPDIR/b1"
	[ "$(q "SELECT count(*), count(DISTINCT xmin::text) FROM b1")" = "50|1" ]
	# Each transaction is ~150 bytes of stream: 1kB batches hold a few each.
	pg-apply -d "$tgt_URL" --max-batch-delay 1h --max-batch-bytes 1kB "$BATS_TEST_TMPDIR/b2"
	run q "SELECT count(*), count(DISTINCT xmin::text) FROM b2"
	[ "${output%%|*}" -eq 50 ]
	[ "${output##*|}" -gt 5 ]
	[ "${output##*|}" -lt 50 ]
	[ "$(applied_lsn b2_slot)" = "0/32010" ]
}

@test "a producer that pauses between transactions gets each committed while it waits" {
	q "CREATE TABLE qp (id int PRIMARY KEY)"
	small_txns qp qp_slot >"$BATS_TEST_TMPDIR/qp.pgcs"
	# Header, relation and the first 5 transactions, then one at a time.
	run pg-apply -d "$tgt_URL" --max-batch-delay 1h < <(
		head -17 "$BATS_TEST_TMPDIR/qp.pgcs"
		sed -n '18,$p' "$BATS_TEST_TMPDIR/qp.pgcs" | head -15 | while IFS= read -r l; do
			printf '%s\n' "$l"
			[[ $l == COMMIT* ]] && sleep 0.3
		done
	)
	[ "$status" -eq 0 ]
	# The first six arrive together (the sixth before the first pause); the
	# other four one each.
	run q "SELECT count(*), count(DISTINCT xmin::text) FROM qp"
	[ "${output%%|*}" -eq 10 ]
	[ "${output##*|}" -ge 5 ]
	[ "${output##*|}" -le 10 ]
}

@test "a live producer sending a transaction every millisecond or so gets each committed as it arrives" {
	q "CREATE TABLE lv (id int PRIMARY KEY)"
	small_txns lv lv_slot >"$BATS_TEST_TMPDIR/lv.pgcs"
	# Gaps shorter than the 2 ms of quiet a catching-up producer is given,
	# at a few kB/s: live, so no waiting for a pause that never comes.
	run pg-apply -d "$tgt_URL" --max-batch-delay 1h < <(
		while IFS= read -r l; do
			printf '%s\n' "$l"
			# 1 ms, waited without a process: sleep(1) takes longer than that.
			if [[ $l == COMMIT* ]]; then
				local until=$((${EPOCHREALTIME/./} + 1000))
				while ((${EPOCHREALTIME/./} < until)); do :; done
			fi
		done <"$BATS_TEST_TMPDIR/lv.pgcs"
	)
	[ "$status" -eq 0 ]
	run q "SELECT count(*), count(DISTINCT xmin::text) FROM lv"
	[ "${output%%|*}" -eq 50 ]
	# A busy machine may deliver a few together; waiting for quiet input
	# put nearly all 50 in one to five target transactions.
	[ "${output##*|}" -ge 15 ]
}

@test "a row changed in transaction after transaction ends the batch early, every 64 changes, when updates cannot be merged" {
	# The second unique index keeps updates of hot from being merged.
	q "CREATE TABLE hot (id int PRIMARY KEY, n int UNIQUE); INSERT INTO hot VALUES (1, 0); CREATE TABLE hot_log (id int PRIMARY KEY)"
	{
		printf 'PGCS\t1\t42\t1\thot_slot\t0/100\n'
		printf 'RELATION\tpublic\thot\t1\td\t2\tid\t23\t-1\tk\tn\t23\t-1\t-\n'
		printf 'RELATION\tpublic\thot_log\t2\td\t1\tid\t23\t-1\tk\n'
		for i in $(seq 1 200); do
			printf 'BEGIN\t%d\t0/%X\t%s\n' "$i" $((4096 * i)) "$T0"
			printf 'UPDATE\tpublic\thot\tN\t1\t%d\n' "$i"
			printf 'INSERT\tpublic\thot_log\t%d\n' "$i"
			printf 'COMMIT\t%d\t0/%X\t0/%X\t%s\n' "$i" $((4096 * i)) $((4096 * i + 16)) "$T0"
		done
	} >"$BATS_TEST_TMPDIR/hot.pgcs"
	run pg-apply -d "$tgt_URL" --max-batch-delay 1h "$BATS_TEST_TMPDIR/hot.pgcs"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT n FROM hot")" = 200 ]
	# Batches of 64, 64, 64 and 8 transactions.
	[ "$(q "SELECT count(*), count(DISTINCT xmin::text) FROM hot_log")" = "200|4" ]
}

# n_upd_is TABLE N: pg-apply's sessions made N updates (n_tup_upd) to TABLE,
# once their statistics are flushed (at the end of the session).
n_upd_is() {
	[ "$(q "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = '$1'")" = "$2" ]
}

# merge_stream SLOT TABLE...: 100 transactions, each updating row 1 of
# every TABLE (id, n, doc: doc changes in transaction 40 only), and row 2
# (to -50) in transaction 50.
merge_stream() {
	local slot=$1 t i r=0
	shift
	printf 'PGCS\t1\t43\t1\t%s\t0/100\n' "$slot"
	for t in "$@"; do
		printf 'RELATION\tpublic\t%s\t%d\td\t3\tid\t23\t-1\tk\tn\t23\t-1\t-\tdoc\t25\t-1\t-\n' "$t" $((++r))
	done
	for i in $(seq 1 100); do
		printf 'BEGIN\t%d\t0/%X\t%s\n' "$i" $((4096 * i)) "$T0"
		for t in "$@"; do
			if ((i == 40)); then
				printf 'UPDATE\tpublic\t%s\tN\t1\t%d\tnew doc\n' "$t" "$i"
			else
				printf 'UPDATE\tpublic\t%s\tN\t1\t%d\t\\U\n' "$t" "$i"
			fi
			if ((i == 50)); then
				printf 'UPDATE\tpublic\t%s\tN\t2\t-50\t\\U\n' "$t"
			fi
		done
		printf 'COMMIT\t%d\t0/%X\t0/%X\t%s\n' "$i" $((4096 * i)) $((4096 * i + 16)) "$T0"
	done
}

@test "updates of one row within a batch are merged into one; an unchanged TOAST value keeps the newest value" {
	for t in mg mg_no; do
		q "CREATE TABLE $t (id int PRIMARY KEY, n int, doc text); INSERT INTO $t VALUES (1, 0, repeat('d', 50000)), (2, 0, 'two')"
	done
	merge_stream mg_slot mg >"$BATS_TEST_TMPDIR/mg.pgcs"
	merge_stream mg_no_slot mg_no >"$BATS_TEST_TMPDIR/mg_no.pgcs"
	run pg-apply -d "$tgt_URL" --max-batch-delay 1h "$BATS_TEST_TMPDIR/mg.pgcs"
	[ "$status" -eq 0 ]
	run pg-apply -d "$tgt_URL" --max-batch-delay 1h --no-merge-updates "$BATS_TEST_TMPDIR/mg_no.pgcs"
	[ "$status" -eq 0 ]
	for t in mg mg_no; do
		[ "$(q "SELECT string_agg(id || ':' || n || ':' || left(doc, 7) || ':' || length(doc), ',' ORDER BY id) FROM $t")" = "1:100:new doc:7,2:-50:two:3" ]
		[ "$(applied_lsn "${t}_slot")" = "0/64010" ]
	done
	# One batch, and in it each row updated once; unmerged, every update.
	wait_until 10 n_upd_is mg 2
	wait_until 10 n_upd_is mg_no 101
}

# multi_stream SLOT TABLE ROWS: one transaction updating rows 1..ROWS of TABLE
# (id, c char(5), v varchar(10), n numeric(6,2), j json, a int[], t timestamptz, b bytea, u uuid).
multi_stream() {
	printf 'PGCS\t1\t46\t1\t%s\t0/100\n' "$1"
	printf 'RELATION\tpublic\t%s\t1\td\t9\tid\t23\t-1\tk\tc\t1042\t9\t-\tv\t1043\t14\t-\tn\t1700\t393222\t-\tj\t114\t-1\t-\ta\t1007\t-1\t-\tt\t1184\t-1\t-\tb\t17\t-1\t-\tu\t2950\t-1\t-\n' "$2"
	printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
	for i in $(seq 1 "$3"); do
		printf 'UPDATE\tpublic\t%s\tN\t%d\tc%d\tv\\t%d\t%d.25\t{"k": [%d, null]}\t{%d,NULL,3}\t2026-01-%02d 10:00:00+00\t\\\\x00ff%02x\t00000000-0000-0000-0000-%012d\n' \
			"$2" "$i" "$((i % 10))" "$i" "$i" "$i" "$i" "$((i % 28 + 1))" "$((i % 256))" "$i"
	done
	printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0"
}

@test "merged updates of many rows go out several to a statement and give what one by one gives, every type" {
	for t in mm_a mm_b; do
		q "CREATE TABLE $t (id int PRIMARY KEY, c char(5), v varchar(10), n numeric(6,2), j json, a int[], t timestamptz, b bytea, u uuid)"
		q "INSERT INTO $t (id) SELECT generate_series(1, 45)"
	done
	run pg-apply -d "$tgt_URL" --log-level debug < <(multi_stream mm_a_slot mm_a 45)
	[ "$status" -eq 0 ]
	# 45 rows: one statement of 32, one of 8 and five single rows.
	[[ $output == *'FROM (VALUES ($1::pg_catalog.int4'* ]]
	run pg-apply -d "$tgt_URL" --no-merge-updates < <(multi_stream mm_b_slot mm_b 45)
	[ "$status" -eq 0 ]
	[ "$(table_checksum "$tgt_URL" mm_a)" = "$(table_checksum "$tgt_URL" mm_b)" ]
	run q "SELECT c || '|' || v || '|' || n || '|' || (j->'k'->>0) || '|' || a[1] || '|' || encode(b, 'hex') FROM mm_a WHERE id = 12"; [ "$output" = "c2|v	12|12.25|12|12|00ff0c" ]
	wait_until 10 n_upd_is mm_a 45
}

@test "a merged update of several rows: a value that does not fit, or a missing row, exits 5 and applies nothing" {
	q "CREATE TABLE mf (id int PRIMARY KEY, v varchar(3)); INSERT INTO mf SELECT g, 'x' FROM generate_series(1, 10) g"
	run pgapply <<EOF
PGCS→1→47→1→mf_slot→0/100
RELATION→public→mf→1→d→2→id→23→-1→k→v→1043→7→-
BEGIN→1→0/200→$T0
UPDATE→public→mf→N→1→a
UPDATE→public→mf→N→2→b
UPDATE→public→mf→N→3→c
UPDATE→public→mf→N→4→d
UPDATE→public→mf→N→5→toolong
UPDATE→public→mf→N→6→f
UPDATE→public→mf→N→7→g
UPDATE→public→mf→N→8→h
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *"cannot apply update to public.mf: value too long for type character varying(3) (column \"v\", SQLSTATE 22001)"* ]]
	[[ $output != *toolong* ]]
	[ "$(q "SELECT count(*) FROM mf WHERE v = 'x'")" = 10 ]
	q "DELETE FROM mf WHERE id = 4"
	run pgapply <<EOF
PGCS→1→47→1→mf_slot→0/100
RELATION→public→mf→1→d→2→id→23→-1→k→v→1043→7→-
BEGIN→2→0/300→$T0
UPDATE→public→mf→N→1→a
UPDATE→public→mf→N→2→b
UPDATE→public→mf→N→3→c
UPDATE→public→mf→N→4→d
UPDATE→public→mf→N→5→e
UPDATE→public→mf→N→6→f
UPDATE→public→mf→N→7→g
UPDATE→public→mf→N→8→h
COMMIT→2→0/300→0/310→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *"cannot apply update to public.mf: no row on the target matches key (id) for 1 of 8 merged updates, the last of source transaction 2 (commit LSN 0/300)"* ]]
	[ "$(q "SELECT count(*) FROM mf WHERE v = 'x'")" = 9 ]
}

@test "updates are applied one by one where merging could be seen: another unique index, an always trigger, a rule" {
	q "CREATE TABLE mu (id int PRIMARY KEY, n int UNIQUE, doc text)"
	q "CREATE TABLE mt (id int PRIMARY KEY, n int, doc text); CREATE TABLE mt_log (n int)"
	q "CREATE FUNCTION mt_log() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN INSERT INTO public.mt_log VALUES (NEW.n); RETURN NEW; END'"
	q "CREATE TRIGGER mt_log AFTER UPDATE ON mt FOR EACH ROW EXECUTE FUNCTION mt_log(); ALTER TABLE mt ENABLE ALWAYS TRIGGER mt_log"
	q "CREATE TABLE mr (id int PRIMARY KEY, n int, doc text); CREATE TABLE mr_log (n int)"
	q "CREATE RULE mr_log AS ON UPDATE TO mr DO ALSO INSERT INTO mr_log VALUES (NEW.n); ALTER TABLE mr ENABLE ALWAYS RULE mr_log"
	for t in mu mt mr; do q "INSERT INTO $t VALUES (1, 0, 'one'), (2, -1, 'two')"; done
	merge_stream mu_slot mu mt mr >"$BATS_TEST_TMPDIR/mu.pgcs"
	run pg-apply -d "$tgt_URL" --max-batch-delay 1h "$BATS_TEST_TMPDIR/mu.pgcs"
	[ "$status" -eq 0 ]
	for t in mu mt mr; do
		[ "$(q "SELECT string_agg(id || ':' || n || ':' || doc, ',' ORDER BY id) FROM $t")" = "1:100:new doc,2:-50:two" ]
	done
	[ "$(q "SELECT count(*), sum(n) FROM mt_log")" = "101|5000" ]
	[ "$(q "SELECT count(*), sum(n) FROM mr_log")" = "101|5000" ]
	wait_until 10 n_upd_is mu 101
}

@test "a unique index on other columns: values swapped through a third one in one batch apply" {
	q "CREATE TABLE sw (id int PRIMARY KEY, email text UNIQUE); INSERT INTO sw VALUES (1, 'a'), (2, 'b')"
	run pgapply --max-batch-delay 1h <<EOF
PGCS→1→44→1→sw_slot→0/100
RELATION→public→sw→1→d→2→id→23→-1→k→email→25→-1→-
BEGIN→1→0/200→$T0
UPDATE→public→sw→N→1→x
COMMIT→1→0/200→0/210→$T0
BEGIN→2→0/300→$T0
UPDATE→public→sw→N→2→a
COMMIT→2→0/300→0/310→$T0
BEGIN→3→0/400→$T0
UPDATE→public→sw→N→1→b
COMMIT→3→0/400→0/410→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(id || email, ',' ORDER BY id) FROM sw")" = "1b,2a" ]
}

@test "held updates stay in order with deletes, re-inserts, truncates and a redefined relation of their table" {
	q "CREATE TABLE mo (id int PRIMARY KEY, n int); INSERT INTO mo VALUES (1, 0), (2, 0), (3, 0)"
	run pgapply --max-batch-delay 1h <<EOF
PGCS→1→45→1→mo_slot→0/100
RELATION→public→mo→1→d→2→id→23→-1→k→n→23→-1→-
BEGIN→1→0/200→$T0
UPDATE→public→mo→N→1→10
UPDATE→public→mo→N→2→20
DELETE→public→mo→K→1→\\N
INSERT→public→mo→1→11
UPDATE→public→mo→N→1→12
DELETE→public→mo→K→3→\\N
INSERT→public→mo→4→40
UPDATE→public→mo→N→4→41
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM mo")" = "1:12,2:20,4:41" ]
	q "ALTER TABLE mo ADD COLUMN c text"
	run pgapply --max-batch-delay 1h <<EOF
PGCS→1→45→1→mo_slot→0/100
RELATION→public→mo→1→d→2→id→23→-1→k→n→23→-1→-
BEGIN→2→0/300→$T0
UPDATE→public→mo→N→2→21
RELATION→public→mo→1→d→3→id→23→-1→k→n→23→-1→-→c→25→-1→-
UPDATE→public→mo→N→2→22→two
UPDATE→public→mo→N→4→42→four
COMMIT→2→0/300→0/310→$T0
BEGIN→3→0/400→$T0
UPDATE→public→mo→N→1→13→one
TRUNCATE→-→public→mo
INSERT→public→mo→5→50→five
UPDATE→public→mo→N→5→51→\\U
COMMIT→3→0/400→0/410→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(id || ':' || n || ':' || c, ',' ORDER BY id) FROM mo")" = "5:51:five" ]
	[ "$(applied_lsn mo_slot)" = "0/410" ]
}

# RANDOM_STREAM_SEEDS: the seeds of the random streams (make soak: 1 to 40).
@test "random streams of inserts, updates, key changes, deletes and truncates end as their model says, merged or not (RANDOM_STREAM_SEEDS)" {
	local seed mode t
	for seed in ${RANDOM_STREAM_SEEDS:-1 2 3 4}; do
		for mode in big small nomerge; do
			t=rnd_${seed}_$mode
			q "CREATE TABLE $t (id int PRIMARY KEY, n int, doc text)"
			awk -v seed="$seed" -v table="$t" -v slot="${t}_slot" -v txns=300 -v expect="$BATS_TEST_TMPDIR/$t.want" \
				-f "$BATS_TEST_DIRNAME/lib/random-stream.awk" >"$BATS_TEST_TMPDIR/$t.pgcs"
			case $mode in
			big) run pg-apply -d "$tgt_URL" --max-batch-delay 1h "$BATS_TEST_TMPDIR/$t.pgcs" ;;
			# Small batches also leave room for only a few held rows.
			small) run pg-apply -d "$tgt_URL" --max-batch-delay 1h --max-batch-bytes 2kB "$BATS_TEST_TMPDIR/$t.pgcs" ;;
			nomerge) run pg-apply -d "$tgt_URL" --max-batch-delay 1h --no-merge-updates "$BATS_TEST_TMPDIR/$t.pgcs" ;;
			esac
			echo "$t: $output"
			[ "$status" -eq 0 ]
			q "SELECT id || '|' || n || '|' || coalesce(doc, '\\N') FROM $t" | sort >"$BATS_TEST_TMPDIR/$t.got"
			sort "$BATS_TEST_TMPDIR/$t.want" | diff - "$BATS_TEST_TMPDIR/$t.got"
		done
	done
}

@test "a run of inserts through COPY gives exactly the rows single-row statements give" {
	q "CREATE TABLE cp1 (id int PRIMARY KEY, v text, n numeric); CREATE TABLE cp2 (LIKE cp1 INCLUDING ALL)"
	gen() {
		printf 'PGCS\t1\t17\t1\t%s\t0/100\n' "$1"
		printf 'RELATION\tpublic\t%s\t1\td\t3\tid\t23\t-1\tk\tv\t25\t-1\t-\tn\t1700\t-1\t-\n' "$2"
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		for i in $(seq 1 300); do printf 'INSERT\tpublic\t%s\t%d\tv\\t%d\\\\\t%d.5\n' "$2" "$i" "$i" "$i"; done
		printf 'INSERT\tpublic\t%s\t1000\t\\N\t\\N\n' "$2"
		printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0"
	}
	run pg-apply -d "$tgt_URL" --log-level debug < <(gen cp1_slot cp1)
	[ "$status" -eq 0 ]
	[[ $output == *"copying a run of inserts into public.cp1"* ]]
	run pg-apply -d "$tgt_URL" --log-level debug --copy-threshold 0 < <(gen cp2_slot cp2)
	[ "$status" -eq 0 ]
	[[ $output != *"copying a run"* ]]
	[ "$(q "SELECT count(*) FROM cp1")" = 301 ]
	[ "$(table_checksum "$tgt_URL" cp1)" = "$(table_checksum "$tgt_URL" cp2)" ]
}

@test "statements of a redefined table are deallocated: the target session's prepared statements stay few" {
	q "CREATE TABLE ps (id int PRIMARY KEY, n int, c text); INSERT INTO ps VALUES (1, 0, 'c')"
	# The probe's trigger runs in pg-apply's own session, the only one that
	# sees its prepared statements.
	q "CREATE TABLE ps_probe (id int); CREATE TABLE ps_seen (stmts bigint)"
	q "CREATE FUNCTION ps_seen() RETURNS trigger LANGUAGE plpgsql AS
	   'BEGIN INSERT INTO public.ps_seen SELECT count(*) FROM pg_catalog.pg_prepared_statements; RETURN NEW; END'"
	q "CREATE TRIGGER ps_seen AFTER INSERT ON ps_probe FOR EACH ROW EXECUTE FUNCTION ps_seen();
	   ALTER TABLE ps_probe ENABLE ALWAYS TRIGGER ps_seen"
	gen() {
		printf 'PGCS\t1\t46\t1\tps_slot\t0/100\n'
		printf 'RELATION\tpublic\tps_probe\t2\td\t1\tid\t23\t-1\t-\n'
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		# The table redefined 200 times, alternating between two column sets,
		# and changed in between: an update, an insert and a delete, each a
		# prepared statement for the column set of the moment.
		for i in $(seq 1 200); do
			if ((i % 2)); then
				printf 'RELATION\tpublic\tps\t1\td\t2\tid\t23\t-1\tk\tn\t23\t-1\t-\n'
				printf 'UPDATE\tpublic\tps\tN\t1\t%d\n' "$i"
				printf 'INSERT\tpublic\tps\t2\t%d\n' "$i"
				printf 'DELETE\tpublic\tps\tK\t2\t\\N\n'
			else
				printf 'RELATION\tpublic\tps\t1\td\t3\tid\t23\t-1\tk\tn\t23\t-1\t-\tc\t25\t-1\t-\n'
				printf 'UPDATE\tpublic\tps\tN\t1\t%d\tc%d\n' "$i" "$i"
				printf 'INSERT\tpublic\tps\t2\t%d\tc\n' "$i"
				printf 'DELETE\tpublic\tps\tK\t2\t\\N\t\\N\n'
			fi
		done
		printf 'INSERT\tpublic\tps_probe\t1\n'
		printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0"
	}
	run pg-apply -d "$tgt_URL" --log-level debug < <(gen)
	echo "$output" | tail -5
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(id || ':' || n || ':' || c, ',') FROM ps")" = "1:200:c200" ]
	# 600 statements were prepared, for 200 column sets.
	[ "$(grep -c 'prepared pgsync_[0-9]* for public.ps:' <<<"$output")" -ge 600 ]
	stmts=$(q "SELECT stmts FROM ps_seen")
	echo "prepared statements in the apply session: $stmts"
	[ "$stmts" -le 10 ]
}

@test "many tables with many statement shapes: at most 1024 statements stay prepared, the least used deallocated" {
	q "DO \$\$ BEGIN FOR t IN 1..20 LOOP
	     EXECUTE format('CREATE TABLE pm%s (id int PRIMARY KEY, a text, b text, c text, d text, e text, f text)', t);
	     EXECUTE format('INSERT INTO pm%s VALUES (1, ''-'', ''-'', ''-'', ''-'', ''-'', ''-'')', t);
	   END LOOP; END \$\$"
	q "CREATE TABLE pm_probe (id int); CREATE TABLE pm_seen (stmts bigint)"
	q "CREATE FUNCTION pm_seen() RETURNS trigger LANGUAGE plpgsql AS
	   'BEGIN INSERT INTO public.pm_seen SELECT count(*) FROM pg_catalog.pg_prepared_statements; RETURN NEW; END'"
	q "CREATE TRIGGER pm_seen AFTER INSERT ON pm_probe FOR EACH ROW EXECUTE FUNCTION pm_seen();
	   ALTER TABLE pm_probe ENABLE ALWAYS TRIGGER pm_seen"
	gen() {
		local t p j row
		printf 'PGCS\t1\t47\t1\tpm_slot\t0/100\n'
		printf 'RELATION\tpublic\tpm_probe\t2\td\t1\tid\t23\t-1\t-\n'
		for t in $(seq 1 20); do
			printf 'RELATION\tpublic\tpm%d\t%d\td\t7\tid\t23\t-1\tk' "$t" $((t + 2))
			for j in a b c d e f; do printf '\t%s\t25\t-1\t-' "$j"; done
			printf '\n'
		done
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		# Per table 64 updates, each leaving another set of columns
		# unchanged (\U): 64 statement shapes, 1280 in all.
		for t in $(seq 1 20); do
			for p in $(seq 0 63); do
				row="UPDATE\tpublic\tpm$t\tN\t1"
				for j in 0 1 2 3 4 5; do
					if (((p >> j) & 1)); then row+='\t\\U'; else row+="\tv$p"; fi
				done
				printf "$row\n"
			done
		done
		printf 'INSERT\tpublic\tpm_probe\t1\n'
		printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0"
	}
	run pg-apply -d "$tgt_URL" --no-merge-updates --log-level debug < <(gen)
	echo "$output" | tail -3
	[ "$status" -eq 0 ]
	[ "$(grep -c 'prepared pgsync_[0-9]* for public.pm[0-9]*:' <<<"$output")" -eq 1280 ]
	[ "$(q "SELECT DISTINCT concat_ws(',', a, b, c, d, e, f) FROM pm1 UNION ALL SELECT 'pm20: ' || concat_ws(',', a, b, c, d, e, f) FROM pm20")" = "v62,v61,v59,v55,v47,v31
pm20: v62,v61,v59,v55,v47,v31" ]
	stmts=$(q "SELECT stmts FROM pm_seen")
	echo "prepared statements in the apply session: $stmts"
	# The cache's 1024 (the probe's insert among them) and the progress row's.
	[ "$stmts" -le 1025 ]
}

@test "MESSAGE is ignored and POSITION moves an idle job's applied position" {
	run pgapply <<EOF
PGCS→1→18→1→idle_slot→0/100
MESSAGE→n→0/150→app→68656c6c6f
POSITION→0/5000→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(applied_lsn idle_slot)" = "0/5000" ]
}

@test "plain and zstd files given together are read in order as one stream" {
	q "CREATE TABLE zf (id int PRIMARY KEY)"
	pgcs "$BATS_TEST_TMPDIR/a.pgcs" <<EOF
PGCS→1→19→1→zf_slot→0/100
RELATION→public→zf→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→zf→1
COMMIT→1→0/200→0/210→$T0
EOF
	pgcs "$BATS_TEST_TMPDIR/b.pgcs" <<EOF
PGCS→1→19→1→zf_slot→0/210
RELATION→public→zf→1→d→1→id→23→-1→k
BEGIN→2→0/300→$T0
INSERT→public→zf→2
COMMIT→2→0/300→0/310→$T0
EOF
	zstd -q --rm "$BATS_TEST_TMPDIR/b.pgcs"
	run pg-apply -d "$tgt_URL" "$BATS_TEST_TMPDIR/a.pgcs" "$BATS_TEST_TMPDIR/b.pgcs.zst"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM zf")" = "1,2" ]
	[ "$(applied_lsn zf_slot)" = "0/310" ]
}

@test "a snapshot section loads, records its position and snapshot time, and the changes after it apply" {
	q "CREATE TABLE sn (id int PRIMARY KEY, name text)"
	run pgapply --jobs 2 --checkpoint "$BATS_TEST_TMPDIR/cp" <<EOF
PGCS→1→40→1→sn_slot→0/1A00000→producer=pg-snapshot-dump/0.1.0
SNAPSHOT→0/1A00000→00000003-00000002-1→1
COPY→public→sn→2→id→name
ROW→1→Ada
ROW→3→\\N is not NULL
ENDCOPY→2
TABLEDONE→public→sn→2→23
SNAPSHOTDONE→0/1A00000
PGCS→1→40→1→sn_slot→0/19FFF00→producer=pg-walcat/0.1.0
RELATION→public→sn→16385→d→2→id→23→-1→k→name→25→-1→-
BEGIN→741→0/19FFF00→$T0
INSERT→public→sn→1→Ada
COMMIT→741→0/19FFF00→0/1A00000→$T0
BEGIN→742→0/1A01F20→$T0
INSERT→public→sn→2→Bob
UPDATE→public→sn→N→3→Cy
COMMIT→742→0/1A01F20→0/1A01F50→$T0
EOF
	[ "$status" -eq 0 ]
	# Transaction 741 is inside the snapshot already: skipped, not repeated.
	[[ $output == *"applied 1 transactions, skipped 1 already applied; position 0/1A01F50"* ]]
	[ "$(q "SELECT string_agg(id || '=' || name, ',' ORDER BY id) FROM sn")" = "1=Ada,2=Bob,3=Cy" ]
	[ "$(q "SELECT applied_lsn, snapshot_done_at IS NOT NULL FROM pgsync.job WHERE job = 'sn_slot'")" = "0/1A01F50|t" ]
	[ "$(q "SELECT state, rows_copied FROM pgsync.table_sync WHERE job = 'sn_slot'")" = "done|2" ]
	[ "$(head -1 "$BATS_TEST_TMPDIR/cp")" = 0/1A01F50 ]
}

@test "a bad json value in a snapshot frame is reported at its own line, not at the json's line 1" {
	q "CREATE TABLE sjs (id int PRIMARY KEY, j json)"
	run --separate-stderr pgapply <<EOF
PGCS→1→42→1→sjs_slot→0/1A00000→producer=pg-snapshot-dump/0.1.0
SNAPSHOT→0/1A00000→00000003-00000002-1→1
COPY→public→sjs→2→id→j
ROW→1→{}
ROW→2→[1]
ROW→3→{bad
ROW→4→{}
ENDCOPY→4
TABLEDONE→public→sjs→4→23
SNAPSHOTDONE→0/1A00000
EOF
	[ "$status" -eq 5 ]
	[[ $stderr == *"pg-apply: error: -:6: cannot load public.sjs: invalid input syntax for type json (SQLSTATE 22P02)"* ]]
	[ "$(q "SELECT count(*) FROM sjs")" = 0 ]
}

@test "an incomplete snapshot section records no position" {
	q "CREATE TABLE sn2 (id int PRIMARY KEY)"
	run pgapply <<EOF
PGCS→1→41→1→sn2_slot→0/1A00000
SNAPSHOT→0/1A00000→00000003-00000002-1→1
COPY→public→sn2→1→id
ROW→1
ENDCOPY→1
EOF
	[ "$status" -eq 1 ]
	[[ $output == *"error: -:5: truncated: the stream ends inside the snapshot section"* ]]
	[ "$(q "SELECT coalesce(applied_lsn::text, 'none'), snapshot_done_at IS NULL FROM pgsync.job WHERE job = 'sn2_slot'")" = "none|t" ]
}

# ---------------------------------------------------------------- restarts and identity

@test "a header inside a transaction discards the open batch; the resent transactions apply once" {
	q "CREATE TABLE rs (id int PRIMARY KEY)"
	run pgapply --max-batch-delay 1h <<EOF
PGCS→1→20→1→rs_slot→0/100
RELATION→public→rs→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→rs→1
COMMIT→1→0/200→0/210→$T0
BEGIN→2→0/300→$T0
INSERT→public→rs→2
PGCS→1→20→1→rs_slot→0/100
RELATION→public→rs→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→rs→1
COMMIT→1→0/200→0/210→$T0
BEGIN→2→0/300→$T0
INSERT→public→rs→2
COMMIT→2→0/300→0/310→$T0
EOF
	[ "$status" -eq 0 ]
	[[ $output == *"warning: -:8: stream restarted inside transaction 2: discarding the uncommitted batch"* ]]
	[ "$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM rs")" = "1,2" ]
	[ "$(applied_lsn rs_slot)" = "0/310" ]
}

@test "a header inside a transaction whose inserts are being copied aborts the COPY; the resent rows apply once" {
	q "CREATE TABLE rsc (id int PRIMARY KEY)"
	run pgapply --max-batch-delay 1h < <(
		printf 'PGCS\t1\t20\t1\trsc_slot\t0/100\n'
		printf 'RELATION\tpublic\trsc\t1\td\t1\tid\t23\t-1\tk\n'
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		seq 1 100 | sed 's/^/INSERT\tpublic\trsc\t/'
		printf 'PGCS\t1\t20\t1\trsc_slot\t0/100\n'
		printf 'RELATION\tpublic\trsc\t1\td\t1\tid\t23\t-1\tk\n'
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		seq 1 100 | sed 's/^/INSERT\tpublic\trsc\t/'
		printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0")
	[ "$status" -eq 0 ]
	[[ $output == *"stream restarted inside transaction 1"* ]]
	[ "$(q "SELECT count(*), sum(id) FROM rsc")" = "100|5050" ]
}

@test "a header from another source in the same input exits 4 naming both identities" {
	run pgapply <<EOF
PGCS→1→21→1→id_slot→0/100
POSITION→0/200→$T0
PGCS→1→99→1→id_slot→0/100
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"error: -:3: the source is another server than the job's: system identifier 99, the job's is 21 (the stream changed source); nothing of it is applied: resync required, unless the job's own server answers again"* ]]
}

@test "a job recorded for another source, timeline or slot refuses the stream (exit 4)" {
	run pgapply <<EOF
PGCS→1→22→1→job_slot→0/100
EOF
	[ "$status" -eq 0 ]
	run pgapply <<EOF
PGCS→1→22→2→job_slot→0/100
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"the source's timeline 2 does not descend from timeline 1 the target applied 0/0 on: another branch of the history: resync required, nothing of timeline 2 applied"* ]]
	run pgapply --job job_slot <<EOF
PGCS→1→22→1→other_slot→0/100
EOF
	[ "$status" -eq 4 ]
	[[ $output == *'slot "other_slot" does not match job "job_slot"'* ]]
}

@test "a later timeline whose history leaves the recorded one at or after the applied position goes on and is recorded; one below it exits 4 with nothing applied" {
	local cp=$BATS_TEST_TMPDIR/cp
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→26→1→tl_slot→0/100
POSITION→0/300→$T0
EOF
	[ "$status" -eq 0 ]
	# A promoted standby: timeline 2 left timeline 1 at 0/400.
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→26→2→tl_slot→0/300→producer=x→history=1:0/400
POSITION→0/500→$T0
EOF
	[ "$status" -eq 0 ]
	[[ $output == *"the source's timeline 2 follows timeline 1 at 0/400, at or after the applied position 0/300: the same history: job \"tl_slot\" goes on on timeline 2"* ]]
	[ "$(q "SELECT source_timeline, applied_lsn FROM pgsync.job WHERE job = 'tl_slot'")" = "2|0/500" ]
	grep -qx timeline=2 "$cp"
	# The old timeline comes back: refused, nothing applied.
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→26→1→tl_slot→0/500
POSITION→0/600→$T0
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"the source is on timeline 1, before timeline 2 the target applied 0/500 on"* ]]
	# Timeline 3 left timeline 2 at 0/450, below the applied 0/550, in the
	# same input as a stream of timeline 2: nothing of it applied.
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→26→2→tl_slot→0/500→history=1:0/400
POSITION→0/550→$T0
PGCS→1→26→3→tl_slot→0/550→history=1:0/400,2:0/450
BEGIN→77→0/560→$T0
COMMIT→77→0/560→0/570→$T0
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"the source's timeline 3 left timeline 2 at 0/450, before the applied position 0/550 on timeline 2: the target holds transactions the new primary never had: resync required, nothing of timeline 3 applied"* ]]
	[ "$(q "SELECT source_timeline, applied_lsn FROM pgsync.job WHERE job = 'tl_slot'")" = "2|0/550" ]
	grep -qx timeline=2 "$cp"
}

@test "an existing job row keeps its state and slot_owned, and gets its source recorded" {
	q "INSERT INTO pgsync.job (job, state, slot, slot_owned) VALUES ('orch', 'CATCHING_UP', 'orch_slot', true)"
	run pgapply --job orch <<EOF
PGCS→1→23→1→orch_slot→0/100
POSITION→0/300→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT state, slot, slot_owned, source_sysid, applied_lsn FROM pgsync.job WHERE job = 'orch'")" = "CATCHING_UP|orch_slot|t|23|0/300" ]
}

@test "a stream naming no slot needs --job" {
	run pgapply <<EOF
PGCS→1→24→1→-→0/100
EOF
	[ "$status" -eq 2 ]
	[[ $output == *"the stream names no slot: use --job NAME"* ]]
	run pgapply --job noslot <<EOF
PGCS→1→24→1→-→0/100
EOF
	[ "$status" -eq 0 ]
}

@test "a checkpoint file ahead of the target exits 4; one behind is rewritten from the target" {
	local cp=$BATS_TEST_TMPDIR/cp
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→25→1→cp_slot→0/100
POSITION→0/300→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(head -1 "$cp")" = 0/300 ]
	# The target is authoritative when it is ahead of the file.
	printf '0/200\nsysid=25\ntimeline=1\nslot=cp_slot\n' >"$cp"
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→25→1→cp_slot→0/300
EOF
	[ "$status" -eq 0 ]
	[ "$(head -1 "$cp")" = 0/300 ]
	# The file claims more than the target has: the slot may have moved on.
	printf '0/900\nsysid=25\ntimeline=1\nslot=cp_slot\n' >"$cp"
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→25→1→cp_slot→0/300
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"checkpoint file \"$cp\" says 0/900 was applied, but the target records only 0/300 for job \"cp_slot\""* ]]
	printf '0/300\nsysid=999\ntimeline=1\nslot=cp_slot\n' >"$cp"
	run pgapply --checkpoint "$cp" <<EOF
PGCS→1→25→1→cp_slot→0/300
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"belongs to source 999 timeline 1 slot \"cp_slot\""* ]]
	[ "$(applied_lsn cp_slot)" = 0/300 ]
}

# ---------------------------------------------------------------- errors

@test "a stream cut inside a transaction exits 1 naming transaction and line; nothing of the batch is applied" {
	q "CREATE TABLE cut (id int PRIMARY KEY)"
	run pgapply --max-batch-delay 1h <<EOF
PGCS→1→26→1→cut_slot→0/100
RELATION→public→cut→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→cut→1
COMMIT→1→0/200→0/210→$T0
BEGIN→2→0/300→$T0
INSERT→public→cut→2
EOF
	[ "$status" -eq 1 ]
	[[ $output == *"error: -: stream truncated in transaction 2 at line 8"* ]]
	[ "$(q "SELECT count(*) FROM cut")" = 0 ]
	[ -z "$(applied_lsn cut_slot)" ]
}

@test "a source column missing on the target exits 5 naming it; nothing is applied" {
	q "CREATE TABLE mc (id int PRIMARY KEY)"
	run pgapply <<EOF
PGCS→1→27→1→mc_slot→0/100
RELATION→public→mc→1→d→2→id→23→-1→k→extra→25→-1→-
BEGIN→1→0/200→$T0
INSERT→public→mc→1→x
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *'error: column "extra" of public.mc does not exist on the target: apply the DDL on the target, then rerun'* ]]
	[ "$(q "SELECT count(*) FROM mc")" = 0 ]
}

@test "a column dropped on the source keeps replicating; the target column gets its default" {
	q "CREATE TABLE dc (id int PRIMARY KEY, gone text DEFAULT 'dflt', v text)"
	run pgapply <<EOF
PGCS→1→28→1→dc_slot→0/100
RELATION→public→dc→1→d→2→id→23→-1→k→v→25→-1→-
BEGIN→1→0/200→$T0
INSERT→public→dc→1→x
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	[ "$(q "SELECT id, gone, v FROM dc")" = "1|dflt|x" ]
}

@test "a value that does not fit exits 5 naming table, column and SQLSTATE, never a value, never truncating" {
	q "CREATE TABLE fit (id int PRIMARY KEY, v varchar(3), n numeric(4,1))"
	run pgapply <<EOF
PGCS→1→29→1→fit_slot→0/100
RELATION→public→fit→1→d→3→id→23→-1→k→v→1043→-1→-→n→1700→-1→-
BEGIN→1→0/200→$T0
INSERT→public→fit→1→secretvalue→1
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *'error: cannot apply insert to public.fit: value too long for type character varying(3) (column "v", SQLSTATE 22001)'* ]]
	[[ $output != *secretvalue* ]]
	# The same in the middle of a run of inserts, which goes through COPY.
	run pgapply < <(
		printf 'PGCS\t1\t29\t1\tfit_slot\t0/100\n'
		printf 'RELATION\tpublic\tfit\t1\td\t3\tid\t23\t-1\tk\tv\t1043\t-1\t-\tn\t1700\t-1\t-\n'
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		for i in $(seq 1 40); do printf 'INSERT\tpublic\tfit\t%d\tok\t1.5\n' "$i"; done
		printf 'INSERT\tpublic\tfit\t41\tok\t12345.6\n'
		printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0")
	[ "$status" -eq 5 ]
	[[ $output == *'error: cannot apply insert to public.fit: numeric field overflow (column "n", SQLSTATE 22003)'* ]]
	run pgapply <<EOF
PGCS→1→29→1→fit_slot→0/100
RELATION→public→fit→1→d→3→id→23→-1→k→v→1043→-1→-→n→1700→-1→-
BEGIN→1→0/200→$T0
INSERT→public→fit→99999999999→a→1
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *'value "..." is out of range for type integer (column "id", SQLSTATE 22003)'* ]]
	[[ $output != *99999999999* ]]
	[ "$(q "SELECT count(*) FROM fit")" = 0 ]
}

@test "a lock the target cannot get (SQLSTATE 55P03) exits 1 from a change and from a snapshot frame alike" {
	# The table's check takes a lock under its own lock_timeout while another
	# session holds a conflicting lock on the table (inserts still get theirs):
	# the target refuses the row with lock_not_available on either path.
	q "CREATE TABLE lkt (id int PRIMARY KEY, v text)"
	q "CREATE FUNCTION public.lkt_gate() RETURNS boolean LANGUAGE plpgsql SET lock_timeout = '50ms'
		AS \$\$ BEGIN LOCK TABLE public.lkt IN SHARE MODE; RETURN true; END \$\$"
	q "ALTER TABLE lkt ADD CHECK (public.lkt_gate())"
	local locker change_status change_err
	psql_at tgt -c "BEGIN; LOCK TABLE lkt IN SHARE UPDATE EXCLUSIVE MODE; SELECT pg_sleep(120); COMMIT" >/dev/null 2>&1 3>&- &
	locker=$!
	echo "$locker" >>"$BATS_TEST_TMPDIR/pids"
	wait_until 30 q_is "SELECT count(*) FROM pg_locks WHERE relation = 'lkt'::regclass AND mode = 'ShareUpdateExclusiveLock' AND granted" 1
	run --separate-stderr pgapply <<EOF
PGCS→1→44→1→lkc_slot→0/100
RELATION→public→lkt→1→d→2→id→23→-1→k→v→25→-1→-
BEGIN→1→0/200→$T0
INSERT→public→lkt→1→a
COMMIT→1→0/200→0/210→$T0
EOF
	change_status=$status change_err=$stderr
	run --separate-stderr pgapply <<EOF
PGCS→1→44→1→lks_slot→0/1A00000→producer=pg-snapshot-dump/0.1.0
SNAPSHOT→0/1A00000→00000003-00000002-1→1
COPY→public→lkt→2→id→v
ROW→1→a
ENDCOPY→1
TABLEDONE→public→lkt→1→4
SNAPSHOTDONE→0/1A00000
EOF
	q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()" >/dev/null
	wait "$locker" || true
	[ "$change_status" -eq 1 ]
	[[ $change_err == *"error: cannot apply insert to public.lkt: canceling statement due to lock timeout (SQLSTATE 55P03)"* ]]
	[ "$status" -eq 1 ]
	[[ $stderr == *"error: -:4: cannot load public.lkt: canceling statement due to lock timeout (SQLSTATE 55P03)"* ]]
	[ "$(q "SELECT count(*) FROM lkt")" = 0 ]
	[ -z "$(applied_lsn lkc_slot)" ]
	[ -z "$(applied_lsn lks_slot)" ]
}

@test "a feature the target lacks for the change (SQLSTATE 0A000) exits 5 from a change and from a snapshot frame alike" {
	# Row security forced on the owner's table: the target takes an INSERT but
	# refuses COPY FROM, which a run of inserts and a snapshot frame both use.
	q "CREATE ROLE rls_owner LOGIN"
	q "CREATE DATABASE rls_db OWNER rls_owner"
	local url="${tgt_URL/user=postgres/user=rls_owner}"
	url="${url/dbname=postgres/dbname=rls_db}"
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$url" -c "CREATE TABLE rl (id int PRIMARY KEY, v text);
		ALTER TABLE rl ENABLE ROW LEVEL SECURITY; ALTER TABLE rl FORCE ROW LEVEL SECURITY;
		CREATE POLICY rl_all ON rl USING (true) WITH CHECK (true)"
	run --separate-stderr pg-apply -d "$url" --copy-threshold 2 < <(sed 's/→/\t/g' <<EOF
PGCS→1→45→1→rlc_slot→0/100
RELATION→public→rl→1→d→2→id→23→-1→k→v→25→-1→-
BEGIN→1→0/200→$T0
INSERT→public→rl→1→a
INSERT→public→rl→2→b
COMMIT→1→0/200→0/210→$T0
EOF
)
	[ "$status" -eq 5 ]
	[[ $stderr == *"error: cannot apply insert to public.rl: COPY FROM not supported with row-level security (SQLSTATE 0A000)"* ]]
	run --separate-stderr pg-apply -d "$url" < <(sed 's/→/\t/g' <<EOF
PGCS→1→45→1→rls_slot→0/1A00000→producer=pg-snapshot-dump/0.1.0
SNAPSHOT→0/1A00000→00000003-00000002-1→1
COPY→public→rl→2→id→v
ROW→1→a
ENDCOPY→1
TABLEDONE→public→rl→1→4
SNAPSHOTDONE→0/1A00000
EOF
)
	[ "$status" -eq 5 ]
	[[ $stderr == *"error: -:3: cannot load public.rl: COPY FROM not supported with row-level security (SQLSTATE 0A000)"* ]]
	[ "$(psql -X -qAt -d "$url" -c "SELECT count(*) FROM rl")" = 0 ]
}

@test "an update or delete that finds no row exits 5 naming key columns and source transaction" {
	q "CREATE TABLE nr (a int, b int, v text, PRIMARY KEY (a, b))"
	q "INSERT INTO nr VALUES (1, 1, 'x')"
	run pgapply <<EOF
PGCS→1→30→1→nr_slot→0/100
RELATION→public→nr→1→d→3→a→23→-1→k→b→23→-1→k→v→25→-1→-
BEGIN→7→0/200→$T0
UPDATE→public→nr→N→1→1→y
UPDATE→public→nr→N→1→2→secret
COMMIT→7→0/200→0/210→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *"error: cannot apply update to public.nr: no row on the target matches key (a, b) of source transaction 7 (commit LSN 0/200)"* ]]
	[[ $output != *secret* ]]
	[ "$(q "SELECT v FROM nr")" = x ]
	run pgapply <<EOF
PGCS→1→30→1→nr_slot→0/100
RELATION→public→nr→1→d→3→a→23→-1→k→b→23→-1→k→v→25→-1→-
BEGIN→8→0/300→$T0
DELETE→public→nr→K→5→5→\\N
COMMIT→8→0/300→0/310→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *"cannot apply delete to public.nr: no row on the target matches key (a, b) of source transaction 8 (commit LSN 0/300)"* ]]
}

@test "a table outside the job's snapshot exits 4; a missing target table exits 5" {
	q "CREATE TABLE snap_in (id int PRIMARY KEY); CREATE TABLE snap_out (id int PRIMARY KEY)"
	q "INSERT INTO pgsync.job (job, slot) VALUES ('snapjob', 'snapjob')"
	q "INSERT INTO pgsync.table_sync (job, schema_name, table_name, state) VALUES ('snapjob', 'public', 'snap_in', 'done')"
	run pgapply <<EOF
PGCS→1→31→1→snapjob→0/100
RELATION→public→snap_in→1→d→1→id→23→-1→k
RELATION→public→snap_out→2→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→snap_in→1
INSERT→public→snap_out→1
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 4 ]
	[[ $output == *"error: table public.snap_out is not part of this job's snapshot: add it to replication.tables and resync"* ]]
	[ "$(q "SELECT count(*) FROM snap_in")" = 0 ]
	run pgapply <<EOF
PGCS→1→31→1→nt_slot→0/100
RELATION→public→no_such_table→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→no_such_table→1
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 5 ]
	[[ $output == *"error: table public.no_such_table does not exist on the target"* ]]
}

@test "a line longer than --max-message-bytes exits 5 naming the line and the limit" {
	q "CREATE TABLE ll (id int PRIMARY KEY, v text)"
	run pgapply --max-message-bytes 2kB < <(
		printf 'PGCS\t1\t32\t1\tll_slot\t0/100\n'
		printf 'RELATION\tpublic\tll\t1\td\t2\tid\t23\t-1\tk\tv\t25\t-1\t-\n'
		printf 'BEGIN\t1\t0/200\t%s\n' "$T0"
		printf 'INSERT\tpublic\tll\t1\t%s\n' "$(head -c 3000 /dev/zero | tr '\0' x)"
		printf 'COMMIT\t1\t0/200\t0/210\t%s\n' "$T0")
	[ "$status" -eq 5 ]
	[[ $output == *"error: -: line 4 is longer than --max-message-bytes (2048 bytes)"* ]]
	[ "$(q "SELECT count(*) FROM ll")" = 0 ]
}

# ---------------------------------------------------------------- signals, heartbeat, roles

# apply_on_fifo [pg-apply options...]: pg-apply reading $BATS_TEST_TMPDIR/in,
# a FIFO this shell holds open on fd 7 (closing it ends the input), its
# stderr in $BATS_TEST_TMPDIR/err. Sets the caller's pid; teardown kills it.
apply_on_fifo() {
	local fifo=$BATS_TEST_TMPDIR/in
	mkfifo "$fifo"
	pg-apply -d "$tgt_URL" "$@" <"$fifo" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	echo "$pid" >>"$BATS_TEST_TMPDIR/pids"
	exec 7>"$fifo"
}


@test "SIGTERM while waiting for input commits, writes the checkpoint, records the stop and exits 0" {
	q "CREATE TABLE sg (id int PRIMARY KEY)"
	local pid
	apply_on_fifo --checkpoint "$BATS_TEST_TMPDIR/cp" --max-batch-delay 1h
	pgcs /dev/fd/7 <<EOF
PGCS→1→33→1→sg_slot→0/100
RELATION→public→sg→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→sg→1
COMMIT→1→0/200→0/210→$T0
EOF
	# Idle input commits at once: the row is there while pg-apply still runs.
	wait_until 10 q_is "SELECT count(*) FROM sg" 1
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	exec 7>&-
	[ "$rc" -eq 0 ]
	[ "$(head -1 "$BATS_TEST_TMPDIR/cp")" = 0/210 ]
	[ "$(q "SELECT state, stopped_at IS NOT NULL, applied_lsn, transactions, changes, lag_bytes
		FROM pgsync.job_runtime WHERE job = 'sg_slot'")" = "STOPPED|t|0/210|1|1|0" ]
}

@test "SIGTERM inside an open transaction rolls it back and exits 0" {
	q "CREATE TABLE sgt (id int PRIMARY KEY)"
	local pid
	apply_on_fifo
	pgcs /dev/fd/7 <<EOF
PGCS→1→34→1→sgt_slot→0/100
RELATION→public→sgt→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→sgt→1
COMMIT→1→0/200→0/210→$T0
EOF
	wait_until 10 q_is "SELECT applied_lsn FROM pgsync.job WHERE job = 'sgt_slot'" 0/210
	pgcs /dev/fd/7 <<EOF
BEGIN→2→0/300→$T0
INSERT→public→sgt→2
EOF
	sleep 0.3
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	exec 7>&-
	[ "$rc" -eq 0 ]
	[ "$(q "SELECT string_agg(id::text, ',') FROM sgt")" = 1 ]
	[ "$(applied_lsn sgt_slot)" = 0/210 ]
}

@test "SIGTERM before the first commit of a new job writes no checkpoint file (never 0/0)" {
	q "CREATE TABLE sgn (id int PRIMARY KEY)"
	local pid
	apply_on_fifo --checkpoint "$BATS_TEST_TMPDIR/cp"
	pgcs /dev/fd/7 <<EOF
PGCS→1→35→1→sgn_slot→0/100
RELATION→public→sgn→1→d→1→id→23→-1→k
BEGIN→1→0/200→$T0
INSERT→public→sgn→1
EOF
	wait_until 10 q_is "SELECT count(*) FROM pgsync.job WHERE job = 'sgn_slot'" 1
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	exec 7>&-
	[ "$rc" -eq 0 ]
	[ ! -e "$BATS_TEST_TMPDIR/cp" ]
	[ "$(q "SELECT count(*) FROM sgn")" = 0 ]
}

@test "SIGTERM while a statement waits on a lock cancels it, rolls the batch back and exits 0" {
	q "CREATE TABLE lk (id int PRIMARY KEY, v int); INSERT INTO lk VALUES (1, 0)"
	local pid locker rc=0
	psql_at tgt -c "BEGIN; LOCK TABLE lk; SELECT pg_sleep(60); COMMIT" >/dev/null 2>&1 3>&- &
	locker=$!
	wait_until 10 q_is "SELECT count(*) FROM pg_locks WHERE relation = 'lk'::regclass AND mode = 'AccessExclusiveLock' AND granted" 1
	apply_on_fifo
	echo "$locker" >>"$BATS_TEST_TMPDIR/pids"
	pgcs /dev/fd/7 <<EOF
PGCS→1→43→1→lk_slot→0/100
RELATION→public→lk→1→d→2→id→23→-1→k→v→23→-1→-
BEGIN→1→0/200→$T0
UPDATE→public→lk→N→1→1
COMMIT→1→0/200→0/210→$T0
EOF
	wait_until 10 q_is "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-apply' AND wait_event_type = 'Lock'" 1
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	exec 7>&-
	q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()" >/dev/null
	wait "$locker" || true
	[ "$rc" -eq 0 ]
	grep -q "stopped by signal while the target was busy: the open batch is rolled back" "$BATS_TEST_TMPDIR/err"
	[ "$(q "SELECT v FROM lk")" = 0 ]
	[ -z "$(applied_lsn lk_slot)" ]
	[ "$(q "SELECT state FROM pgsync.job_runtime WHERE job = 'lk_slot'")" = STOPPED ]
}

@test "the heartbeat row is refreshed every interval while pg-apply waits for input" {
	local pid first
	apply_on_fifo --heartbeat-interval 1s
	pgcs /dev/fd/7 <<EOF
PGCS→1→35→1→hb_slot→0/100
POSITION→0/400→$T0
EOF
	wait_until 10 q_is "SELECT applied_lsn FROM pgsync.job_runtime WHERE job = 'hb_slot'" 0/400
	first=$(q "SELECT heartbeat_at FROM pgsync.job_runtime WHERE job = 'hb_slot'")
	wait_until 10 q_is "SELECT heartbeat_at > '$first' FROM pgsync.job_runtime WHERE job = 'hb_slot'" t
	# Without --connection-file nothing is known about the source connection.
	run q "SELECT pid, state, version, heartbeat_interval_s, rss_bytes > 0, stopped_at IS NULL, source_version IS NULL,
		connection_state IS NULL, reconnects FROM pgsync.job_runtime WHERE job = 'hb_slot'"
	[ "$output" = "$pid|STREAMING|0.1.0|1|t|t|t|t|0" ]
	exec 7>&-
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
}

@test "--connection-file: each heartbeat reports the producer's connection state and reconnects; an unreadable file is unknown" {
	local f=$BATS_TEST_TMPDIR/connection pid
	printf 'reconnecting\t3\n' >"$f"
	apply_on_fifo --heartbeat-interval 1s --connection-file "$f"
	pgcs /dev/fd/7 <<EOF
PGCS→1→36→1→cf_slot→0/100
POSITION→0/400→$T0
EOF
	local sql="SELECT coalesce(connection_state, 'NULL') || '/' || reconnects FROM pgsync.job_runtime WHERE job = 'cf_slot'"
	wait_until 10 q_is "$sql" reconnecting/3
	printf 'connected\t4\n' >"$f"
	wait_until 10 q_is "$sql" connected/4
	printf 'garbage\n' >"$f"
	wait_until 10 q_is "$sql" NULL/0
	printf 'disconnected\t4\n' >"$f"
	wait_until 10 q_is "$sql" disconnected/4
	rm "$f"
	wait_until 10 q_is "$sql" NULL/0
	exec 7>&-
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
}

@test "the heartbeat goes on, as SNAPSHOTTING, while a snapshot section waits for its next frame" {
	local pid first
	q "CREATE TABLE hbs (id int PRIMARY KEY)"
	apply_on_fifo --heartbeat-interval 1s
	pgcs /dev/fd/7 <<EOF
PGCS→1→36→1→hbs_slot→0/1A00000→producer=pg-snapshot-dump/0.1.0
SNAPSHOT→0/1A00000→00000003-00000002-1→1
COPY→public→hbs→1→id
ROW→1
ENDCOPY→1
EOF
	wait_until 10 q_is "SELECT state FROM pgsync.job_runtime WHERE job = 'hbs_slot'" SNAPSHOTTING
	first=$(q "SELECT heartbeat_at FROM pgsync.job_runtime WHERE job = 'hbs_slot'")
	wait_until 10 q_is "SELECT heartbeat_at > '$first' FROM pgsync.job_runtime WHERE job = 'hbs_slot'" t
	[ "$(q "SELECT pid, stopped_at IS NULL FROM pgsync.job_runtime WHERE job = 'hbs_slot'")" = "$pid|t" ]
	pgcs /dev/fd/7 <<EOF
TABLEDONE→public→hbs→1→2
SNAPSHOTDONE→0/1A00000
EOF
	exec 7>&-
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	[ "$(q "SELECT count(*) FROM hbs")" = 1 ]
	[ "$(q "SELECT applied_lsn FROM pgsync.job WHERE job = 'hbs_slot'")" = 0/1A00000 ]
}

@test "without permission for session_replication_role it still applies, and says triggers stay active" {
	q "CREATE ROLE pa_owner LOGIN"
	q "CREATE DATABASE pa_db OWNER pa_owner"
	local url="${tgt_URL/user=postgres/user=pa_owner}"
	url="${url/dbname=postgres/dbname=pa_db}"
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$url" -c "CREATE TABLE tg (id int PRIMARY KEY, v text);
		CREATE FUNCTION tg_mark() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN NEW.v := 'fired'; RETURN NEW; END\$\$;
		CREATE TRIGGER tg_mark BEFORE INSERT ON tg FOR EACH ROW EXECUTE FUNCTION tg_mark()"
	run --separate-stderr pg-apply -d "$url" < <(sed 's/→/\t/g' <<EOF
PGCS→1→36→1→role_slot→0/100
RELATION→public→tg→1→d→2→id→23→-1→k→v→25→-1→-
BEGIN→1→0/200→$T0
INSERT→public→tg→1→x
COMMIT→1→0/200→0/210→$T0
EOF
)
	[ "$status" -eq 0 ]
	[[ $stderr == *"pg-apply: no permission to set session_replication_role: triggers and foreign keys stay active on the target"* ]]
	[ "$(psql -X -qAt -d "$url" -c "SELECT v FROM tg")" = fired ]
	# A superuser session skips the trigger, as the built-in apply worker does.
	q "CREATE TABLE tg (id int PRIMARY KEY, v text);
		CREATE FUNCTION tg_mark() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN NEW.v := 'fired'; RETURN NEW; END\$\$;
		CREATE TRIGGER tg_mark BEFORE INSERT ON tg FOR EACH ROW EXECUTE FUNCTION tg_mark()"
	run --separate-stderr pgapply --job role_super <<EOF
PGCS→1→36→1→role_slot→0/100
RELATION→public→tg→1→d→2→id→23→-1→k→v→25→-1→-
BEGIN→1→0/200→$T0
INSERT→public→tg→1→x
COMMIT→1→0/200→0/210→$T0
EOF
	[ "$status" -eq 0 ]
	[[ $stderr != *"session_replication_role"* ]]
	[ "$(q "SELECT v FROM tg")" = x ]
}

@test "memory stays bounded for a source transaction far larger than the batch limit" {
	q "CREATE TABLE bigtx (id int PRIMARY KEY, v text)"
	local pid hwm
	apply_on_fifo --max-batch-bytes 1MB --copy-threshold 0
	# 300,000 rows (about 45 MB of stream) in one transaction, through
	# single-row statements; then the same volume through COPY.
	awk -v t0="$T0" 'BEGIN {
		print "PGCS\t1\t37\t1\tbig_slot\t0/100"
		print "RELATION\tpublic\tbigtx\t1\td\t2\tid\t23\t-1\tk\tv\t25\t-1\t-"
		print "BEGIN\t1\t0/200\t" t0
		for (i = 1; i <= 300000; i++) printf "INSERT\tpublic\tbigtx\t%d\t%0100d\n", i, i
		print "COMMIT\t1\t0/200\t0/210\t" t0
	}' >&7
	wait_until 60 q_is "SELECT applied_lsn FROM pgsync.job WHERE job = 'big_slot'" 0/210
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
	exec 7>&-
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	[ "$(q "SELECT count(*) FROM bigtx")" = 300000 ]
	echo "peak RSS ${hwm} kB" >&3
	sanitized pg-apply || [ "$hwm" -lt 32768 ]
}

# ---------------------------------------------------------------- malformed streams

# corpus FILE CODE MESSAGE: applying test/corpus/FILE exits CODE with
# MESSAGE, and leaves nothing behind (each file holds one valid transaction
# before the damage, which must not be applied either).
corpus() {
	local file=$1 code=$2 msg=$3 job
	job=corpus_${file%%.*}
	job=${job//-/_}
	q "CREATE TABLE IF NOT EXISTS c_users (id int PRIMARY KEY, name text, bio text)"
	cd "$PGSYNC_ROOT/test/corpus" || return 1
	run --separate-stderr pg-apply -d "$tgt_URL" --job "$job" --max-batch-delay 1h "$file"
	[ "$status" -eq "$code" ] || { echo "exit $status, expected $code: $stderr"; return 1; }
	[[ $stderr == *"pg-apply: error: $msg"* ]] || { echo "stderr: $stderr"; return 1; }
	[ "$(q "SELECT count(*) FROM c_users")" = 0 ]
	[ -z "$(applied_lsn "$job")" ]
}

@test "corpus: an unknown record exits 5 naming it and its line" {
	corpus unknown-record.pgcs 5 'unknown-record.pgcs:7: unknown record "FROB"'
}
@test "corpus: too few values exits 5" {
	corpus wrong-field-count.pgcs 5 'wrong-field-count.pgcs:7: INSERT has 5 fields, expected 6'
}
@test "corpus: too many values exits 5" {
	corpus too-many-values.pgcs 5 'too-many-values.pgcs:7: INSERT has 7 fields, expected 6'
}
@test "corpus: a trailing lone backslash exits 5" {
	corpus bad-escape.pgcs 5 'bad-escape.pgcs:7: bad escape sequence in INSERT value 2'
}
@test "corpus: \\N inside a longer value exits 5" {
	corpus null-token-inside-value.pgcs 5 'null-token-inside-value.pgcs:7: bad escape sequence in INSERT value 2'
}
@test "corpus: a raw carriage return in a value exits 5" {
	corpus raw-carriage-return.pgcs 5 'raw-carriage-return.pgcs:7: bad escape sequence in INSERT value 2'
}
@test "corpus: \\U in an INSERT exits 5" {
	corpus unchanged-in-insert.pgcs 5 'unchanged-in-insert.pgcs:7: unchanged-value token \U in INSERT value 2'
}
@test "corpus: \\U in the key of an UPDATE N exits 5" {
	corpus unchanged-in-key.pgcs 5 'unchanged-in-key.pgcs:7: unchanged-value token \U in key column 1 of UPDATE'
}
@test "corpus: an unknown UPDATE kind exits 5" {
	corpus bad-update-kind.pgcs 5 'bad-update-kind.pgcs:7: malformed old-row kind in UPDATE'
}
@test "corpus: a change before its RELATION exits 5" {
	corpus change-before-relation.pgcs 5 'change-before-relation.pgcs:7: INSERT for public.c_other before its RELATION'
}
@test "corpus: a change outside a transaction exits 5" {
	corpus change-outside-transaction.pgcs 5 'change-outside-transaction.pgcs:3: INSERT outside a transaction'
}
@test "corpus: BEGIN inside a transaction exits 5" {
	corpus nested-begin.pgcs 5 'nested-begin.pgcs:7: BEGIN inside transaction 12'
}
@test "corpus: COMMIT of another transaction exits 5" {
	corpus commit-of-other-xid.pgcs 5 'commit-of-other-xid.pgcs:7: COMMIT of transaction 13 inside transaction 12'
}
@test "corpus: an end LSN not after the commit LSN exits 5" {
	corpus commit-end-before-start.pgcs 5 'commit-end-before-start.pgcs:7: end LSN of transaction 12 is not after its commit LSN'
}
@test "corpus: commit LSNs going backwards exit 5" {
	corpus commit-lsn-backwards.pgcs 5 'commit-lsn-backwards.pgcs:6: commit LSN 0/1A00800 of transaction 10 is not after the previous one (0/1A01000)'
}
@test "corpus: a BEGIN below an earlier POSITION of its stream exits 5" {
	corpus begin-below-position.pgcs 5 'begin-below-position.pgcs:7: BEGIN of transaction 12 at 0/1A02000 is below position 0/1A05000, which the stream'"'"'s POSITION already reached'
}
@test "corpus: a POSITION below the previous COMMIT end exits 5" {
	corpus position-backwards.pgcs 5 'position-backwards.pgcs:6: POSITION 0/1A00800 is below position 0/1A01030, which the stream'"'"'s COMMIT end already reached'
}
@test "corpus: a malformed LSN exits 5" {
	corpus bad-lsn.pgcs 5 'bad-lsn.pgcs:3: malformed LSN in BEGIN'
}
@test "corpus: a malformed time exits 5" {
	corpus bad-time.pgcs 5 'bad-time.pgcs:8: malformed time in COMMIT'
}
@test "corpus: POSITION inside a transaction exits 5" {
	corpus position-in-transaction.pgcs 5 'position-in-transaction.pgcs:7: POSITION inside transaction 12'
}
@test "corpus: a snapshot frame record outside a snapshot section exits 5" {
	corpus snapshot-frame-outside-section.pgcs 5 'snapshot-frame-outside-section.pgcs:7: ROW outside a snapshot section'
}
@test "corpus: an empty line exits 5" {
	corpus empty-line.pgcs 5 'empty-line.pgcs:7: malformed record name'
}
@test "corpus: a lower-case record name exits 5" {
	corpus lowercase-record.pgcs 5 'lowercase-record.pgcs:7: malformed record name'
}
@test "corpus: binary garbage exits 5" {
	corpus binary-garbage.pgcs 5 'binary-garbage.pgcs:4: malformed record name'
}
@test "corpus: unknown TRUNCATE options exit 5" {
	corpus bad-truncate-options.pgcs 5 'bad-truncate-options.pgcs:7: malformed options in TRUNCATE'
}
@test "corpus: non-hex MESSAGE content exits 5" {
	corpus bad-message-content.pgcs 5 'bad-message-content.pgcs:7: malformed content in MESSAGE'
}
@test "corpus: a stream without a header exits 5" {
	corpus no-header.pgcs 5 'no-header.pgcs:1: stream does not start with a PGCS header'
}
@test "corpus: another format version exits 5" {
	corpus unknown-version.pgcs 5 'unknown-version.pgcs:1: unsupported stream format version "2"'
}
@test "corpus: an unknown critical (!) header feature exits 5" {
	corpus unknown-critical-feature.pgcs 5 'unknown-critical-feature.pgcs:1: unsupported stream feature "!encrypted"'
}
@test "corpus: a malformed system identifier exits 5" {
	corpus bad-sysid.pgcs 5 'bad-sysid.pgcs:1: malformed system identifier in PGCS'
}
@test "corpus: a RELATION with missing column groups exits 5" {
	corpus relation-short.pgcs 5 'relation-short.pgcs:2: RELATION has 10 fields, expected 18'
}
@test "corpus: EOF inside a transaction exits 1" {
	corpus truncated-in-transaction.pgcs 1 'truncated-in-transaction.pgcs: stream truncated in transaction 12 at line 8'
}
@test "corpus: EOF inside a line exits 1" {
	corpus truncated-line.pgcs 1 'truncated-line.pgcs: stream truncated in transaction 12 at line 7'
}
@test "corpus: a zstd stream cut inside a frame exits 1" {
	corpus truncated-zstd.pgcs.zst 1 'truncated-zstd.pgcs.zst: stream truncated in transaction 12 at line 2101'
}
@test "corpus: corrupt zstd data exits 1" {
	corpus corrupt-zstd.pgcs.zst 1 'cannot decompress corrupt-zstd.pgcs.zst'
}
