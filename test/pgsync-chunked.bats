#!/usr/bin/env bats
# pgsync bootstrap with resources.snapshot_mode = chunked: a copy in chunks
# that survives every interruption. Under a pgbench load with key-changing
# updates, the bootstrap is killed with -9 at seeded random points (pgsync
# itself and each program it runs), the servers are restarted,
# resources.snapshot_timeout expires and the target's disk fills up (the
# source's restart, the full disk and the count of rows a resumed copy of
# partitions inserts in make soak only: PGSYNC_TEST_SOAK=1); each
# time, pgsync bootstrap again continues: the job's slot is kept, the rows
# the resumed attempt inserts (pg_stat_user_tables.n_tup_ins on the target)
# are exactly the table minus the chunks already done, and after pgsync run
# every table is identical. The source's xmin moves on during the copy.
#
# The source role has exactly the guide's privileges, the target role is no
# superuser and the target database is LATIN1; two publications, a schema
# and a table with capitals, serial, composite, uuid, text and no keys (the
# text key in one piece: the databases' encodings differ; text keys in
# chunks are pgsync-chunked-keys.bats').
# The target's pgsync.table_chunk gets a trigger that makes each chunk take
# 50 ms, so that a copy of a few MB lasts long enough to be interrupted in
# the middle on any machine.
#
# CHUNKED_SEEDS: the seeds of the kill -9 test; seed N kills KINDS[N % 5].
# Default "5": pgsync itself (the kills of pg-snapshot-dump and pg-apply
# mid-group are pg-snapshot-dump-chunks.bats', and test/chaos's copy faults);
# CHUNKED_SEEDS="$(seq 1 10)" for the long run, about a minute a seed.

# One of the longest files: started first (test/run-bats).
# run-bats: slow 6

load lib/cluster
load pgsync-helpers
load chunked-helpers

readonly CT=public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.pgbench_history,Odd.Orders,public.t_uuid,public.t_comp,public.t_text,public.t_nokey,public.t_empty,public.t_one
# Tables the load never inserts into: what the resumed copy inserts in them
# is exactly what the chunks done before did not hold.
readonly NO_INSERTS="public.pgbench_accounts public.pgbench_branches public.pgbench_tellers public.t_comp public.t_text public.t_nokey public.t_empty public.t_one"
readonly KINDS=(pgsync pg-snapshot-dump pg-apply pg-slot pg-walcat)
readonly CK_JOB=ck CK_SLOT=ck_slot CK_NTABLES=11
readonly CK_TABLES="pgbench_accounts pgbench_branches pgbench_tellers pgbench_history Odd.Orders t_uuid t_comp t_text t_nokey t_empty t_one"

