#!/usr/bin/env bats
# pg-walcat | pg-apply end to end: a mixed workload (pgbench plus a table of
# every awkward type) arrives identical; crashes of either program or of the
# target never lose or repeat a transaction; overlapping archives replay
# without effect; a stream from another source is refused.
#
# Each test is its own job: a slot on the source and a target database
# cloned from a template, loaded with the source rows as of the slot's
# creation (the role pg-snapshot-dump plays in production).

# One of the longest files: started first (test/run-bats).
# run-bats: slow 2

load lib/cluster
bats_require_minimum_version 1.5.0

TABLES="pgbench_accounts pgbench_branches pgbench_tellers pgbench_history types types_full"

types_schema() {
	cat <<'SQL'
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TYPE pair AS (a int, b text);
CREATE TABLE types (
	id int PRIMARY KEY,
	n numeric, f8 float8, f4 real, ts timestamp, tstz timestamptz, d date, iv interval,
	b bytea, t text, vc varchar(50), c char(5), bo bool, j json, jb jsonb,
	arr int[], tarr text[], r int4range, tr tstzrange, m mood, dom posint, comp pair,
	u uuid, ip inet, bits bit varying(10), x xml, pt point, doc text
);
CREATE TABLE types_full (LIKE types);
ALTER TABLE types_full REPLICA IDENTITY FULL;
SQL
}

setup_file() {
	cluster_start src
	cluster_start tgt
	pgbench -i -q -I dtpg -s 1 "$src_URL" >/dev/null 2>&1
	types_schema | psql_at src >/dev/null
	psql_at src -c "CREATE PUBLICATION pub FOR TABLE $(echo "$TABLES" | sed 's/ /, /g')"
	psql_at tgt -c "CREATE DATABASE tmpl"
	pgbench -i -q -I dtp "$(tgt_db tmpl)" >/dev/null 2>&1
	types_schema | psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db tmpl)" >/dev/null
}

# A failed test must not leave its pipeline running.
teardown() {
	kill_test_pids
}

teardown_file() {
	cluster_stop_all
}

# new_job NAME: slot NAME on the source, target database NAME with the
# source rows as of the slot's creation (nothing writes meanwhile).
new_job() {
	pg-slot create -d "$src_URL" --slot "$1" >/dev/null 2>&1
	psql_at tgt -c "CREATE DATABASE $1 TEMPLATE tmpl"
	pg_dump -a -d "$src_URL" $(printf -- '-t %s ' $TABLES) | psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db "$1")" >/dev/null
}

