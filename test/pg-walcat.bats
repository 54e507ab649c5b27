#!/usr/bin/env bats
# pg-walcat: the command line, and what the stream says about each kind of
# change (types, TOAST, replica identities, truncate, messages, streamed
# transactions) against a real PostgreSQL source. Operational behaviour
# (--endpos, acknowledgements, reconnects, limits) is in pg-walcat-ops.bats.

load lib/cluster
load lib/slot

setup_file() {
	# A tiny decoding budget: any transaction over 64kB is streamed, so both
	# the direct and the spooled paths run in this file.
	cluster_start src --set logical_decoding_work_mem=64kB
	psql_at src -c "CREATE PUBLICATION pub FOR ALL TABLES"
}

teardown_file() {
	cluster_stop_all
}

# walcat_now SLOT [OPTION...]: everything the slot has, into $out; stderr in $err.
walcat_now() {
	local slot=$1
	shift
	out=$BATS_TEST_TMPDIR/out.pgcs err=$BATS_TEST_TMPDIR/err
	pg-walcat -d "$src_URL" --slot "$slot" --publication pub --endpos now "$@" >"$out" 2>"$err"
}

# rows FILE TABLE: the values of every INSERT into public.TABLE, as COPY text.
rows() {
	awk -F'\t' -v t="$2" '$1 == "INSERT" && $2 == "public" && $3 == t' "$1" | cut -f4-
}

# records FILE NAME...: the lines of the given record types.
records() {
	local file=$1 re
	shift
	re=$(IFS='|'; echo "$*")
	grep -E "^($re)"$'\t' "$file" || true
}

# copy_out QUERY: COPY text from the source with the value settings the
# stream uses (ISO dates, postgres intervals, exact floats, hex bytea, UTC).
copy_out() {
	psql_at src -c "SET datestyle = ISO" -c "SET intervalstyle = postgres" \
		-c "SET extra_float_digits = 3" -c "SET bytea_output = hex" -c "SET timezone = UTC" \
		-c "COPY ($1) TO STDOUT"
}

@test "--help prints the usage on stdout and exits 0" {
	run pg-walcat --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: pg-walcat -d SOURCE --slot NAME --publication NAME[,NAME...]"* ]]
	[[ $output == *"--ack-file=FILE"* ]]
	[[ $output == *"--endpos=LSN|now"* ]]
}

@test "--version prints the program and version" {
	run pg-walcat --version
	[ "$status" -eq 0 ]
	[ "$output" = "pg-walcat (pgsync) 0.1.0" ]
}

@test "an unknown option is a usage error (exit 2)" {
	run pg-walcat --slot s --publication p --frobnicate
	[ "$status" -eq 2 ]
	[[ ${lines[0]} == "pg-walcat: error: unknown option --frobnicate" ]]
	[[ ${lines[1]} == "usage: pg-walcat "* ]]
}

@test "missing --slot or --publication is a usage error (exit 2)" {
	run pg-walcat -d "$src_URL" --publication pub
	[ "$status" -eq 2 ]
	[[ $output == *"pg-walcat: error: --slot is required"* ]]
	run pg-walcat -d "$src_URL" --slot s
	[ "$status" -eq 2 ]
	[[ $output == *"pg-walcat: error: --publication is required"* ]]
}

@test "malformed numbers and positions are usage errors naming the value (exit 2)" {
	run pg-walcat --slot s --publication p --endpos 0/XYZ
	[ "$status" -eq 2 ]
	[[ $output == *'invalid --endpos "0/XYZ"'* ]]
	run pg-walcat --slot s --publication p --start 12
	[ "$status" -eq 2 ]
	[[ $output == *'invalid --start "12"'* ]]
	run pg-walcat --slot s --publication p --status-interval 10x
	[ "$status" -eq 2 ]
	[[ $output == *'invalid --status-interval "10x"'* ]]
	run pg-walcat --slot s --publication p --max-message-bytes 12QB
	[ "$status" -eq 2 ]
	[[ $output == *'invalid --max-message-bytes "12QB"'* ]]
	run pg-walcat --slot s --publication p --zstd=99
	[ "$status" -eq 2 ]
	[[ $output == *'invalid --zstd level "99"'* ]]
	run pg-walcat --slot 'Bad-Name' --publication p
	[ "$status" -eq 2 ]
	[[ $output == *'invalid slot name "Bad-Name"'* ]]
	run pg-walcat --slot s --publication p --start 0/20 --endpos 0/10
	[ "$status" -eq 2 ]
	[[ $output == *"--start is after --endpos"* ]]
}

