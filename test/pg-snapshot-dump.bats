#!/usr/bin/env bats
# pg-snapshot-dump: the command line, and what the snapshot section says about
# the tables it copies (columns, row filters, partitions, splitting, escaping,
# TOAST) against a real source, plus how it fails (missing objects, an expired
# snapshot, a killed worker, timeout, signals). Loading is in
# bootstrap-copy.bats.

load lib/cluster

setup_file() {
	cluster_start src
	psql_at src <<'SQL'
CREATE TABLE t_empty (id int PRIMARY KEY, v text);
CREATE TABLE t_one (id int PRIMARY KEY, v text);
INSERT INTO t_one VALUES (1, 'only');
CREATE TABLE t_esc (id int PRIMARY KEY, v text, b bytea, ts timestamptz, f float8);
INSERT INTO t_esc VALUES
  (1, E'tab\there', '\x00ff', '2024-02-03 04:05:06.789+02', 0.1),
  (2, E'line\nbreak\r\\back', NULL, NULL, 'NaN'),
  (3, '\N', '', '-infinity', 1e300),
  (4, '', NULL, '2024-06-01 00:00+00', -0.0),
  (5, NULL, NULL, NULL, NULL);
CREATE TABLE t_gen (a int PRIMARY KEY, b int GENERATED ALWAYS AS (a * 2) STORED, c text, d text);
INSERT INTO t_gen (a, c, d) SELECT g, 'c' || g, 'd' || g FROM generate_series(1, 10) g;
CREATE TABLE t_filter (id int PRIMARY KEY, keep bool);
INSERT INTO t_filter SELECT g, g % 3 = 0 FROM generate_series(1, 30) g;
CREATE TABLE t_int (id bigint PRIMARY KEY, v text);
INSERT INTO t_int SELECT g, md5(g::text) FROM generate_series(-5000, 24999) g;
CREATE TABLE t_text (k text PRIMARY KEY, v int);
INSERT INTO t_text SELECT md5(g::text), g FROM generate_series(1, 20000) g;
CREATE TABLE t_nokey (a int, b text);
INSERT INTO t_nokey SELECT g % 100, repeat('z', g % 50) FROM generate_series(1, 20000) g;
CREATE TABLE t_toast (id int PRIMARY KEY, doc text);
INSERT INTO t_toast SELECT g, (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 40000) i)
  FROM generate_series(1, 3) g;
CREATE TABLE "Mixed Case" (id int PRIMARY KEY, "Val" text);
INSERT INTO "Mixed Case" VALUES (1, 'x');
CREATE TABLE t_parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE t_parted_a PARTITION OF t_parted FOR VALUES FROM (0) TO (100);
CREATE TABLE t_parted_b PARTITION OF t_parted FOR VALUES FROM (100) TO (200);
INSERT INTO t_parted SELECT g, 'p' || g FROM generate_series(0, 199) g;
CREATE TABLE t_move (id int PRIMARY KEY, v text) WITH (fillfactor = 100, autovacuum_enabled = off);
INSERT INTO t_move SELECT g, repeat('m', 40) || g FROM generate_series(1, 40000) g;
CREATE TABLE t_big (id int PRIMARY KEY, pad text);
INSERT INTO t_big SELECT g, repeat('b', 200) FROM generate_series(1, 200000) g;
CREATE VIEW v_view AS SELECT 1 AS one;
ANALYZE;
CREATE PUBLICATION pub_basic FOR TABLE t_empty, t_one, t_esc;
CREATE PUBLICATION pub_gen FOR TABLE t_gen;
CREATE PUBLICATION pub_leaves FOR TABLE t_parted;
CREATE PUBLICATION pub_root FOR TABLE t_parted WITH (publish_via_partition_root = true);
CREATE PUBLICATION pub_empty;
SQL
	# column lists and row filters: PostgreSQL 15 and later
	if (($(psql_at src -c "SHOW server_version_num") >= 150000)); then
		psql_at src -c "CREATE PUBLICATION pub_cols FOR TABLE t_gen (a, d), t_filter WHERE (keep)"
	fi
}

need_major() {
	(($(psql_at src -c "SHOW server_version_num") >= $1 * 10000)) || skip "needs PostgreSQL $1"
}

teardown_file() {
	cluster_stop_all
}