# types_round N: rows N*1000+1.. of every awkward value, then updates that
# keep, change and re-key TOASTed rows, deletes, identical rows in the
# replica-identity-full table, a savepoint rollback and an aborted transaction.
types_round() {
	psql_at src -v base=$(($1 * 1000)) <<'SQL'
INSERT INTO types (id, n, f8, f4, ts, tstz, d, iv, b, t, vc, c, bo, j, jb, arr, tarr, r, tr, m, dom, comp, u, ip, bits, x, pt, doc)
SELECT :base + i,
	(ARRAY['NaN', 'Infinity', '-Infinity', '0', '-1.5e-20', '123456789012345678901234567890.123456789'])[i % 6 + 1]::numeric,
	(ARRAY['NaN', 'Infinity', '-Infinity', '-0', '1e308', '3.141592653589793'])[i % 6 + 1]::float8,
	(ARRAY['NaN', 'Infinity', '1.5'])[i % 3 + 1]::real,
	(ARRAY['infinity', '-infinity', '2024-02-29 23:59:59.999999', '0001-01-01 00:00:00 BC'])[i % 4 + 1]::timestamp,
	(ARRAY['infinity', '-infinity', '2024-02-29 23:59:59.999999+05:30'])[i % 3 + 1]::timestamptz,
	(ARRAY['infinity', '-infinity', '2000-01-01'])[i % 3 + 1]::date,
	'1 year 2 mons -3 days 04:05:06.789'::interval * i,
	CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN ''::bytea
		ELSE (SELECT string_agg(set_byte('\x00'::bytea, 0, g), ''::bytea) FROM generate_series(0, 255) g) END,
	(ARRAY[NULL, '', E'tab\there', E'new\nline', E'back\\slash', '\N', E'\\N', E'cr\rlf', 'Grüße 日本 🐘', E'\\x41'])[i % 10 + 1],
	repeat('v', i % 50), 'ab', i % 2 = 0, '{"a" : [1, 2 , "x"],  "b": null}', '{"b": 2, "a": [1, {"c": "\u00e9"}]}',
	ARRAY[i, NULL, -i], ARRAY['a b', NULL, 'q"uote', E'back\\', '{}', ''],
	CASE WHEN i % 4 = 0 THEN 'empty'::int4range ELSE int4range(i, i + 10) END,
	tstzrange('2024-01-01', 'infinity', '[)'),
	(ARRAY['sad', 'ok', 'happy'])[i % 3 + 1]::mood, i + 1, ROW(i, E'x,"y"\\z')::pair,
	md5((:base + i)::text)::uuid, '192.168.0.1/24', B'1010', '<a x="1">t&amp;</a>', point(i, -i),
	CASE WHEN i % 2 = 0 THEN (SELECT string_agg(md5(g::text || i), '') FROM generate_series(1, 300) g) END
FROM generate_series(1, 60) i;
INSERT INTO types_full SELECT * FROM types WHERE id > :base AND id <= :base + 60;
INSERT INTO types_full SELECT * FROM types WHERE id > :base AND id <= :base + 5;
UPDATE types SET t = 'updated ' || id, n = n + 1 WHERE id > :base AND id % 5 = 0;
UPDATE types SET doc = doc || 'more' WHERE id > :base AND id % 8 = 0;
UPDATE types SET id = id + 500 WHERE id > :base AND id <= :base + 60 AND id % 7 = 0;
DELETE FROM types WHERE id > :base AND id % 11 = 0;
UPDATE types_full SET t = 'full ' || id WHERE id > :base AND id % 4 = 0;
UPDATE types_full SET vc = 'one of two' WHERE ctid = (SELECT ctid FROM types_full WHERE id = :base + 3 LIMIT 1);
DELETE FROM types_full WHERE ctid = (SELECT ctid FROM types_full WHERE id = :base + 2 LIMIT 1);
DELETE FROM types_full WHERE id > :base AND id % 9 = 0;
BEGIN;
INSERT INTO types (id, t) VALUES (:base + 900, 'with a savepoint');
SAVEPOINT s;
INSERT INTO types (id, t) VALUES (:base + 901, 'rolled back');
ROLLBACK TO s;
UPDATE types SET t = NULL WHERE id = :base + 900;
COMMIT;
BEGIN;
INSERT INTO types (id, t) VALUES (:base + 902, 'aborted');
ROLLBACK;
SQL
}

pgbench_round() {
	pgbench -n -t "$1" -c 2 "$src_URL" >/dev/null 2>&1
}

# big_txn N TAG: one source transaction of N rows, long enough to be caught
# mid-apply, marked TAG.
big_txn() {
	psql_at src -c "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler)
		SELECT 1, 1, g, g, now(), '$2' FROM generate_series(1, $1) g"
}

# pipeline JOB [pg-apply options]: pg-walcat up to now into pg-apply, both
# acknowledging through the job's checkpoint file. Sets walcat_rc, apply_rc.
pipeline() {
	local job=$1
	shift
	set +e
	pg-walcat -d "$src_URL" --slot "$job" --publication pub --ack-file "$BATS_FILE_TMPDIR/$job.lsn" --endpos now \
		2>>"$BATS_FILE_TMPDIR/$job.walcat.log" |
		pg-apply -d "$(tgt_db "$job")" --checkpoint "$BATS_FILE_TMPDIR/$job.lsn" "$@" \
			2>>"$BATS_FILE_TMPDIR/$job.apply.log"
	walcat_rc=${PIPESTATUS[0]} apply_rc=${PIPESTATUS[1]}
	set -e
}

# copying_in DB: a COPY runs in DB right now.
copying_in() {
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$1' AND state = 'active' AND query LIKE 'COPY %'")" -gt 0 ]
}

# start_pipeline JOB [pg-apply options]: pg-walcat --endpos now | pg-apply in
# the background, through a fifo so that each has its pid (wpid, apid).
start_pipeline() {
	local job=$1 cp=$BATS_FILE_TMPDIR/$1.lsn fifo=$BATS_TEST_TMPDIR/fifo
	shift
	mkfifo "$fifo"
	pg-walcat -d "$src_URL" --slot "$job" --publication pub --ack-file "$cp" --endpos now >"$fifo" 2>"$BATS_TEST_TMPDIR/w.log" 3>&- &
	wpid=$!
	pg-apply -d "$(tgt_db "$job")" --checkpoint "$cp" "$@" <"$fifo" 2>"$BATS_TEST_TMPDIR/a.log" 3>&- &
	apid=$!
	echo "$wpid $apid" >"$BATS_TEST_TMPDIR/pids"
}

