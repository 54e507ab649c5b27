#!/usr/bin/env bats
# pgsync check against real servers: every source and target prerequisite of
# the operations guide, one line per finding, each failure with its fix,
# exit 3 on any failure and 0 when all pass, and nothing created anywhere.
# Checked as the guide's least-privilege source role and a target role that
# is not a superuser, except where a test is about other roles.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	# A source that cannot do logical replication at all.
	cluster_start low --set wal_level=replica --set max_replication_slots=1 --set max_wal_senders=1
	# As the guide's least-privilege roles (on every source).
	lp_roles_for_tests cs_src cs_tgt
	lp_source_role_for_tests low cs_src
	export LOW_LP=${low_URL/user=postgres/user=cs_src}
	psql_at src -c "CREATE SCHEMA app;
		CREATE TABLE app.orders (id int PRIMARY KEY, note text);
		CREATE TABLE app.items (id int, sku text NOT NULL);
		CREATE UNIQUE INDEX items_sku ON app.items (sku);
		ALTER TABLE app.items REPLICA IDENTITY USING INDEX items_sku;
		CREATE TABLE app.audit (id int, note text);
		CREATE TABLE app.wide (id int, note text);
		ALTER TABLE app.wide REPLICA IDENTITY FULL;
		CREATE TABLE app.extra (id int PRIMARY KEY);
		CREATE PUBLICATION ck_pub FOR TABLE app.orders, app.items"
	job_conf ck ck_slot ck_pub app.orders,app.items >/dev/null
}

teardown_file() {
	cluster_stop_all
}