# dump OPTION...: pg-snapshot-dump from src into $out, stderr in $err, status in $rc.
dump() {
	out=$BATS_TEST_TMPDIR/out.pgcs err=$BATS_TEST_TMPDIR/err
	rc=0
	pg-snapshot-dump -d "$src_URL" "$@" >"$out" 2>"$err" || rc=$?
}

# frame_rows FILE SCHEMA TABLE: the ROW payloads of that table, sorted.
frame_rows() {
	awk -F'\t' -v s="$2" -v t="$3" '
		$1 == "COPY" { cur = ($2 == s && $3 == t) }
		$1 == "ENDCOPY" { cur = 0 }
		$1 == "ROW" && cur { print substr($0, 5) }' "$1" | LC_ALL=C sort
}

# copy_out QUERY: COPY text from src in the stream's value settings, sorted.
copy_out() {
	psql_at src -c "SET datestyle = ISO" -c "SET intervalstyle = postgres" \
		-c "SET extra_float_digits = 3" -c "SET bytea_output = hex" -c "SET timezone = UTC" \
		-c "COPY ($1) TO STDOUT" | LC_ALL=C sort
}

# hold_reader FLAG: copy stdin to stdout only once FLAG exists, so that a
# producer stays blocked in the middle of its copy until the test says so.
hold_reader() {
	while [ ! -e "$1" ]; do sleep 0.1; done
	cat
}

# records FILE NAME: the lines of one record type.
records() {
	grep "^$2"$'\t' "$1" || true
}

@test "--help prints the usage on stdout and exits 0; --version prints the version" {
	run pg-snapshot-dump --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: pg-snapshot-dump -d SOURCE (--snapshot NAME --position LSN [--slot NAME] | --own-snapshot)" ]]
	[[ $output == *"--split-rows=N"* ]]
	[[ $output == *"--split-by=HOW"* ]]
	[[ $output == *"--progress-file=FILE"* ]]
	run pg-snapshot-dump --version
	[ "$status" -eq 0 ]
	[ "$output" = "pg-snapshot-dump (pgsync) 0.1.0" ]
}

@test "usage errors exit 2 with one error line and the usage" {
	run pg-snapshot-dump -d "$src_URL" --publication pub_basic
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-snapshot-dump: error: give exactly one of --snapshot NAME and --own-snapshot" ]
	[[ ${lines[1]} == "usage: pg-snapshot-dump "* ]]
	run pg-snapshot-dump -d "$src_URL" --snapshot 00000003-00000002-1 --publication pub_basic
	[ "$status" -eq 2 ]
	[[ ${lines[0]} == "pg-snapshot-dump: error: --snapshot needs --position LSN"* ]]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-snapshot-dump: error: give exactly one of --publication NAME[,NAME...] and --table SCHEMA.TABLE" ]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot --publication 'pub_basic,,pub_gen'
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-snapshot-dump: error: invalid --publication: empty publication name in the list" ]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot --publication 'pub_basic, pub_basic'
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-snapshot-dump: error: invalid --publication: publication "pub_basic" is named twice' ]
	run pg-snapshot-dump -d "$src_URL" --list-tables --table public.t_one
	[ "$status" -eq 2 ]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot --table t_one
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-snapshot-dump: error: invalid --table "t_one": expected SCHEMA.TABLE' ]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot -P pub_basic --jobs 0
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-snapshot-dump: error: invalid --jobs "0": expected a number from 1 to 256' ]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot -P pub_basic --frame-size 8MBx
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-snapshot-dump: error: invalid --frame-size "8MBx": expected a size from 4kB to 1GB' ]
	run pg-snapshot-dump -d "$src_URL" --own-snapshot -P pub_basic --position 0/1
	[ "$status" -eq 2 ]
	[[ ${lines[0]} == "pg-snapshot-dump: error: --position and --slot describe an imported snapshot"* ]]
	run pg-snapshot-dump -d "$src_URL" --snapshot x --position 0/zz -P pub_basic
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-snapshot-dump: error: invalid --position "0/zz": expected an LSN like 0/16B3748' ]
}