setup_file() {
	cluster_start src
	cluster_start tgt
	pgbench -i -s 1 -q -d "$src_URL" >/dev/null 2>&1
	psql_at src <<-'SQL'
		ALTER TABLE pgbench_history ADD COLUMN hid bigserial PRIMARY KEY;
		CREATE SCHEMA "Odd";
		CREATE SEQUENCE "Odd".code_seq;
		CREATE TABLE "Odd"."Orders" ("Id" bigserial PRIMARY KEY, "Note" text,
			"Code" bigint NOT NULL UNIQUE DEFAULT nextval('"Odd".code_seq'));
		INSERT INTO "Odd"."Orders" ("Note") SELECT 'caf' || chr(233) || ' ' || g FROM generate_series(1, 20000) g;
		CREATE TABLE t_uuid (id uuid PRIMARY KEY, v int);
		INSERT INTO t_uuid SELECT md5(g::text)::uuid, g FROM generate_series(1, 8000) g;
		-- a chunk boundary falls inside a run of equal leading key columns
		CREATE TABLE t_comp (a int, b int, v text, PRIMARY KEY (a, b));
		INSERT INTO t_comp SELECT g % 3, g, 'c' || g FROM generate_series(1, 12000) g;
		CREATE TABLE t_text (k text PRIMARY KEY, v int);
		INSERT INTO t_text SELECT 'k' || g, g FROM generate_series(1, 6000) g;
		CREATE TABLE t_nokey (a int, b text);
		ALTER TABLE t_nokey REPLICA IDENTITY FULL;
		INSERT INTO t_nokey SELECT g, 'n' || g FROM generate_series(1, 3000) g;
		CREATE TABLE t_empty (id int PRIMARY KEY);
		CREATE TABLE t_one (id int PRIMARY KEY, v text);
		INSERT INTO t_one VALUES (7, 'one');
		ANALYZE;
		CREATE PUBLICATION ck_bench FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history;
		CREATE PUBLICATION ck_rest FOR TABLE "Odd"."Orders", t_uuid, t_comp, t_text, t_nokey, t_empty, t_one;
	SQL
	psql_at tgt -c "CREATE DATABASE ck ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	export tgt_URL="$tgt_URL dbname=ck"
	lp_source_role ck_src public.pgbench_accounts public.pgbench_branches public.pgbench_tellers \
		public.pgbench_history Odd.Orders public.t_uuid public.t_comp public.t_text public.t_nokey \
		public.t_empty public.t_one
	lp_target_role ck_tgt ck
	job_conf ck ck_slot "ck_bench, ck_rest" "$CT" resources.snapshot_mode=chunked \
		resources.chunk_rows=2000 resources.chunk_bytes=64kB resources.chunk_group_seconds=1 \
		resources.max_parallel_copies=2 >/dev/null
	# The load: pgbench's own, and rows that move between chunks, a
	# table growing at its end, inserts of random uuids.
	cat >"$BATS_FILE_TMPDIR/load.sql" <<-'SQL'
		\set k random(1, 20000)
		UPDATE "Odd"."Orders" SET "Id" = "Id" + 100000 WHERE "Id" = :k;
		UPDATE "Odd"."Orders" SET "Id" = "Id" - 100000 WHERE "Id" = :k + 100000 AND :k % 2 = 0;
		INSERT INTO "Odd"."Orders" ("Note") VALUES ('grown');
		INSERT INTO t_uuid VALUES (gen_random_uuid(), :k);
		UPDATE t_comp SET v = v || '.' WHERE a = :k % 3 AND b = :k % 12000;
		UPDATE t_nokey SET b = b || '.' WHERE a = :k % 3000;
	SQL
}

teardown_file() {
	stop_load
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
	if [[ -f $BATS_FILE_TMPDIR/mounted ]]; then
		local mnt
		mnt=$(<"$BATS_FILE_TMPDIR/mounted")
		umount "$mnt" && rmdir "$mnt" "$(dirname "$mnt")" 2>/dev/null || true
	fi
}

# --- helpers ---------------------------------------------------------------------

start_load() {
	pgbench -n -c 1 -R 40 -T 600 -d "$src_URL" >/dev/null 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/load1.pid"
	pgbench -n -c 1 -R 40 -T 600 -f "$BATS_FILE_TMPDIR/load.sql" -d "$src_URL" >/dev/null 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/load2.pid"
}

# A fresh start: no job, no slot, no target tables, and each chunk slowed
# down on the target (see the top of the file).
reset_job() {
	if run_alive; then stop_run KILL; fi
	pgs ck cleanup --yes >/dev/null 2>&1 || true
	psql_at tgt -c "DROP SCHEMA IF EXISTS \"Odd\" CASCADE" -c "DROP TABLE IF EXISTS pgbench_accounts,
		pgbench_branches, pgbench_tellers, pgbench_history, t_uuid, t_comp, t_text, t_nokey, t_empty, t_one" \
		-c "DELETE FROM pgsync.pending_definitions" 2>/dev/null || true
	rm -rf "$BATS_FILE_TMPDIR/ck.state"
}

# group_started_after N: the background bootstrap's pg-snapshot-dump began
# group N + 1.
group_started_after() {
	(($(grep -c "pg-snapshot-dump: copying" "$BATS_TEST_TMPDIR/bs.log" || true) > $1))
}

action_is() {
	[ "$(pgs ck status --json | jq -r .action)" = "$1" ]
}

# --- tests ----------------------------------------------------------------------------

