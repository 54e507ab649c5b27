#!/usr/bin/env bats
# pg-slot create|drop|show against real servers: the printed consistent
# point and snapshot, holding an exported snapshot, preflight failures,
# invalidated and active slots.

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src
	# A slot here loses its WAL after one segment switch and a checkpoint.
	cluster_start inv --set max_slot_wal_keep_size=1MB
	cluster_start replica --set wal_level=replica
	psql_at src -c "CREATE ROLE norep LOGIN; CREATE ROLE nolog REPLICATION NOLOGIN"
}

teardown_file() {
	cluster_stop_all
}

teardown() {
	# A test that failed half-way must not leave a holder or consumer behind.
	local pid
	for pid in ${BG_PIDS:-}; do
		kill "$pid" 2>/dev/null || true
	done
}

url_as() { # url_as ROLE: src's conninfo with another user
	printf '%s\n' "${src_URL/user=postgres/user=$1}"
}

# Start pg-slot create --export-snapshot in the background with its stdin on
# a fifo this shell keeps open in fd HOLD_FD; waits for the printed line.
start_holder() {
	local slot=$1
	shift
	mkfifo "$BATS_TEST_TMPDIR/hold"
	pg-slot create -d "$src_URL" --slot "$slot" --export-snapshot "$@" \
		<"$BATS_TEST_TMPDIR/hold" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	HOLDER=$!
	BG_PIDS="${BG_PIDS:-} $HOLDER"
	exec {HOLD_FD}>"$BATS_TEST_TMPDIR/hold"
	wait_until 20 test -s "$BATS_TEST_TMPDIR/out"
	SNAPSHOT=$(cut -f3 "$BATS_TEST_TMPDIR/out")
}

# import SNAPSHOT SQL: run SQL in a transaction that imports the snapshot.
import() {
	psql_at src <<-SQL
		BEGIN ISOLATION LEVEL REPEATABLE READ;
		SET TRANSACTION SNAPSHOT '$1';
		$2;
		COMMIT;
	SQL
}

# The import that just ran (under `run`) failed because SNAPSHOT is gone
# (the message changed in PostgreSQL 18).
snapshot_gone() {
	[[ $output == *"invalid snapshot identifier: \"$1\""* || $output == *"snapshot \"$1\" does not exist"* ]]
}

open_xacts() {
	psql_at src -c "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND backend_xid IS NOT NULL"
}

walsender_waits_on_lock() { # walsender_waits_on_lock SLOT: creating SLOT waits for a transaction
	[ "$(psql_at src -c "SELECT wait_event_type FROM pg_stat_activity WHERE backend_type = 'walsender' AND query LIKE 'CREATE_REPLICATION_SLOT $1 %'")" = Lock ]
}

@test "create prints slot, consistent LSN and '-', and makes a pgoutput slot confirmed at that LSN" {
	run --separate-stderr pg-slot create -d "$src_URL" --slot c_plain
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ $output =~ ^c_plain$'\t'[0-9A-F]+/[0-9A-F]+$'\t'-$ ]]
	[ "$(slot_col c_plain plugin)" = pgoutput ]
	[ "$(slot_col c_plain slot_type)" = logical ]
	[ "$(slot_col c_plain confirmed_flush_lsn)" = "$(cut -f2 <<<"$output")" ]
	[ "$(untimed "$stderr")" = "pg-slot: created replication slot \"c_plain\" at $(cut -f2 <<<"$output")" ]
}

@test "create --json prints slot, consistent_lsn and a null snapshot" {
	run --separate-stderr pg-slot create -d "$src_URL" --slot c_json --json
	[ "$status" -eq 0 ]
	local lsn
	lsn=$(slot_col c_json confirmed_flush_lsn)
	[ "$output" = "{\"slot\":\"c_json\",\"consistent_lsn\":\"$lsn\",\"snapshot\":null}" ]
	[[ $stderr == '{"time":'*'"level":"info"'* ]]
}

@test "create of an existing slot exits 1 with the server's error and SQLSTATE" {
	pg-slot create -d "$src_URL" --slot c_dup 2>/dev/null
	run --separate-stderr pg-slot create -d "$src_URL" --slot c_dup
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = 'pg-slot: error: cannot create replication slot "c_dup": replication slot "c_dup" already exists (SQLSTATE 42710)' ]
}

