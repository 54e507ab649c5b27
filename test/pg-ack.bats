#!/usr/bin/env bats
# pg-ack against real servers: it moves confirmed_flush_lsn exactly to the
# given position, and refuses to go backwards, past the source's WAL, onto
# an active, invalidated or missing slot, or from a checkpoint file that
# belongs to another source or slot.

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src
	# A slot here loses its WAL after one segment switch and a checkpoint.
	cluster_start inv --set max_slot_wal_keep_size=1MB
	psql_at src -c "CREATE ROLE norep LOGIN" \
		-c "CREATE TABLE ack_t (id int PRIMARY KEY, v text)" \
		-c "CREATE PUBLICATION ack_p FOR TABLE ack_t"
}

teardown_file() {
	cluster_stop_all
}

teardown() {
	local pid
	for pid in ${BG_PIDS:-}; do
		kill "$pid" 2>/dev/null || true
	done
}

flush_lsn() {
	psql_at "${1:-src}" -c "SELECT pg_current_wal_flush_lsn()"
}

# What the slot would send now: the values of the rows it carries, in order.
slot_rows() {
	psql_at src -c "SELECT string_agg(encode(data, 'escape'), '') FROM pg_logical_slot_peek_binary_changes('$1', NULL, NULL, 'proto_version', '1', 'publication_names', 'ack_p')" |
		grep -o 'row[0-9]*' | tr '\n' ' '
}

@test "--lsn moves confirmed_flush_lsn exactly there, prints it, and the slot resends only what commits after it" {
	new_slot a_exact
	local before target
	before=$(slot_col a_exact confirmed_flush_lsn)
	psql_at src -c "INSERT INTO ack_t VALUES (1, 'row1')"
	target=$(flush_lsn)
	psql_at src -c "INSERT INTO ack_t VALUES (2, 'row2')"
	[ "$(slot_rows a_exact)" = "row1 row2 " ]
	run --separate-stderr pg-ack -d "$src_URL" --slot a_exact --lsn "$target"
	[ "$status" -eq 0 ]
	[ "$output" = "$target" ]
	[ "$(untimed "$stderr")" = "pg-ack: confirmed $before -> $target on replication slot \"a_exact\"" ]
	[ "$(slot_col a_exact confirmed_flush_lsn)" = "$target" ]
	[ "$(slot_rows a_exact)" = "row2 " ]
}

@test "--json prints the slot with its previous and confirmed positions" {
	new_slot a_json
	local before target
	before=$(slot_col a_json confirmed_flush_lsn)
	psql_at src -c "INSERT INTO ack_t VALUES (3, 'row3')"
	target=$(flush_lsn)
	run --separate-stderr pg-ack -d "$src_URL" --slot a_json --lsn "$target" --json
	[ "$status" -eq 0 ]
	[ "$output" = "{\"slot\":\"a_json\",\"previous_lsn\":\"$before\",\"confirmed_lsn\":\"$target\"}" ]
	[[ $stderr == '{"time":'*'"msg":"confirmed '* ]]
	[ "$(slot_col a_json confirmed_flush_lsn)" = "$target" ]
}

@test "--dry-run says what it would confirm, prints nothing on stdout and leaves the slot" {
	new_slot a_dry
	local before target
	before=$(slot_col a_dry confirmed_flush_lsn)
	psql_at src -c "INSERT INTO ack_t VALUES (4, 'row4')"
	target=$(flush_lsn)
	run --separate-stderr pg-ack -d "$src_URL" --slot a_dry --lsn "$target" --dry-run
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$(untimed "$stderr")" = "pg-ack: would confirm $before -> $target on replication slot \"a_dry\" (dry run: nothing changed)" ]
	[ "$(slot_col a_dry confirmed_flush_lsn)" = "$before" ]
}

@test "the position the slot already confirmed is a no-op that exits 0" {
	new_slot a_same
	local at
	at=$(slot_col a_same confirmed_flush_lsn)
	run --separate-stderr pg-ack -d "$src_URL" --slot a_same --lsn "$at"
	[ "$status" -eq 0 ]
	[ "$output" = "$at" ]
	[ "$(untimed "$stderr")" = "pg-ack: replication slot \"a_same\" has already confirmed $at: nothing to do" ]
}

