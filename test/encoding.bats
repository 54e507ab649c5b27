#!/usr/bin/env bats
# Values arrive byte for byte in targets of any encoding, from sources of
# any encoding, on both paths (the snapshot: pg-snapshot-dump | pg-apply;
# the stream: pg-walcat | pg-apply; and pgsync bootstrap + run): the stream
# is UTF-8 and every session pgsync opens says so. Stored bytes are read
# back with convert_to(v, getdatabaseencoding()), which returns them as
# stored. A character the target's encoding cannot hold stops the apply with
# exit 5, naming table and SQLSTATE but never the value or its bytes, with
# nothing of its transaction applied.

load lib/cluster
load pgsync-helpers
bats_require_minimum_version 1.5.0

# Hex of a text with bytes 09 0a 0d 20-7e a0-ff: every LATIN1 character
# (ASCII, the tab, newline and carriage return COPY text escapes, and
# 0xA0-0xFF; 0x80-0x9F are control characters in LATIN1).
latin1_hex() {
	printf '%02x' 9 10 13 $(seq 32 126) $(seq 160 255)
}

# The same characters in UTF-8: U+00A0-U+00BF are c2 a0-bf, U+00C0-U+00FF
# are c3 80-bf.
utf8_hex() {
	local i
	printf '%02x' 9 10 13 $(seq 32 126)
	for i in $(seq 160 255); do
		if ((i < 192)); then printf 'c2%02x' "$i"; else printf 'c3%02x' $((i - 64)); fi
	done
}

# The source tables: latin (every LATIN1 character, and café), win (the
# WIN1252 characters that LATIN1 lacks), jp (Japanese); rows $1 and $1+1.
# chr() is the code point in a UTF-8 database and the byte in a LATIN1 one:
# the same characters in both.
source_rows() {
	local db=$1 base=$2
	psql -X -q -v ON_ERROR_STOP=1 -d "$db" -v base="$base" <<'SQL'
INSERT INTO latin VALUES (:base, 'caf' || chr(233)),
	(:base + 1, (SELECT string_agg(chr(i), '' ORDER BY o) FROM unnest(ARRAY[9, 10, 13])
		WITH ORDINALITY AS a(i, o)) || (SELECT string_agg(chr(i), '' ORDER BY i)
		FROM generate_series(32, 126) i) || (SELECT string_agg(chr(i), '' ORDER BY i)
		FROM generate_series(160, 255) i));
SQL
	if [[ $(psql -X -qAt -d "$db" -c "SELECT getdatabaseencoding()") == UTF8 ]]; then
		psql -X -q -v ON_ERROR_STOP=1 -d "$db" -v base="$base" <<'SQL'
INSERT INTO win VALUES (:base, 'x' || chr(8364) || chr(352) || chr(339) || chr(8482) || 'y');
INSERT INTO jp VALUES (:base, chr(26085) || chr(26412) || chr(35486) || ' ok');
SQL
	fi
}

# stored DB TABLE [COLUMN]: "id hex" per row, the bytes of COLUMN (v) as
# the target stores them.
stored() {
	psql -X -qAt -F ' ' -v ON_ERROR_STOP=1 -d "$(db_url "$1")" \
		-c "SELECT id, encode(convert_to(${3:-v}, pg_catalog.getdatabaseencoding()), 'hex') FROM $2 ORDER BY id"
}

db_url() {
	echo "${tgt_URL/dbname=postgres/dbname=$1}"
}

src_db() {
	echo "${src_URL/dbname=postgres/dbname=$1}"
}

# An identifier with é in any server encoding (a Unicode escape).
CAFE='U&"caf\00e9"'

TABLES_SQL="CREATE TABLE latin (id int PRIMARY KEY, v text);
	CREATE TABLE win (id int PRIMARY KEY, v text);
	CREATE TABLE jp (id int PRIMARY KEY, v text);
	CREATE TABLE bad (id int PRIMARY KEY, v text);
	CREATE TABLE badsnap (id int PRIMARY KEY, v text);"

# target_db NAME ENCODING: a target database with the tables.
target_db() {
	psql_at tgt -c "CREATE DATABASE $1 ENCODING '$2' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	psql -X -q -v ON_ERROR_STOP=1 -d "$(db_url "$1")" -c "$TABLES_SQL"
}