# big_rows_in JOB: rows of the job's big transaction on its target.
big_rows_in() {
	psql -X -qAt -d "$(tgt_db "$1")" -c "SELECT count(*) FROM pgbench_history WHERE filler = '$1'"
}

applied_of() {
	psql -X -qAt -d "$(tgt_db "$1")" -c "SELECT applied_lsn FROM pgsync.job WHERE job = '$1'"
}

@test "pgbench and every awkward type arrive identical through pg-walcat | pg-apply" {
	new_job mixed
	pgbench_round 300
	types_round 1
	psql_at src -c "TRUNCATE pgbench_history"
	pgbench_round 100
	pipeline mixed
	[ "$walcat_rc" -eq 0 ]
	[ "$apply_rc" -eq 0 ] || cat "$BATS_FILE_TMPDIR/mixed.apply.log"
	same_tables_in mixed $TABLES
	# The checkpoint file holds what the target holds.
	[ "$(head -1 "$BATS_FILE_TMPDIR/mixed.lsn")" = "$(applied_of mixed)" ]
	# Unchanged TOASTed values crossed as \U and kept their value.
	[ "$(psql -X -qAt -d "$(tgt_db mixed)" -c "SELECT count(*) FROM types WHERE length(doc) > 9000")" -gt 20 ]
}

@test "a live pipeline acknowledges only what the target committed, and stops cleanly on SIGTERM" {
	new_job live
	local cp=$BATS_FILE_TMPDIR/live.lsn fifo=$BATS_TEST_TMPDIR/fifo wpid apid confirmed applied mid
	mkfifo "$fifo"
	pg-walcat -d "$src_URL" --slot live --publication pub --ack-file "$cp" --status-interval 1s >"$fifo" 2>"$BATS_TEST_TMPDIR/w.log" 3>&- &
	wpid=$!
	pg-apply -d "$(tgt_db live)" --checkpoint "$cp" <"$fifo" 2>"$BATS_TEST_TMPDIR/a.log" 3>&- &
	apid=$!
	echo "$wpid $apid" >"$BATS_TEST_TMPDIR/pids"
	pgbench_round 200
	mid=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	types_round 2
	# Caught up: every table as on the source.
	wait_until 30 same_tables_in live $TABLES
	# The slot follows the checkpoint file, never ahead of the target.
	wait_until 30 sql_is src t "SELECT confirmed_flush_lsn >= '$mid' FROM pg_replication_slots WHERE slot_name = 'live'"
	confirmed=$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'live'")
	applied=$(applied_of live)
	[ "$(psql_at src -c "SELECT '$confirmed'::pg_lsn <= '$applied'::pg_lsn")" = t ]
	kill -TERM "$apid" "$wpid"
	local arc=0 wrc=0
	wait "$apid" || arc=$?
	wait "$wpid" || wrc=$?
	[ "$arc" -eq 0 ]
	[ "$wrc" -eq 0 ]
	[ "$(psql -X -qAt -d "$(tgt_db live)" -c "SELECT stopped_at IS NOT NULL FROM pgsync.job_runtime WHERE job = 'live'")" = t ]
}

@test "kill -9 of pg-apply in the middle of a batch: the rerun leaves no duplicate and no missing row" {
	new_job kill_apply
	pgbench_round 200
	big_txn 400000 kill_apply
	types_round 3
	pgbench_round 100
	local wpid apid
	start_pipeline kill_apply
	wait_until 30 copying_in kill_apply
	kill -9 "$apid"
	wait "$apid" || true
	wait "$wpid" || true
	# Nothing of the big transaction is there.
	[ "$(big_rows_in kill_apply)" = 0 ]
	pipeline kill_apply
	[ "$walcat_rc" -eq 0 ]
	[ "$apply_rc" -eq 0 ]
	same_tables_in kill_apply $TABLES
}

@test "kill -9 of pg-walcat in the middle of a transaction: pg-apply rolls it back, the rerun completes" {
	new_job kill_walcat
	pgbench_round 100
	big_txn 400000 kill_walcat
	pgbench_round 100
	local wpid apid arc=0
	# An always-firing trigger holds the copy of the big transaction at its
	# 1,000th row for a few seconds: pg-walcat is then stuck writing the
	# rest of it (the pipe and pg-apply's read-ahead hold far less).
	psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db kill_walcat)" <<'SQL'
