#!/usr/bin/env bats
# Continuity: every condition that makes a job RESYNC_REQUIRED (exit 4) on
# real servers: the slot dropped, the slot invalidated by
# max_slot_wal_keep_size (at start and while streaming), another source with
# the same slot name, the slot confirmed past the target. Once marked, run
# refuses (exit 4) and status names the action.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	cluster_start other
	# Its own cluster: invalidation hits every slot that falls behind.
	cluster_start inv --set max_wal_size=64MB
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

# job NAME: tables NAME_t on the source (src_URL), a publication and a job.
make_job() {
	local name=$1 url=${2:-$src_URL}
	psql -X -q -v ON_ERROR_STOP=1 -d "$url" -c "CREATE TABLE ${name}_t (id int PRIMARY KEY, v text);
		INSERT INTO ${name}_t SELECT g, 'v' || g FROM generate_series(1, 200) g;
		CREATE PUBLICATION ${name}_pub FOR TABLE ${name}_t"
	job_conf "$name" "${name}_slot" "${name}_pub" "public.${name}_t" >/dev/null
}

# Fill and switch WAL segments on a cluster until the slot falls out of
# max_slot_wal_keep_size, then checkpoint so that the server invalidates it.
push_wal_past() {
	local i
	for i in 1 2 3 4; do
		psql_at "$1" -c "CREATE TABLE IF NOT EXISTS wal_filler (pad text); INSERT INTO wal_filler SELECT repeat('w', 500) FROM generate_series(1, 2000); SELECT pg_switch_wal()" >/dev/null
	done
	psql_at "$1" -c "CHECKPOINT"
}

slot_lost() {
	[[ $(psql_at "$1" -c "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$2'") == lost ]]
}

@test "a dropped slot: status sees it before run does; run marks RESYNC_REQUIRED and exits 4" {
	make_job r1
	pgs r1 bootstrap
	psql_at src -c "SELECT pg_drop_replication_slot('r1_slot')"
	run pgs r1 status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.state == "CATCHING_UP" and .resync_required == true and
		.resync_reason == "replication slot r1_slot no longer exists on the source" and
		.slot.exists == false and .action == "pgsync cleanup --yes && pgsync bootstrap --restart-snapshot"'
	run pgs r1 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r1 requires a resync: replication slot r1_slot no longer exists on the source; pgsync cleanup --yes && pgsync bootstrap --restart-snapshot"* ]]
	[ "$(job_state r1)" = RESYNC_REQUIRED ]
	[ "$(job_field r1 last_error)" = "replication slot r1_slot no longer exists on the source" ]
}

@test "run refuses a job in RESYNC_REQUIRED with exit 4, and the documented resync restores it" {
	run pgs r1 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r1 requires a resync (replication slot r1_slot no longer exists on the source): pgsync cleanup --yes && pgsync bootstrap --restart-snapshot"* ]]
	run pgs r1 check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  target: job r1 is RESYNC_REQUIRED"* ]]
	psql_at src -c "UPDATE r1_t SET v = 'changed while lost' WHERE id < 50"
	run pgs r1 cleanup --yes
	[ "$status" -eq 0 ]
	run pgs r1 bootstrap --restart-snapshot
	[ "$status" -eq 0 ]
	same_tables r1_t
	[ "$(job_state r1)" = CATCHING_UP ]
}

@test "a slot invalidated by max_slot_wal_keep_size while the job is stopped: run exits 4" {
	make_job r2 "$inv_URL"
	SRC_URL=$inv_URL run pgs r2 bootstrap
	[ "$status" -eq 0 ]
	cluster_set inv max_slot_wal_keep_size=1MB >/dev/null
	push_wal_past inv
	wait_until 20 slot_lost inv r2_slot
	SRC_URL=$inv_URL run pgs r2 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r2 requires a resync: replication slot r2_slot was invalidated (wal_status lost"*"): the WAL the job needs was removed"* ]]
	[ "$(job_state r2)" = RESYNC_REQUIRED ]
	SRC_URL=$inv_URL run pgs r2 status --json
	echo "$output" | jq -e '.resync_required == true and .slot.wal_status == "lost"'
}

@test "a slot invalidated while streaming is caught (monitor or the server's error): exit 4" {
	cluster_set inv max_slot_wal_keep_size=-1 >/dev/null
	make_job r5 "$inv_URL"
	SRC_URL=$inv_URL pgs r5 bootstrap
	SRC_URL=$inv_URL start_run r5
	wait_until 20 state_is r5 STREAMING
	# Freeze the consumer so that the slot falls behind, then shrink the
	# allowance: the checkpointer invalidates the slot and ends its sender.
	walcat=$(ps -o pid=,comm= --ppid "$RUN_PID" | awk '$2 == "pg-walcat" {print $1}')
	[ -n "$walcat" ]
	kill -STOP "$walcat"
	cluster_set inv max_slot_wal_keep_size=1MB >/dev/null
	push_wal_past inv
	wait_until 20 slot_lost inv r5_slot
	kill -CONT "$walcat"
	wait_run 60
	cat "$(current_run_log)"
	[ "$RUN_STATUS" -eq 4 ]
	[ "$(job_state r5)" = RESYNC_REQUIRED ]
	[[ $(job_field r5 last_error) == *"r5_slot"* ]]
	cluster_set inv max_slot_wal_keep_size=-1 >/dev/null
}

@test "another server with the same slot name: the system identifier differs, run exits 4" {
	make_job r3
	pgs r3 bootstrap
	# The same tables, publication and slot name, on another cluster.
	psql_at other -c "CREATE TABLE r3_t (id int PRIMARY KEY, v text); CREATE PUBLICATION r3_pub FOR TABLE r3_t"
	psql_at other -c "SELECT pg_create_logical_replication_slot('r3_slot', 'pgoutput')" >/dev/null
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	other_sysid=$(psql_at other -c "SELECT system_identifier FROM pg_control_system()")
	SRC_URL=$other_URL run pgs r3 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r3 requires a resync: the source system identifier is $other_sysid, but the job was copied from $sysid: this is another server"* ]]
	[ "$(job_state r3)" = RESYNC_REQUIRED ]
	# The other server's slot is not ours to touch.
	[ "$(psql_at other -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'r3_slot' AND NOT active")" = 1 ]
}

@test "a slot confirmed beyond the target's applied position: run exits 4, nothing is skipped silently" {
	make_job r4
	pgs r4 bootstrap
	psql_at src -c "INSERT INTO r4_t VALUES (1000, 'never applied')"
	# Something else consumed and confirmed the change the target lacks.
	psql_at src -c "SELECT pg_replication_slot_advance('r4_slot', pg_current_wal_lsn())" >/dev/null
	confirmed=$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'r4_slot'")
	applied=$(job_field r4 applied_lsn)
	run pgs r4 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r4 requires a resync: replication slot r4_slot confirmed $confirmed, beyond the target's applied position $applied: the changes in between are gone from the slot"* ]]
	[ "$(psql_at tgt -c "SELECT count(*) FROM r4_t WHERE id = 1000")" = 0 ]
	run pgs r4 status --prometheus
	[[ $output == *'pgsync_state{job="r4",state="RESYNC_REQUIRED"} 1'* ]]
	[[ $output == *'pgsync_resync_required{job="r4"} 1'* ]]
}
