#!/usr/bin/env bats
# Table names with a dot, a comma or a quote, which PostgreSQL allows:
# replication.tables takes SQL's double quotes ("s.x"."a.b", public."c,d",
# public."q""x"), pgsync-config reads them once and hands pgsync the list as
# schema TAB name lines, and no step splits a name on a dot or a comma. One
# job, serial keys, in both copy modes: bootstrap, run (inserts, updates
# and deletes arrive), verify (identical; a row changed on the target is a
# difference, named by its table), switchover (the sequences move). The
# source role has exactly the guide's privileges; the chunked job copies
# into a LATIN1 database as a target role that is not a superuser.

load lib/cluster
load pgsync-helpers

# The tables, as SQL names them.
readonly -a NAMED=('"s.x"."a.b"' 'public."c,d"' 'public."q""x"' '"Big Co"."Orders"')
readonly TABLES_CONF='"s.x"."a.b", public."c,d", public."q""x", "Big Co"."Orders"'

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src <<'SQL'
CREATE SCHEMA "s.x";
CREATE SCHEMA "Big Co";
-- look-alikes the dots and commas would have named
CREATE SCHEMA s;
CREATE TABLE s.x (id int PRIMARY KEY);
CREATE TABLE public.c (id int PRIMARY KEY);
CREATE TABLE public.d (id int PRIMARY KEY);
CREATE TABLE "s.x"."a.b" (id serial PRIMARY KEY, v text);
CREATE TABLE public."c,d" (id serial PRIMARY KEY, v text);
CREATE TABLE public."q""x" (id serial PRIMARY KEY, v text);
CREATE TABLE "Big Co"."Orders" (id bigserial PRIMARY KEY, "V" text);
INSERT INTO "s.x"."a.b" (v) SELECT 'ab' || g FROM generate_series(1, 40) g;
INSERT INTO public."c,d" (v) SELECT 'cd' || g FROM generate_series(1, 30) g;
INSERT INTO public."q""x" (v) SELECT 'qx' || g FROM generate_series(1, 20) g;
INSERT INTO "Big Co"."Orders" ("V") SELECT 'o' || g FROM generate_series(1, 25) g;
INSERT INTO s.x VALUES (1);
CREATE PUBLICATION nm_pub FOR TABLE "s.x"."a.b", public."c,d", public."q""x", "Big Co"."Orders";
CREATE PUBLICATION nk_pub FOR TABLE "s.x"."a.b", public."c,d", public."q""x", "Big Co"."Orders";
SQL
	# The guide's source privileges, granted by name: lp_source_role would
	# split these names on their dots.
	psql_at src <<'SQL'
CREATE ROLE nm_src LOGIN REPLICATION;
GRANT CONNECT ON DATABASE postgres TO nm_src;
GRANT USAGE ON SCHEMA "s.x", "Big Co", public TO nm_src;
GRANT SELECT ON "s.x"."a.b", public."c,d", public."q""x", "Big Co"."Orders" TO nm_src;
GRANT SELECT ON SEQUENCE "s.x"."a.b_id_seq", public."c,d_id_seq", public."q""x_id_seq", "Big Co"."Orders_id_seq" TO nm_src;
SQL
	export SRC_URL=${src_URL/user=postgres/user=nm_src}
	# nm: the copy at one snapshot, the tables created by pg_dump; nk: a
	# chunked copy into the tables bootstrap creates too, on another
	# database, LATIN1, as a role that may only create schemas and tables.
	job_conf nm nm_slot nm_pub "$TABLES_CONF" resources.snapshot_mode=single >/dev/null
	job_conf nk nk_slot nk_pub "$TABLES_CONF" resources.snapshot_mode=chunked resources.chunk_rows=10 >/dev/null
	psql_at tgt -c "CREATE DATABASE nk ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db nk)" \
		-c "CREATE ROLE nk_tgt LOGIN" -c "GRANT CREATE ON DATABASE nk TO nk_tgt" -c "GRANT CREATE ON SCHEMA public TO nk_tgt"
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

# checksum URL TABLE: the rows of TABLE (a name as SQL writes it).
checksum() {
	psql -X -v ON_ERROR_STOP=1 -qAt -d "$1" \
		-c "SELECT coalesce(md5(string_agg(ROW(x.*)::text, E'\n' ORDER BY ROW(x.*)::text)), '') FROM $2 x"
}

