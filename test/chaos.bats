#!/usr/bin/env bats
# Chaos: the pipeline pg-walcat | pg-apply, bare and under pgsync run, under
# kill -9, server restarts and terminated backends, with nothing lost,
# repeated or acknowledged early. test/chaos does the work (CHAOS_SEED,
# FAULTS, DURATION to vary it); this file runs a short round of it in both
# modes, and checks that its invariant checker can fail. make soak
# (PGSYNC_TEST_SOAK=1) adds a round under pgsync run with a failover of the
# source as its last fault (PostgreSQL 17 or later: PGSYNC_MAJOR, default 17
# there).

# One of the longest files: started first (test/run-bats).
# run-bats: slow 2

load lib/cluster

setup_file() {
	cluster_start one
	cc -O1 -o "$BATS_FILE_TMPDIR/chaos-sampler" "$PGSYNC_ROOT/test/chaos-sampler.c" \
		-I "$(pg_config --includedir)" -L "$(pg_config --libdir)" -lpq
}

teardown_file() {
	cluster_stop_all
}

# chaos_run MODE: a short round of test/chaos (FAULTS, DURATION and
# CHAOS_SEED from the environment pass through).
chaos_run() {
	local major=()
	[[ -z ${PGSYNC_MAJOR:-} ]] || major=(PGSYNC_MAJOR="$PGSYNC_MAJOR")
	run env "${major[@]}" CHAOS_MODE="$1" FAULTS="${FAULTS:-6}" DURATION="${DURATION:-$2}" \
		"$PGSYNC_ROOT/test/chaos"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"${FAULTS:-6} faults survived"* ]]
	[[ $output == *", 0 missed,"* ]]
	[[ $output == *identical ]]
	[[ $output != *FAILED* ]]
}

@test "chaos, pg-walcat | pg-apply: 6 faults of 6 kinds (kill -9, immediate restarts, terminated backends) leave every table identical and never acknowledge early" {
	chaos_run pipe 30
}

@test "chaos, pgsync bootstrap + run: 5 faults during the chunked copy (kill -9 of bootstrap, pg-snapshot-dump, pg-apply, both servers restarted) and 6 of 6 kinds while it streams leave every table identical, the job never needs a resync and never acknowledges early" {
	chaos_run pgsync 25
	[[ $output == *", ${COPY_FAULTS:-5} copy faults survived, 0 missed,"* ]]
}

@test "chaos, pgsync run with a failover of the source (17+): the primary crashed once the job's slot is synced, the standby promoted; the job follows it on timeline 2, no resync, tables identical, nothing acknowledged early" {
	local m=${PGSYNC_MAJOR:-17} n=${FAULTS:-4}
	soak_only "pgsync-failover.bats fails the source over under a write load"
	((m >= 17)) || skip "failover slots need PostgreSQL 17 or later, PGSYNC_MAJOR is $m"
	run env PGSYNC_MAJOR="$m" CHAOS_MODE=pgsync CHAOS_FAILOVER=1 FAULTS="$n" COPY_FAULTS=0 \
		DURATION="${DURATION:-30}" "$PGSYNC_ROOT/test/chaos"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"$n faults survived ("*"failover x1"* ]]
	[[ $output == *", 0 missed,"* ]]
	[[ $output == *" s after the promotion on timeline 2, identical" ]]
	[[ $output != *FAILED* ]]
	[[ $output =~ invariant\ samples ]]
}

@test "chaos-sampler flags a slot confirmed past the target's applied_lsn, and a checkpoint file past it" {
	psql_at one <<-'SQL'
		CREATE SCHEMA IF NOT EXISTS pgsync;
		CREATE TABLE IF NOT EXISTS pgsync.job (job text PRIMARY KEY, applied_lsn pg_lsn);
		INSERT INTO pgsync.job VALUES ('early', '0/10');
		SELECT 1 FROM pg_create_logical_replication_slot('early', 'pgoutput');
	SQL
	printf '0/20\n' >"$BATS_TEST_TMPDIR/ack"
	"$BATS_FILE_TMPDIR/chaos-sampler" "$one_URL" "$one_URL" early early "$BATS_TEST_TMPDIR/ack" \
		"$BATS_TEST_TMPDIR/violations" >"$BATS_TEST_TMPDIR/out" &
	local pid=$!
	sleep 0.5
	kill -TERM "$pid"
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/violations"
	[[ $(cat "$BATS_TEST_TMPDIR/out") =~ ^samples\ [1-9][0-9]*\ violations\ [1-9] ]]
	grep -q 'slot confirmed_flush_lsn .* is past the target.s applied_lsn 0/10$' "$BATS_TEST_TMPDIR/violations"
	grep -q 'checkpoint file 0/20 is past the target.s applied_lsn 0/10$' "$BATS_TEST_TMPDIR/violations"
	psql_at one -c "SELECT pg_drop_replication_slot('early')"
}

@test "chaos-sampler is quiet while the slot and the checkpoint file stay at or below applied_lsn" {
	psql_at one <<-'SQL'
		CREATE SCHEMA IF NOT EXISTS pgsync;
		CREATE TABLE IF NOT EXISTS pgsync.job (job text PRIMARY KEY, applied_lsn pg_lsn);
		SELECT 1 FROM pg_create_logical_replication_slot('fine', 'pgoutput');
		INSERT INTO pgsync.job SELECT 'fine', confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'fine';
	SQL
	psql_at one -c "SELECT applied_lsn FROM pgsync.job WHERE job = 'fine'" >"$BATS_TEST_TMPDIR/ack"
	"$BATS_FILE_TMPDIR/chaos-sampler" "$one_URL" "$one_URL" fine fine "$BATS_TEST_TMPDIR/ack" \
		"$BATS_TEST_TMPDIR/violations" >"$BATS_TEST_TMPDIR/out" &
	local pid=$!
	sleep 0.5
	kill -TERM "$pid"
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/out"
	[[ $(cat "$BATS_TEST_TMPDIR/out") =~ ^samples\ [1-9][0-9]*\ violations\ 0\  ]]
	[ ! -e "$BATS_TEST_TMPDIR/violations" ]
	psql_at one -c "SELECT pg_drop_replication_slot('fine')"
}

@test "chaos rejects a malformed FAULTS, DURATION, CHAOS_MODE or CHAOS_FAILOVER setting with exit 2 and says which" {
	run env FAULTS=x "$PGSYNC_ROOT/test/chaos"
	[ "$status" -eq 2 ]
	[[ $output == *"FAULTS must be a non-negative integer"* ]]
	run env DURATION=3 "$PGSYNC_ROOT/test/chaos"
	[ "$status" -eq 2 ]
	[[ $output == *"DURATION must be at least 10 seconds"* ]]
	run env CHAOS_MODE=subscription "$PGSYNC_ROOT/test/chaos"
	[ "$status" -eq 2 ]
	[[ $output == *"CHAOS_MODE must be pipe or pgsync"* ]]
	run env CHAOS_FAILOVER=1 CHAOS_MODE=pipe "$PGSYNC_ROOT/test/chaos"
	[ "$status" -eq 2 ]
	[[ $output == *"CHAOS_FAILOVER=1 needs CHAOS_MODE=pgsync"* ]]
	run env CHAOS_FAILOVER=1 CHAOS_MODE=pgsync PGSYNC_MAJOR=16 "$PGSYNC_ROOT/test/chaos"
	[ "$status" -eq 2 ]
	[[ $output == *"CHAOS_FAILOVER=1 needs PGSYNC_MAJOR=17 or later"* ]]
}