@test "create --if-not-exists on an existing slot prints its confirmed position and '-' and exits 0" {
	pg-slot create -d "$src_URL" --slot c_ine 2>/dev/null
	psql_at src -c "CREATE TABLE c_ine_t (id int)" -c "INSERT INTO c_ine_t VALUES (1)"
	pg-ack -d "$src_URL" --slot c_ine --lsn "$(psql_at src -c 'SELECT pg_current_wal_flush_lsn()')" 2>/dev/null
	run --separate-stderr pg-slot create -d "$src_URL" --slot c_ine --if-not-exists
	[ "$status" -eq 0 ]
	[ "$output" = "c_ine"$'\t'"$(slot_col c_ine confirmed_flush_lsn)"$'\t-' ]
	[ "$(untimed "$stderr")" = 'pg-slot: replication slot "c_ine" already exists' ]
	# A new slot under --if-not-exists is created as usual.
	run pg-slot create -d "$src_URL" --slot c_ine_new --if-not-exists
	[ "$status" -eq 0 ]
	[ "$(slot_col c_ine_new plugin)" = pgoutput ]
}

@test "create --if-not-exists --export-snapshot on an existing slot exits 1: no snapshot for an old slot" {
	pg-slot create -d "$src_URL" --slot c_ine_snap 2>/dev/null
	run --separate-stderr pg-slot create -d "$src_URL" --slot c_ine_snap --if-not-exists --export-snapshot </dev/null
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[[ $stderr == 'pg-slot: error: replication slot "c_ine_snap" already exists: a snapshot can be exported only when the slot is created'* ]]
}

@test "create --if-not-exists refuses an existing slot of another plugin or kind (exit 3)" {
	psql_at src -c "SELECT pg_create_logical_replication_slot('c_td', 'test_decoding')" >/dev/null
	psql_at src -c "SELECT pg_create_physical_replication_slot('c_phys')" >/dev/null
	run pg-slot create -d "$src_URL" --slot c_td --if-not-exists
	[ "$status" -eq 3 ]
	[ "$output" = 'pg-slot: error: replication slot "c_td" already exists and uses plugin "test_decoding", not pgoutput' ]
	run pg-slot create -d "$src_URL" --slot c_phys --if-not-exists
	[ "$status" -eq 3 ]
	[ "$output" = 'pg-slot: error: replication slot "c_phys" already exists and is a physical slot, not a logical one' ]
}

@test "an exported snapshot is importable while held and sees exactly what committed before the consistent point" {
	psql_at src -c "CREATE TABLE snap_t (id int PRIMARY KEY, v text)" \
		-c "INSERT INTO snap_t VALUES (1, 'one'), (2, 'two'), (3, 'three')" \
		-c "CREATE PUBLICATION snap_p FOR TABLE snap_t"
	# A transaction open (with an xid) when the slot is requested: the slot
	# becomes consistent only after it commits, so the snapshot must see it.
	mkfifo "$BATS_TEST_TMPDIR/sql"
	psql_at src <"$BATS_TEST_TMPDIR/sql" >"$BATS_TEST_TMPDIR/psql.out" 2>&1 3>&- &
	local psql_pid=$! sql_fd
	BG_PIDS="$psql_pid"
	exec {sql_fd}>"$BATS_TEST_TMPDIR/sql"
	echo "BEGIN; INSERT INTO snap_t VALUES (4, 'four');" >&"$sql_fd"
	wait_until 20 eval '[ "$(open_xacts)" = 1 ]'

	mkfifo "$BATS_TEST_TMPDIR/hold"
	# Not inheriting the psql fifo's write end, so psql sees EOF after COMMIT.
	pg-slot create -d "$src_URL" --slot snap_s --export-snapshot \
		<"$BATS_TEST_TMPDIR/hold" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" 3>&- {sql_fd}>&- &
	local holder=$! hold_fd
	BG_PIDS="$BG_PIDS $holder"
	exec {hold_fd}>"$BATS_TEST_TMPDIR/hold"
	# The walsender waits on the open transaction; nothing is printed yet.
	wait_until 20 walsender_waits_on_lock snap_s
	[ ! -s "$BATS_TEST_TMPDIR/out" ]
	echo "COMMIT;" >&"$sql_fd"
	exec {sql_fd}>&-
	wait "$psql_pid"

	wait_until 20 test -s "$BATS_TEST_TMPDIR/out"
	local snapshot
	snapshot=$(cut -f3 "$BATS_TEST_TMPDIR/out")
	[[ $snapshot =~ ^[0-9A-F]+-[0-9A-F]+-[0-9]+$ ]]
	[ "$(cut -f2 "$BATS_TEST_TMPDIR/out")" = "$(slot_col snap_s confirmed_flush_lsn)" ]
	psql_at src -c "INSERT INTO snap_t VALUES (5, 'five')"

	run import "$snapshot" "SELECT string_agg(id::text, ',' ORDER BY id) FROM snap_t"
	[ "$status" -eq 0 ]
	[ "$output" = "1,2,3,4" ]
	kill -0 "$holder"

	exec {hold_fd}>&-
	local rc=0
	wait "$holder" || rc=$?
	[ "$rc" -eq 0 ]
	untimed "$(<"$BATS_TEST_TMPDIR/err")" | grep -qx "pg-slot: stdin closed: releasing snapshot $snapshot"
	run import "$snapshot" "SELECT 1"
	[ "$status" -ne 0 ]
	snapshot_gone "$snapshot"

	# The slot sends exactly what the snapshot did not see: row 5, not 1-4.
	run psql_at src -c "SELECT string_agg(encode(data, 'escape'), '') FROM pg_logical_slot_peek_binary_changes('snap_s', NULL, NULL, 'proto_version', '1', 'publication_names', 'snap_p')"
	[[ $output == *five* ]]
	[[ $output != *four* && $output != *three* && $output != *one* ]]
}