CREATE FUNCTION public.hold_once() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN IF NEW.aid = 1000 AND NEW.filler = 'kill_walcat' THEN PERFORM pg_sleep(5); END IF; RETURN NEW; END$$;
CREATE TRIGGER hold_once BEFORE INSERT ON pgbench_history FOR EACH ROW EXECUTE FUNCTION public.hold_once();
ALTER TABLE pgbench_history ENABLE ALWAYS TRIGGER hold_once;
SQL
	start_pipeline kill_walcat
	wait_until 30 eval '[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '"'kill_walcat'"' AND wait_event = '"'PgSleep'"'")" = 1 ]'
	kill -9 "$wpid"
	wait "$wpid" || true
	wait "$apid" || arc=$?
	psql -X -q -d "$(tgt_db kill_walcat)" -c "DROP TRIGGER hold_once ON pgbench_history"
	[ "$arc" -eq 1 ]
	grep -q "error: -: stream truncated in transaction [0-9]* at line" "$BATS_TEST_TMPDIR/a.log"
	[ "$(big_rows_in kill_walcat)" = 0 ]
	pipeline kill_walcat
	[ "$walcat_rc" -eq 0 ]
	[ "$apply_rc" -eq 0 ]
	same_tables_in kill_walcat $TABLES
}

@test "a target restart during apply under --no-loop: pg-apply exits 1, the rerun completes with identical tables" {
	new_job restart_tgt
	pgbench_round 100
	big_txn 400000 restart_tgt
	types_round 4
	local wpid apid arc=0
	start_pipeline restart_tgt --no-loop
	wait_until 30 copying_in restart_tgt
	cluster_restart tgt --mode fast
	wait "$apid" || arc=$?
	wait "$wpid" || true
	[ "$arc" -eq 1 ]
	grep -q "error: .*\(terminating connection\|lost the target connection\)" "$BATS_TEST_TMPDIR/a.log"
	[ "$(big_rows_in restart_tgt)" = 0 ]
	pipeline restart_tgt
	[ "$walcat_rc" -eq 0 ]
	[ "$apply_rc" -eq 0 ]
	same_tables_in restart_tgt $TABLES
}

@test "replaying an overlapping archive, twice, changes nothing" {
	new_job arch
	pgbench_round 100
	types_round 5
	# Segment 1, then segment 2 from the same unacknowledged slot: it repeats
	# everything in segment 1 and adds what came after.
	pg-walcat -d "$src_URL" --slot arch --publication pub --endpos now >"$BATS_TEST_TMPDIR/seg1.pgcs" 2>/dev/null
	pgbench_round 100
	pg-walcat -d "$src_URL" --slot arch --publication pub --endpos now -z >"$BATS_TEST_TMPDIR/seg2.pgcs.zst" 2>/dev/null
	run pg-apply -d "$(tgt_db arch)" "$BATS_TEST_TMPDIR/seg1.pgcs"
	[ "$status" -eq 0 ]
	run pg-apply -d "$(tgt_db arch)" "$BATS_TEST_TMPDIR/seg1.pgcs" "$BATS_TEST_TMPDIR/seg2.pgcs.zst"
	[ "$status" -eq 0 ]
	[[ $output =~ applied\ ([0-9]+)\ transactions,\ skipped\ ([0-9]+) ]]
	[ "${BASH_REMATCH[1]}" -eq 200 ]
	same_tables_in arch $TABLES
	local before
	before=$(applied_of arch)
	run pg-apply -d "$(tgt_db arch)" "$BATS_TEST_TMPDIR/seg1.pgcs" "$BATS_TEST_TMPDIR/seg2.pgcs.zst"
	[ "$status" -eq 0 ]
	[[ $output == *"applied 0 transactions"* ]]
	[ "$(applied_of arch)" = "$before" ]
	same_tables_in arch $TABLES
}

@test "a stream from another source exits 4 naming both sources" {
	# The target cluster is a source too: stream its own changes into the
	# database of a job that applies the real source.
	local db
	db=$(tgt_db arch)
	psql -X -qAt -d "$db" -c "CREATE PUBLICATION other_pub FOR TABLE pgbench_branches"
	pg-slot create -d "$db" --slot arch >/dev/null 2>&1
	psql -X -qAt -d "$db" -c "UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1"
	run --separate-stderr bash -c "pg-walcat -d '$db' --slot arch --publication other_pub --endpos now | pg-apply -d '$db'"
	[ "$status" -eq 4 ]
	local src_sysid tgt_sysid
	src_sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	tgt_sysid=$(psql_at tgt -c "SELECT system_identifier FROM pg_control_system()")
	[[ $stderr == *"the source is another server than the job's: system identifier $tgt_sysid, the job's is $src_sysid, job \"arch\"; nothing of the stream is applied: resync required"* ]]
	pg-slot drop -d "$db" --slot arch >/dev/null 2>&1
	same_tables_in arch $TABLES
}