@test "refuses to write compressed output to a terminal (exit 2)" {
	run script -qec "pg-walcat -d '$src_URL' --slot s --publication pub -z" /dev/null
	[ "$status" -eq 2 ]
	[[ $output == *"refusing to write compressed output to a terminal"* ]]
}

@test "smoke: inserts, update, delete come out as the worked example's records" {
	new_slot smoke
	psql_at src <<'SQL'
CREATE TABLE users (id int PRIMARY KEY, name text, bio text);
INSERT INTO users VALUES (1, 'Ada', NULL), (2, E'tab\there', E'line\nbreak');
UPDATE users SET name = 'Ada L.' WHERE id = 1;
DELETE FROM users WHERE id = 2;
SQL
	walcat_now smoke
	local relid end
	relid=$(psql_at src -c "SELECT 'users'::regclass::oid")
	end=$(tail -n 1 "$out" | cut -f2)
	run cut -f1 "$out"
	[ "$(echo "$output" | tr '\n' ' ')" = "PGCS BEGIN RELATION INSERT INSERT COMMIT BEGIN UPDATE COMMIT BEGIN DELETE COMMIT END " ]
	[ "$(records "$out" RELATION)" = "$(printf 'RELATION\tpublic\tusers\t%s\td\t3\tid\t23\t-1\tk\tname\t25\t-1\t-\tbio\t25\t-1\t-' "$relid")" ]
	[ "$(records "$out" INSERT)" = "$(printf 'INSERT\tpublic\tusers\t1\tAda\t\\N\nINSERT\tpublic\tusers\t2\ttab\\there\tline\\nbreak')" ]
	[ "$(records "$out" UPDATE)" = "$(printf 'UPDATE\tpublic\tusers\tN\t1\tAda L.\t\\N')" ]
	[ "$(records "$out" DELETE)" = "$(printf 'DELETE\tpublic\tusers\tK\t2\t\\N\t\\N')" ]
	# The header names the source, the slot and where the stream starts.
	local sysid start
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	start=$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'smoke'")
	[ "$(head -n 1 "$out")" = "$(printf 'PGCS\t1\t%s\t1\tsmoke\t%s\tproducer=pg-walcat/0.1.0\tserver=%s' "$sysid" "$start" "$(psql_at src -c 'SHOW server_version_num')")" ]
	# END carries the --endpos position, which is past the last commit.
	[[ $(tail -n 1 "$out") =~ ^END$'\t'[0-9A-F]+/[0-9A-F]+$ ]]
	# Commit LSNs grow; each COMMIT repeats its BEGIN's xid and commit LSN.
	run awk -F'\t' '$1=="BEGIN"{x=$2; c=$3} $1=="COMMIT"{ if ($2!=x || $3!=c) bad=1; n++ } END { print n, bad+0 }' "$out"
	[ "$output" = "3 0" ]
	# Logs go to stderr, as JSON lines with --json; stdout is the same stream.
	pg-walcat -d "$src_URL" --slot smoke --publication pub --endpos "$end" --json \
		>"$BATS_TEST_TMPDIR/again" 2>"$BATS_TEST_TMPDIR/json"
	cmp <(grep -v '^POSITION' "$out") <(grep -v '^POSITION' "$BATS_TEST_TMPDIR/again")
	run grep -c '^{"time":"[^"]*","program":"pg-walcat","pid":[0-9]*,"level":"info","msg":"streaming from slot' "$BATS_TEST_TMPDIR/json"
	[ "$output" = 1 ]
	psql_at src -c "DROP TABLE users"
}