@test "SIGTERM while create waits for an open transaction cancels it: no slot is left, exit 1" {
	psql_at src -c "CREATE TABLE wait_t (id int)"
	mkfifo "$BATS_TEST_TMPDIR/sql"
	psql_at src <"$BATS_TEST_TMPDIR/sql" >/dev/null 2>&1 3>&- &
	local psql_pid=$! sql_fd
	BG_PIDS="$psql_pid"
	exec {sql_fd}>"$BATS_TEST_TMPDIR/sql"
	echo "BEGIN; INSERT INTO wait_t VALUES (1);" >&"$sql_fd"
	wait_until 20 eval '[ "$(open_xacts)" = 1 ]'
	pg-slot create -d "$src_URL" --slot wait_s </dev/null >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" 3>&- {sql_fd}>&- &
	local creator=$!
	BG_PIDS="$BG_PIDS $creator"
	wait_until 20 walsender_waits_on_lock wait_s
	# After five seconds it says what it is waiting for.
	wait_until 20 grep -q 'waiting for transactions running on the source to finish before replication slot "wait_s" becomes consistent' "$BATS_TEST_TMPDIR/err"
	kill -TERM "$creator"
	local rc=0
	wait "$creator" || rc=$?
	[ "$rc" -eq 1 ]
	grep -qx 'pg-slot: error: interrupted while creating replication slot "wait_s": no slot was created' "$BATS_TEST_TMPDIR/err"
	[ ! -s "$BATS_TEST_TMPDIR/out" ]
	[ -z "$(slot_col wait_s plugin)" ]
	echo "COMMIT;" >&"$sql_fd"
	exec {sql_fd}>&-
	wait "$psql_pid"
}

@test "SIGTERM to a snapshot holder releases the snapshot and exits 0" {
	start_holder hold_term
	import "$SNAPSHOT" "SELECT 1" >/dev/null
	kill -TERM "$HOLDER"
	local rc=0
	wait "$HOLDER" || rc=$?
	[ "$rc" -eq 0 ]
	untimed "$(<"$BATS_TEST_TMPDIR/err")" | grep -qx "pg-slot: stop signal received: releasing snapshot $SNAPSHOT"
	run import "$SNAPSHOT" "SELECT 1"
	[ "$status" -ne 0 ]
	snapshot_gone "$SNAPSHOT"
	exec {HOLD_FD}>&-
}

@test "create --temporary makes a temporary slot that is gone when the hold ends; it needs --export-snapshot" {
	start_holder hold_temp --temporary
	[ "$(slot_col hold_temp temporary)" = t ]
	import "$SNAPSHOT" "SELECT 1" >/dev/null
	exec {HOLD_FD}>&-
	wait "$HOLDER"
	[ "$(psql_at src -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'hold_temp'")" = 0 ]
	run pg-slot create -d "$src_URL" --slot hold_temp2 --temporary
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: --temporary needs --export-snapshot and cannot take --if-not-exists" ]
}