@test "a chunked bootstrap under load copies every table in chunks at temporary slots' snapshots, then the stream keeps them identical" {
	reset_job
	start_load
	run pgs ck bootstrap
	stop_load
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"created replication slot ck_slot at "*": the stream starts there"* ]]
	[[ $output == *"chunk group 1 at "* ]]
	[[ $output == *"created the tables' keys and the indexes that are not unique"* ]]
	[[ $output == *"created the other unique and exclusion constraints"* ]]
	# Only the job's slot is left: the groups' were temporary.
	[ "$(psql_at src -c "SELECT string_agg(slot_name, ',') FROM pg_replication_slots")" = ck_slot ]
	# The text key is in one piece, and the log says why: the target
	# database is LATIN1, so its order cannot be proven to be the source's.
	[[ $output == *'public.t_text is copied in one piece, not in key chunks: key column "k": the source database'"'"'s encoding is UTF8, the target'"'"'s LATIN1'* ]]
	# Tables with an integer, composite or uuid key above chunk_rows are in
	# key chunks; the text key, no key and the small ones in one piece.
	run psql_at tgt -c "SELECT table_name, count(*) > 1, bool_and(key_columns IS NOT NULL) FROM pgsync.table_chunk
		WHERE job = 'ck' GROUP BY 1 ORDER BY 1"
	echo "$output"
	[[ $output == *"pgbench_accounts|t|t"* && $output == *"Orders|t|t"* && $output == *"t_uuid|t|t"* ]]
	[[ $output == *"t_comp|t|t"* && $output == *"t_text|f|f"* && $output == *"t_nokey|f|f"* ]]
	[[ $output == *"t_empty|f|f"* && $output == *"t_one|f|f"* ]]
	# The late unique constraint exists, next to the key.
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_constraint WHERE conrelid = '\"Odd\".\"Orders\"'::regclass AND contype IN ('p', 'u')")" = 2 ]
	run pgs ck status
	echo "$output"
	[[ $output =~ chunks:\ +[0-9]+\ done,\ [0-9]+\ rows,\ [0-9]+\ bytes,\ last\ at\ [0-9A-F]+/[0-9A-F]+ ]]
	all_identical
}

@test "pgsync status during a chunked copy: chunks, rows, bytes, the time left and the WAL the slot retains" {
	reset_job
	catalog_ready
	slow_chunks
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	wait_until 120 chunks_at_least 10
	run pgs ck status --json
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -r .state <<<"$output")" = SNAPSHOTTING ]
	[ "$(jq -r .snapshot.mode <<<"$output")" = chunked ]
	(($(jq -r .snapshot.chunks.done <<<"$output") >= 10))
	(($(jq -r .snapshot.chunks.rows <<<"$output") > 0))
	(($(jq -r .snapshot.chunks.bytes <<<"$output") > 0))
	[[ $(jq -r .snapshot.chunks.eta_seconds <<<"$output") =~ ^[0-9]+$ ]]
	[[ $(jq -r .slot.retained_bytes <<<"$output") =~ ^[0-9]+$ ]]
	run pgs ck status
	[[ $output =~ chunks:\ +[0-9]+\ done,.*about\ [0-9]+\ s\ left\ at\ [0-9]+\ rows/s ]]
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 300
	cat "$BATS_TEST_TMPDIR/bs.log"
	[ "$BG_STATUS" -eq 0 ]
	grep -q "replication slot ck_slot retains [0-9]* bytes of WAL" "$BATS_TEST_TMPDIR/bs.log"
}

@test "the source's xmin moves on during a long chunked copy: no session of pgsync's holds one older than a chunk group" {
	reset_job
	catalog_ready
	slow_chunks
	start_load
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	wait_until 120 grep -q "chunk group 1 at" "$BATS_TEST_TMPDIR/bs.log"
	# A transaction that ends now: every snapshot taken after it has a
	# newer xmin. The group after the next one takes its snapshot later:
	# look while it copies (it may be the last one).
	local x
	x=$(psql_at src -c "SELECT txid_current() % 4294967296")
	wait_until 120 grep -q 'created replication slot "pgsync_copy_[0-9]*_3"' "$BATS_TEST_TMPDIR/bs.log"
	run psql_at src -c "SELECT count(*), count(*) FILTER (WHERE backend_xmin IS NOT NULL AND age(backend_xmin) >= age('$x'::text::xid))
		FROM pg_stat_activity WHERE application_name IN ('pgsync', 'pg-slot', 'pg-snapshot-dump', 'pg_dump') OR backend_type = 'walsender'"
	echo "sessions, older than xid $x: $output"
	[[ $output =~ ^[1-9][0-9]*\|0$ ]]
	# No replication slot holds a data xmin (the job's holds only catalog_xmin).
	[ "$(psql_at src -c "SELECT count(*) FROM pg_replication_slots WHERE xmin IS NOT NULL")" = 0 ]
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 300
	stop_load
	[ "$BG_STATUS" -eq 0 ]
	grep -c "chunk group [0-9]* at" "$BATS_TEST_TMPDIR/bs.log" >&3
	all_identical
}

