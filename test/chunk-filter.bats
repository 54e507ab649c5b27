#!/usr/bin/env bats
# Exactly once across a chunked copy and the change stream (doc/snapshot.md,
# "Chunks and the change stream"): the job's slot is created first, at L0;
# chunks are copied by PostgreSQL itself, each group at the exported
# snapshot of its own temporary slot (consistent point Li), with its
# pgsync.table_chunk row, while the source keeps changing; then the stream
# from L0 goes through pg-walcat | pg-apply to a position past every Li, and
# the target must equal the source row for row. A change to a key whose
# chunk was copied at Li applies iff it committed at or after Li.
#
# Roles as the guide gives them: the source role may only read and
# replicate, the target role is no superuser.

load lib/cluster
load pgsync-helpers
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src
	cluster_start tgt
	lp_roles_for_tests cf_src cf_tgt
	# The target role creates the pgsync schema, as pg-apply does on first use.
	pg-apply -d "$TGT_URL" </dev/null
}

teardown() {
	local pid
	if [[ -f $BATS_TEST_TMPDIR/pids ]]; then
		for pid in $(<"$BATS_TEST_TMPDIR/pids"); do
			kill "$pid" 2>/dev/null || true
		done
	fi
}

teardown_file() {
	cluster_stop_all
}

# job_start JOB PUBLICATION: the job's slot at L0 (no snapshot), and its row on
# the target with the applied position L0, as bootstrap's chunked mode does.
job_start() {
	JOB=$1 PUB=$2
	L0=$(pg-slot create -d "$SRC_URL" --slot "$JOB" | cut -f2)
	psql_at tgt -c "INSERT INTO pgsync.job (job, slot, applied_lsn) VALUES ('$JOB', '$JOB', '$L0')" >/dev/null
}

# group_start: a temporary slot with an exported snapshot, held until
# group_end; sets LI (its consistent point) and SNAP.
group_start() {
	local fifo=$BATS_TEST_TMPDIR/hold.$((++GROUPS_STARTED))
	mkfifo "$fifo"
	pg-slot create -d "$SRC_URL" --slot "cf_group_$GROUPS_STARTED" --temporary --export-snapshot \
		<"$fifo" >"$fifo.out" 2>"$fifo.err" &
	HOLDER=$!
	echo "$HOLDER" >>"$BATS_TEST_TMPDIR/pids"
	exec {HOLD_FD}>"$fifo"
	wait_until 30 test -s "$fifo.out"
	IFS=$'\t' read -r _ LI SNAP <"$fifo.out"
}

group_end() {
	exec {HOLD_FD}>&-
	wait "$HOLDER"
}