@test "every built-in scalar type, arrays, ranges, multiranges, enums, domains and composites round-trip byte for byte" {
	new_slot types
	psql_at src <<'SQL'
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TYPE pair AS (a int, b text);
CREATE TABLE types (
	id int PRIMARY KEY, b bool, i2 int2, i4 int4, i8 int8, n numeric, n2 numeric(12,4),
	f4 float4, f8 float8, m money, c char(5), vc varchar(10), t text, nm name, ch "char",
	by bytea, d date, tm time, ttz timetz, ts timestamp, tstz timestamptz, iv interval,
	u uuid, j json, jb jsonb, jp jsonpath, x xml, ip inet, cd cidr, mac macaddr, mac8 macaddr8,
	bt bit(4), vb varbit, tsv tsvector, tsq tsquery, pt point, ln line, ls lseg, bx box,
	pa path, pg polygon, ci circle, o oid, rc regclass, pl pg_lsn, x8 xid8, snap pg_snapshot,
	ia int[], ta text[], na numeric[][], r4 int4range, nr numrange, tr tstzrange, dr daterange,
	mr int4multirange, dmr datemultirange, e mood, ea mood[], dm posint, cp pair, cpa pair[]
);
INSERT INTO types VALUES (1, true, -32768, 2147483647, -9223372036854775808, 'NaN', 12345678.1234,
	'NaN', 'Infinity', '-1234.56', 'ab', 'hello', E'tab\there\nnew line\rcr back\\slash \\N end', 'nm', 'c',
	(SELECT decode(string_agg(lpad(to_hex(g), 2, '0'), ''), 'hex') FROM generate_series(0, 255) g),
	'infinity', '24:00:00', '12:34:56.789+05:30', '-infinity', 'infinity', '1 year 2 mons -3 days 04:05:06.789',
	'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, "tab\tq\"", null]}', '{"k": [1, "x"], "a": {"b": null}}',
	'$.a[*] ? (@ > 1)', '<a x="1">t&amp;</a>', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03',
	'08:00:2b:01:02:03:04:05', B'1010', B'10101', 'a fat cat:2A sat', 'fat & (rat | cat)', '(1.5,-2)',
	'{1,2,3}', '[(0,0),(1,1)]', '((0,0),(2,2))', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(1,0))', '<(0,0),5>',
	4294967295, 'pg_class', '16/B374D848', '18446744073709551615', '10:20:10,14,15',
	'{1,NULL,3}', ARRAY[E'a\tb', 'NULL', NULL, '', 'q"uote', E'back\\slash', '{x}'], '{{1.5,NaN},{-Infinity,0}}',
	'[1,5)', '(,3.5]', '[2020-01-01 00:00+00,infinity)', 'empty', '{[1,3), [5,7)}', '{}',
	'happy', '{sad,ok}', 42, ROW(1, E'x\ty'), ARRAY[ROW(1, 'a')::pair, ROW(NULL, NULL)::pair]);
INSERT INTO types VALUES (2, false, 0, 0, 0, '-Infinity', -0.0001, '-Infinity', 'NaN', 0, '', '', '', '', ' ',
	'\x', '-infinity', '00:00', '00:00+00', 'infinity', '-infinity', '0', '00000000-0000-0000-0000-000000000000',
	'null', '[]', '$', '', '::1', '::/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00', B'0000', B'',
	'', '!x', '(0,0)', '{0,1,0}', '[(0,0),(0,0)]', '((0,0),(0,0))', '((0,0))', '((0,0))', '<(0,0),0>',
	0, '-', '0/0', '0', '1:1:', '{}', '{}', '{}', 'empty', 'empty', 'empty', 'empty', '{}', '{}',
	'sad', '{}', 1, ROW(NULL, ''), '{}');