# one_seed SEED: a bootstrap killed with -9 at the seed's point, resumed.
one_seed() {
	local seed=$1 kind point pid
	RANDOM=$seed
	kind=${KINDS[seed % ${#KINDS[@]}]}
	point=$((1 + RANDOM % 60))
	reset_job
	catalog_ready
	slow_chunks
	start_load
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	wait_until 120 chunks_at_least "$point"
	case $kind in
	pg-walcat)
		# A large transaction between the chunks for the catch-up to apply.
		psql_at src -c "UPDATE pgbench_accounts SET filler = 'seed $seed'" >/dev/null
		pid=$(kill_child pg-walcat) || pid=none
		;;
	pgsync)
		pid=$BG_PID
		kill -KILL "$pid" || true
		;;
	pg-slot)
		# Not the holder of the group under way: once every worker
		# imported its snapshot, that one's end interrupts nothing and the
		# bootstrap just completes. The next group's, the moment it runs,
		# before its snapshot is exported or imported.
		pid=$(kill_child pg-slot "$(child_pid pg-slot)") || pid=none
		;;
	*) pid=$(kill_child "$kind") || pid=none ;;
	esac
	echo "# seed $seed: kill -9 of $kind (pid $pid) after $(chunks_done) chunks" >&3
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 120
	cat "$BATS_TEST_TMPDIR/bs.log"
	if [ "$BG_STATUS" -eq 0 ]; then
		# A program may finish before the kill lands, and the last group
		# has no next one whose pg-slot could be killed.
		echo "# seed $seed: the bootstrap completed regardless" >&3
		stop_load
		all_identical
		return
	fi
	# The job's slot is kept, and with it the chunks.
	slot_exists ck_slot
	[ "$(job_state ck)" = SNAPSHOTTING ]
	(($(chunks_done) > 0))
	before_resume
	resume
	resumed_inserted_only_the_rest
	stop_load
	all_identical
}

@test "kill -9 of pgsync or any program at random points of a chunked copy under load: bootstrap again continues, copies only what was not done, tables identical (CHUNKED_SEEDS)" {
	local seed
	for seed in ${CHUNKED_SEEDS:-5}; do
		one_seed "$seed"
	done
}

# interrupted_then_resumed [target]: the bootstrap in the background ended
# with an error; the slot and the chunks are kept, and bootstrap again
# continues. With "target": the target was down when it stopped, so it
# could record neither the error nor the count of chunks kept.
interrupted_then_resumed() {
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 300
	cat "$BATS_TEST_TMPDIR/bs.log"
	[ "$BG_STATUS" -ne 0 ]
	grep -q "replication slot ck_slot and the .*chunks copied.* are kept; run pgsync bootstrap again to continue" \
		"$BATS_TEST_TMPDIR/bs.log"
	slot_exists ck_slot
	if [[ ${1:-} != target ]]; then
		grep -q "replication slot ck_slot and the [0-9]* chunks copied ([0-9]* of 11 tables done) are kept" "$BATS_TEST_TMPDIR/bs.log"
		[[ $(job_field ck last_error) == "bootstrap failed while "*" are kept" ]]
		# (once the failed attempt's heartbeat is stale)
		wait_until 30 action_is "pgsync bootstrap"
	fi
	# A table copied in one piece whose copy had not finished gets a stray
	# row, as an attempt stopped in its middle leaves: the resume must
	# empty it before copying it again.
	local stray=0
	if [[ $(psql_at tgt -c "SELECT count(*) FROM pgsync.table_sync WHERE job = 'ck' AND table_name = 't_nokey' AND state <> 'done'") == 1 ]]; then
		psql_at tgt -c "INSERT INTO t_nokey VALUES (-1, 'stray')" >/dev/null
		stray=1
	fi
	echo "# t_nokey unfinished before the resume: $stray" >&3
	before_resume
	resume
	((stray == 0)) || [[ $output == *"emptied the tables whose copy in one piece an earlier attempt did not finish"* ]]
	resumed_inserted_only_the_rest
	all_identical
}