# chunk SCHEMA.TABLE KEYS LO HI: copy the key range (LO, HI] of the table
# (KEYS: its key columns, comma-separated, "-" for a table copied in one
# piece; LO and HI comma-separated SQL literals, "-" for unbounded) at the
# group's snapshot into the target, and record it at the group's LI.
chunk() {
	local schema=${1%%.*} table=${1#*.} keys=$2 lo=$3 hi=$4 qkeys="" where="" k n
	local qt="\"$schema\".\"$table\"" names=NULL lov=NULL hiv=NULL
	if [[ $keys != - ]]; then
		IFS=, read -ra k <<<"$keys"
		for n in "${k[@]}"; do qkeys+="${qkeys:+, }\"$n\""; done
		names="ARRAY['$(sed "s/,/','/g" <<<"$keys")']"
		[[ $lo == - ]] || { where="($qkeys) > ($lo)"; lov="ARRAY[$lo]::text[]"; }
		[[ $hi == - ]] || { where+="${where:+ AND }($qkeys) <= ($hi)"; hiv="ARRAY[$hi]::text[]"; }
	fi
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$SRC_URL" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
		-c "SET TRANSACTION SNAPSHOT '$SNAP'" -c "COPY (SELECT * FROM $qt ${where:+WHERE $where}) TO STDOUT" -c COMMIT |
		psql -X -q -v ON_ERROR_STOP=1 -d "$TGT_URL" -c "COPY $qt FROM STDIN"
	psql_at tgt -c "INSERT INTO pgsync.table_chunk (job, schema_name, table_name, key_columns, lo, hi, lsn, rows, bytes)
		VALUES ('$JOB', '$schema', '$table', $names, $lov, $hiv, '$LI', 0, 0)" >/dev/null
}

# catch_up [pg-apply options]: the stream from L0 to the source's current
# position through pg-walcat | pg-apply; status and stderr in CATCHUP_*.
catch_up() {
	local end
	end=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	set +e
	pg-walcat -d "$SRC_URL" --slot "$JOB" --publication "$PUB" --endpos "$end" 2>"$BATS_TEST_TMPDIR/walcat.err" |
		pg-apply -d "$TGT_URL" --job "$JOB" "$@" 2>"$BATS_TEST_TMPDIR/apply.err"
	CATCHUP_STATUS=$?
	set -e
	CATCHUP_ERR=$(<"$BATS_TEST_TMPDIR/apply.err")
}

# A chunk filter was in effect, and was dropped once past the last chunk.
filtered() {
	[[ $CATCHUP_ERR == *"chunked copy: changes committed before "*" are applied only to keys whose chunk was copied before them"* ]]
	[[ $CATCHUP_ERR == *"applied past the last chunk's position"* ]]
}

# ------------------------------------------------------------------------

@test "inserts, updates, deletes and rows moving both ways between chunks copied at different points, under pgbench, arrive exactly once" {
	local t
	both 'CREATE TABLE public."Orders" ("Id" serial PRIMARY KEY, "Note" text)'
	psql_at src -c 'INSERT INTO "Orders" ("Note") SELECT $$o$$ || g FROM generate_series(1, 300) g;
		DELETE FROM "Orders" WHERE "Id" % 2 = 1' >/dev/null
	pgbench -i -q -I dtgp -s 1 "$src_URL" >/dev/null 2>&1
	pgbench -i -q -I dtp "$tgt_URL" >/dev/null 2>&1
	psql_at src -c 'GRANT SELECT ON ALL TABLES IN SCHEMA public TO cf_src' >/dev/null
	psql_at tgt -c 'GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public TO cf_tgt' >/dev/null
	psql_at src -c 'CREATE PUBLICATION cf_pub FOR TABLE "Orders", pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history' >/dev/null
	job_start cf_ops cf_pub

	# Under way all along: pgbench, and rows of pgbench_accounts moving
	# between the first chunk (negative keys) and the others, both ways.
	cat >"$BATS_TEST_TMPDIR/move.sql" <<-'SQL'
		\set a random(1, 100000)
		UPDATE pgbench_accounts SET aid = -aid WHERE aid = :a OR aid = -:a;
	SQL
	pgbench -n -c 2 -T 600 -b tpcb-like@3 -f "$BATS_TEST_TMPDIR/move.sql@2" "$src_URL" >/dev/null 2>&1 &
	local bench=$!
	echo "$bench" >>"$BATS_TEST_TMPDIR/pids"

	# Before any chunk: everything is in every chunk's copy. Rows move
	# from even keys to odd ones, which are free.
	psql_at src <<-'SQL'
		INSERT INTO "Orders" ("Note") VALUES ('p0');
		UPDATE "Orders" SET "Note" = 'p0' WHERE "Id" IN (10, 110, 210);
		DELETE FROM "Orders" WHERE "Id" IN (20, 120, 220);
		UPDATE "Orders" SET "Id" = 131 WHERE "Id" = 30;
		UPDATE "Orders" SET "Id" = 41 WHERE "Id" = 140;
		UPDATE "Orders" SET "Id" = 33 WHERE "Id" = 230;
		UPDATE "Orders" SET "Id" = 235 WHERE "Id" = 36;
	SQL
	group_start
	chunk public.Orders Id 100 200
	chunk public.pgbench_accounts aid 50000 75000
	chunk public.pgbench_branches - - -
	group_end

	# (100, 200] is copied, the rest not yet.
	psql_at src <<-'SQL'
		UPDATE "Orders" SET "Note" = 'p1' WHERE "Id" IN (12, 112, 212);
		DELETE FROM "Orders" WHERE "Id" IN (22, 122, 222);
		INSERT INTO "Orders" ("Id", "Note") VALUES (121, 'p1');
		INSERT INTO "Orders" ("Note") VALUES ('p1');
		BEGIN;
		UPDATE "Orders" SET "Id" = 13 WHERE "Id" = 114;
		UPDATE "Orders" SET "Id" = 115 WHERE "Id" = 14;
		UPDATE "Orders" SET "Id" = 215 WHERE "Id" = 116;
		UPDATE "Orders" SET "Id" = 117 WHERE "Id" = 216;
		UPDATE "Orders" SET "Id" = 217 WHERE "Id" = 16;
		COMMIT;
	SQL
	group_start
	chunk public.Orders Id - 100
	chunk public.pgbench_accounts aid - 25000
	chunk public.pgbench_tellers - - -
	group_end

	# (-inf, 200] is copied, (200, +inf) not yet.
	psql_at src <<-'SQL'
		UPDATE "Orders" SET "Note" = 'p2' WHERE "Id" IN (18, 118, 218);
		UPDATE "Orders" SET "Id" = 119 WHERE "Id" = 24;
		UPDATE "Orders" SET "Id" = 25 WHERE "Id" = 124;
		UPDATE "Orders" SET "Id" = 221 WHERE "Id" = 26;
		UPDATE "Orders" SET "Id" = 27 WHERE "Id" = 226;
		UPDATE "Orders" SET "Id" = 223 WHERE "Id" = 128;
		UPDATE "Orders" SET "Id" = 123, "Note" = 'moved' WHERE "Id" = 228;
		DELETE FROM "Orders" WHERE "Id" IN (32, 232);
	SQL
	group_start
	chunk public.Orders Id 200 -
	chunk public.pgbench_accounts aid 25000 50000
	chunk public.pgbench_accounts aid 75000 -
	chunk public.pgbench_history - - -
	group_end

	# Everything is copied: nothing is filtered from here on.
	psql_at src <<-'SQL'
		UPDATE "Orders" SET "Note" = 'p3' WHERE "Id" % 7 = 0;
		UPDATE "Orders" SET "Id" = 225 WHERE "Id" = 34;
		UPDATE "Orders" SET "Id" = 29 WHERE "Id" = 234;
		UPDATE "Orders" SET "Id" = 229 WHERE "Id" = 134;
		DELETE FROM "Orders" WHERE "Id" IN (38, 138, 238);
		INSERT INTO "Orders" ("Note") VALUES ('p3');
	SQL
	kill "$bench"
	wait "$bench" || true

	catch_up
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	for t in Orders pgbench_accounts pgbench_branches pgbench_tellers pgbench_history; do
		same_tables "$t"
	done
	# Rows really moved while the chunks were copied.
	[ "$(psql_at src -c 'SELECT count(*) > 0 FROM pgbench_accounts WHERE aid < 0')" = t ]
	[ "$(psql_at tgt -c "SELECT applied_lsn >= max(lsn) FROM pgsync.job JOIN pgsync.table_chunk USING (job) WHERE job = 'cf_ops' GROUP BY applied_lsn")" = t ]

	# PostgreSQL's own subscription, from scratch, ends with the same rows.
	psql_at tgt -c "CREATE DATABASE cf_oracle" >/dev/null
	# The same definitions as the target's, without pg_dump: the system's
	# pg_dump refuses a newer server.
	local oracle=${tgt_URL/dbname=postgres/dbname=cf_oracle}
	psql -X -q -v ON_ERROR_STOP=1 -d "$oracle" -c 'CREATE TABLE public."Orders" ("Id" serial PRIMARY KEY, "Note" text)'
	pgbench -i -q -I dtp "$oracle" >/dev/null 2>&1
	psql -X -q -v ON_ERROR_STOP=1 -d "${tgt_URL/dbname=postgres/dbname=cf_oracle}" \
		-c "CREATE SUBSCRIPTION cf_oracle CONNECTION '$src_URL' PUBLICATION cf_pub"
	wait_until 120 oracle_synced "$(psql_at src -c "SELECT pg_current_wal_lsn()")"
	for t in Orders pgbench_accounts pgbench_branches pgbench_tellers pgbench_history; do
		[ "$(table_checksum "${tgt_URL/dbname=postgres/dbname=cf_oracle}" "$t")" = "$(table_checksum "$tgt_URL" "$t")" ]
	done
	psql -X -q -d "${tgt_URL/dbname=postgres/dbname=cf_oracle}" -c "DROP SUBSCRIPTION cf_oracle"
}

# oracle_synced LSN: the oracle subscription copied every table and applied
# what the source wrote below LSN.
oracle_synced() {
	local url=${tgt_URL/dbname=postgres/dbname=cf_oracle} lsn=$1
	[ "$(psql -X -qAt -d "$url" -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ] &&
		[ "$(psql_at src -c "SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'cf_oracle'")" = t ]
}

@test "composite integer keys with a chunk boundary inside a run of equal leading values: rows move across it both ways" {
	both 'CREATE TABLE public."Lines" (a int, b bigint, v text, PRIMARY KEY (a, b))'
	psql_at src -c 'INSERT INTO "Lines" SELECT x, y, $$l$$ FROM generate_series(1, 9) x, generate_series(1, 9) y' >/dev/null
	psql_at src -c 'CREATE PUBLICATION cf_pub_lines FOR TABLE "Lines"' >/dev/null
	job_start cf_lines cf_pub_lines
	group_start
	chunk public.Lines a,b 5,4 -
	group_end
	# Only above (5,4) is copied: (5,1) -> (5,17) arrives as an insert,
	# (5,8) -> (5,-2) as a delete, (5,5) -> (5,16) as the update.
	psql_at src <<-'SQL'
		UPDATE "Lines" SET b = 17 WHERE (a, b) = (5, 1);
		UPDATE "Lines" SET b = -2 WHERE (a, b) = (5, 8);
		UPDATE "Lines" SET b = 16 WHERE (a, b) = (5, 5);
		UPDATE "Lines" SET v = 'x' WHERE a = 5;
		DELETE FROM "Lines" WHERE (a, b) IN ((5, 3), (5, 9));
		INSERT INTO "Lines" VALUES (5, 3, 'back'), (5, 100, 'new');
	SQL
	group_start
	chunk public.Lines a,b - 5,4
	group_end
	psql_at src -c "UPDATE \"Lines\" SET b = b + 1000 WHERE a = 5 AND b < 5; UPDATE \"Lines\" SET v = 'after'" >/dev/null
	catch_up
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	same_tables Lines
}

@test "uuid keys: rows in chunks ordered as uuids, moved both ways" {
	both 'CREATE TABLE public."Tokens" (u uuid PRIMARY KEY, v text)'
	# uuid(n): the key with n in its last hex digits, so keys order as n.
	psql_at src -c "CREATE FUNCTION public.uid(n int) RETURNS uuid IMMUTABLE LANGUAGE sql
		AS \$\$SELECT ('00000000-0000-0000-0000-' || lpad(to_hex(n), 12, '0'))::uuid\$\$" >/dev/null
	psql_at src -c 'INSERT INTO "Tokens" SELECT uid(g), $$t$$ FROM generate_series(1, 300) g' >/dev/null
	psql_at src -c 'CREATE PUBLICATION cf_pub_tokens FOR TABLE "Tokens"' >/dev/null
	job_start cf_tokens cf_pub_tokens
	# Bounds 0xa0 and 0xc8: a letter after digits, as uuid order has it.
	group_start
	chunk public.Tokens u "'00000000-0000-0000-0000-0000000000a0'" "'00000000-0000-0000-0000-0000000000c8'"
	group_end
	psql_at src <<-'SQL'
		DELETE FROM "Tokens" WHERE u IN (uid(5), uid(171));
		UPDATE "Tokens" SET u = uid(5) WHERE u = uid(170);
		UPDATE "Tokens" SET u = uid(171) WHERE u = uid(6);
		UPDATE "Tokens" SET v = 'mid' WHERE u IN (uid(7), uid(172), uid(250));
		DELETE FROM "Tokens" WHERE u IN (uid(8), uid(173), uid(251));
		INSERT INTO "Tokens" VALUES (uid(1000), 'x'), (uid(173), 'y');
	SQL
	group_start
	chunk public.Tokens u - "'00000000-0000-0000-0000-0000000000a0'"
	chunk public.Tokens u "'00000000-0000-0000-0000-0000000000c8'" -
	group_end
	psql_at src -c "UPDATE \"Tokens\" SET u = uid(2000) WHERE u = uid(175); UPDATE \"Tokens\" SET v = 'after' WHERE u < uid(20)" >/dev/null
	catch_up
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	same_tables Tokens
}

@test "text keys the target column orders otherwise: placed by the target under the source's collation (--key-collations), moved both ways" {
	# The source column's order (ICU root) compares case last: a1 < ... <
	# a9 < b1 < B1 < ... < B5 < b6 ...; the target column's ("C") puts
	# capitals first, so a* and b1..b5 would lie in (B5, c3] for it, not
	# for the source: placed by the column's own order, changes to them
	# would be judged by the wrong chunk.
	[[ $(psql_at src -c "SELECT count(*) FROM pg_collation WHERE collname = 'und-x-icu'") == 1 ]] ||
		skip "this server has no ICU collations"
	psql_at src -c 'CREATE TABLE public."Names" (k text COLLATE "und-x-icu" PRIMARY KEY, v text)' >/dev/null
	psql_at tgt -c 'CREATE TABLE public."Names" (k text COLLATE "C" PRIMARY KEY, v text)' >/dev/null
	psql_at src -c "INSERT INTO \"Names\" SELECT n || g, 'n' FROM unnest(ARRAY['a', 'B', 'b', 'C', 'c']) n, generate_series(1, 9) g" >/dev/null
	psql_at src -c 'CREATE PUBLICATION cf_pub_names FOR TABLE "Names"' >/dev/null
	printf 'public\tNames\tk\tpg_catalog."und-x-icu"\t\\N\n' >"$BATS_TEST_TMPDIR/colls"
	job_start cf_names cf_pub_names
	group_start
	chunk public.Names k "'B5'" "'c3'"
	group_end
	# Only (B5, c3] is copied; rows move into it and out of it.
	psql_at src <<-'SQL'
		UPDATE "Names" SET k = 'a7x' WHERE k = 'B7';
		UPDATE "Names" SET k = 'b7x' WHERE k = 'a2';
		UPDATE "Names" SET k = 'C9x' WHERE k = 'c1';
		UPDATE "Names" SET v = 'mid' WHERE k IN ('a1', 'B6', 'b1', 'C9', 'c4');
		DELETE FROM "Names" WHERE k IN ('a3', 'b4', 'c5');
		INSERT INTO "Names" VALUES ('a0', 'x'), ('b0', 'y'), ('c0', 'z');
	SQL
	group_start
	chunk public.Names k - "'B5'"
	chunk public.Names k "'c3'" -
	group_end
	psql_at src -c "UPDATE \"Names\" SET k = k || 'z' WHERE k IN ('a5', 'b5', 'C5'); UPDATE \"Names\" SET v = 'after'" >/dev/null
	catch_up --key-collations "$BATS_TEST_TMPDIR/colls"
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	[[ $CATCHUP_ERR == *"keys placed by the target"* ]]
	same_tables Names
}

# toast_move JOB IDENTITY: a row with a TOASTed column moves from a chunk
# copied later into one copied earlier by an update that leaves the column
# unchanged, so pg-apply must insert the whole row.
toast_move() {
	local job=$1 identity=$2 table=Docs_$2
	both "CREATE TABLE public.\"$table\" (id int PRIMARY KEY, doc text, n int)"
	psql_at src -c "ALTER TABLE \"$table\" REPLICA IDENTITY $identity" >/dev/null
	psql_at src -c "INSERT INTO \"$table\" SELECT g, (SELECT string_agg(md5(random()::text || g || i), '') FROM generate_series(1, 400) i), g FROM generate_series(1, 200) g" >/dev/null
	psql_at src -c "CREATE PUBLICATION pub_$job FOR TABLE \"$table\"" >/dev/null
	job_start "$job" "pub_$job"
	group_start
	chunk "public.$table" id - 100
	group_end
	psql_at src -c "DELETE FROM \"$table\" WHERE id = 50" -c "UPDATE \"$table\" SET id = 50 WHERE id = 150" >/dev/null
	psql_at src -c "UPDATE \"$table\" SET id = 1050 WHERE id = 60" >/dev/null
	group_start
	chunk "public.$table" id 100 -
	group_end
}

@test "a row moved into an earlier chunk keeps its unchanged TOASTed value from the old row under replica identity full" {
	toast_move cf_toast_full FULL
	# The moved row's old image carries the TOASTed value; the new one does not.
	catch_up
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	same_tables Docs_FULL
	[ "$(psql_at tgt -c 'SELECT length(doc) FROM "Docs_FULL" WHERE id = 50')" = 12800 ]
}

@test "a row moved into an earlier chunk with an unchanged TOASTed value the stream does not carry: exit 5 naming the table and the remedy" {
	toast_move cf_toast_default DEFAULT
	catch_up
	[ "$CATCHUP_STATUS" -eq 5 ]
	[[ $CATCHUP_ERR == *'pg-apply: error: cannot apply an update of public.Docs_DEFAULT that moves a row into a chunk copied before it: column "doc" kept a TOASTed value the stream does not carry: set REPLICA IDENTITY FULL on the source table, then copy it again (pgsync bootstrap --restart-snapshot)'* ]]
	[ "$(grep -c 'error' <<<"$CATCHUP_ERR")" = 1 ]
	# The moved row is not on the target without its value.
	[ "$(psql_at tgt -c 'SELECT count(*) FROM "Docs_DEFAULT" WHERE n = 150')" = 0 ]
}

@test "TRUNCATE between two chunk groups empties only the chunks copied before it; one-piece tables are judged as a whole" {
	both 'CREATE TABLE public."Events" ("Id" bigserial PRIMARY KEY, v text)'
	both 'CREATE TABLE public.heap (v text, n int)'
	both 'CREATE TABLE public.late (v text)'
	psql_at src -c 'ALTER TABLE heap REPLICA IDENTITY FULL; ALTER TABLE late REPLICA IDENTITY FULL' >/dev/null
	psql_at src -c 'INSERT INTO "Events" (v) SELECT $$e$$ || g FROM generate_series(1, 300) g;
		INSERT INTO heap SELECT $$h$$, g FROM generate_series(1, 50) g; INSERT INTO late VALUES ($$l$$)' >/dev/null
	psql_at src -c 'CREATE PUBLICATION cf_pub_trunc FOR TABLE "Events", heap, late' >/dev/null
	job_start cf_trunc cf_pub_trunc
	psql_at src -c "UPDATE heap SET v = 'before' WHERE n < 10; INSERT INTO late VALUES ('before')" >/dev/null
	group_start
	chunk public.Events Id - 100
	chunk public.heap - - -
	group_end
	# Mid-copy: (-inf, 100] and heap are copied, (100, +inf) and late are not.
	psql_at src <<-'SQL'
		UPDATE "Events" SET v = 'mid' WHERE "Id" IN (5, 150);
		TRUNCATE "Events", heap, late;
		INSERT INTO "Events" (v) SELECT 'new' || g FROM generate_series(1, 5) g;
		INSERT INTO "Events" ("Id", v) VALUES (7, 'low'), (170, 'high');
		INSERT INTO heap VALUES ('after truncate', 1);
		INSERT INTO late VALUES ('after truncate');
	SQL
	group_start
	chunk public.Events Id 100 -
	chunk public.late - - -
	group_end
	# Past every chunk: a TRUNCATE is a TRUNCATE again.
	psql_at src -c "INSERT INTO \"Events\" (\"Id\", v) VALUES (50, 'x'); TRUNCATE late; INSERT INTO late VALUES ('last'); UPDATE heap SET n = 2" >/dev/null
	catch_up
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	same_tables Events heap late
}

# part_changes TABLE STEP: the source's changes to TABLE between groups.
part_changes() {
	case $2 in
	1) psql_at src -c "UPDATE $1 SET id = id + 1000 WHERE id IN (10, 120); UPDATE $1 SET id = id - 200 WHERE id = 280;
		UPDATE $1 SET k = k + 1 WHERE id IN (130, 230); DELETE FROM $1 WHERE id IN (20, 260)" ;;
	2) psql_at src -c "UPDATE $1 SET id = id + 2000 WHERE id IN (30, 170); TRUNCATE $1;
		INSERT INTO $1 SELECT g, g % 7, 'new' FROM generate_series(1, 400, 3) g; UPDATE $1 SET id = id + 500 WHERE id = 4" ;;
	3) psql_at src -c "UPDATE $1 SET k = k + 1 WHERE id = 100; UPDATE $1 SET id = id - 90 WHERE id = 298;
		INSERT INTO $1 VALUES (5000, 1, 'last')" ;;
	esac >/dev/null
}