INSERT INTO types (id, t, n) VALUES (3, NULL, 'Infinity'), (4, '', '-0'), (5, '\N', '1e-20'), (6, E'\\N', '123456789012345678901234567890.123456789');
SQL
	walcat_now types
	# Every value the stream carries equals COPY's text of the row read back.
	rows "$out" types >"$BATS_TEST_TMPDIR/stream.copy"
	copy_out "SELECT * FROM types ORDER BY id" >"$BATS_TEST_TMPDIR/source.copy"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/source.copy")" -eq 6 ]
	cmp "$BATS_TEST_TMPDIR/stream.copy" "$BATS_TEST_TMPDIR/source.copy"
	# NULL, the empty string and the texts \N stay distinct.
	[ "$(rows "$out" types | sed -n 3,6p | cut -f13)" = "$(printf '\\N\n\n\\\\N\n\\\\N')" ]
	# The stream loads back with COPY into a copy of the table.
	psql_at src -c "CREATE TABLE types_back (LIKE types)"
	psql_at src -c "COPY types_back FROM STDIN" <"$BATS_TEST_TMPDIR/stream.copy"
	[ "$(table_checksum "$src_URL" types_back)" = "$(table_checksum "$src_URL" types)" ]
	# Non-built-in types are named by TYPE records before the RELATION.
	local mood
	mood=$(psql_at src -c "SELECT 'mood'::regtype::oid")
	run cut -f1 "$out"
	[[ $(echo "$output" | tr '\n' ' ') == "PGCS BEGIN TYPE "*"RELATION INSERT COMMIT "* ]]
	grep -qxF "$(printf 'TYPE\t%s\tpublic\tmood' "$mood")" "$out"
	# RELATION gives each column its source type OID and typmod.
	run awk -F'\t' '$1=="RELATION" { for (i = 7; i <= NF; i += 4) if ($i=="n2" || $i=="c" || $i=="vc" || $i=="bt") printf "%s:%s:%s ", $i, $(i+1), $(i+2) }' "$out"
	[ "$output" = "n2:1700:786440 c:1042:9 vc:1043:14 bt:1560:4 " ]
	psql_at src -c "DROP TABLE types, types_back"
}

@test "an update that leaves a TOASTed value unchanged writes \\U for it, the insert carries it whole" {
	new_slot toast
	psql_at src <<'SQL'
CREATE TABLE toasty (id int PRIMARY KEY, note text, big text);
ALTER TABLE toasty ALTER big SET STORAGE EXTERNAL;
-- 20 kB of md5-chained text: incompressible enough and stored out of line.
INSERT INTO toasty SELECT 1, 'n', string_agg(md5(g::text), '') FROM generate_series(1, 640) g;
UPDATE toasty SET note = 'changed' WHERE id = 1;
UPDATE toasty SET big = big || 'x' WHERE id = 1;
SQL
	walcat_now toast
	[ "$(records "$out" UPDATE | head -n 1)" = "$(printf 'UPDATE\tpublic\ttoasty\tN\t1\tchanged\t\\U')" ]
	# A changed TOASTed value is sent whole.
	[ "$(records "$out" UPDATE | sed -n 2p | cut -f7 | wc -c)" -eq 20482 ]
	[ "$(rows "$out" toasty | cut -f3)" = "$(psql_at src -c "SELECT string_agg(md5(g::text), '') FROM generate_series(1, 640) g")" ]
	psql_at src -c "DROP TABLE toasty"
}