objects_on() {
	psql_at "$1" -c "SELECT (SELECT count(*) FROM pg_replication_slots) || ' ' || (SELECT count(*) FROM pg_publication)
		|| ' ' || (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgsync') || ' ' || (SELECT count(*) FROM pg_class)"
}

@test "check passes (exit 0) with an ok line for every prerequisite and creates nothing on either side" {
	src_before=$(objects_on src)
	tgt_before=$(objects_on tgt)
	run pgs ck check
	[ "$status" -eq 0 ]
	[[ $output == *"ok    source: wal_level = logical"* ]]
	[[ $output == *"ok    source: max_replication_slots = 32 with 0 in use, this job needs one more"* ]]
	[[ $output == *"ok    source: max_wal_senders = 32 with 0 in use; this job needs one and check one while it probes"* ]]
	[[ $output == *"ok    source: role cs_src has LOGIN"* ]]
	[[ $output == *"ok    source: role cs_src has REPLICATION"* ]]
	[[ $output == *"ok    source: CONNECT on database postgres"* ]]
	[[ $output == *"ok    source: USAGE on schema app"* ]]
	[[ $output == *"ok    source: SELECT on app.orders"* ]]
	[[ $output == *"ok    source: app.orders has a primary key"* ]]
	[[ $output == *"ok    source: app.items has a replica identity index"* ]]
	[[ $output == *"ok    source: publication ck_pub publishes insert update delete truncate"* ]]
	[[ $output == *"ok    source: publication ck_pub contains exactly the 2 configured tables"* ]]
	[[ $output == *"ok    source: replication connection (IDENTIFY_SYSTEM): system identifier "* ]]
	[[ $output == *"ok    source: replication slot ck_slot does not exist yet: bootstrap creates it"* ]]
	[[ $output == *"info  target: role cs_tgt is not a superuser: triggers fire on the target and foreign key order matters"* ]]
	[[ $output == *"ok    target: CREATE on database postgres, to create schema pgsync"* ]]
	[[ $output == *"ok    target: app.orders does not exist yet: bootstrap creates it and schema app"* ]]
	[[ $output == *"pgsync: check passed with 0 warning(s)"* ]]
	[[ $output != *FAIL* ]]
	[ "$(objects_on src)" = "$src_before" ]
	[ "$(objects_on tgt)" = "$tgt_before" ]
}

@test "publication problems: a missing table, an extra table, missing actions (a warning) and no truncate" {
	psql_at src -c "CREATE PUBLICATION ck_bad FOR TABLE app.orders, app.extra WITH (publish = 'insert, delete')"
	job_conf ck_bad ck_bad_slot ck_bad_pub app.orders,app.items >/dev/null
	sed -i 's/^source.publication = .*/source.publication = ck_bad/' "$BATS_FILE_TMPDIR/ck_bad.conf"
	run pgs ck_bad check
	[ "$status" -eq 3 ]
	[[ $output == *"warn  source: publication ck_bad publishes insert delete: the other changes to its tables are not replicated, as with a subscription; fix: ALTER PUBLICATION ck_bad SET (publish = 'insert, update, delete, truncate')"* ]]
	[[ $output == *"warn  source: publication ck_bad does not publish truncate: a TRUNCATE on the source is not replicated; fix: ALTER PUBLICATION ck_bad SET (publish = 'insert, update, delete, truncate')"* ]]
	[[ $output == *"FAIL  source: publication ck_bad does not contain app.items; fix: ALTER PUBLICATION ck_bad ADD TABLE app.items"* ]]
	[[ $output == *"FAIL  source: publication ck_bad also contains app.extra, which is not in replication.tables; fix: ALTER PUBLICATION ck_bad DROP TABLE app.extra, or add app.extra to replication.tables"* ]]
	[[ $output == *"pgsync: error: check failed: 2 problem(s), 2 warning(s)"* ]]
	job_conf ck_none ck_none_slot ck_missing_pub app.orders >/dev/null
	run pgs ck_none check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: publication ck_missing_pub does not exist; fix: CREATE PUBLICATION ck_missing_pub FOR TABLE app.orders"* ]]
}

@test "several publications: the union is compared, each table named with its publications; a missing one and different column lists fail" {
	(($(psql_at src -c "SHOW server_version_num") >= 150000)) || skip "schema publications, row filters and column lists need PostgreSQL 15"
	psql_at src -c "CREATE SCHEMA ms;
		CREATE TABLE ms.a (id int PRIMARY KEY, v text);
		CREATE TABLE ms.b (id int PRIMARY KEY, v text, w text);
		CREATE TABLE app.mc (id int PRIMARY KEY, n int);
		CREATE PUBLICATION ck_ms FOR TABLES IN SCHEMA ms;
		CREATE PUBLICATION ck_mf FOR TABLE app.mc WHERE (n > 0), ms.b WHERE (id > 3);
		CREATE PUBLICATION ck_mf2 FOR TABLE app.mc WHERE (n < -10);
		CREATE PUBLICATION ck_mcol FOR TABLE ms.b (id, v)"
	job_conf ck_multi ck_multi_slot 'ck_ms, ck_mf,ck_mf2' ms.a,ms.b,app.mc >/dev/null
	run pgs ck_multi check
	[ "$status" -eq 0 ]
	[[ $output == *"ok    source: ms.a is published by ck_ms"$'\n'* ]]
	[[ $output == *"ok    source: ms.b is published by ck_ms, ck_mf"$'\n'* ]]
	[[ $output == *"ok    source: app.mc is published by ck_mf, ck_mf2, rows where ((n < '-10'::integer)) OR ((n > 0))"$'\n'* ]]
	[[ $output == *"ok    source: publications ck_ms, ck_mf, ck_mf2 contain exactly the 3 configured tables"* ]]
	job_conf ck_multi2 ck_multi2_slot 'ck_mf,ck_mcol,ck_nosuch' ms.b,app.mc >/dev/null
	run pgs ck_multi2 check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: publication ck_nosuch does not exist; fix: CREATE PUBLICATION ck_nosuch FOR TABLE ms.b, app.mc"* ]]
	job_conf ck_multi3 ck_multi3_slot 'ck_mf,ck_mcol' ms.b,app.mc >/dev/null
	run pgs ck_multi3 check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: cannot resolve the tables of publication ck_mf,ck_mcol: cannot use different column lists for table \"ms.b\" in different publications (ck_mf,ck_mcol)"* ]]
	# bootstrap refuses it the same way before it creates anything
	run pgs ck_multi3 bootstrap
	[ "$status" -eq 3 ]
	[[ $output == *"cannot use different column lists for table \"ms.b\" in different publications"* ]]
	slot_gone ck_multi3_slot
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'ms'")" -eq 0 ]
	job_conf ck_multi4 ck_multi4_slot 'ck_ms' ms.b >/dev/null
	run pgs ck_multi4 check
	[ "$status" -eq 3 ]
	# (A table of a schema publication cannot be taken out alone.)
	[[ $output == *"FAIL  source: publication ck_ms also contains ms.a, which is not in replication.tables; fix: add ms.a to replication.tables, or publish the tables of schema ms one by one: ALTER PUBLICATION ck_ms DROP TABLES IN SCHEMA ms, then ADD TABLE each configured table of it"* ]]
}