@test "the source restarted during a chunked copy: bootstrap again continues from the kept slot" {
	soak_only "the target restarted and kill -9 of pgsync, in this file, resume from the kept slot"
	# The restart must come while pg-snapshot-dump reads, as a group starts:
	# later in a group it waits for the slower target with what it has
	# read, and one that comes then ends only connections it no longer
	# needs, which is no interruption. Up to three tries.
	local try groups
	for try in 1 2 3; do
		reset_job
		catalog_ready
		slow_chunks
		pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
		wait_until 120 chunks_at_least 20
		groups=$(grep -c "pg-snapshot-dump: copying" "$BATS_TEST_TMPDIR/bs.log" || true)
		wait_until 60 group_started_after "$groups"
		cluster_restart src --mode immediate
		bg_wait "$BATS_TEST_TMPDIR/bs.log" 300
		[ "$BG_STATUS" -eq 0 ] || break
		echo "# try $try: the copy went on: the restart came between two groups' reading" >&3
	done
	interrupted_then_resumed
}

@test "the target restarted during a chunked copy: bootstrap again continues, the chunk in flight copied anew" {
	reset_job
	catalog_ready
	slow_chunks
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	wait_until 120 chunks_at_least 20
	cluster_restart tgt --mode immediate
	interrupted_then_resumed target
}

@test "resources.snapshot_timeout ends a chunked bootstrap that waits for a source transaction; bootstrap again continues" {
	soak_only "snapshot_timeout is in pgsync-bootstrap.bats, and kill -9 in this file resumes a chunked copy from its kept slot"
	reset_job
	catalog_ready
	slow_chunks
	local conf=$BATS_FILE_TMPDIR/ck.conf
	cp "$conf" "$conf.orig"
	echo "resources.snapshot_timeout = 14s" >>"$conf"
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	wait_until 120 chunks_at_least 5
	# A transaction left open: the next group's temporary slot waits for it.
	psql_at src -c "BEGIN; SELECT txid_current(); SELECT pg_sleep(60)" >/dev/null 2>&1 &
	local open=$!
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 120
	kill "$open" 2>/dev/null || true
	psql_at src -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()" >/dev/null
	mv -f "$conf.orig" "$conf"
	cat "$BATS_TEST_TMPDIR/bs.log"
	grep -q "resources.snapshot_timeout (14.000 s) expired" "$BATS_TEST_TMPDIR/bs.log"
	interrupted_then_resumed
}

@test "the target's disk full during a chunked copy, then space freed: bootstrap again continues" {
	soak_only "the target restarted, in this file, fails a chunk in flight and resumes"
	[[ $(id -u) == 0 ]] || skip "mounting a small file system for the target database needs root"
	# Beside the clusters: the server's user can reach that directory.
	local mnt admin="$tgt_URL dbname=postgres"
	mnt=$(dirname "$(cluster_dir tgt)")/small
	mkdir -p "$mnt"
	mount -t tmpfs -o size=20m tmpfs "$mnt" || skip "cannot mount a tmpfs here"
	echo "$mnt" >"$BATS_FILE_TMPDIR/mounted"
	mkdir "$mnt/ts"
	chown postgres "$mnt/ts" 2>/dev/null || true
	reset_job
	catalog_ready
	slow_chunks
	# The whole target database on 20 MB, about 8 of them its catalog:
	# the copy fills it.
	psql -X -q -v ON_ERROR_STOP=1 -d "$admin" -c "CREATE TABLESPACE ck_small LOCATION '$mnt/ts'"
	wait_until 60 psql -X -q -d "$admin" -c "ALTER DATABASE ck SET TABLESPACE ck_small"
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 300
	cat "$BATS_TEST_TMPDIR/bs.log"
	grep -q "SQLSTATE 53100" "$BATS_TEST_TMPDIR/bs.log"
	# Space again.
	mount -o remount,size=256m "$mnt"
	interrupted_then_resumed target
	# (once the sessions of the run have gone)
	wait_until 60 psql -X -q -d "$admin" -c "ALTER DATABASE ck SET TABLESPACE pg_default"
	psql -X -q -v ON_ERROR_STOP=1 -d "$admin" -c "DROP TABLESPACE ck_small"
}

@test "bootstrap --restart-snapshot after an interrupted chunked copy starts over: a new slot, no chunk kept" {
	reset_job
	catalog_ready
	slow_chunks
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" ck bootstrap
	wait_until 120 chunks_at_least 10
	kill -TERM "$BG_PID"
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 120
	cat "$BATS_TEST_TMPDIR/bs.log"
	[ "$BG_STATUS" -eq 1 ]
	local l0
	l0=$(job_field ck consistent_lsn)
	run pgs ck bootstrap --restart-snapshot
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"dropping replication slot ck_slot of job ck to start over"* ]]
	[[ $output != *"continuing the copy"* ]]
	[ "$(job_field ck consistent_lsn)" != "$l0" ]
	all_identical
}