@test "a snapshot holder whose server connection is terminated exits 1 saying so" {
	start_holder hold_kill
	psql_at src -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'walsender' AND application_name = 'pg-slot'" >/dev/null
	local rc=0
	wait "$HOLDER" || rc=$?
	[ "$rc" -eq 1 ]
	grep -q "^pg-slot: error: lost the connection to the source while holding snapshot $SNAPSHOT: " "$BATS_TEST_TMPDIR/err"
	exec {HOLD_FD}>&-
}

@test "create --hold-timeout gives the snapshot up after the timeout and exits 1" {
	start_holder hold_timeout --hold-timeout 1s
	local rc=0
	wait "$HOLDER" || rc=$?
	[ "$rc" -eq 1 ]
	grep -qx "pg-slot: error: held snapshot $SNAPSHOT for the whole --hold-timeout: releasing it" "$BATS_TEST_TMPDIR/err"
	exec {HOLD_FD}>&-
}

@test "create as a role without REPLICATION exits 3 with the ALTER ROLE fix" {
	run pg-slot create -d "$(url_as norep)" --slot c_norep
	[ "$status" -eq 3 ]
	[ "$output" = "pg-slot: error: role norep has neither REPLICATION nor SUPERUSER: run ALTER ROLE norep REPLICATION as a superuser" ]
	[ -z "$(slot_col c_norep plugin)" ]
}

@test "create as a role that cannot log in exits 3 with the ALTER ROLE fix" {
	run pg-slot create -d "$(url_as nolog)" --slot c_nolog
	[ "$status" -eq 3 ]
	[[ $output == "pg-slot: error: cannot connect to the source ("*'role "nolog" is not permitted to log in: run ALTER ROLE nolog LOGIN as a superuser' ]]
	[[ $output != *password* ]]
}

@test "create on a source with wal_level=replica exits 3 saying how to fix it" {
	run pg-slot create -d "$replica_URL" --slot c_replica
	[ "$status" -eq 3 ]
	[ "$output" = "pg-slot: error: the source has wal_level = replica, logical decoding needs logical: set wal_level = logical in postgresql.conf and restart the server" ]
}

@test "show prints one key<TAB>value line per field, with the columns this server version has" {
	pg-slot create -d "$src_URL" --slot sh_text 2>/dev/null
	run --separate-stderr pg-slot show -d "$src_URL" --slot sh_text
	[ "$status" -eq 0 ]
	local v keys
	v=$(psql_at src -c "SHOW server_version_num")
	keys="slot slot_type plugin database temporary active active_pid restart_lsn confirmed_flush_lsn wal_status safe_wal_size two_phase"
	((v < 160000)) || keys="$keys conflicting"
	((v < 170000)) || keys="$keys invalidation_reason failover synced"
	keys="$keys current_lsn retained_bytes"
	[ "$(cut -f1 <<<"$output" | tr '\n' ' ')" = "$keys " ]
	[ "$(grep -c $'\t' <<<"$output")" -eq "${#lines[@]}" ]
	grep -qx $'slot\tsh_text' <<<"$output"
	grep -qx $'plugin\tpgoutput' <<<"$output"
	grep -qx $'active\tfalse' <<<"$output"
	grep -qx $'active_pid\t-' <<<"$output"
	grep -qx $'wal_status\treserved' <<<"$output"
	grep -qx "restart_lsn"$'\t'"$(slot_col sh_text restart_lsn)" <<<"$output"
	grep -qx "confirmed_flush_lsn"$'\t'"$(slot_col sh_text confirmed_flush_lsn)" <<<"$output"
	local retained
	retained=$(awk -F'\t' '$1 == "retained_bytes" { print $2 }' <<<"$output")
	[ "$retained" -gt 0 ]
	# Retained WAL is what the slot pins: the current position minus restart_lsn.
	[ "$retained" -le "$(psql_at src -c "SELECT pg_current_wal_flush_lsn() - restart_lsn FROM pg_replication_slots WHERE slot_name = 'sh_text'")" ]
	[ "$stderr" = "" ]
}