@test "a published generated column (PostgreSQL 18) needs a plain column in the target: check and bootstrap refuse before creating anything" {
	(($(psql_at src -c "SHOW server_version_num") >= 180000)) || skip "publish_generated_columns needs PostgreSQL 18"
	psql_at src -c "CREATE SCHEMA gc;
		CREATE TABLE gc.g (id int PRIMARY KEY, p int, d int GENERATED ALWAYS AS (p * 2) STORED);
		CREATE PUBLICATION ck_gen FOR TABLE gc.g WITH (publish_generated_columns = stored)"
	job_conf ck_gen ck_gen_slot ck_gen gc.g >/dev/null
	run pgs ck_gen check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  target: gc.g is published with its generated column(s) d: bootstrap would create them generated, and a generated column cannot take the published values; fix: create gc.g in the target first with them as plain columns"* ]]
	run pgs ck_gen bootstrap
	[ "$status" -eq 3 ]
	slot_gone ck_gen_slot
	psql_at tgt -c "CREATE SCHEMA gc; CREATE TABLE gc.g (id int PRIMARY KEY, p int, d int GENERATED ALWAYS AS (p * 3) STORED)"
	run pgs ck_gen check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  target: gc.g has generated column(s) d in the target, which the publications publish"* ]]
	psql_at tgt -c "ALTER TABLE gc.g ALTER COLUMN d DROP EXPRESSION"
	run pgs ck_gen check
	[[ $output != *"generated column"* ]]
	psql_at tgt -c "DROP SCHEMA gc CASCADE"
}

@test "tables: missing, without a key (fail), REPLICA IDENTITY FULL (warning)" {
	psql_at src -c "CREATE PUBLICATION ck_keys FOR TABLE app.audit, app.wide"
	job_conf ck_keys ck_keys_slot ck_keys app.audit,app.wide,app.nosuch >/dev/null
	run pgs ck_keys check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: app.audit has no primary key or replica identity index: once published, the application's own updates and deletes on it fail; fix: add a primary key, or ALTER TABLE app.audit REPLICA IDENTITY USING INDEX <unique index on NOT NULL columns>"* ]]
	[[ $output == *"warn  source: app.wide has REPLICA IDENTITY FULL: updates and deletes are matched on every column, slow on large tables"* ]]
	[[ $output == *"FAIL  source: table app.nosuch does not exist; fix: create it, or remove app.nosuch from replication.tables"* ]]
}

@test "a role without REPLICATION, SELECT and USAGE: each failure with its fix, and the replication probe refused" {
	psql_at src -c "CREATE ROLE ck_user LOGIN"
	SRC_URL="$src_URL user=ck_user" run pgs ck check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: role ck_user lacks REPLICATION; fix: ALTER ROLE ck_user REPLICATION (as a superuser)"* ]]
	[[ $output == *"FAIL  source: USAGE on schema app; fix: GRANT USAGE ON SCHEMA app TO ck_user"* ]]
	[[ $output == *"FAIL  source: SELECT on app.orders; fix: GRANT SELECT ON app.orders TO ck_user"* ]]
	# The server's wording varies by version ("must be superuser or
	# replication role", "permission denied to start WAL sender").
	[[ $output == *"FAIL  source: replication connection refused: "*"; fix: allow the role in pg_hba.conf for the database"* ]]
	psql_at src -c "ALTER ROLE ck_user REPLICATION; GRANT USAGE ON SCHEMA app TO ck_user; GRANT SELECT ON ALL TABLES IN SCHEMA app TO ck_user"
	SRC_URL="$src_URL user=ck_user" run pgs ck check
	[ "$status" -eq 0 ]
	[[ $output == *"ok    source: role ck_user has REPLICATION"* ]]
}

@test "pg_hba.conf rejecting the role: the connection failure line says how to fix it" {
	psql_at src -c "CREATE ROLE ck_hba LOGIN REPLICATION"
	hba=$src_DIR/data/pg_hba.conf
	cp "$hba" "$BATS_FILE_TMPDIR/pg_hba.conf.orig"
	{ echo "local all ck_hba reject"; cat "$BATS_FILE_TMPDIR/pg_hba.conf.orig"; } >"$hba"
	psql_at src -c "SELECT pg_reload_conf()" >/dev/null
	SRC_URL="$src_URL user=ck_hba" run pgs ck check
	cp "$BATS_FILE_TMPDIR/pg_hba.conf.orig" "$hba"
	psql_at src -c "SELECT pg_reload_conf()" >/dev/null
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: cannot connect to the source (host=$src_DIR/sock port=$(cat "$src_DIR/port") user=ck_hba dbname=postgres): "*"pg_hba.conf rejects connection for host \"[local]\", user \"ck_hba\""*"; fix: let pg_hba.conf on the source allow user ck_hba to database postgres from this host"*", then reload it: SELECT pg_reload_conf()"* ]]
	refused_without_noise
}