@test "pgsync check: a chunked bootstrap needs a spare replication slot and WAL sender for its temporary slot (exit 3 naming what to set)" {
	cluster_start low --set max_replication_slots=1 --set max_wal_senders=2
	psql_at low -c "CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION lp FOR TABLE t" >/dev/null
	job_conf lowjob lowjob_slot lp public.t resources.snapshot_mode=chunked >/dev/null
	run env PGSYNC_SOURCE_URL="$low_URL" PGSYNC_TARGET_URL="$tgt_URL" TMPDIR="$(pgs_tmpdir)" \
		pgsync -c "$BATS_FILE_TMPDIR/lowjob.conf" check
	echo "$output"
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: max_replication_slots = 1 with 0 in use, this job needs one more, and its chunked bootstrap one more at a time for the temporary slot of each chunk group; fix: raise max_replication_slots to at least 2 (server restart)"* ]]
	[[ $output == *"ok    source: max_wal_senders = 2 with 0 in use; this job needs one (during its chunked bootstrap: the temporary slot's) and check one while it probes"* ]]
	# A single-snapshot bootstrap needs no second slot.
	sed -i 's/^resources.snapshot_mode = chunked$/resources.snapshot_mode = single/' "$BATS_FILE_TMPDIR/lowjob.conf"
	run env PGSYNC_SOURCE_URL="$low_URL" PGSYNC_TARGET_URL="$tgt_URL" TMPDIR="$(pgs_tmpdir)" \
		pgsync -c "$BATS_FILE_TMPDIR/lowjob.conf" check
	echo "$output"
	[[ $output == *"ok    source: max_replication_slots = 1 with 0 in use, this job needs one more"* ]]
	cluster_stop low
}

@test "cleanup --yes after a chunked copy removes its chunk rows with the job, and the slot" {
	reset_job
	catalog_ready
	# check warns of a target role without TEMPORARY before a chunked copy.
	psql_at tgt -c "REVOKE TEMPORARY ON DATABASE ck FROM PUBLIC" >/dev/null
	run pgs ck check
	psql_at tgt -c "GRANT TEMPORARY ON DATABASE ck TO PUBLIC" >/dev/null
	echo "$output"
	[[ $output == *"target: no TEMPORARY on database ck: a chunked copy's catch-up fails on a table cut by a text, numeric, date or timestamp key; fix: GRANT TEMPORARY ON DATABASE ck TO "* ]]
	run pgs ck check
	[[ $output != *"no TEMPORARY"* ]]
	run pgs ck bootstrap
	[ "$status" -eq 0 ]
	(($(chunks_done) > 0))
	run pgs ck cleanup --yes
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(chunks_done)" = 0 ]
	slot_gone ck_slot
}

# --- partitioned tables ---------------------------------------------------------------

# Two partitioned tables, each in two levels (a range partition
# sub-partitioned by hash), keyed by (id, k), which holds both partition
# keys: cp_r published via its root, cp_l by its leaves (configured as
# such). The target has cp_l already, as the guide says for partitions
# published under their own names; cp_r too when no pg_dump here can read
# the source.
readonly CP_LEAVES="cp_r_1 cp_r_2a cp_r_2b cp_l_1 cp_l_2a cp_l_2b"