# same_named [DB]: every table of NAMED holds the same rows on src and in
# database DB (default postgres) of tgt.
same_named() {
	local t a b rc=0 tgt
	tgt=$(tgt_db "${1:-postgres}")
	for t in "${NAMED[@]}"; do
		a=$(checksum "$src_URL" "$t") && b=$(checksum "$tgt" "$t") && [[ $a == "$b" ]] ||
			{ echo "table $t differs" >&2; rc=1; }
	done
	return $rc
}

nk_streaming() {
	[[ $(psql -X -qAt -d "$(tgt_db nk)" -c "SELECT state FROM pgsync.job WHERE job = 'nk'") == STREAMING ]]
}

@test "the configured names are read as SQL reads them, and the look-alikes are not copied" {
	run pgsync-config -c "$BATS_FILE_TMPDIR/nm.conf" --list replication.tables
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 's.x\ta.b\npublic\tc,d\npublic\tq"x\nBig Co\tOrders')" ]
	run pgs nm check
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"publication nm_pub contains exactly the 4 configured tables"* ]]
}

@test "bootstrap, run, verify and switchover a job whose tables have a dot, a comma and a quote in their names" {
	run pgs nm bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	same_named
	# Exactly the configured tables: none of the look-alikes.
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_class WHERE oid IN (to_regclass('s.x'), to_regclass('public.c'), to_regclass('public.d'))")" = 0 ]

	start_run nm
	wait_until 60 state_is nm STREAMING
	psql_at src <<'SQL'
INSERT INTO "s.x"."a.b" (v) VALUES ('new');
UPDATE public."c,d" SET v = 'changed' WHERE id = 3;
DELETE FROM public."q""x" WHERE id = 7;
INSERT INTO "Big Co"."Orders" ("V") VALUES ('new'), ('newer');
DELETE FROM "s.x"."a.b" WHERE id = 1;
SQL
	wait_until 60 same_named

	run pgs nm verify
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"s.x.a.b: 40 rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	[[ $output == *"public.c,d: 30 rows compared"* ]]
	[[ $output == *"public.q\"x: 19 rows compared"* ]]
	[[ $output == *"Big Co.Orders: 27 rows compared"* ]]
	# One table, named as replication.tables names it.
	run pgs nm verify --table 'public."c,d"'
	[ "$status" -eq 0 ]
	[[ $output == *"public.c,d: 30 rows compared"* ]]
	[[ $output != *"a.b"* ]]

	# A row changed on the target is a difference, in that table only.
	psql_at tgt -c "UPDATE public.\"q\"\"x\" SET v = 'drift' WHERE id = 2"
	run pgs nm verify --show-keys
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"public.q\"x: 19 rows compared, 0 missing on target, 0 only on target, 1 differing"* ]]
	[[ $output == *"s.x.a.b: 40 rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	psql_at tgt -c "UPDATE public.\"q\"\"x\" SET v = 'qx2' WHERE id = 2"

	run pgs nm switchover --no-fence --verify
	echo "$output"
	[ "$status" -eq 0 ]
	wait_run 60
	[ "$RUN_STATUS" -eq 0 ]
	same_named
	# The sequences moved: the next default key on the target is the
	# source's next one.
	local t
	for t in '"s.x"."a.b_id_seq"' 'public."c,d_id_seq"' 'public."q""x_id_seq"' '"Big Co"."Orders_id_seq"'; do
		[ "$(psql_at tgt -c "SELECT last_value FROM $t")" = "$(psql_at src -c "SELECT last_value FROM $t")" ]
	done
	[ "$(psql_at tgt -c "INSERT INTO \"s.x\".\"a.b\" (v) VALUES ('after') RETURNING id")" = 42 ]
	[ "$(psql_at tgt -c "INSERT INTO \"Big Co\".\"Orders\" (\"V\") VALUES ('after') RETURNING id")" = 28 ]
}

@test "a chunked copy of the same tables into tables bootstrap creates, then streamed and verified" {
	TGT_URL=$(tgt_db nk nk_tgt) run pgs nk bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	same_named nk
	TGT_URL=$(tgt_db nk nk_tgt) start_run nk
	wait_until 60 nk_streaming
	psql_at src <<'SQL'
INSERT INTO public."c,d" (v) VALUES ('chunked');
UPDATE "Big Co"."Orders" SET "V" = 'x' WHERE id = 5;
DELETE FROM public."q""x" WHERE id = 9;
SQL
	wait_until 60 same_named nk
	TGT_URL=$(tgt_db nk nk_tgt) run pgs nk verify
	echo "$output"
	[ "$status" -eq 0 ]
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}