# After a refused connection: no connection without its host, port, user
# and database, no fix about the publications.
refused_without_noise() {
	[[ $output != *"libpq defaults"* ]]
	[[ $output != *"cannot resolve the tables of publication"* ]]
	[[ $output != *"change the publications"* ]]
}

@test "a source database without CONNECT for the role: the failure names the connection and the GRANT" {
	psql_at src -c "CREATE DATABASE ck_closed" -c "REVOKE CONNECT ON DATABASE ck_closed FROM PUBLIC" \
		-c "CREATE ROLE ck_nc LOGIN REPLICATION"
	SRC_URL="host=$src_DIR/sock port=$(cat "$src_DIR/port") user=ck_nc dbname=ck_closed" run pgs ck check
	echo "$output"
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: cannot connect to the source (host=$src_DIR/sock port=$(cat "$src_DIR/port") user=ck_nc dbname=ck_closed): "*"permission denied for database \"ck_closed\""*"; fix: GRANT CONNECT ON DATABASE ck_closed TO ck_nc (as the owner of the database)"* ]]
	refused_without_noise
}

@test "a wrong password: the failure names the connection and says to correct the password, never showing it" {
	psql_at src -c "SET password_encryption = 'scram-sha-256'; CREATE ROLE ck_pw LOGIN REPLICATION PASSWORD 'Right-Pw-1'"
	hba=$src_DIR/data/pg_hba.conf
	cp "$hba" "$BATS_FILE_TMPDIR/pg_hba.conf.orig"
	{ echo "local all ck_pw scram-sha-256"; cat "$BATS_FILE_TMPDIR/pg_hba.conf.orig"; } >"$hba"
	psql_at src -c "SELECT pg_reload_conf()" >/dev/null
	SRC_URL="host=$src_DIR/sock port=$(cat "$src_DIR/port") user=ck_pw password=Wrong-Pw-2 dbname=postgres" run pgs ck check
	cp "$BATS_FILE_TMPDIR/pg_hba.conf.orig" "$hba"
	psql_at src -c "SELECT pg_reload_conf()" >/dev/null
	echo "$output"
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: cannot connect to the source (host=$src_DIR/sock port=$(cat "$src_DIR/port") user=ck_pw dbname=postgres): "*"password authentication failed for user \"ck_pw\""*"; fix: correct the password of role ck_pw in PGSYNC_SOURCE_URL"* ]]
	[[ $output != *Wrong-Pw-2* ]]
	refused_without_noise
}

@test "a keyless table in a FOR TABLES IN SCHEMA publication: the application's updates fail already, and a fix that can be done" {
	(($(psql_at src -c "SHOW server_version_num") >= 150000)) || skip "FOR TABLES IN SCHEMA needs PostgreSQL 15"
	psql_at src -c "CREATE SCHEMA shop; CREATE TABLE shop.orders (id int PRIMARY KEY); CREATE TABLE shop.notes (body text);
		GRANT USAGE ON SCHEMA shop TO cs_src; GRANT SELECT ON ALL TABLES IN SCHEMA shop TO cs_src;
		CREATE PUBLICATION ck_schema FOR TABLES IN SCHEMA shop"
	# The application's own update fails on the source already.
	run psql_at src -c "UPDATE shop.notes SET body = body"
	[[ $output == *"does not have a replica identity and publishes updates"* ]]
	job_conf ck_schema ck_schema_slot ck_schema shop.orders >/dev/null
	run pgs ck_schema check
	echo "$output"
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: publication ck_schema also contains shop.notes, which is not in replication.tables, and has no primary key or replica identity index: the application's own updates and deletes on it fail on the source already, since the publication publishes them; fix: give shop.notes a primary key (or ALTER TABLE shop.notes REPLICA IDENTITY FULL) so that the application can change it; then add shop.notes to replication.tables, or publish the tables of schema shop one by one: ALTER PUBLICATION ck_schema DROP TABLES IN SCHEMA shop, then ADD TABLE each configured table of it"* ]]
	[[ $output != *"take it out of publication"* ]]
}