@test "show --json prints one object with the same values, null where the server has none" {
	pg-slot create -d "$src_URL" --slot sh_json 2>/dev/null
	run --separate-stderr pg-slot show -d "$src_URL" --slot sh_json --json
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	local restart
	restart=$(slot_col sh_json restart_lsn)
	[[ $output == '{"slot":"sh_json","slot_type":"logical","plugin":"pgoutput","database":"postgres","temporary":false,"active":false,"active_pid":null,"restart_lsn":"'"$restart"'",'* ]]
	[[ $output == *'"wal_status":"reserved","safe_wal_size":null,'* ]]
	[[ $output == *',"retained_bytes":'[0-9]*'}' ]]
	# Valid JSON, as psql's json parser sees it.
	[ "$(psql_at src -c "SELECT (\$\$$output\$\$::json)->>'plugin'")" = pgoutput ]
}

@test "show of a missing slot exits 4 saying it does not exist" {
	run --separate-stderr pg-slot show -d "$src_URL" --slot sh_missing
	[ "$status" -eq 4 ]
	[ "$output" = "" ]
	[ "$stderr" = 'pg-slot: error: replication slot "sh_missing" does not exist' ]
}

@test "show of a slot invalidated through max_slot_wal_keep_size prints it and exits 4" {
	pg-slot create -d "$inv_URL" --slot sh_lost 2>/dev/null
	psql_at inv -c "CREATE TABLE IF NOT EXISTS junk (x int)"
	local i
	for ((i = 0; i < 20; i++)); do
		psql_at inv -c "INSERT INTO junk VALUES (1)" -c "SELECT pg_switch_wal()" -c "CHECKPOINT" >/dev/null
		[ "$(slot_col sh_lost wal_status inv)" != lost ] || break
	done
	[ "$(slot_col sh_lost wal_status inv)" = lost ]
	run --separate-stderr pg-slot show -d "$inv_URL" --slot sh_lost
	[ "$status" -eq 4 ]
	grep -qx $'wal_status\tlost' <<<"$output"
	grep -qx $'restart_lsn\t-' <<<"$output"
	[[ $stderr == 'pg-slot: error: replication slot "sh_lost" is invalidated ('*'): resync required' ]]
	if (($(psql_at inv -c "SHOW server_version_num") >= 170000)); then
		grep -qx $'invalidation_reason\twal_removed' <<<"$output"
	fi
	run pg-slot create -d "$inv_URL" --slot sh_lost --if-not-exists
	[ "$status" -eq 4 ]
	[[ $output == 'pg-slot: error: replication slot "sh_lost" already exists but is invalidated ('*'): drop it and resync' ]]
}

@test "lineage prints the source's identity and the slot, and exits 4 naming both values for each check the server fails" {
	local role=lin_rep sysid restart confirmed url
	psql_at src -c "CREATE ROLE $role LOGIN REPLICATION"
	url=$(url_as "$role")
	pg-slot create -d "$src_URL" --slot lin >/dev/null 2>&1
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	restart=$(slot_col lin restart_lsn)
	confirmed=$(slot_col lin confirmed_flush_lsn)
	run --separate-stderr pg-slot lineage -d "$url" --slot lin --sysid "$sysid" --timeline 1 \
		--created "$confirmed" --taken "$confirmed" --restart-floor "$restart"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "sysid	$sysid" ]
	[ "${lines[1]}" = "timeline	1" ]
	[[ $output == *"restart_lsn	$restart"* ]]
	run --separate-stderr pg-slot lineage -d "$url" --slot lin --sysid 12345
	[ "$status" -eq 4 ]
	[ "$stderr" = "pg-slot: error: the source is another server than the job's: system identifier $sysid, the job's is 12345" ]
	run --separate-stderr pg-slot lineage -d "$url" --slot lin --timeline 2
	[ "$status" -eq 4 ]
	[[ $stderr == *"another server than the job's: system identifier $sysid on timeline 1, the job's is on timeline 2" ]]
	run --separate-stderr pg-slot lineage -d "$url" --slot lin --taken FF/0
	[ "$status" -eq 4 ]
	[[ $stderr == *"another server than the job's: its WAL ends at "*", before FF/0 that the job already took from the source"* ]]
	run --separate-stderr pg-slot lineage -d "$url" --slot lin --created FF/0
	[ "$status" -eq 4 ]
	[[ $stderr == *"replication slot \"lin\" confirmed $confirmed, before FF/0 where the job's slot was created"* ]]
	run --separate-stderr pg-slot lineage -d "$url" --slot lin --restart-floor FF/0
	[ "$status" -eq 4 ]
	[[ $stderr == *"replication slot \"lin\" restarts at $restart, before FF/0 where the job's slot already restarted"* ]]
	# A missing slot is the caller's verdict: the identity still is.
	run --separate-stderr pg-slot lineage -d "$url" --slot nosuch --sysid "$sysid" --taken FF/0 --restart-floor FF/0
	[ "$status" -eq 0 ]
	[ "$output" = "sysid	$sysid
timeline	1" ]
	pg-slot drop -d "$src_URL" --slot lin >/dev/null 2>&1
}