setup_file() {
	cluster_start src
	cluster_start tgt
	# A UTF-8 source (the cluster's default) and a LATIN1 one.
	psql_at src -c "$TABLES_SQL"
	psql_at src -c "CREATE PUBLICATION pub_latin FOR TABLE latin;
		CREATE PUBLICATION pub_win FOR TABLE latin, win;
		CREATE PUBLICATION pub_jp FOR TABLE jp;
		CREATE PUBLICATION pub_bad FOR TABLE bad;
		CREATE TABLE badrun (id int PRIMARY KEY, v text);
		CREATE PUBLICATION pub_badrun FOR TABLE badrun"
	psql_at src -c "CREATE DATABASE l1src ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	# A table named café too: names are converted as values are.
	psql -X -q -v ON_ERROR_STOP=1 -d "$(src_db l1src)" -c "$TABLES_SQL
		CREATE TABLE $CAFE (id int PRIMARY KEY, v text);
		CREATE PUBLICATION pub_latin FOR TABLE latin, $CAFE"
	for enc in LATIN1 WIN1252 SQL_ASCII EUC_JP UTF8; do
		target_db "snap_${enc,,}" "$enc"
		target_db "strm_${enc,,}" "$enc"
	done
	for db in l1snap_utf8:UTF8 l1strm_utf8:UTF8 l1strm_latin1:LATIN1; do
		target_db "${db%:*}" "${db#*:}"
		psql -X -q -d "$(db_url "${db%:*}")" -c "CREATE TABLE $CAFE (id int PRIMARY KEY, v text)"
	done
	target_db bad_latin1 LATIN1
	target_db badsnap_latin1 LATIN1
	target_db badrun_latin1 LATIN1
	psql -X -q -d "$(db_url badrun_latin1)" -c "CREATE TABLE badrun (id int PRIMARY KEY, v text)"

	# Snapshot rows 1-2, then a slot, then stream rows 11-12.
	source_rows "$src_URL" 1
	source_rows "$(src_db l1src)" 1
	psql -X -q -d "$(src_db l1src)" -c "INSERT INTO $CAFE VALUES (1, 'ok')"
	for pub in pub_latin pub_win pub_jp; do
		pg-snapshot-dump -d "$src_URL" --own-snapshot --publication "$pub" \
			>"$BATS_FILE_TMPDIR/snap.$pub" 2>>"$BATS_FILE_TMPDIR/dump.log"
	done
	pg-snapshot-dump -d "$(src_db l1src)" --own-snapshot --publication pub_latin \
		>"$BATS_FILE_TMPDIR/l1snap.pub_latin" 2>>"$BATS_FILE_TMPDIR/dump.log"
	pg-slot create -d "$src_URL" --slot enc_slot >/dev/null
	pg-slot create -d "$(src_db l1src)" --slot l1_slot >/dev/null
	source_rows "$src_URL" 11
	source_rows "$(src_db l1src)" 11
	psql -X -q -d "$(src_db l1src)" -c "INSERT INTO $CAFE VALUES (11, 'ok')"
	# Without --ack-file nothing is confirmed: each publication reads the
	# slot from the same place.
	for pub in pub_latin pub_win pub_jp; do
		pg-walcat -d "$src_URL" --slot enc_slot --publication "$pub" --endpos now \
			>"$BATS_FILE_TMPDIR/strm.$pub" 2>>"$BATS_FILE_TMPDIR/walcat.log"
	done
	pg-walcat -d "$(src_db l1src)" --slot l1_slot --publication pub_latin --endpos now \
		>"$BATS_FILE_TMPDIR/l1strm.pub_latin" 2>>"$BATS_FILE_TMPDIR/walcat.log"
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

# apply FILE DB: pg-apply FILE into target database DB.
apply() {
	pg-apply -d "$(db_url "$2")" --job enc "$BATS_FILE_TMPDIR/$1" 2>"$BATS_TEST_TMPDIR/apply.err" || {
		cat "$BATS_TEST_TMPDIR/apply.err" >&2
		return 1
	}
}

# expect DB TABLE[.COLUMN] LINES...: the stored rows are exactly LINES.
expect() {
	local db=$1 table=${2%%.*} col=${2#*.} got want
	[[ $2 == *.* ]] || col=v
	shift 2
	got=$(stored "$db" "$table" "$col")
	want=$(printf '%s\n' "$@")
	if [[ $got != "$want" ]]; then
		printf 'stored in %s.%s:\n%s\nexpected:\n%s\n' "$db" "$table" "$got" "$want" >&2
		return 1
	fi
}

@test "a LATIN1 target stores every LATIN1 character as its LATIN1 byte, from the snapshot and from the stream" {
	apply snap.pub_latin snap_latin1
	apply strm.pub_latin strm_latin1
	expect snap_latin1 latin "1 636166e9" "2 $(latin1_hex)"
	expect strm_latin1 latin "11 636166e9" "12 $(latin1_hex)"
}

@test "a WIN1252 target stores LATIN1 characters and the euro, S caron, oe and trade mark signs as WIN1252 bytes on both paths" {
	apply snap.pub_win snap_win1252
	apply strm.pub_win strm_win1252
	expect snap_win1252 latin "1 636166e9" "2 $(latin1_hex)"
	expect strm_win1252 latin "11 636166e9" "12 $(latin1_hex)"
	# x € Š œ ™ y
	expect snap_win1252 win "1 78808a9c9979"
	expect strm_win1252 win "11 78808a9c9979"
}

@test "a SQL_ASCII target stores the stream's UTF-8 bytes unchanged on both paths" {
	# SQL_ASCII converts nothing: what the client sends (UTF-8) is stored.
	apply snap.pub_latin snap_sql_ascii
	apply strm.pub_latin strm_sql_ascii
	expect snap_sql_ascii latin "1 636166c3a9" "2 $(utf8_hex)"
	expect strm_sql_ascii latin "11 636166c3a9" "12 $(utf8_hex)"
}

@test "an EUC_JP target stores Japanese text as EUC_JP bytes on both paths" {
	apply snap.pub_jp snap_euc_jp
	apply strm.pub_jp strm_euc_jp
	# 日 本 語 " ok"
	expect snap_euc_jp jp "1 c6fccbdcb8ec206f6b"
	expect strm_euc_jp jp "11 c6fccbdcb8ec206f6b"
}

@test "a LATIN1 source arrives as UTF-8 in a UTF-8 target and unchanged in a LATIN1 target on both paths" {
	apply l1snap.pub_latin l1snap_utf8
	apply l1strm.pub_latin l1strm_utf8
	apply l1strm.pub_latin l1strm_latin1
	expect l1snap_utf8 latin "1 636166c3a9" "2 $(utf8_hex)"
	expect l1strm_utf8 latin "11 636166c3a9" "12 $(utf8_hex)"
	expect l1strm_latin1 latin "11 636166e9" "12 $(latin1_hex)"
	# The table named café, found by name on both sides.
	for db in l1snap_utf8:1 l1strm_utf8:11 l1strm_latin1:11; do
		[ "$(psql -X -qAt -d "$(db_url "${db%:*}")" -c "SELECT string_agg(id::text, ',') FROM $CAFE")" = "${db#*:}" ]
	done
}

# no_bytes FILE: the message names neither the value nor its bytes (in any
# spelling: the character, its UTF-8 bytes as the server prints them, hex).
no_bytes() {
	! grep -qiE 'x€y|€|0xe2|e282ac|\\xe2' "$1"
}

# stops_unrepresentable DB JOB FILE PREFIX [TAIL]: pg-apply of FILE into DB
# exits 5 with PREFIX, both encodings and TAIL (SQLSTATE 22P05), and
# without the character or its bytes.
stops_unrepresentable() {
	run pg-apply -d "$(db_url "$1")" --job "$2" "$3"
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"$4"*'encoding "UTF8" has no equivalent in encoding "LATIN1"'*"${5:-SQLSTATE 22P05)}"* ]]
	no_bytes <(echo "$output")
}