@test "a missing publication or table exits 3 naming it; a view exits 2" {
	dump --own-snapshot --publication pub_basic,no_such_pub
	[ "$rc" -eq 3 ]
	[ "$(cat "$err")" = 'pg-snapshot-dump: error: publication "no_such_pub" does not exist in database "postgres": create it (CREATE PUBLICATION no_such_pub FOR TABLE ...) or fix the publication list' ]
	[ ! -s "$out" ]
	dump --own-snapshot --table public.t_one --table public.no_such_table
	[ "$rc" -eq 3 ]
	[ "$(cat "$err")" = 'pg-snapshot-dump: error: table "public.no_such_table" does not exist on the source' ]
	dump --own-snapshot --table public.v_view
	[ "$rc" -eq 2 ]
	[ "$(cat "$err")" = 'pg-snapshot-dump: error: "public.v_view" is not a table' ]
	dump --own-snapshot --table public.a.b
	[ "$rc" -eq 2 ]
	[ "$(cat "$err")" = 'pg-snapshot-dump: error: invalid --table "public.a.b": expected SCHEMA.TABLE' ]
}

@test "a snapshot that is no longer exported exits 1 saying the exporting session must stay open" {
	dump --snapshot 00000003-0000ABCD-1 --position 0/1000 --publication pub_basic
	[ "$rc" -eq 1 ]
	# 15: invalid snapshot identifier (22023); 18: snapshot ... does not exist (42704)
	[[ $(cat "$err") == 'pg-snapshot-dump: error: cannot import snapshot "00000003-0000ABCD-1": '*' (SQLSTATE '*'): the session that exported it (pg-slot create --export-snapshot) must stay open until the copy has started' ]]
	[ ! -s "$out" ]
}

@test "own snapshot: header identity, SNAPSHOT, one TABLEDONE per table with exact counts, SNAPSHOTDONE" {
	dump --own-snapshot --publication pub_basic
	[ "$rc" -eq 0 ]
	local sysid pos
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	IFS=$'\t' read -r -a h <"$out"
	[ "${h[0]}" = PGCS ]
	[ "${h[1]}" = 1 ]
	[ "${h[2]}" = "$sysid" ]
	[ "${h[3]}" = 1 ]
	[ "${h[4]}" = - ]
	pos=${h[5]}
	[ "${h[6]}" = producer=pg-snapshot-dump/0.1.0 ]
	[[ ${h[7]} == server=1[0-9]* ]]
	[[ $(sed -n 2p "$out") == "SNAPSHOT"$'\t'"$pos"$'\t'*$'\t'3 ]]
	[ "$(tail -n 1 "$out")" = "SNAPSHOTDONE"$'\t'"$pos" ]
	[ "$(psql_at src -c "SELECT '$pos'::pg_lsn <= pg_current_wal_lsn()")" = t ]
	records "$out" TABLEDONE | LC_ALL=C sort >"$BATS_TEST_TMPDIR/done"
	printf 'TABLEDONE\tpublic\tt_empty\t0\t0\nTABLEDONE\tpublic\tt_esc\t5\t%s\nTABLEDONE\tpublic\tt_one\t1\t7\n' \
		"$(frame_rows "$out" public t_esc | wc -c)" | diff - "$BATS_TEST_TMPDIR/done"
	# an empty table gets no frame, only its TABLEDONE
	[ -z "$(awk -F'\t' '$1 == "COPY" && $3 == "t_empty"' "$out")" ]
	[[ $(cat "$err") == *"copied public.t_one: 1 rows (estimated 1)"* ]]
}