@test "a source without logical decoding or headroom: wal_level, slots and senders each fail" {
	psql_at low -c "CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t; SELECT pg_create_physical_replication_slot('held')" >/dev/null
	job_conf ck_low ck_low_slot p public.t >/dev/null
	SRC_URL=$LOW_LP run pgs ck_low check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: wal_level = replica, logical decoding needs logical; fix: set wal_level = logical in postgresql.conf and restart the source server (pgsync never changes it)"* ]]
	[[ $output == *"FAIL  source: max_replication_slots = 1 with 1 in use, this job needs one more; fix: raise max_replication_slots (server restart) or drop slots nothing uses"* ]]
	[[ $output == *"FAIL  source: max_wal_senders = 1 with 0 in use; this job needs one and check one while it probes; fix: raise max_wal_senders (server restart): one sender per job, plus one for pgsync check"* ]]
}

@test "target: a role that cannot create the pgsync schema, and an existing table lacking a source column" {
	psql_at tgt -c "CREATE ROLE ck_tgt LOGIN; CREATE SCHEMA app; CREATE TABLE app.orders (id int PRIMARY KEY); GRANT USAGE ON SCHEMA app TO ck_tgt"
	TGT_URL="$tgt_URL user=ck_tgt" run pgs ck check
	[ "$status" -eq 3 ]
	[[ $output == *"info  target: role ck_tgt is not a superuser: triggers fire on the target and foreign key order matters"* ]]
	[[ $output == *"FAIL  target: CREATE on database postgres, to create schema pgsync; fix: GRANT CREATE ON DATABASE postgres TO ck_tgt"* ]]
	[[ $output == *"FAIL  target: app.orders exists; SELECT, INSERT, UPDATE, DELETE, TRUNCATE on it; fix: GRANT USAGE ON SCHEMA app TO ck_tgt; GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON app.orders TO ck_tgt"* ]]
	[[ $output == *"FAIL  target: app.orders has no column note, which the source table has; fix: ALTER TABLE app.orders ADD COLUMN note <type> on the target, or drop the target table so bootstrap creates it"* ]]
	[[ $output == *"FAIL  target: app.items does not exist yet: bootstrap creates it in schema app; fix: GRANT CREATE ON SCHEMA app TO ck_tgt"* ]]
	psql_at tgt -c "DROP SCHEMA app CASCADE"
}

@test "target: an existing table without a primary key or unique index is a warning with its fix" {
	psql_at tgt -c "CREATE SCHEMA app; CREATE TABLE app.orders (id int PRIMARY KEY, note text); CREATE TABLE app.items (id int, sku text NOT NULL)"
	run pgs ck check
	[ "$status" -eq 0 ]
	[[ $output == *"warn  target: app.items has no primary key or unique index: each update and delete applied to it scans the table; fix: create the source's primary key on app.items in the target, or drop the table so bootstrap creates it with its keys"* ]]
	[[ $output != *"app.orders has no primary key"* ]]
	[[ $output == *"pgsync: check passed with 1 warning(s)"* ]]
	# A unique index is enough.
	psql_at tgt -c "CREATE UNIQUE INDEX ON app.items (sku)"
	run pgs ck check
	[ "$status" -eq 0 ]
	[[ $output != *"has no primary key or unique index"* ]]
	psql_at tgt -c "DROP SCHEMA app CASCADE"
}

@test "a slot of that name that the job did not create fails the check" {
	psql_at src -c "SELECT pg_create_logical_replication_slot('ck_slot', 'pgoutput')" >/dev/null
	run pgs ck check
	psql_at src -c "SELECT pg_drop_replication_slot('ck_slot')" >/dev/null
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: replication slot ck_slot already exists and job ck did not create it: pgsync never touches it; fix: choose another source.slot, or drop the slot yourself if nothing uses it: SELECT pg_drop_replication_slot('ck_slot')"* ]]
}

@test "an unreachable target is a failure line too, with exit 3" {
	TGT_URL="host=$BATS_FILE_TMPDIR port=1 user=postgres dbname=postgres" run pgs ck check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  target: cannot connect to the target (host=$BATS_FILE_TMPDIR port=1 user=postgres dbname=postgres): "* ]]
}