@test "a character the LATIN1 target cannot hold stops the stream with exit 5 naming table and SQLSTATE, not the bytes, and nothing of its transaction is applied" {
	local s=$BATS_TEST_TMPDIR/bad.pgcs
	pg-slot create -d "$src_URL" --slot bad_slot >/dev/null
	psql_at src -c "INSERT INTO bad VALUES (1, 'ok')"
	psql_at src -c "BEGIN; INSERT INTO bad VALUES (2, 'fine'); INSERT INTO bad VALUES (3, 'x' || chr(8364) || 'y'); COMMIT"
	pg-walcat -d "$src_URL" --slot bad_slot --publication pub_bad --endpos now >"$s" 2>/dev/null
	stops_unrepresentable bad_latin1 bad "$s" 'pg-apply: error: cannot apply insert to public.bad: ' ' (column "v", SQLSTATE 22P05)'
	[ "$(psql -X -qAt -d "$(db_url bad_latin1)" -c "SELECT count(*) FROM bad WHERE id IN (2, 3)")" = 0 ]
	# The recorded position stays before it: a rerun stops at the same place.
	run pg-apply -d "$(db_url bad_latin1)" --job bad "$s"
	[ "$status" -eq 5 ]
	[[ $output == *'public.bad: '*'SQLSTATE 22P05)'* ]]
	[ "$(psql -X -qAt -d "$(db_url bad_latin1)" -c "SELECT count(*) FROM bad WHERE id IN (2, 3)")" = 0 ]
}