@test "values keep tabs, newlines, backslashes, the text \\N, NULL and empty strings exactly as COPY writes them" {
	dump --own-snapshot --table public.t_esc
	[ "$rc" -eq 0 ]
	diff <(copy_out "SELECT id, v, b, ts, f FROM t_esc") <(frame_rows "$out" public t_esc)
	# NULL, '' and the two characters \N stay distinct
	[ "$(frame_rows "$out" public t_esc | awk -F'\t' '$1 == 3 { print $2 } $1 == 4 { print "[" $2 "]" } $1 == 5 { print $2 }')" = '\\N
[]
\N' ]
}

@test "--snapshot from pg-slot create --export-snapshot copies the data as of the slot, with its name and position" {
	local fifo=$BATS_TEST_TMPDIR/hold slot lsn snap
	mkfifo "$fifo"
	pg-slot create -d "$src_URL" --slot snapdump_slot --export-snapshot <"$fifo" >"$BATS_TEST_TMPDIR/slot" 2>/dev/null &
	exec 7>"$fifo"
	wait_until 20 test -s "$BATS_TEST_TMPDIR/slot"
	IFS=$'\t' read -r slot lsn snap <"$BATS_TEST_TMPDIR/slot"
	# written after the snapshot: must not be in the copy
	psql_at src -c "INSERT INTO t_one VALUES (2, 'later')"
	dump --snapshot "$snap" --position "$lsn" --slot "$slot" --table public.t_one
	exec 7>&-
	wait
	psql_at src -c "DELETE FROM t_one WHERE id = 2; SELECT pg_drop_replication_slot('snapdump_slot')" >/dev/null
	[ "$rc" -eq 0 ]
	[[ $(head -n 1 "$out") == PGCS$'\t'1$'\t'*$'\t'1$'\t'snapdump_slot$'\t'"$lsn"$'\t'* ]]
	[ "$(sed -n 2p "$out")" = "SNAPSHOT"$'\t'"$lsn"$'\t'"$snap"$'\t'1 ]
	[ "$(frame_rows "$out" public t_one)" = "1"$'\t'"only" ]
	[ "$(tail -n 1 "$out")" = "SNAPSHOTDONE"$'\t'"$lsn" ]
}

@test "publication column lists and row filters decide the columns and rows; generated columns are left out" {
	need_major 15
	dump --own-snapshot --publication pub_cols
	[ "$rc" -eq 0 ]
	[ "$(records "$out" COPY | sort -u)" = "COPY"$'\t'"public"$'\t'"t_filter"$'\t'"2"$'\t'"id"$'\t'"keep
COPY"$'\t'"public"$'\t'"t_gen"$'\t'"2"$'\t'"a"$'\t'"d" ]
	diff <(copy_out "SELECT a, d FROM t_gen") <(frame_rows "$out" public t_gen)
	diff <(copy_out "SELECT id, keep FROM t_filter WHERE keep") <(frame_rows "$out" public t_filter)
	[ "$(frame_rows "$out" public t_filter | wc -l)" -eq 10 ]
	dump --own-snapshot --publication pub_gen
	[ "$rc" -eq 0 ]
	[ "$(records "$out" COPY | sort -u)" = "COPY"$'\t'"public"$'\t'"t_gen"$'\t'"3"$'\t'"a"$'\t'"c"$'\t'"d" ]
}

@test "several publications: each table once, under its topmost root when one publishes via the root; --list-tables names the publications" {
	dump --own-snapshot --publication 'pub_leaves, pub_root,pub_basic'
	[ "$rc" -eq 0 ]
	[ "$(records "$out" TABLEDONE | cut -f2-4 | sort)" = "public"$'\t'"t_empty"$'\t'"0
public"$'\t'"t_esc"$'\t'"5
public"$'\t'"t_one"$'\t'"1
public"$'\t'"t_parted"$'\t'"200" ]
	diff <(copy_out "SELECT id, v FROM t_parted") <(frame_rows "$out" public t_parted)
	run pg-snapshot-dump -d "$src_URL" --publication pub_root,pub_leaves,pub_gen --list-tables
	[ "$status" -eq 0 ]
	[ "$output" = "public"$'\t'"t_gen"$'\t'"pub_gen"$'\t\t'"a,c,d"$'\t'"
public"$'\t'"t_parted"$'\t'"pub_root,pub_leaves"$'\t\t'"id,v"$'\t' ]
}

@test "several publications: row filters are OR-ed, one without a filter means every row; different column lists are refused" {
	need_major 15
	psql_at src <<'SQL'
CREATE PUBLICATION pub_f1 FOR TABLE t_filter WHERE (id < 5);
CREATE PUBLICATION pub_f2 FOR TABLE t_filter WHERE (id > 25);
CREATE PUBLICATION pub_f3 FOR TABLE t_filter;
CREATE PUBLICATION pub_c1 FOR TABLE t_gen (a, c);
SQL
	dump --own-snapshot --publication pub_f1,pub_f2,pub_cols
	[ "$rc" -eq 0 ]
	diff <(copy_out "SELECT id, keep FROM t_filter WHERE id < 5 OR id > 25 OR keep") <(frame_rows "$out" public t_filter)
	dump --own-snapshot --publication pub_f1,pub_f3
	[ "$rc" -eq 0 ]
	[ "$(frame_rows "$out" public t_filter | wc -l)" -eq 30 ]
	dump --own-snapshot --publication pub_cols,pub_c1
	[ "$rc" -eq 3 ]
	[ "$(cat "$err")" = 'pg-snapshot-dump: error: cannot use different column lists for table "public.t_gen" in different publications (pub_cols,pub_c1), as PostgreSQL'"'"'s own subscriptions cannot: give it the same column list (or none) in each' ]
	[ ! -s "$out" ]
	# no list is a list of every column: as different from (a, c) as another list
	dump --own-snapshot --publication pub_gen,pub_c1
	[ "$rc" -eq 3 ]
	psql_at src -c "DROP PUBLICATION pub_f1, pub_f2, pub_f3, pub_c1"
}

@test "partitions: leaves by their own names, the root's name with publish_via_partition_root or --table on the root" {
	dump --own-snapshot --publication pub_leaves
	[ "$rc" -eq 0 ]
	[ "$(records "$out" TABLEDONE | cut -f2-4 | sort)" = "public"$'\t'"t_parted_a"$'\t'"100
public"$'\t'"t_parted_b"$'\t'"100" ]
	dump --own-snapshot --publication pub_root
	[ "$rc" -eq 0 ]
	[ "$(records "$out" TABLEDONE | cut -f2-4)" = "public"$'\t'"t_parted"$'\t'"200" ]
	diff <(copy_out "SELECT id, v FROM t_parted") <(frame_rows "$out" public t_parted)
	dump --own-snapshot --table public.t_parted --log-level debug
	[ "$rc" -eq 0 ]
	[ "$(records "$out" TABLEDONE | cut -f2-4)" = "public"$'\t'"t_parted"$'\t'"200" ]
	[ "$(records "$out" COPY | cut -f2-3 | sort -u)" = "public"$'\t'"t_parted" ]
	# one read per partition
	[ "$(grep -c 'debug: part [12] of 2 of public.t_parted: all rows of "public"."t_parted_[ab]", ' "$err")" -eq 2 ]
}

@test "--split-by key: a table above --split-rows is copied in integer key ranges that cover it exactly once" {
	dump --own-snapshot --table public.t_int --split-rows 7000 --jobs 3 --split-by key --log-level debug
	[ "$rc" -eq 0 ]
	# 30000 rows / 7000 -> 5 parts, rounded up to a multiple of --jobs: 6
	[ "$(grep -c 'debug: part [0-9] of 6 of public.t_int: a range of "id" in "public"."t_int", ' "$err")" -eq 6 ]
	# The bounds are values of the rows: no log line shows them.
	[ "$(grep -c 'WHERE\|COPY (' "$err")" -eq 0 ]
	[[ $(cat "$err") == *"copying 1 tables in 6 parts with 3 workers"* ]]
	diff <(copy_out "SELECT id, v FROM t_int") <(frame_rows "$out" public t_int)
	[ "$(records "$out" TABLEDONE | cut -f4)" = 30000 ]
	[ "$(records "$out" ENDCOPY | wc -l)" -ge 6 ]
}

@test "--split-by key: a text key is split at sampled boundaries, a table without a key by ctid block ranges" {
	need_major 14
	dump --own-snapshot --table public.t_text --table public.t_nokey --split-rows 5000 --jobs 2 --split-by key \
		--log-level debug
	[ "$rc" -eq 0 ]
	[ "$(grep -c 'debug: part [0-9] of 4 of public.t_text: a range of "k" in "public"."t_text", ' "$err")" -eq 4 ]
	[ "$(grep -c 'debug: part [0-9] of 4 of public.t_nokey: a range of the blocks of "public"."t_nokey", ' "$err")" -eq 4 ]
	# The sampled bounds are keys of the rows: no log line shows them.
	[ "$(grep -c 'WHERE\|COPY (' "$err")" -eq 0 ]
	diff <(copy_out "SELECT k, v FROM t_text") <(frame_rows "$out" public t_text)
	diff <(copy_out "SELECT a, b FROM t_nokey") <(frame_rows "$out" public t_nokey)
}

@test "by default (14+) keyed tables above --split-rows are cut into ctid block ranges covering them exactly once" {
	need_major 14
	dump --own-snapshot --table public.t_int --table public.t_text --split-rows 7000 --jobs 3 --log-level debug
	[ "$rc" -eq 0 ]
	[ "$(grep -c 'debug: part [0-9] of 6 of public.t_int: a range of the blocks of "public"."t_int", ' "$err")" -eq 6 ]
	[ "$(grep -c 'debug: part [0-9] of 3 of public.t_text: a range of the blocks of "public"."t_text", ' "$err")" -eq 3 ]
	[ "$(grep -c 'debug: part .*: a range of "' "$err")" -eq 0 ]
	diff <(copy_out "SELECT id, v FROM t_int") <(frame_rows "$out" public t_int)
	diff <(copy_out "SELECT k, v FROM t_text") <(frame_rows "$out" public t_text)
	[ "$(records "$out" TABLEDONE | cut -f3,4 | sort | tr '\t\n' ': ')" = "t_int:30000 t_text:20000 " ]
}

@test "--split-by: ctid splitting sees each row once while updates move rows between block ranges mid-copy" {
	need_major 14
	local flag=$BATS_TEST_TMPDIR/go before=$BATS_TEST_TMPDIR/before
	# free space in the first blocks, so that updated rows of the last blocks
	# get their new versions there: into a range that may not be read yet
	psql_at src -c "DELETE FROM t_move WHERE id <= 6000" -c "VACUUM t_move"
	copy_out "SELECT id, v FROM t_move" >"$before"
	out=$BATS_TEST_TMPDIR/out.pgcs err=$BATS_TEST_TMPDIR/err
	# a 64kB frame per worker and a blocked reader: most parts wait unread
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.t_move --split-rows 3000 --jobs 2 \
		--split-by ctid --frame-size 64kB --log-level debug 2>"$err" | hold_reader "$flag" >"$out" &
	local pid=$!
	until grep -q 'copying 1 tables in 12 parts' "$err"; do sleep 0.1; done
	psql_at src -c "UPDATE t_move SET v = v || 'u' WHERE id > 34000" \
		-c "UPDATE t_move SET v = v || 'w' WHERE id BETWEEN 6001 AND 9000" \
		-c "DELETE FROM t_move WHERE id % 7 = 0" \
		-c "INSERT INTO t_move SELECT g, 'new' FROM generate_series(40001, 43000) g"
	# new versions did land in earlier blocks than the old ones
	[ "$(psql_at src -c "SELECT count(*) FROM t_move WHERE id > 34000 AND ctid < '(100,0)'")" -gt 0 ]
	touch "$flag"
	wait "$pid"
	[ "$(records "$out" TABLEDONE | cut -f4)" = 34000 ]
	# no row twice, none missing, none changed: the snapshot's table
	diff "$before" <(frame_rows "$out" public t_move)
	[ "$(records "$out" ENDCOPY | wc -l)" -ge 12 ]
}

@test "--split-by rejects anything but auto, key and ctid with exit 2" {
	run pg-snapshot-dump -d "$src_URL" --own-snapshot -P pub_basic --split-by range
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-snapshot-dump: error: invalid --split-by "range": expected auto, key or ctid' ]
	[[ ${lines[1]} == "usage: pg-snapshot-dump "* ]]
}

@test "frames stay below --frame-size and a TOASTed value of over 1 MB is copied whole" {
	dump --own-snapshot --table public.t_toast --table public.t_int --frame-size 2MB
	[ "$rc" -eq 0 ]
	# every frame (COPY line to ENDCOPY line) fits in 2 MB
	local biggest
	biggest=$(awk '/^COPY\t/ { n = 0 } { n += length($0) + 1 } /^ENDCOPY\t/ { if (n > max) max = n } END { print max }' "$out")
	[ "$biggest" -le $((2 * 1024 * 1024)) ]
	[ "$(records "$out" ENDCOPY | wc -l)" -ge 3 ]
	diff <(copy_out "SELECT id, doc FROM t_toast") <(frame_rows "$out" public t_toast)
	[ "$(frame_rows "$out" public t_toast | awk -F'\t' '{ print length($2) }' | sort -u)" = 1280000 ]
}

@test "memory stays at about (jobs + 1) x --frame-size, whatever the size of the copy" {
	local kb
	/usr/bin/time -f '%M' -o "$BATS_TEST_TMPDIR/rss" pg-snapshot-dump -d "$src_URL" --own-snapshot \
		--table public.t_big --split-rows 50000 --jobs 2 --frame-size 1MB -q >"$BATS_TEST_TMPDIR/big.pgcs"
	kb=$(tail -n 1 "$BATS_TEST_TMPDIR/rss")
	echo "# pg-snapshot-dump peak RSS ${kb} kB for $(($(stat -c %s "$BATS_TEST_TMPDIR/big.pgcs") / 1048576)) MB" >&3
	[ "$(stat -c %s "$BATS_TEST_TMPDIR/big.pgcs")" -gt $((35 * 1024 * 1024)) ]
	sanitized pg-snapshot-dump || [ "$kb" -lt 20000 ]
}

@test "a row larger than --frame-size gets a frame of its own; one longer than --max-message-bytes fails naming the table and the limit (exit 5)" {
	dump --own-snapshot --table public.t_toast --table public.t_one --frame-size 64kB
	[ "$rc" -eq 0 ]
	diff <(copy_out "SELECT id, doc FROM t_toast") <(frame_rows "$out" public t_toast)
	# One row to each frame of t_toast: none fits a frame with another.
	[ "$(records "$out" COPY | grep -c $'\tt_toast\t')" = "$(copy_out "SELECT count(*) FROM t_toast")" ]
	dump --own-snapshot --table public.t_toast --table public.t_one --frame-size 64kB --max-message-bytes 1MB
	[ "$rc" -eq 5 ]
	grep -q '^pg-snapshot-dump: error: cannot copy public.t_toast: a row of 1280003 bytes is longer than --max-message-bytes (1048576 bytes)$' "$err"
	[ -z "$(awk -F'\t' '$1 == "TABLEDONE" && $3 == "t_toast"' "$out")" ]
	[ -z "$(records "$out" SNAPSHOTDONE)" ]
}

@test "quoted identifiers in --table keep their case and spaces" {
	dump --own-snapshot --table 'public."Mixed Case"'
	[ "$rc" -eq 0 ]
	[ "$(records "$out" COPY)" = "COPY"$'\t'"public"$'\t'"Mixed Case"$'\t'"2"$'\t'"id"$'\t'"Val" ]
	[ "$(records "$out" TABLEDONE)" = "TABLEDONE"$'\t'"public"$'\t'"Mixed Case"$'\t'"1"$'\t'"4" ]
}

@test "an empty publication gives an empty but complete section" {
	dump --own-snapshot --publication pub_empty
	[ "$rc" -eq 0 ]
	[ "$(wc -l <"$out")" -eq 3 ]
	[[ $(sed -n 2p "$out") == SNAPSHOT$'\t'*$'\t'0 ]]
	grep -q '^SNAPSHOTDONE' "$out"
	grep -q 'warning: publication "pub_empty" has no tables' "$err"
}

@test "--progress-file ends with JSON saying every table is done, with rows and bytes" {
	local pf=$BATS_TEST_TMPDIR/progress.json
	dump --own-snapshot --publication pub_basic --progress-file "$pf"
	[ "$rc" -eq 0 ]
	[ "$(jq -r '.state' "$pf")" = done ]
	[ "$(jq -r '[.tables_total, .tables_done, .rows_copied] | @tsv' "$pf")" = "3"$'\t'"3"$'\t'"6" ]
	[ "$(jq -r '.tables[] | select(.table == "t_one") | [.state, .rows_copied, .bytes_copied, .parts] | @tsv' "$pf")" = "done"$'\t'"1"$'\t'"7"$'\t'"1" ]
	[ ! -e "$pf.tmp" ]
}

@test "on a terminal, stderr shows a live progress line, cleared before each log line" {
	command -v script >/dev/null || skip "script(1) is not installed"
	local log=$BATS_TEST_TMPDIR/tty
	script -qec "pg-snapshot-dump -d '$src_URL' --own-snapshot --table public.t_big --frame-size 64kB >/dev/null" /dev/null >"$log"
	grep -q $'\rpg-snapshot-dump: 0/1 tables, 0 rows (0%), 0 B, ' "$log"
	grep -qE $'\r\033\\[K'"${LOG_TIME_RE}pg-snapshot-dump: copied public\\.t_big: 200000 rows \\(estimated 200000\\)" "$log"
}

@test "--zstd compresses the stream: zstd -d gives back the plain one" {
	dump --own-snapshot --table public.t_esc --zstd=5
	[ "$rc" -eq 0 ]
	[ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" = 28b52ffd ]
	zstd -dc "$out" >"$BATS_TEST_TMPDIR/plain"
	diff <(copy_out "SELECT id, v, b, ts, f FROM t_esc") <(frame_rows "$BATS_TEST_TMPDIR/plain" public t_esc)
	grep -q '^SNAPSHOTDONE' "$BATS_TEST_TMPDIR/plain"
}

@test "a worker whose backend is terminated mid-copy fails the dump naming the table; nothing unfinished is reported done" {
	local errf=$BATS_TEST_TMPDIR/err outf=$BATS_TEST_TMPDIR/out.pgcs
	# The reader is held until the kill, so the workers are inside their COPY.
	(st=0
	 pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.t_big --table public.t_one \
		--split-rows 100000 --jobs 2 --frame-size 64kB 2>"$errf" || st=$?
	 echo "rc=$st" >>"$errf") |
		hold_reader "$BATS_TEST_TMPDIR/go" >"$outf" &
	wait_until 20 eval '[ -n "$(psql_at src -c "SELECT 1 FROM pg_stat_activity WHERE application_name = '"'pg-snapshot-dump'"' AND query LIKE '"'COPY%t_big%'"' LIMIT 1")" ]'
	psql_at src -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'pg-snapshot-dump' AND query LIKE 'COPY%t_big%' LIMIT 1" >/dev/null
	touch "$BATS_TEST_TMPDIR/go"
	wait
	grep -q '^rc=1$' "$errf"
	grep -q '^pg-snapshot-dump: error: cannot copy public.t_big (part [12] of 2): ' "$errf"
	[ -z "$(awk -F'\t' '$1 == "TABLEDONE" && $3 == "t_big"' "$outf")" ]
	[ -z "$(records "$outf" SNAPSHOTDONE)" ]
	# no source session is left behind
	wait_until 10 eval '[ -z "$(psql_at src -c "SELECT 1 FROM pg_stat_activity WHERE application_name = '"'pg-snapshot-dump'"'")" ]'
}

@test "--connection-file says connected while the copy reads the source and disconnected after; an unwritable one is exit 2" {
	local f=$BATS_TEST_TMPDIR/connection outf=$BATS_TEST_TMPDIR/out.pgcs
	printf 'connected\t5\n' >"$f"
	# The reader is held, so the copy is still connected when the file is read.
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.t_big --frame-size 64kB --connection-file "$f" \
		2>"$BATS_TEST_TMPDIR/err" | hold_reader "$BATS_TEST_TMPDIR/go" >"$outf" &
	wait_until 20 eval '[[ $(cat "$f") == $'"'"'connected\t0'"'"' ]]'
	touch "$BATS_TEST_TMPDIR/go"
	wait
	[ "$(cat "$f")" = $'disconnected\t0' ]
	grep -q '^SNAPSHOTDONE' "$outf"
	run pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.t_big --connection-file /nonexistent/dir/c
	[ "$status" -eq 2 ]
	[[ $output == *"pg-snapshot-dump: error: --connection-file: cannot create connection file"* ]]
}

@test "--timeout stops the copy with exit 1 and says the snapshot holds back vacuum" {
	local errf=$BATS_TEST_TMPDIR/err outf=$BATS_TEST_TMPDIR/out.pgcs
	(st=0
	 pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.t_big --frame-size 64kB --timeout 1s \
		2>"$errf" || st=$?
	 echo "rc=$st" >>"$errf") | (sleep 3; cat >"$outf")
	grep -q '^rc=1$' "$errf"
	grep -q '^pg-snapshot-dump: error: the copy did not finish within --timeout 1s: stopped, because its snapshot keeps vacuum on the source from removing old rows$' "$errf"
	[ -z "$(records "$outf" SNAPSHOTDONE)" ]
}

@test "SIGTERM during the copy exits 1 with 'interrupted' and writes no SNAPSHOTDONE" {
	local errf=$BATS_TEST_TMPDIR/err outf=$BATS_TEST_TMPDIR/out.pgcs fifo=$BATS_TEST_TMPDIR/pipe
	mkfifo "$fifo"
	hold_reader "$BATS_TEST_TMPDIR/go" <"$fifo" >"$outf" &
	pg-snapshot-dump -d "$src_URL" --own-snapshot --table public.t_big --frame-size 64kB 2>"$errf" >"$fifo" &
	local pid=$!
	wait_until 20 grep -q 'copying 1 tables' "$errf"
	kill -TERM "$pid"
	touch "$BATS_TEST_TMPDIR/go"
	local st=0
	wait "$pid" || st=$?
	wait
	[ "$st" -eq 1 ]
	grep -q '^pg-snapshot-dump: error: interrupted by SIGTERM: the copy is incomplete$' "$errf"
	[ -z "$(records "$outf" SNAPSHOTDONE)" ]
}