@test "pgsync runs an installed psql itself, not Debian's per-call version wrapper" {
	local real
	real=$(printf '%s\n' /usr/lib/postgresql/*/bin/psql | sort -t/ -k5 -n -r | head -1)
	[[ -x $real ]] || skip "no /usr/lib/postgresql/*/bin/psql here"
	# A psql on PATH that is a link to a file named pg_wrapper, and fails.
	mkdir -p "$BATS_TEST_TMPDIR/wrap"
	printf '#!/bin/sh\necho "pg_wrapper was run" >&2\nexit 1\n' >"$BATS_TEST_TMPDIR/wrap/pg_wrapper"
	chmod +x "$BATS_TEST_TMPDIR/wrap/pg_wrapper"
	ln -s pg_wrapper "$BATS_TEST_TMPDIR/wrap/psql"
	PATH=$BATS_TEST_TMPDIR/wrap:$PATH run pgs ck check
	[ "$status" -eq 0 ]
	[[ $output == *"pgsync: check passed with 0 warning(s)"* ]]
	[[ $output != *"pg_wrapper was run"* ]]
}

@test "a partitioned table in a publication without publish_via_partition_root: one failure, with the fix, not three" {
	psql_at src -c "CREATE TABLE app.pt (id int PRIMARY KEY) PARTITION BY RANGE (id);
		CREATE TABLE app.pt_1 PARTITION OF app.pt FOR VALUES FROM (0) TO (10);
		CREATE TABLE app.pt_2 PARTITION OF app.pt FOR VALUES FROM (10) TO (20);
		CREATE PUBLICATION ck_pt_pub FOR TABLE app.pt"
	job_conf ck_pt ck_pt_slot ck_pt_pub app.pt >/dev/null
	run pgs ck_pt check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: app.pt is partitioned, and publication ck_pt_pub publishes the changes of its partitions under their own names (publish_via_partition_root is off); fix: ALTER PUBLICATION ck_pt_pub SET (publish_via_partition_root = true)"* ]]
	[[ $output != *"does not contain app.pt"* ]]
	[[ $output != *"also contains app.pt_"* ]]
	psql_at src -c "ALTER PUBLICATION ck_pt_pub SET (publish_via_partition_root = true)"
	run pgs ck_pt check
	[[ $output == *"ok    source: publication ck_pt_pub contains exactly the 1 configured tables"* ]]
	[[ $output != *"partitioned"* ]]
	# SELECT on the root alone: the copy reads through it, but bootstrap's
	# pg_dump cannot lock the partitions.
	psql_at src -c "REVOKE SELECT ON app.pt_2 FROM cs_src"
	run pgs ck_pt check
	[[ $output == *"warn  source: no SELECT on app.pt_2, a partition of app.pt: bootstrap cannot create the partitions the target lacks; fix: GRANT SELECT ON app.pt_2 TO cs_src"* ]]
	[[ $output != *"partition of app.pt:"*"app.pt_1"* ]]
	run pgs ck_pt bootstrap
	[ "$status" -ne 0 ]
	echo "$output"
	[[ $output == *"permission denied for table pt_2"* ]]
	pgs ck_pt cleanup --yes >/dev/null
	psql_at src -c "GRANT SELECT ON app.pt_2 TO cs_src"
	run pgs ck_pt check
	[[ $output != *"a partition of"* ]]
}

@test "a table bootstrap would create uses types the target lacks: a failure for each, naming the type or its extension" {
	psql_at src -c "CREATE EXTENSION IF NOT EXISTS citext; CREATE TYPE app.mood AS ENUM ('ok', 'sad');
		CREATE TABLE app.typed (id int PRIMARY KEY, moods app.mood[], name citext, n numeric);
		CREATE PUBLICATION ck_ty_pub FOR TABLE app.typed"
	job_conf ck_ty ck_ty_slot ck_ty_pub app.typed >/dev/null
	run pgs ck_ty check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  target: app.typed uses type app.mood, which the target does not have: bootstrap creates tables, not types; fix: create type app.mood on the target as the source has it"* ]]
	[[ $output == *"FAIL  target: app.typed uses type public.citext, which the target does not have: bootstrap creates tables, not types; fix: CREATE EXTENSION citext on the target"* ]]
	[[ $output != *"type pg_catalog"* ]]
	# The administrator creates them, and lets the job's role create tables beside them.
	psql_at tgt -c "CREATE EXTENSION IF NOT EXISTS citext; CREATE SCHEMA IF NOT EXISTS app; CREATE TYPE app.mood AS ENUM ('ok', 'sad');
		GRANT CREATE ON SCHEMA app TO cs_tgt"
	run pgs ck_ty check
	[ "$status" -eq 0 ]
	[[ $output != *"uses type"* ]]
	psql_at tgt -c "DROP TYPE app.mood; DROP EXTENSION citext"
}