@test "replica identity default, full, using index and nothing: RELATION flags, K, O and N records" {
	new_slot ident
	psql_at src <<'SQL'
CREATE TABLE ri_def (id int PRIMARY KEY, v text);
CREATE TABLE ri_full (id int, v text);
ALTER TABLE ri_full REPLICA IDENTITY FULL;
CREATE TABLE ri_idx (a int NOT NULL, b int NOT NULL, v text);
CREATE UNIQUE INDEX ri_idx_ab ON ri_idx (b, a);
ALTER TABLE ri_idx REPLICA IDENTITY USING INDEX ri_idx_ab;
CREATE TABLE ri_none (id int, v text);
ALTER TABLE ri_none REPLICA IDENTITY NOTHING;
INSERT INTO ri_def VALUES (1, 'a');
UPDATE ri_def SET v = 'b' WHERE id = 1;
UPDATE ri_def SET id = 2 WHERE id = 1;
DELETE FROM ri_def WHERE id = 2;
INSERT INTO ri_full VALUES (1, 'a');
UPDATE ri_full SET v = NULL;
DELETE FROM ri_full;
INSERT INTO ri_idx VALUES (1, 2, 'a');
UPDATE ri_idx SET v = 'b';
UPDATE ri_idx SET a = 5;
DELETE FROM ri_idx;
INSERT INTO ri_none VALUES (1, 'only inserts publish without an identity');
SQL
	walcat_now ident
	run awk -F'\t' '$1=="RELATION" { printf "%s %s", $3, $5; for (i = 7; i <= NF; i += 4) printf " %s=%s", $i, $(i+3); print "" }' "$out"
	[ "${lines[0]}" = "ri_def d id=k v=-" ]
	[ "${lines[1]}" = "ri_full f id=k v=k" ]
	[ "${lines[2]}" = "ri_idx i a=k b=k v=-" ]
	[ "${lines[3]}" = "ri_none n id=- v=-" ]
	run records "$out" UPDATE DELETE
	[ "${lines[0]}" = "$(printf 'UPDATE\tpublic\tri_def\tN\t1\tb')" ]
	[ "${lines[1]}" = "$(printf 'UPDATE\tpublic\tri_def\tK\t1\t\\N\t2\tb')" ]
	[ "${lines[2]}" = "$(printf 'DELETE\tpublic\tri_def\tK\t2\t\\N')" ]
	[ "${lines[3]}" = "$(printf 'UPDATE\tpublic\tri_full\tO\t1\ta\t1\t\\N')" ]
	[ "${lines[4]}" = "$(printf 'DELETE\tpublic\tri_full\tO\t1\t\\N')" ]
	[ "${lines[5]}" = "$(printf 'UPDATE\tpublic\tri_idx\tN\t1\t2\tb')" ]
	[ "${lines[6]}" = "$(printf 'UPDATE\tpublic\tri_idx\tK\t1\t2\t\\N\t5\t2\tb')" ]
	[ "${lines[7]}" = "$(printf 'DELETE\tpublic\tri_idx\tK\t5\t2\t\\N')" ]
	[ "${#lines[@]}" -eq 8 ]
	psql_at src -c "DROP TABLE ri_def, ri_full, ri_idx, ri_none"
}

@test "truncate: plain, several tables with CASCADE, RESTART IDENTITY, both" {
	new_slot trunc
	psql_at src <<'SQL'
CREATE TABLE tr_a (id serial PRIMARY KEY);
CREATE TABLE tr_b (id int PRIMARY KEY, a int REFERENCES tr_a);
CREATE TABLE tr_c (id int PRIMARY KEY);
INSERT INTO tr_a DEFAULT VALUES;
TRUNCATE tr_c;
TRUNCATE tr_a CASCADE;
TRUNCATE tr_c RESTART IDENTITY;
TRUNCATE tr_a, tr_c RESTART IDENTITY CASCADE;
SQL
	walcat_now trunc
	run records "$out" TRUNCATE
	[ "${lines[0]}" = "$(printf 'TRUNCATE\t-\tpublic\ttr_c')" ]
	[ "${lines[1]}" = "$(printf 'TRUNCATE\tcascade\tpublic\ttr_a\tpublic\ttr_b')" ]
	[ "${lines[2]}" = "$(printf 'TRUNCATE\trestart_identity\tpublic\ttr_c')" ]
	[ "${lines[3]}" = "$(printf 'TRUNCATE\tcascade,restart_identity\tpublic\ttr_a\tpublic\ttr_c\tpublic\ttr_b')" ]
	# Every truncated table was described before its first truncate.
	run awk -F'\t' '$1=="RELATION" { seen[$3]=1 } $1=="TRUNCATE" { for (i = 4; i <= NF; i += 2) if (!seen[$i]) print "undescribed", $i }' "$out"
	[ "$output" = "" ]
	psql_at src -c "DROP TABLE tr_b, tr_a, tr_c"
}