@test "drop removes the slot and says so" {
	pg-slot create -d "$src_URL" --slot d_plain 2>/dev/null
	run --separate-stderr pg-slot drop -d "$src_URL" --slot d_plain
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$(untimed "$stderr")" = 'pg-slot: dropped replication slot "d_plain"' ]
	[ -z "$(slot_col d_plain plugin)" ]
}

@test "drop of a missing slot exits 4; with --if-exists it exits 0 with a notice" {
	run --separate-stderr pg-slot drop -d "$src_URL" --slot d_missing
	[ "$status" -eq 4 ]
	[ "$stderr" = 'pg-slot: error: replication slot "d_missing" does not exist' ]
	run --separate-stderr pg-slot drop -d "$src_URL" --slot d_missing --if-exists
	[ "$status" -eq 0 ]
	[ "$(untimed "$stderr")" = 'pg-slot: replication slot "d_missing" does not exist: nothing to drop' ]
}

@test "drop refuses an active slot, naming the PID that holds it (exit 1), and keeps it" {
	pg-slot create -d "$src_URL" --slot d_active 2>/dev/null
	start_consumer d_active
	local pid
	pid=$(slot_col d_active active_pid)
	run pg-slot drop -d "$src_URL" --slot d_active
	[ "$status" -eq 1 ]
	[ "$output" = "pg-slot: error: replication slot \"d_active\" is active for PID $pid: stop its consumer first" ]
	[ "$(slot_col d_active plugin)" = pgoutput ]
	kill "$CONSUMER"
}

@test "drop --wait waits for the consumer to release the slot, then drops it" {
	pg-slot create -d "$src_URL" --slot d_wait 2>/dev/null
	start_consumer d_wait
	(sleep 1; kill "$CONSUMER") 3>&- &
	run pg-slot drop -d "$src_URL" --slot d_wait --wait 20s
	[ "$status" -eq 0 ]
	[ -z "$(slot_col d_wait plugin)" ]
}

@test "usage errors exit 2 with a message and the usage lines" {
	run pg-slot
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: missing command: create, alter, drop, show or lineage" ]
	[[ ${lines[1]} == "usage: pg-slot create "* ]]
	run pg-slot frob --slot x
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-slot: error: unknown command "frob": expected create, alter, drop, show or lineage' ]
	run pg-slot show
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: show needs --slot NAME" ]
	run pg-slot show --slot Bad-Name
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-slot: error: invalid slot name "Bad-Name": use 1 to 63 lower-case letters, digits and underscores' ]
	run pg-slot create --slot x --if-exists
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: --if-exists applies to drop only" ]
	run pg-slot show --slot x --wait 1s
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: --wait applies to drop and alter only" ]
	run pg-slot alter --slot x
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: alter needs --failover or --no-failover" ]
	run pg-slot drop --slot x --failover
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: --failover and --no-failover apply to create and alter only" ]
	run pg-slot create --slot x --failover --no-failover
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: give at most one of --failover and --no-failover" ]
	run pg-slot create --slot x --hold-timeout 5s
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: --hold-timeout needs --export-snapshot" ]
	run pg-slot drop --slot x --wait soon
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-slot: error: invalid --wait "soon": expected a duration (0, 500ms, 10s, 1min)' ]
	run pg-slot show --slot x extra
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-slot: error: unexpected argument "extra"' ]
	run pg-slot show --slot x --restart-floor 0/1
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-slot: error: --sysid, --timeline, --created, --taken and --restart-floor apply to lineage only" ]
	run pg-slot lineage --slot x --taken soon
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-slot: error: invalid --taken "soon": expected an LSN like 0/1A2B3C4' ]
}

@test "options may come before the command, and -d defaults to the libpq environment" {
	run env PGHOST="$src_DIR/sock" PGPORT="$(cat "$src_DIR/port")" PGUSER=postgres PGDATABASE=postgres \
		pg-slot --slot env_slot create
	[ "$status" -eq 0 ]
	[ "$(slot_col env_slot plugin)" = pgoutput ]
}
