#!/usr/bin/env bats
# Which server is this: the servers that answer at the source's address while
# a job exists. Another cluster there makes the job RESYNC_REQUIRED, and the
# mark clears once the job's own server answers again: run continues, with
# nothing lost. A copy of the job's own server restored from an older backup
# (same system identifier, older WAL and an older copy of the slot) is never
# streamed from, on any run, also once its WAL has grown past what the
# target applied. The servers are swapped as an operator would by mistake:
# another data directory started on the source's socket and port. pgsync runs
# as the guide's least-privilege source role (on every cluster) and a target
# role that is not a superuser; two publications, a serial key and a table
# name with capitals.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	cluster_start other
	lp_roles_for_tests ln_src ln_tgt
	lp_source_role_for_tests other ln_src
	# The same tables, publications and slot name on the other cluster.
	local ddl='CREATE TABLE "Lin_Orders" (id serial PRIMARY KEY, v text);
		CREATE TABLE lin_items (k text PRIMARY KEY, n int);
		CREATE PUBLICATION lin_pub1 FOR TABLE "Lin_Orders";
		CREATE PUBLICATION lin_pub2 FOR TABLE lin_items'
	psql_at src -c "$ddl"
	psql_at other -c "$ddl"
	psql_at src -c "INSERT INTO \"Lin_Orders\" (v) SELECT 'o' || g FROM generate_series(1, 300) g;
		INSERT INTO lin_items SELECT 'k' || g, g FROM generate_series(1, 50) g"
	psql_at other -c "SELECT pg_create_logical_replication_slot('lin_slot', 'pgoutput')" >/dev/null
	job_conf lin lin_slot "lin_pub1, lin_pub2" 'public.Lin_Orders,public.lin_items' >/dev/null
	pgs lin bootstrap
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	# A test that failed between the swaps left a data directory aside.
	local d
	for d in "$other_DIR"/data.was*; do
		[[ -e $other_DIR/data || ! -d $d ]] || mv "$d" "$other_DIR/data"
	done
	rm -rf "$other_DIR"/data.was*
	cluster_stop_all
}

writes() {
	psql_at src -c "INSERT INTO \"Lin_Orders\" (v) SELECT 'w' || g FROM generate_series(1, $1) g;
		UPDATE lin_items SET n = n + 1 WHERE n % 3 = 0; DELETE FROM \"Lin_Orders\" WHERE id % 29 = 0"
}

caught_up() {
	applied_reaches lin && same_tables Lin_Orders lin_items
}

# put_at_source DATA: stop the server at the source's address and start the
# data directory DATA there instead: the same socket directory and port. The
# data directory that answered is kept as DATA.was.
put_at_source() {
	local data=$1 port
	port=$(<"$src_DIR/port")
	cluster_stop src --mode fast
	mv "$src_DIR/data" "$data.was"
	mv "$data" "$src_DIR/data"
	# Later lines win: this server takes the source's socket and port.
	printf "unix_socket_directories = '%s'\nport = %s\n" "$src_DIR/sock" "$port" >>"$src_DIR/data/pgsync.conf"
	cluster_start src
}

base_dir() {
	dirname "$src_DIR"
}

target_sums() {
	table_checksum "$tgt_URL" Lin_Orders
	table_checksum "$tgt_URL" lin_items
}