@test "a multi-table transaction is one BEGIN/COMMIT with its changes in order; a changed table is described again" {
	new_slot multi
	psql_at src <<'SQL'
CREATE TABLE mt_a (id int PRIMARY KEY, v text);
CREATE TABLE mt_b (id int PRIMARY KEY);
BEGIN;
INSERT INTO mt_a VALUES (1, 'x');
INSERT INTO mt_b VALUES (10);
UPDATE mt_a SET v = 'y';
DELETE FROM mt_b;
COMMIT;
ALTER TABLE mt_a ADD COLUMN w int DEFAULT 7;
INSERT INTO mt_a VALUES (2, 'z');
INSERT INTO mt_b VALUES (11);
SQL
	walcat_now multi
	run cut -f1-3 "$out"
	[ "${lines[1]}" = "BEGIN" ] || [[ ${lines[1]} == BEGIN* ]]
	local shape
	shape=$(awk -F'\t' '$1 != "PGCS" && $1 != "END" { print ($1 ~ /BEGIN|COMMIT/) ? $1 : $1 " " $3 }' "$out" | tr '\n' ',')
	[ "$shape" = "BEGIN,RELATION mt_a,INSERT mt_a,RELATION mt_b,INSERT mt_b,UPDATE mt_a,DELETE mt_b,COMMIT,BEGIN,RELATION mt_a,INSERT mt_a,COMMIT,BEGIN,INSERT mt_b,COMMIT," ]
	[ "$(records "$out" RELATION | tail -n 1 | cut -f6)" = 3 ]
	[ "$(records "$out" INSERT | tail -n 2 | head -n 1)" = "$(printf 'INSERT\tpublic\tmt_a\t2\tz\t7')" ]
	psql_at src -c "DROP TABLE mt_a, mt_b"
}

@test "logical messages: transactional inside their transaction, others outside, pgsync ones never" {
	new_slot msgs
	psql_at src <<'SQL'
CREATE TABLE mm (id int PRIMARY KEY);
BEGIN;
INSERT INTO mm VALUES (1);
SELECT pg_logical_emit_message(true, E'app\tx', E'\\x00ff0a'::bytea);
SELECT pg_logical_emit_message(true, 'pgsync.test', 'hidden');
COMMIT;
SELECT pg_logical_emit_message(false, 'app', '');
SELECT pg_logical_emit_message(false, 'pgsync.heartbeat', '');
INSERT INTO mm VALUES (2);
SQL
	walcat_now msgs
	run records "$out" MESSAGE
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} =~ ^MESSAGE$'\t't$'\t'[0-9A-F]+/[0-9A-F]+$'\t''app\tx'$'\t'00ff0a$ ]]
	[[ ${lines[1]} =~ ^MESSAGE$'\t'n$'\t'[0-9A-F]+/[0-9A-F]+$'\t'app$'\t'$ ]]
	run cut -f1 "$out"
	[ "$(echo "$output" | tr '\n' ' ')" = "PGCS BEGIN RELATION INSERT MESSAGE COMMIT MESSAGE POSITION BEGIN INSERT COMMIT END " ]
	# The pgsync message's position is where it was written.
	[[ $(records "$out" POSITION) =~ ^POSITION$'\t'[0-9A-F]+/[0-9A-F]+$'\t'[0-9-]+\ [0-9:.]+\+00$ ]]
	psql_at src -c "DROP TABLE mm"
}