@test "partitioned tables: a root's chunks when its changes come under the root, the leaves' when they come under the leaves; rows moving between partitions and chunks and a TRUNCATE between groups arrive exactly once" {
	local t
	for t in pv pl; do
		both "CREATE TABLE $t (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (id);
			CREATE TABLE ${t}_1 PARTITION OF $t FOR VALUES FROM (MINVALUE) TO (100);
			CREATE TABLE ${t}_2 PARTITION OF $t FOR VALUES FROM (100) TO (MAXVALUE) PARTITION BY HASH (k);
			CREATE TABLE ${t}_2a PARTITION OF ${t}_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
			CREATE TABLE ${t}_2b PARTITION OF ${t}_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1)"
		psql_at src -c "INSERT INTO $t SELECT g, g % 7, 'p' || g FROM generate_series(1, 300) g" >/dev/null
	done
	psql_at src -c "CREATE PUBLICATION cf_pub_pv FOR TABLE pv WITH (publish_via_partition_root = true);
		CREATE PUBLICATION cf_pub_pl FOR TABLE pl" >/dev/null
	job_start cf_parts cf_pub_pv,cf_pub_pl
	# pv is cut by its root's key over all its partitions, under its name;
	# pl's leaves each by its own key, under theirs.
	group_start
	chunk public.pv id,k - 150,2147483647
	chunk public.pl_1 id,k - -
	chunk public.pl_2a id,k - 200,2147483647
	group_end
	part_changes pv 1
	part_changes pl 1
	group_start
	chunk public.pv id,k 150,2147483647 250,2147483647
	chunk public.pl_2b id,k - -
	group_end
	part_changes pv 2
	part_changes pl 2
	group_start
	chunk public.pv id,k 250,2147483647 -
	chunk public.pl_2a id,k 200,2147483647 -
	group_end
	part_changes pv 3
	part_changes pl 3
	catch_up
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	filtered
	same_tables pv pl pv_1 pv_2a pv_2b pl_1 pl_2a pl_2b
}