@test "another cluster at the source's address while run streams: RESYNC_REQUIRED, cleared once the job's own server answers, run continues" {
	start_run lin
	wait_until 60 state_is lin STREAMING
	writes 100
	wait_until 60 caught_up
	# Another cluster's data directory at the source's socket and port.
	cluster_stop other --mode fast
	put_at_source "$(base_dir)/other/data"
	wait_run 90
	cat "$(current_run_log)"
	[ "$RUN_STATUS" -eq 4 ]
	[ "$(job_state lin)" = RESYNC_REQUIRED ]
	[[ $(job_field lin last_error) == *"another server than the job's"* ]]
	run pgs lin status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.resync_required == true and (.action | startswith("point PGSYNC_SOURCE_URL at the job'"'"'s server"))'
	run pgs lin run
	[ "$status" -eq 4 ]
	[[ $output == *"job lin cannot continue: the source is another server than the job's: system identifier "* ]]
	# The job's own server answers again: nothing to resync.
	put_at_source "$(base_dir)/other/data.was"
	mv "$(base_dir)/other/data.was.was" "$(base_dir)/other/data"
	run pgs lin status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.state == "RESYNC_REQUIRED" and .resync_required == false and .action == "pgsync run"'
	writes 50
	start_run lin
	wait_until 60 caught_up
	wait_until 30 state_is lin STREAMING
	[ "$(job_field lin "coalesce(last_error, '')")" = "" ]
	writes 30
	wait_until 60 caught_up
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "a copy of the source restored from an older backup is refused on every run, also once its WAL passed the target's position" {
	local copy restart_copy applied sums confirmed_copy
	copy="$src_DIR/copy_data"
	start_run lin
	wait_until 60 caught_up
	stop_run TERM
	# A cold copy of the source's data directory, its slot as it was then.
	restart_copy=$(psql_at src -c "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'lin_slot'")
	cluster_stop src --mode fast
	cp -a "$src_DIR/data" "$copy"
	cluster_start src
	# The job goes on from the job's own server, and its slot restarts
	# later: a checkpoint logs the running transactions the slot can
	# restart from, and run records the slot's restart_lsn (a catalog
	# without the column records nothing).
	start_run lin
	wait_until 60 state_is lin STREAMING
	floor_past() {
		writes 20
		psql_at src -c CHECKPOINT
		[[ $(psql_at src -c "SELECT restart_lsn > '$restart_copy' FROM pg_replication_slots WHERE slot_name = 'lin_slot'") == t ]] &&
			[[ $(psql_at tgt -c "SELECT coalesce((to_jsonb(j) ->> 'slot_restart_lsn')::pg_lsn > '$restart_copy',
				NOT to_jsonb(j) ? 'slot_restart_lsn') FROM pgsync.job j WHERE j.job = 'lin'") == t ]]
	}
	wait_until 90 floor_past
	writes 200
	wait_until 60 caught_up
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	applied=$(job_field lin applied_lsn)
	sums=$(target_sums)
	# The copy at the source's address; its WAL is behind the target's.
	put_at_source "$copy"
	confirmed_copy=$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'lin_slot'")
	run timeout 60 env PGSYNC_SOURCE_URL="$SRC_URL" PGSYNC_TARGET_URL="$TGT_URL" TMPDIR="$(pgs_tmpdir)" \
		pgsync -c "$BATS_FILE_TMPDIR/lin.conf" run
	echo "$output"
	[ "$status" -eq 4 ]
	[[ $output == *"another server than the job's: its WAL ends at "*", before $applied that the job already took from the source"* ]]
	# Writes on the copy until its WAL is past the target's position.
	wal_past() {
		psql_at src -c "INSERT INTO \"Lin_Orders\" (v) SELECT 'copy' || g FROM generate_series(1, 500) g;
			UPDATE lin_items SET n = n - 1"
		[[ $(psql_at src -c "SELECT pg_current_wal_lsn() > '$applied'") == t ]]
	}
	wait_until 60 wal_past
	local i
	for i in 1 2 3; do
		run timeout 60 env PGSYNC_SOURCE_URL="$SRC_URL" PGSYNC_TARGET_URL="$TGT_URL" TMPDIR="$(pgs_tmpdir)" \
			pgsync -c "$BATS_FILE_TMPDIR/lin.conf" run
		echo "$output"
		[ "$status" -eq 4 ]
		[[ $output == *"the source is another server than the job's: replication slot \"lin_slot\" restarts at $restart_copy, before "*" where the job's slot already restarted"* ]]
		[ "$(target_sums)" = "$sums" ]
		[ "$(job_field lin applied_lsn)" = "$applied" ]
	done
	# Nothing was confirmed to the copy.
	[ "$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'lin_slot'")" = "$confirmed_copy" ]
	[ "$(job_state lin)" = RESYNC_REQUIRED ]
	run pgs lin status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e --arg c "$restart_copy" '.resync_required == true and
		(.resync_reason | contains("restarts at " + $c + ", before ")) and .slot.restart_lsn == $c'
	run pgs lin status
	[[ $output == *"resync required: "*"restarts at $restart_copy, before "* ]]
	# The job's own server again: run continues, nothing lost.
	put_at_source "$copy.was"
	writes 40
	start_run lin
	wait_until 60 caught_up
	wait_until 30 state_is lin STREAMING
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "a job marked RESYNC_REQUIRED by pg-walcat's older message for another server continues once its own server answers" {
	local sysid
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	# As an earlier version recorded it, the job's own server answering now.
	psql_at tgt -c "UPDATE pgsync.job SET state = 'RESYNC_REQUIRED', last_error = 'pg-walcat exited with status 4: the source system identifier changed from $sysid to 7311: continuity is lost, resync required' WHERE job = 'lin'"
	run pgs lin status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.resync_required == false and .action == "pgsync run"'
	writes 25
	start_run lin
	wait_until 60 caught_up
	wait_until 30 state_is lin STREAMING
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	# A resync no other server caused stays required.
	psql_at tgt -c "UPDATE pgsync.job SET state = 'RESYNC_REQUIRED', last_error = 'replication slot lin_slot no longer exists on the source' WHERE job = 'lin'"
	run pgs lin run
	[ "$status" -eq 4 ]
	[[ $output == *"job lin requires a resync (replication slot lin_slot no longer exists on the source)"* ]]
}