@test "streamed transactions: spooled until commit, commit-ordered, aborted subtransactions and transactions leave no trace" {
	new_slot streamed
	local spool=$BATS_TEST_TMPDIR/spool
	mkdir -p "$spool"
	psql_at src -c "CREATE TABLE st (id int PRIMARY KEY, v text)"
	# Two large transactions overlap; the later one commits first. Each is
	# far over the 64kB budget, so the server streams both in pieces.
	psql_at src -c "BEGIN" -c "INSERT INTO st SELECT g, 'first' FROM generate_series(1, 5000) g" \
		-c "SELECT pg_sleep(1.5)" -c "INSERT INTO st VALUES (100000, 'first-last')" -c "COMMIT" &
	local bg=$!
	sleep 0.5
	psql_at src <<'SQL'
BEGIN;
INSERT INTO st SELECT g, 'second' FROM generate_series(10001, 15000) g;
SAVEPOINT a;
INSERT INTO st SELECT g, 'rolled back' FROM generate_series(20001, 25000) g;
SAVEPOINT b;
INSERT INTO st SELECT g, 'nested, rolled back' FROM generate_series(30001, 35000) g;
ROLLBACK TO a;
SAVEPOINT c;
INSERT INTO st SELECT g, 'released' FROM generate_series(40001, 40010) g;
RELEASE c;
COMMIT;
BEGIN;
INSERT INTO st SELECT g, 'aborted' FROM generate_series(50001, 60000) g;
ROLLBACK;
SQL
	wait "$bg"
	walcat_now streamed --spool-dir "$spool"
	[ "$(psql_at src -c "SELECT stream_txns >= 2 FROM pg_stat_replication_slots WHERE slot_name = 'streamed'")" = t ]
	# Exactly the committed rows, the second transaction before the first.
	[ "$(rows "$out" st | cut -f2 | uniq -c | awk '{ $1 = $1; print }' | tr '\n' ',')" = "5000 second,10 released,5000 first,1 first-last," ]
	# Transactions do not interleave and commit LSNs grow.
	run awk -F'\t' '$1=="BEGIN" { if (open) bad=1; open=1; if (last != "" && $3 <= last) bad=1 } $1=="COMMIT" { open=0; last=$3 } END { print bad+0 }' "$out"
	[ "$output" = 0 ]
	# The spool files were anonymous and are gone.
	[ -z "$(ls -A "$spool")" ]
	[[ $(cat "$err") == *"(2 streamed, 1 aborted)"* ]]
	psql_at src -c "DROP TABLE st"
}

# mask: replace what differs between runs (system identifier, server
# version, LSNs, times, xids, OIDs of user objects) by fixed words, and drop
# POSITION records, which depend on when the server sends keepalives.
mask() {
	awk -F'\t' -v OFS='\t' '
		$1 == "PGCS" { $3 = "SYSID"; sub(/^server=.*/, "server=VERSION", $NF) }
		$1 == "BEGIN" || $1 == "COMMIT" { $2 = "XID" }
		$1 == "RELATION" { $4 = "OID"; for (i = 8; i <= NF; i += 4) if ($i + 0 >= 16384) $i = "OID" }
		$1 == "TYPE" { $2 = "OID" }
		{ for (i = 2; i <= NF; i++) {
			if ($i ~ /^[0-9A-F]+\/[0-9A-F]+$/) $i = "LSN"
			else if ($i ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9:.]+\+00$/) $i = "TIME"
		  }
		  if ($1 != "POSITION") print }' "$@"
}

@test "golden stream: a fixed DDL and DML script on a fresh database gives formats/golden/walcat-basic.pgcs" {
	local golden=$PGSYNC_ROOT/formats/golden/walcat-basic.pgcs url="$src_URL dbname=golden"
	psql_at src -c "CREATE DATABASE golden"
	psql -X -qAt -d "$url" -c "SELECT pg_create_logical_replication_slot('golden', 'pgoutput')" >/dev/null
	psql -X -q -v ON_ERROR_STOP=1 -d "$url" -f "$PGSYNC_ROOT/formats/golden/walcat-basic.sql" >/dev/null
	pg-walcat -d "$url" --slot golden --publication golden --endpos now >"$BATS_TEST_TMPDIR/golden.pgcs"
	mask "$BATS_TEST_TMPDIR/golden.pgcs" >"$BATS_TEST_TMPDIR/masked.pgcs"
	if [[ ${PGSYNC_UPDATE_GOLDEN:-} == 1 ]]; then
		cp "$BATS_TEST_TMPDIR/masked.pgcs" "$golden"
	fi
	diff -u "$golden" "$BATS_TEST_TMPDIR/masked.pgcs"
	psql -X -qAt -d "$url" -c "SELECT pg_drop_replication_slot('golden')" >/dev/null
	psql_at src -c "DROP DATABASE golden"
}