@test "the target session lost in the middle of the catch-up: pg-apply reads the chunks again and applies the rest exactly once" {
	both 'CREATE TABLE public."Bills" ("Id" int PRIMARY KEY, v text)'
	psql_at src -c 'INSERT INTO "Bills" SELECT g, $$b$$ FROM generate_series(2, 400, 2) g' >/dev/null
	psql_at src -c 'CREATE PUBLICATION cf_pub_bills FOR TABLE "Bills"' >/dev/null
	# The first insert of key 151 on the target ends its session (once: a
	# sequence is not rolled back with the transaction).
	psql_at tgt <<-'SQL' >/dev/null
		CREATE SEQUENCE cf_once;
		CREATE FUNCTION cf_cut() RETURNS trigger SECURITY DEFINER LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW."Id" = 151 AND nextval('public.cf_once') = 1 THEN
				PERFORM pg_catalog.pg_terminate_backend(pg_catalog.pg_backend_pid());
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER cf_cut AFTER INSERT ON "Bills" FOR EACH ROW EXECUTE FUNCTION cf_cut();
		ALTER TABLE "Bills" ENABLE ALWAYS TRIGGER cf_cut;
	SQL
	job_start cf_bills cf_pub_bills
	psql_at src -c "UPDATE \"Bills\" SET v = 'before' WHERE \"Id\" % 10 = 0" >/dev/null
	group_start
	chunk public.Bills Id - 200
	group_end
	for i in 1 2 3 4 5; do
		psql_at src -c "UPDATE \"Bills\" SET v = 'mid $i' WHERE \"Id\" % 4 = 0;
			UPDATE \"Bills\" SET \"Id\" = \"Id\" + 201 WHERE \"Id\" = 100 + 4 * $i;
			UPDATE \"Bills\" SET \"Id\" = \"Id\" - 201 WHERE \"Id\" = 300 + 4 * $i" >/dev/null
	done
	psql_at src -c "INSERT INTO \"Bills\" VALUES (151, 'cut here'), (351, 'skipped')" >/dev/null
	group_start
	chunk public.Bills Id 200 -
	group_end
	psql_at src -c "UPDATE \"Bills\" SET v = 'after' WHERE \"Id\" < 300" >/dev/null
	catch_up --max-batch-bytes 2kB
	[ "$CATCHUP_STATUS" -eq 0 ] || { echo "$CATCHUP_ERR"; false; }
	[[ $CATCHUP_ERR == *"reconnecting"* ]]
	[ "$(grep -c 'chunked copy: changes committed before' <<<"$CATCHUP_ERR")" -ge 2 ]
	filtered
	same_tables Bills
}