@test "a character the LATIN1 target cannot hold in a run of inserts applied by COPY stops with exit 5 and nothing of its transaction is applied" {
	local s=$BATS_TEST_TMPDIR/badrun.pgcs
	pg-slot create -d "$src_URL" --slot badrun_slot >/dev/null
	psql_at src -c "INSERT INTO badrun SELECT g, 'ok' FROM generate_series(1, 40) g;
		INSERT INTO badrun VALUES (41, 'x' || chr(8364) || 'y');
		INSERT INTO badrun SELECT g, 'ok' FROM generate_series(42, 80) g"
	pg-walcat -d "$src_URL" --slot badrun_slot --publication pub_badrun --endpos now >"$s" 2>/dev/null
	stops_unrepresentable badrun_latin1 badrun "$s" 'pg-apply: error: cannot apply insert to public.badrun: '
	[ "$(psql -X -qAt -d "$(db_url badrun_latin1)" -c "SELECT count(*) FROM badrun")" = 0 ]
}

@test "a character the LATIN1 target cannot hold stops the snapshot with exit 5 naming table and SQLSTATE, not the bytes, and nothing of the table is loaded" {
	local s=$BATS_TEST_TMPDIR/badsnap.pgcs
	psql_at src -c "INSERT INTO badsnap VALUES (1, 'ok'), (2, 'x' || chr(8364) || 'y'), (3, 'ok')"
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.badsnap -q >"$s"
	stops_unrepresentable badsnap_latin1 badsnap "$s" 'cannot load public.badsnap: '
	[ "$(psql -X -qAt -d "$(db_url badsnap_latin1)" -c "SELECT count(*) FROM badsnap")" = 0 ]
}

# shop_rows BASE: café, every LATIN1 character, and 0.1 + 0.2, whose float8
# text needs extra_float_digits 3 to come back exact.
shop_rows() {
	psql_at src -v base="$1" <<'SQL'
INSERT INTO shop VALUES (:base, 'caf' || chr(233), 1.5),
	(:base + 1, (SELECT string_agg(chr(i), '' ORDER BY o) FROM unnest(ARRAY[9, 10, 13])
		WITH ORDINALITY AS a(i, o)) || (SELECT string_agg(chr(i), '' ORDER BY i)
		FROM generate_series(32, 126) i) || (SELECT string_agg(chr(i), '' ORDER BY i)
		FROM generate_series(160, 255) i), 0.1::float8 + 0.2::float8);
SQL
}

