#!/usr/bin/env bats
# pgsync verify: source and target compared at one consistent point while
# pgsync run streams a pgbench load (identical: exit 0; the stream paused
# and resumed), and with the job stopped; one row changed, deleted or added
# on the target behind pgsync's back in a keyed, a keyless and a
# partitioned table: exit 5 naming each table, the key only with
# --show-keys and never a non-key value; --json; the result in pgsync.job
# and status. The source role has only the guide's privileges, the target
# role is no superuser, and the target database is LATIN1 with other
# default date, time zone, float and bytea settings. One table's schema
# and name need quoting: capitals, spaces and double quotes.

load lib/cluster
load pgsync-helpers

readonly VT='public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history,public.vk_nokey,public.vp_part,Odd "V" s.Mixed Case "T"'

setup_file() {
	cluster_start src
	cluster_start tgt
	pgbench -i -s 1 -q -d "$src_URL" >/dev/null 2>&1
	psql_at src -c "ALTER TABLE pgbench_history REPLICA IDENTITY FULL;
		CREATE TABLE vk_nokey (a int, b text); ALTER TABLE vk_nokey REPLICA IDENTITY FULL;
		INSERT INTO vk_nokey SELECT g % 5, 'n' || (g % 5) FROM generate_series(1, 40) g;
		CREATE TABLE vp_part (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
		CREATE TABLE vp_part_a PARTITION OF vp_part FOR VALUES FROM (0) TO (10);
		CREATE TABLE vp_part_b PARTITION OF vp_part FOR VALUES FROM (10) TO (20);
		INSERT INTO vp_part SELECT g, g % 20, 'p' || g FROM generate_series(1, 2000) g;
		CREATE SCHEMA \"Odd \"\"V\"\" s\";
		CREATE TABLE \"Odd \"\"V\"\" s\".\"Mixed Case \"\"T\"\"\" (\"Id\" text PRIMARY KEY, t timestamptz, f float8, j jsonb, b bytea, e text);
		INSERT INTO \"Odd \"\"V\"\" s\".\"Mixed Case \"\"T\"\"\" VALUES ('a', '2024-01-01 12:00+02', 0.1, '{\"x\": [1, 2]}', '\\x00ff', E'caf\\u00e9\\nline'),
			(E'tab\\tkey', NULL, 'NaN', NULL, NULL, NULL);
		CREATE PUBLICATION vf_pub FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history,
			vk_nokey, vp_part, \"Odd \"\"V\"\" s\".\"Mixed Case \"\"T\"\"\" WITH (publish_via_partition_root = true);
		CREATE ROLE vf_src LOGIN REPLICATION;
		GRANT USAGE ON SCHEMA public, \"Odd \"\"V\"\" s\" TO vf_src;
		GRANT SELECT ON ALL TABLES IN SCHEMA public, \"Odd \"\"V\"\" s\" TO vf_src;
		GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO vf_src"
	psql_at tgt -c "CREATE DATABASE vf ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	# The job lives in database vf: the helpers read it through tgt_URL.
	export tgt_URL="$tgt_URL dbname=vf"
	# Other defaults than the source's: verify's sessions state their own.
	psql_at tgt -c "ALTER DATABASE vf SET TimeZone = 'Pacific/Auckland'; ALTER DATABASE vf SET DateStyle = 'SQL, DMY';
		ALTER DATABASE vf SET extra_float_digits = 0; ALTER DATABASE vf SET bytea_output = 'escape'"
	psql_at tgt -c "CREATE ROLE vf_tgt LOGIN; GRANT CREATE ON DATABASE vf TO vf_tgt; GRANT CREATE ON SCHEMA public TO vf_tgt"
	# Without a pg_dump for the source, partitioned tables are created in
	# the target first (doc/operations.md).
	pg_dump_reads src || psql_at tgt -c "SET ROLE vf_tgt;
		CREATE TABLE vp_part (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
		CREATE TABLE vp_part_a PARTITION OF vp_part FOR VALUES FROM (0) TO (10);
		CREATE TABLE vp_part_b PARTITION OF vp_part FOR VALUES FROM (10) TO (20)"
	job_conf vf vf_slot vf_pub "$VT" >/dev/null
	export SRC_URL="$src_URL user=vf_src" TGT_URL="$tgt_URL user=vf_tgt"
	pgs vf bootstrap
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

tgt_sql() {
	psql_at tgt -c "$1"
}

open_xact() {
	[ "$(psql_at src -c "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND backend_xid IS NOT NULL")" = 1 ]
}

history_over() {
	[ "$(psql_at src -c "SELECT count(*) > $1 FROM pgbench_history")" = t ]
}

# Only the job's slot: verify's own is temporary.
only_job_slot() {
	[ "$(psql_at src -c "SELECT string_agg(slot_name, ',') FROM pg_replication_slots")" = vf_slot ]
}

@test "verify while run streams a pgbench load: identical, exit 0, the stream paused and resumed" {
	start_run vf
	wait_until 60 state_is vf STREAMING
	pgbench -n -c 2 -R 200 -T 600 -d "$src_URL" >/dev/null 2>&1 &
	local bench=$!
	wait_until 30 history_over 100
	run pgs vf verify --jobs 3
	local verified=$output
	kill -TERM "$bench"
	wait "$bench" || true
	echo "$verified"
	[ "$status" -eq 0 ]
	[[ $verified == *"pgsync: job vf is running: asking pgsync run for a consistent point"* ]]
	[[ $verified == *"public.pgbench_accounts: 100000 rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	[[ $verified == *"public.pgbench_history: "*" rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	[[ $verified == *'Odd "V" s.Mixed Case "T": 2 rows compared, 0 missing on target, 0 only on target, 0 differing'* ]]
	[[ $verified =~ verify\ of\ job\ vf\ at\ [0-9A-F]+/[0-9A-F]+:\ identical ]]
	grep -q "stream paused [0-9]* ms for verify at" "$(current_run_log)"
	run_alive
	only_job_slot
	# The stream went on after the pause.
	wait_until 60 applied_reaches vf
	same_tables pgbench_accounts pgbench_history
	[ "$(job_field vf verify_outcome)" = identical ]
}

# each test below: one change on the target, verify exits 5 naming the
# table; undone afterwards, verify is identical again.
expect_difference() {
	run timeout 120 env PGSYNC_SOURCE_URL="$SRC_URL" PGSYNC_TARGET_URL="$TGT_URL" TMPDIR="$(pgs_tmpdir)" \
		pgsync -c "$BATS_FILE_TMPDIR/vf.conf" verify --show-keys
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"verify of job vf at "*": different"* ]]
}

@test "a row changed on the target: exit 5, each table named, the key shown only with --show-keys" {
	# A run with a 5-minute heartbeat answers at once: verify wakes it.
	stop_run TERM
	sed -i 's/^safety.heartbeat_interval = 1s$/safety.heartbeat_interval = 300s/' "$BATS_FILE_TMPDIR/vf.conf"
	start_run vf
	wait_until 60 grep -q "streaming slot" "$(current_run_log)"
	tgt_sql "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 4242;
		UPDATE vk_nokey SET b = 'secret' WHERE ctid = (SELECT min(ctid) FROM vk_nokey WHERE a = 3);
		UPDATE vp_part SET v = 'secret' WHERE id = 77;
		UPDATE \"Odd \"\"V\"\" s\".\"Mixed Case \"\"T\"\"\" SET e = e || ' secret' WHERE \"Id\" = 'a'"
	expect_difference
	[[ $output == *"public.pgbench_accounts: 100000 rows compared, 0 missing on target, 0 only on target, 1 differing"*'  differing: "4242"'* ]]
	[[ $output == *"public.vk_nokey: 41 rows compared, 1 missing on target, 1 only on target, 0 differing"* ]]
	[[ $output == *"public.vp_part: 2000 rows compared, 0 missing on target, 0 only on target, 1 differing"*'  differing: "(77,17)"'* ]]
	[[ $output == *"public.pgbench_branches: 1 rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	[[ $output == *'Odd "V" s.Mixed Case "T": 2 rows compared, 0 missing on target, 0 only on target, 1 differing'*'  differing: "a"'* ]]
	[[ $output != *secret* ]]
	run pgs vf verify
	[ "$status" -eq 5 ]
	[[ $output != *"4242"* ]]
	[ "$(job_field vf verify_outcome)" = different ]
	tgt_sql "UPDATE pgbench_accounts SET abalance = abalance - 1 WHERE aid = 4242;
		UPDATE vk_nokey SET b = 'n3' WHERE b = 'secret'; UPDATE vp_part SET v = 'p77' WHERE id = 77;
		UPDATE \"Odd \"\"V\"\" s\".\"Mixed Case \"\"T\"\"\" SET e = left(e, -7) WHERE \"Id\" = 'a'"
	run pgs vf verify
	[ "$status" -eq 0 ]
}

@test "a row deleted on the target: exit 5, missing on target, with its key" {
	tgt_sql "DELETE FROM pgbench_accounts WHERE aid = 99999;
		DELETE FROM vk_nokey WHERE ctid = (SELECT min(ctid) FROM vk_nokey WHERE a = 1);
		DELETE FROM vp_part WHERE id = 1500"
	expect_difference
	[[ $output == *"public.pgbench_accounts: 100000 rows compared, 1 missing on target, 0 only on target, 0 differing"*'  missing on target: "99999"'* ]]
	[[ $output == *"public.vk_nokey: 40 rows compared, 1 missing on target, 0 only on target, 0 differing"* ]]
	[[ $output == *"public.vp_part: 2000 rows compared, 1 missing on target, 0 only on target, 0 differing"*'  missing on target: "(1500,0)"'* ]]
	tgt_sql "INSERT INTO vk_nokey VALUES (1, 'n1'); INSERT INTO vp_part VALUES (1500, 0, 'p1500')"
	psql_at src -c "SELECT * FROM pgbench_accounts WHERE aid = 99999" -F $'\t' | tgt_sql "COPY pgbench_accounts FROM STDIN"
	run pgs vf verify
	[ "$status" -eq 0 ]
}

@test "a row added on the target, with the job stopped: exit 5, only on target, with its key, also in --json" {
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	tgt_sql "INSERT INTO pgbench_accounts VALUES (200001, 1, 0, 'x');
		INSERT INTO vk_nokey VALUES (9, 'added');
		INSERT INTO vp_part VALUES (5000, 12, 'added')"
	expect_difference
	[[ $output == *"pgsync: job vf is stopped: streaming it to "* ]]
	[[ $output == *"public.pgbench_accounts: 100001 rows compared, 0 missing on target, 1 only on target, 0 differing"*'  only on target: "200001"'* ]]
	[[ $output == *"public.vk_nokey: 41 rows compared, 0 missing on target, 1 only on target, 0 differing"* ]]
	[[ $output == *"public.vp_part: 2001 rows compared, 0 missing on target, 1 only on target, 0 differing"*'  only on target: "(5000,12)"'* ]]
	[[ $output != *added* ]]
	run pgs vf --json verify --show-keys --table public.vp_part --table public.vk_nokey
	[ "$status" -eq 5 ]
	local doc
	doc=$(grep '^{"format_version"' <<<"$output")
	jq -e '.outcome == "different" and (.tables | length) == 2 and
		(.tables[] | select(.table == "public.vp_part") | .only_on_target == 1 and .keys.only_on_target == ["(5000,12)"]) and
		(.tables[] | select(.table == "public.vk_nokey") | .only_on_target == 1 and .keys.only_on_target == [])' <<<"$doc"
	only_job_slot
	# A verify of the stopped job meanwhile (held while it creates its slot
	# by a source transaction left open): a second one is refused.
	mkfifo "$BATS_TEST_TMPDIR/xact"
	psql -X -q -d "$src_URL" <"$BATS_TEST_TMPDIR/xact" >/dev/null 3>&- &
	local holder=$!
	exec {xact}>"$BATS_TEST_TMPDIR/xact"
	echo "BEGIN; INSERT INTO vk_nokey VALUES (100, 'open'); SELECT 1;" >&"$xact"
	wait_until 30 open_xact
	pgs_bg "$BATS_TEST_TMPDIR/v1.log" vf verify
	wait_until 30 test -s "$BATS_FILE_TMPDIR/vf.state/verify.request"
	run pgs vf verify
	echo "ROLLBACK;" >&"$xact"
	exec {xact}>&-
	wait "$holder"
	[ "$status" -eq 3 ]
	[[ $output == *"pgsync: error: another pgsync verify (pid "*") is running for job vf"* ]]
	bg_wait "$BATS_TEST_TMPDIR/v1.log" 60
	[ "$BG_STATUS" -eq 5 ]
	[ ! -e "$BATS_FILE_TMPDIR/vf.state/verify.request" ]
	tgt_sql "DELETE FROM pgbench_accounts WHERE aid = 200001; DELETE FROM vk_nokey WHERE b = 'added'; DELETE FROM vp_part WHERE id = 5000"
	run pgs vf verify
	[ "$status" -eq 0 ]
}

@test "many rows missing on the target are counted from the ranges, without keys (bounded memory)" {
	tgt_sql "DELETE FROM pgbench_accounts WHERE aid <= 10000"
	run pgs vf verify --show-keys --table public.pgbench_accounts
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"pgsync: warning: verify: public.pgbench_accounts: rows differ in more than 256 ranges"* ]]
	[[ $output == *"public.pgbench_accounts: 100000 rows compared, 10000 missing on target, 0 only on target, 0 differing"* ]]
	[[ $output != *"missing on target: "* ]]
	psql -X -q -d "$src_URL" -c "COPY (SELECT * FROM pgbench_accounts WHERE aid <= 10000) TO STDOUT" |
		psql -X -q -v ON_ERROR_STOP=1 -d "$tgt_URL" -c "COPY pgbench_accounts FROM STDIN"
	run pgs vf verify --table public.pgbench_accounts
	[ "$status" -eq 0 ]
}

@test "a row filter and a column list: only the published rows and columns are compared" {
	[ "$(psql_at src -c "SHOW server_version_num")" -ge 150000 ] || skip "row filters and column lists need PostgreSQL 15"
	psql_at src -c "CREATE TABLE vr_f (id int PRIMARY KEY, k int, secret text);
		INSERT INTO vr_f SELECT g, g, 'secret' || g FROM generate_series(1, 20) g;
		GRANT SELECT ON vr_f TO vf_src;
		CREATE PUBLICATION vr_pub FOR TABLE vr_f (id, k) WHERE (k > 5)"
	job_conf vr vr_slot vr_pub public.vr_f >/dev/null
	pgs vr bootstrap
	run pgs vr verify --show-keys
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"public.vr_f: 15 rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	tgt_sql "UPDATE vr_f SET secret = 'not published' WHERE id = 7; UPDATE vr_f SET k = 70 WHERE id = 8"
	run pgs vr verify --show-keys
	echo "$output"
	[ "$status" -eq 5 ]
	[[ $output == *"public.vr_f: 15 rows compared, 0 missing on target, 0 only on target, 1 differing"*'  differing: "8"'* ]]
	[[ $output != *'"7"'* ]]
	pgs vr cleanup --yes
}

@test "a catalog from before verify, owned by another role: verify warns, prints, records nothing; its owner's verify adds the columns" {
	tgt_sql "ALTER TABLE pgsync.job DROP COLUMN verified_at, DROP COLUMN verified_lsn, DROP COLUMN verify_outcome;
		ALTER TABLE pgsync.job OWNER TO postgres; GRANT SELECT, INSERT, UPDATE, DELETE ON pgsync.job TO vf_tgt"
	run pgs vf verify --table public.vk_nokey
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"pgsync: warning: cannot add the verify columns to pgsync.job (must be owner of table job (SQLSTATE 42501)): the result is not recorded"* ]]
	[[ $output == *"public.vk_nokey: 40 rows compared, 0 missing on target, 0 only on target, 0 differing"* ]]
	run pgs vf status
	[[ $output == *"verified:        never (pgsync verify)"* ]]
	tgt_sql "ALTER TABLE pgsync.job OWNER TO vf_tgt"
	run pgs vf verify --table public.vk_nokey
	[ "$status" -eq 0 ]
	[ "$(job_field vf verify_outcome)" = identical ]
}

@test "status shows the last verification; bad verify options are usage errors" {
	run pgs vf status
	[[ $output == *"verified:        identical at "*" (consistent point "*")"* ]]
	run pgs vf status --json
	jq -e '.verification.outcome == "identical" and (.verification.verified_lsn | type == "string") and (.verification.verified_at | type == "string")' <<<"$output"
	run pgs vf verify --table public.nope
	[ "$status" -eq 2 ]
	[[ $output == *"pgsync: error: table public.nope is not in replication.tables"* ]]
	run pgs vf verify --jobs 0
	[ "$status" -eq 2 ]
	run pgs vf status --show-keys
	[ "$status" -eq 2 ]
	[[ $output == *"--table, --jobs and --show-keys belong to verify"* ]]
}