cp_define() {
	cat <<-SQL
		CREATE TABLE IF NOT EXISTS $1 (id bigint, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (id);
		CREATE TABLE IF NOT EXISTS $1_1 PARTITION OF $1 FOR VALUES FROM (MINVALUE) TO (10000);
		CREATE TABLE IF NOT EXISTS $1_2 PARTITION OF $1 FOR VALUES FROM (10000) TO (MAXVALUE) PARTITION BY HASH (k);
		CREATE TABLE IF NOT EXISTS $1_2a PARTITION OF $1_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
		CREATE TABLE IF NOT EXISTS $1_2b PARTITION OF $1_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
	SQL
}

cp_setup() {
	[[ -f $BATS_FILE_TMPDIR/cp.conf ]] && return 0
	{
		cp_define cp_r
		cp_define cp_l
		cat <<-'SQL'
			CREATE SEQUENCE cp_grow START 300000;
			INSERT INTO cp_r SELECT g, g % 7, md5(g::text) FROM generate_series(1, 40000) g;
			INSERT INTO cp_l SELECT * FROM cp_r;
			ANALYZE cp_r, cp_l;
			CREATE PUBLICATION cp_root FOR TABLE cp_r WITH (publish_via_partition_root = true);
			CREATE PUBLICATION cp_leaf FOR TABLE cp_l;
		SQL
	} | psql_at src >/dev/null
	# (pg_dump reads the partitions of the table it creates)
	lp_source_role ck_src public.cp_r public.cp_r_1 public.cp_r_2 public.cp_r_2a public.cp_r_2b \
		public.cp_l_1 public.cp_l_2a public.cp_l_2b
	psql_at src -c "GRANT SELECT ON cp_grow TO ck_src" >/dev/null
	job_conf cp cp_slot "cp_root, cp_leaf" public.cp_r,public.cp_l_1,public.cp_l_2a,public.cp_l_2b \
		resources.snapshot_mode=chunked resources.chunk_rows=2000 resources.chunk_bytes=64kB \
		resources.chunk_group_seconds=1 resources.max_parallel_copies=2 >/dev/null
	# Rows that move between chunks, between the range partitions and
	# between the hash ones, a table growing at its end, deletes.
	local t
	for t in cp_r cp_l; do
		cat <<-SQL
			\set k random(1, 40000)
			UPDATE $t SET id = id + 100000 WHERE id = :k;
			UPDATE $t SET id = id - 100000 WHERE id = :k + 100000 AND :k % 2 = 0;
			UPDATE $t SET k = k + 1 WHERE id = :k + 1;
			INSERT INTO $t VALUES (nextval('cp_grow'), :k % 7, 'grown');
			DELETE FROM $t WHERE id = :k + 2 AND :k % 11 = 0;
		SQL
	done >"$BATS_FILE_TMPDIR/cp-move.sql"
	for t in cp_r cp_l; do
		printf '\\set k random(1, 40000)\nUPDATE %s SET v = v || %s WHERE id = :k;\n' "$t" "'.'"
	done >"$BATS_FILE_TMPDIR/cp-inplace.sql"
}

cp_reset() {
	if run_alive; then stop_run KILL; fi
	pgs cp cleanup --yes >/dev/null 2>&1 || true
	psql_at tgt -c "DROP TABLE IF EXISTS cp_r, cp_l" >/dev/null
	{
		pg_dump_reads src || cp_define cp_r
		cp_define cp_l
		echo "GRANT ALL ON ALL TABLES IN SCHEMA public TO ck_tgt;"
	} | psql_at tgt >/dev/null
	rm -rf "$BATS_FILE_TMPDIR/cp.state"
}

cp_load() {
	pgbench -n -c 1 -R 60 -T 600 -f "$BATS_FILE_TMPDIR/cp-$1.sql" -d "$src_URL" >/dev/null 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/load1.pid"
}

cp_chunks() {
	psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'cp'" 2>/dev/null || echo 0
}

cp_chunks_at_least() {
	(($(cp_chunks) >= $1))
}

# The target's n_tup_ins summed over the leaves of cp_r and of cp_l.
cp_inserted() {
	psql_at tgt -c "SELECT pg_stat_clear_snapshot(); SELECT coalesce(sum(n_tup_ins) FILTER (WHERE relname LIKE 'cp\_r\_%'), 0)
		|| ' ' || coalesce(sum(n_tup_ins) FILTER (WHERE relname LIKE 'cp\_l\_%'), 0)
		FROM pg_stat_user_tables WHERE relname = ANY (string_to_array('$CP_LEAVES', ' '))" | tail -n 1
}

cp_inserted_is() {
	[[ $(cp_inserted) == "$1" ]]
}

# The rows of the chunks done of cp_r and of the leaves of cp_l.
cp_done_rows() {
	psql_at tgt -c "SELECT coalesce(sum(rows) FILTER (WHERE table_name = 'cp_r'), 0) || ' '
		|| coalesce(sum(rows) FILTER (WHERE table_name LIKE 'cp\_l\_%'), 0) FROM pgsync.table_chunk WHERE job = 'cp'"
}

# cp_both_started: cp_r and cp_l each have rows in done chunks, or the copy
# is over (then the caller sees it completed).
cp_both_started() {
	local dr dl
	read -r dr dl <<<"$(cp_done_rows)"
	((dr > 0 && dl > 0)) || ! kill -0 "$BG_PID" 2>/dev/null
}

# cp_killed_and_resumed LOAD: a bootstrap under LOAD, pgsync killed with -9
# mid-copy, bootstrap again. Sets CP_DONE (the rows in chunks done before
# the resume) and CP_INSERTED (what the resumed attempt inserted), or
# CP_DONE=completed when the copy finished before the kill.
cp_killed_and_resumed() {
	local t
	cp_reset
	catalog_ready
	slow_chunks
	cp_load "$1"
	pgs_bg "$BATS_TEST_TMPDIR/bs.log" cp bootstrap
	wait_until 120 cp_chunks_at_least 12 || { cat "$BATS_TEST_TMPDIR/bs.log"; return 1; }
	# Both tables partly copied, so that the resume has done chunks of each
	# to leave alone (the workers may have started on one table only).
	wait_until 120 cp_both_started || { cat "$BATS_TEST_TMPDIR/bs.log"; return 1; }
	kill -KILL "$BG_PID" || true
	echo "# $1: kill -9 of pgsync after $(cp_chunks) chunks" >&3
	bg_wait "$BATS_TEST_TMPDIR/bs.log" 120
	stop_load
	if [ "$BG_STATUS" -eq 0 ]; then
		CP_DONE=completed
		return
	fi
	[ "$(job_state cp)" = SNAPSHOTTING ]
	slot_exists cp_slot
	wait_until 60 no_apply_sessions
	CP_DONE=$(cp_done_rows)
	for t in $CP_LEAVES; do
		psql_at tgt -c "SELECT pg_stat_reset_single_table_counters('$t'::regclass)" >/dev/null
	done
	wait_until 30 cp_inserted_is "0 0"
	run pgs cp bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"continuing the copy of job cp: "*" chunks are on the target, replication slot cp_slot is kept"* ]]
	[[ $output == *"bootstrap of job cp complete: 4 tables, "* ]]
	wait_until 60 no_apply_sessions
	CP_INSERTED=$(cp_inserted)
}