@test "a position below confirmed_flush_lsn exits 4 (continuity lost) and leaves the slot" {
	new_slot a_back
	local old new
	old=$(slot_col a_back confirmed_flush_lsn)
	psql_at src -c "INSERT INTO ack_t VALUES (5, 'row5')"
	new=$(flush_lsn)
	pg-ack -d "$src_URL" --slot a_back --lsn "$new" >/dev/null 2>&1
	run --separate-stderr pg-ack -d "$src_URL" --slot a_back --lsn "$old"
	[ "$status" -eq 4 ]
	[ "$output" = "" ]
	[ "$stderr" = "pg-ack: error: replication slot \"a_back\" has already confirmed $new, past $old: the transactions between them will not be sent again (resync required)" ]
	[ "$(slot_col a_back confirmed_flush_lsn)" = "$new" ]
}

@test "a position past the source's flushed WAL exits 5 and leaves the slot" {
	new_slot a_future
	local before flush
	before=$(slot_col a_future confirmed_flush_lsn)
	run --separate-stderr pg-ack -d "$src_URL" --slot a_future --lsn FF/0
	[ "$status" -eq 5 ]
	[[ $stderr =~ ^pg-ack:\ error:\ position\ FF/0\ is\ past\ the\ source\'s\ flushed\ WAL\ position\ [0-9A-F]+/[0-9A-F]+:\ it\ cannot\ come\ from\ this\ source$ ]]
	[ "$(slot_col a_future confirmed_flush_lsn)" = "$before" ]
}

@test "an active slot exits 1 naming the PID that streams from it" {
	new_slot a_active
	start_consumer a_active ack_p
	local pid
	pid=$(slot_col a_active active_pid)
	run pg-ack -d "$src_URL" --slot a_active --lsn "$(flush_lsn)"
	[ "$status" -eq 1 ]
	[ "$output" = "pg-ack: error: replication slot \"a_active\" is active for PID $pid: a consumer streams from it and confirms on its own" ]
	kill "$CONSUMER"
}

@test "--wait confirms once the consumer has let the slot go" {
	new_slot a_wait
	start_consumer a_wait ack_p
	psql_at src -c "INSERT INTO ack_t VALUES (6, 'row6')"
	local target
	target=$(flush_lsn)
	(sleep 1; kill "$CONSUMER") 3>&- &
	run --separate-stderr pg-ack -d "$src_URL" --slot a_wait --lsn "$target" --wait 20s
	[ "$status" -eq 0 ]
	[ "$(slot_col a_wait confirmed_flush_lsn)" = "$target" ]
}

@test "a missing slot exits 4 saying it does not exist" {
	run pg-ack -d "$src_URL" --slot a_missing --lsn 0/1
	[ "$status" -eq 4 ]
	[ "$output" = 'pg-ack: error: replication slot "a_missing" does not exist' ]
}

@test "a slot invalidated through max_slot_wal_keep_size exits 4" {
	new_slot a_lost inv
	psql_at inv -c "CREATE TABLE IF NOT EXISTS junk (x int)"
	local i
	for ((i = 0; i < 20; i++)); do
		psql_at inv -c "INSERT INTO junk VALUES (1)" -c "SELECT pg_switch_wal()" -c "CHECKPOINT" >/dev/null
		[ "$(slot_col a_lost wal_status inv)" != lost ] || break
	done
	[ "$(slot_col a_lost wal_status inv)" = lost ]
	run pg-ack -d "$inv_URL" --slot a_lost --lsn "$(flush_lsn inv)"
	[ "$status" -eq 4 ]
	[[ $output == 'pg-ack: error: replication slot "a_lost" is invalidated ('*'): resync required' ]]
}

@test "a physical slot exits 2: only logical slots are confirmed" {
	psql_at src -c "SELECT pg_create_physical_replication_slot('a_phys', true)" >/dev/null
	run pg-ack -d "$src_URL" --slot a_phys --lsn "$(flush_lsn)"
	[ "$status" -eq 2 ]
	[ "$output" = 'pg-ack: error: replication slot "a_phys" is a physical slot: pg-ack confirms on logical slots only' ]
}

@test "--from confirms the position of a checkpoint file naming this source and slot" {
	new_slot a_from
	psql_at src -c "INSERT INTO ack_t VALUES (7, 'row7')"
	local target sysid
	target=$(flush_lsn)
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	printf '%s\nsysid=%s\ntimeline=1\nslot=a_from\n' "$target" "$sysid" >"$BATS_TEST_TMPDIR/cp"
	run --separate-stderr pg-ack -d "$src_URL" --slot a_from --from "$BATS_TEST_TMPDIR/cp"
	[ "$status" -eq 0 ]
	[ "$output" = "$target" ]
	[ "$(slot_col a_from confirmed_flush_lsn)" = "$target" ]
	# A file with the position alone is accepted too.
	psql_at src -c "INSERT INTO ack_t VALUES (8, 'row8')"
	target=$(flush_lsn)
	printf '%s\n' "$target" >"$BATS_TEST_TMPDIR/cp"
	run --separate-stderr pg-ack -d "$src_URL" --slot a_from --from "$BATS_TEST_TMPDIR/cp"
	[ "$status" -eq 0 ]
	[ "$(slot_col a_from confirmed_flush_lsn)" = "$target" ]
}

@test "--from a checkpoint file of another source system exits 4 and leaves the slot" {
	new_slot a_sysid
	local before
	before=$(slot_col a_sysid confirmed_flush_lsn)
	psql_at src -c "INSERT INTO ack_t VALUES (9, 'row9')"
	printf '%s\nsysid=1234567890\nslot=a_sysid\n' "$(flush_lsn)" >"$BATS_TEST_TMPDIR/cp"
	run pg-ack -d "$src_URL" --slot a_sysid --from "$BATS_TEST_TMPDIR/cp"
	[ "$status" -eq 4 ]
	[[ $output == "pg-ack: error: checkpoint file \"$BATS_TEST_TMPDIR/cp\": the source is another server than the job's: system identifier "*", the job's is 1234567890; nothing was confirmed to it: resync required, unless the job's own server answers again" ]]
	[ "$(slot_col a_sysid confirmed_flush_lsn)" = "$before" ]
}

@test "--from a checkpoint file of another slot exits 4" {
	new_slot a_other
	printf '%s\nslot=some_other_slot\n' "$(flush_lsn)" >"$BATS_TEST_TMPDIR/cp"
	run pg-ack -d "$src_URL" --slot a_other --from "$BATS_TEST_TMPDIR/cp"
	[ "$status" -eq 4 ]
	[ "$output" = "pg-ack: error: checkpoint file \"$BATS_TEST_TMPDIR/cp\" records slot \"some_other_slot\", not \"a_other\": it belongs to another replication" ]
}

@test "--from an invalid or missing checkpoint file exits 2 with the file's error" {
	printf 'not an lsn\n' >"$BATS_TEST_TMPDIR/bad"
	run pg-ack -d "$src_URL" --slot a_any --from "$BATS_TEST_TMPDIR/bad"
	[ "$status" -eq 2 ]
	[ "$output" = "pg-ack: error: invalid checkpoint file \"$BATS_TEST_TMPDIR/bad\": first line is not an LSN at line 1" ]
	printf '0/16B3748' >"$BATS_TEST_TMPDIR/torn"
	run pg-ack -d "$src_URL" --slot a_any --from "$BATS_TEST_TMPDIR/torn"
	[ "$status" -eq 2 ]
	[ "$output" = "pg-ack: error: invalid checkpoint file \"$BATS_TEST_TMPDIR/torn\": last line is incomplete" ]
	run pg-ack -d "$src_URL" --slot a_any --from "$BATS_TEST_TMPDIR/none"
	[ "$status" -eq 2 ]
	[ "$output" = "pg-ack: error: checkpoint file \"$BATS_TEST_TMPDIR/none\" does not exist" ]
}

@test "a role without REPLICATION exits 3 with the ALTER ROLE fix" {
	new_slot a_norep
	run pg-ack -d "${src_URL/user=postgres/user=norep}" --slot a_norep --lsn "$(flush_lsn)"
	[ "$status" -eq 3 ]
	[ "$output" = "pg-ack: error: role norep has neither REPLICATION nor SUPERUSER: run ALTER ROLE norep REPLICATION as a superuser" ]
}

@test "usage errors exit 2: neither or both of --lsn and --from, a bad LSN, no --slot" {
	run pg-ack -d "$src_URL" --slot a_any
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-ack: error: give exactly one of --lsn LSN and --from CHECKPOINT_FILE" ]
	[[ ${lines[1]} == "usage: pg-ack "* ]]
	run pg-ack -d "$src_URL" --slot a_any --lsn 0/1 --from "$BATS_TEST_TMPDIR/cp"
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-ack: error: give exactly one of --lsn LSN and --from CHECKPOINT_FILE" ]
	run pg-ack -d "$src_URL" --slot a_any --lsn 0/xyz
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-ack: error: invalid --lsn "0/xyz": expected an LSN like 0/1A2B3C4' ]
	run pg-ack -d "$src_URL" --lsn 0/1
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pg-ack: error: missing --slot NAME" ]
	run pg-ack -d "$src_URL" --slot a_any --lsn 0/1 --wait forever
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pg-ack: error: invalid --wait "forever": expected a duration (0, 500ms, 10s, 1min)' ]
}
