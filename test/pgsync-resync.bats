#!/usr/bin/env bats
# Continuity: every condition that makes a job RESYNC_REQUIRED (exit 4) on
# real servers: the slot dropped, the slot invalidated by
# max_slot_wal_keep_size (at start and while streaming), another source with
# the same slot name, the slot confirmed past the target. Once marked, run
# refuses (exit 4) and status names the action. No command drops or reuses a
# slot on a server that is not the job's; a mark that only another server
# caused clears once the job's own server answers again. pgsync runs as the
# guide's least-privilege source role (on every source cluster) and a target
# role that is not a superuser; only what an administrator does to the
# servers (dropping, advancing or invalidating a slot) runs as superuser.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	cluster_start other
	# Its own cluster: invalidation hits every slot that falls behind.
	cluster_start inv --set max_wal_size=64MB
	# As the guide's least-privilege roles.
	lp_roles_for_tests rs_src rs_tgt
	lp_source_role_for_tests other rs_src
	lp_source_role_for_tests inv rs_src
	export INV_LP=${inv_URL/user=postgres/user=rs_src} OTHER_LP=${other_URL/user=postgres/user=rs_src}
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
	# The job is the roles': the target role owns what bootstrap created.
	[ "$(psql_at tgt -c "SELECT tableowner FROM pg_tables WHERE tablename = 'r1_t'")" = rs_tgt ]
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
	SRC_URL=$INV_LP run pgs r2 bootstrap
	[ "$status" -eq 0 ]
	cluster_set inv max_slot_wal_keep_size=1MB >/dev/null
	push_wal_past inv
	wait_until 20 slot_lost inv r2_slot
	SRC_URL=$INV_LP run pgs r2 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r2 requires a resync: replication slot r2_slot was invalidated (wal_status lost"*"): the WAL the job needs was removed"* ]]
	[ "$(job_state r2)" = RESYNC_REQUIRED ]
	SRC_URL=$INV_LP run pgs r2 status --json
	echo "$output" | jq -e '.resync_required == true and .slot.wal_status == "lost"'
}

@test "a slot invalidated while streaming is caught (monitor or the server's error): exit 4" {
	cluster_set inv max_slot_wal_keep_size=-1 >/dev/null
	make_job r5 "$inv_URL"
	SRC_URL=$INV_LP pgs r5 bootstrap
	SRC_URL=$INV_LP start_run r5
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
	SRC_URL=$OTHER_LP run pgs r3 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r3 cannot continue: the source is another server than the job's: system identifier $other_sysid, the job's is $sysid (the source at host=${other_DIR}/sock port=$(<"$other_DIR/port") user=rs_src dbname=postgres; job r3's server is system identifier $sysid (reached at host=${src_DIR}/sock port=$(<"$src_DIR/port")"*")): nothing was dropped; point PGSYNC_SOURCE_URL at system identifier $sysid, then pgsync run continues without a resync"* ]]
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
	[[ $output == *'pgsync_state{pgsync_job="r4",state="RESYNC_REQUIRED"} 1'* ]]
	[[ $output == *'pgsync_resync_required{pgsync_job="r4"} 1'* ]]
}

sysid_of() {
	psql_at "$1" -c "SELECT system_identifier FROM pg_control_system()"
}

# The refusal names both servers: the one answering and the job's.
names_both_servers() {
	[[ $output == *"the source is another server than the job's: system identifier $(sysid_of other), the job's is $(sysid_of src) (the source at host=${other_DIR}/sock port=$(<"$other_DIR/port") user=r6_src dbname=postgres; job r6's server is system identifier $(sysid_of src) (reached at host=${src_DIR}/sock port=$(<"$src_DIR/port") user=r6_src dbname=postgres)): nothing was dropped; point PGSYNC_SOURCE_URL at system identifier $(sysid_of src)"* ]]
}

other_slot_kept() {
	[ "$(psql_at other -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'r6_slot'")" = 1 ]
	slot_exists r6_slot
}

@test "cleanup --yes refuses to drop a slot of the same name on another server: exit 4 naming both servers, both slots kept" {
	make_job r6
	psql_at other -c "CREATE TABLE r6_t (id int PRIMARY KEY, v text); CREATE PUBLICATION r6_pub FOR TABLE r6_t"
	lp_source_role r6_src r6_t
	local good=$SRC_URL
	SRC_URL=${other_URL/user=postgres/user=r6_src}
	psql_at other -c "CREATE ROLE r6_src LOGIN REPLICATION; GRANT SELECT ON r6_t TO r6_src"
	psql_at other -c "SELECT pg_create_logical_replication_slot('r6_slot', 'pgoutput')" >/dev/null
	echo "$good" >"$BATS_FILE_TMPDIR/r6.good"
	echo "$SRC_URL" >"$BATS_FILE_TMPDIR/r6.other"
	SRC_URL=$good run pgs r6 bootstrap
	[ "$status" -eq 0 ]
	run pgs r6 cleanup --yes
	[ "$status" -eq 4 ]
	[[ $output == "pgsync: error: refusing to drop replication slot r6_slot: "* ]]
	names_both_servers
	[[ $output == *"if that server is gone for good, delete the job on the target"* ]]
	other_slot_kept
	[ "$(job_state r6)" = CATCHING_UP ]
}

@test "bootstrap --restart-snapshot and bootstrap after an interrupted copy refuse another server's slot: exit 4, both slots kept" {
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.other") run pgs r6 bootstrap --restart-snapshot
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: refusing to drop replication slot r6_slot: "* ]]
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.other") names_both_servers
	other_slot_kept
	psql_at tgt -c "UPDATE pgsync.job SET state = 'SNAPSHOTTING' WHERE job = 'r6'"
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.other") run pgs r6 bootstrap
	[ "$status" -eq 4 ]
	names_both_servers
	other_slot_kept
	psql_at tgt -c "UPDATE pgsync.job SET state = 'CATCHING_UP' WHERE job = 'r6'"
}

@test "a mistyped source URL: run stops with exit 4 and drops nothing; with the URL corrected run continues without a resync" {
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.other") run pgs r6 run
	[ "$status" -eq 4 ]
	[[ $output == *"pgsync: error: job r6 cannot continue: "*", then pgsync run continues without a resync"* ]]
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.other") names_both_servers
	[ "$(job_state r6)" = RESYNC_REQUIRED ]
	other_slot_kept
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.other") run pgs r6 status --json
	echo "$output" | jq -e '.resync_required == true and (.action | startswith("point PGSYNC_SOURCE_URL at the job'"'"'s server"))'
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.good") run pgs r6 status --json
	echo "$output" | jq -e '.resync_required == false and .action == "pgsync run"'
	psql_at src -c "INSERT INTO r6_t VALUES (9001, 'while the URL was wrong')"
	SRC_URL=$(<"$BATS_FILE_TMPDIR/r6.good") start_run r6
	wait_until 30 state_is r6 STREAMING
	wait_until 30 same_tables r6_t
	[ "$(job_field r6 "last_error IS NULL")" = t ]
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	other_slot_kept
}