@test "pgsync bootstrap and run with least-privilege roles store LATIN1 characters in a LATIN1 target byte for byte, whatever the roles' own settings" {
	# Role defaults that would corrupt the stream if any session kept them:
	# a LATIN1 client encoding on both sides, 15-digit floats on the source.
	psql_at src -c "CREATE TABLE shop (id int PRIMARY KEY, name text, price float8);
		CREATE PUBLICATION pub_shop FOR TABLE shop;
		CREATE ROLE enc_app LOGIN REPLICATION;
		GRANT CONNECT ON DATABASE postgres TO enc_app; GRANT USAGE ON SCHEMA public TO enc_app;
		GRANT SELECT ON shop TO enc_app;
		ALTER ROLE enc_app SET client_encoding = 'LATIN1';
		ALTER ROLE enc_app SET extra_float_digits = 0;
		ALTER ROLE enc_app SET datestyle = 'SQL, DMY'"
	psql_at tgt -c "CREATE DATABASE job_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	psql_at tgt -c "CREATE ROLE enc_tgt LOGIN; GRANT CREATE ON DATABASE job_latin1 TO enc_tgt;
		ALTER ROLE enc_tgt SET client_encoding = 'LATIN1'"
	psql -X -q -d "$(db_url job_latin1)" -c "GRANT CREATE ON SCHEMA public TO enc_tgt"
	shop_rows 1
	SRC_URL=${src_URL/user=postgres/user=enc_app}
	TGT_URL=$(db_url job_latin1)
	TGT_URL=${TGT_URL/user=postgres/user=enc_tgt}
	job_conf encjob encjob_slot pub_shop public.shop >/dev/null
	run pgs encjob bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	start_run encjob
	shop_rows 11
	wait_until 60 psql_is_db job_latin1 "SELECT count(*) FROM shop WHERE id > 10" 2
	stop_run TERM
	expect job_latin1 shop.name "1 636166e9" "2 $(latin1_hex)" "11 636166e9" "12 $(latin1_hex)"
	[ "$(psql -X -qAt -d "$(db_url job_latin1)" -c "SELECT count(*) FROM shop WHERE price = 0.1::float8 + 0.2::float8")" = 2 ]
}

psql_is_db() {
	[ "$(psql -X -qAt -d "$(db_url "$1")" -c "$2")" = "$3" ]
}

@test "the orchestrator's service sections give psql the session settings over the role's defaults, after the connection's own options" {
	psql_at src -c "CREATE ROLE enc_psql LOGIN;
		ALTER ROLE enc_psql SET client_encoding = 'LATIN1'; ALTER ROLE enc_psql SET datestyle = 'SQL, DMY';
		ALTER ROLE enc_psql SET extra_float_digits = 0; ALTER ROLE enc_psql SET statement_timeout = '5s'"
	local svc=$BATS_TEST_TMPDIR/pg_service.conf
	pgsync-config --service s <<<"${src_URL/user=postgres/user=enc_psql} options='-c search_path=pg_catalog -c datestyle=German'" >"$svc"
	grep -qx 'client_encoding=UTF8' "$svc"
	grep -q '^options=-c search_path=pg_catalog -c datestyle=German -c datestyle=ISO ' "$svc"
	run env PGSERVICEFILE="$svc" psql -X -qAt -d service=s \
		-c "SELECT current_setting('client_encoding'), current_setting('datestyle'), current_setting('extra_float_digits'), current_setting('statement_timeout'), current_setting('search_path')"
	[ "$status" -eq 0 ]
	[ "$output" = "UTF8|ISO, DMY|3|0|pg_catalog" ]
}

@test "a connection's own options stay but cannot change the text form of values, in the copy and in the stream" {
	psql_at src -c "CREATE TABLE fl (id int PRIMARY KEY, f float8, d date, v text);
		CREATE PUBLICATION pub_fl FOR TABLE fl;
		INSERT INTO fl VALUES (1, 0.1::float8 + 0.2::float8, '2024-02-03', 'caf' || chr(233))"
	local url="$src_URL options='-c extra_float_digits=0 -c datestyle=SQL,DMY -c application_name=mine'"
	pg-slot create -d "$src_URL" --slot fl_slot >/dev/null
	psql_at src -c "INSERT INTO fl VALUES (2, 0.1::float8 + 0.2::float8, '2024-02-03', 'caf' || chr(233))"
	pg-snapshot-dump -d "$url" --own-snapshot --table public.fl -q >"$BATS_TEST_TMPDIR/fl.snap"
	pg-walcat -d "$url" --slot fl_slot --publication pub_fl --endpos now >"$BATS_TEST_TMPDIR/fl.strm" 2>/dev/null
	grep -q $'^ROW\t1\t0.30000000000000004\t2024-02-03\tcaf\xc3\xa9$' "$BATS_TEST_TMPDIR/fl.snap"
	grep -q $'\t2\t0.30000000000000004\t2024-02-03\tcaf\xc3\xa9$' "$BATS_TEST_TMPDIR/fl.strm"
	# The connection's own options reach the server (a bad one is refused).
	run pg-slot show -d "$src_URL options='-c work_mem=bogus'" --slot fl_slot
	[ "$status" -ne 0 ]
	[[ $output == *'work_mem'* ]]
}