# More than one chunk of cp_r under its own name and of each leaf of cp_l,
# none of their partitions'; the stream then keeps every table identical.
cp_chunked_and_identical() {
	run psql_at tgt -c "SELECT string_agg(table_name || ':' || (count > 1)::text, ' ' ORDER BY table_name)
		FROM (SELECT table_name, count(*) FROM pgsync.table_chunk WHERE job = 'cp' AND key_columns = '{id,k}' GROUP BY 1) c"
	echo "$output"
	[ "$output" = "cp_l_1:true cp_l_2a:true cp_l_2b:true cp_r:true" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = 'cp'
		AND table_name NOT IN ('cp_r', 'cp_l_1', 'cp_l_2a', 'cp_l_2b')")" = 0 ]
	start_run cp
	wait_until 60 grep -q "streaming slot" "$(current_run_log)" || { run_log cp; return 1; }
	wait_until 120 applied_reaches cp || { run_log cp; return 1; }
	kill -TERM "$(<"$(current_run_log).pid")"
	bg_wait "$(current_run_log)" 180 || { run_log cp; return 1; }
	[ "$BG_STATUS" -eq 0 ]
	# the tables, and the rows in each partition
	same_tables cp_r cp_l $CP_LEAVES
}

@test "partitioned tables in chunks, via their root and by their leaves, under load with rows moving between partitions and chunks: kill -9 mid-copy, bootstrap again, identical" {
	cp_setup
	cp_killed_and_resumed move
	echo "# chunks done before the resume (cp_r, cp_l): $CP_DONE" >&3
	cp_chunked_and_identical
	# the unique key of the root, built after the load
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_partition_tree('cp_r_pkey')")" = 5 ]
}

@test "a resumed chunked copy of partitioned tables inserts only the rows of the chunks not done before, summed over the partitions" {
	soak_only "partitioned tables in chunks, killed mid-copy and resumed, in this file"
	cp_setup
	cp_killed_and_resumed inplace
	[ "$CP_DONE" != completed ] || skip "the copy finished before the kill"
	local total
	total=$(psql_at tgt -c "SELECT (SELECT count(*) FROM cp_r) || ' ' || (SELECT count(*) FROM cp_l)")
	echo "# rows (cp_r, cp_l): $total; in chunks done before the resume: $CP_DONE; inserted by the resume: $CP_INSERTED" >&3
	read -r tr tl <<<"$total"
	read -r dr dl <<<"$CP_DONE"
	((dr > 0 && dl > 0))
	[ "$CP_INSERTED" = "$((tr - dr)) $((tl - dl))" ]
	cp_chunked_and_identical
	pgs cp cleanup --yes >/dev/null
}
