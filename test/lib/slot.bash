# Replication slots and LSNs in bats tests: load with `load lib/slot` after
# lib/cluster. CLUSTER is a name given to cluster_start; src by default.

# lsn_num X/Y: the LSN as a decimal number, for comparisons in (( )).
lsn_num() {
	local hi=${1%/*} lo=${1#*/}
	echo $(((16#$hi << 32) | 16#$lo))
}

# lsn_str N: the number back to X/Y.
lsn_str() {
	printf '%X/%X\n' $(($1 >> 32)) $(($1 & 0xFFFFFFFF))
}

# new_slot NAME [CLUSTER]: a pgoutput slot whose stream starts now.
new_slot() {
	psql_at "${2:-src}" -c "SELECT 1 FROM pg_create_logical_replication_slot('$1', 'pgoutput')" >/dev/null
}

# slot_col SLOT COLUMN [CLUSTER]: one column of pg_replication_slots.
slot_col() {
	psql_at "${3:-src}" -c "SELECT $2 FROM pg_replication_slots WHERE slot_name = '$1'"
}

# confirmed SLOT [CLUSTER]: the slot's confirmed_flush_lsn.
confirmed() {
	slot_col "$1" confirmed_flush_lsn "${2:-}"
}

# slot_active SLOT [CLUSTER]: a walsender streams from the slot now.
slot_active() {
	[ "$(slot_col "$1" active "${2:-}")" = t ]
}

# start_consumer SLOT [PUBLICATION]: pg_recvlogical (which speaks to every
# major alike) keeps SLOT of src active until killed; its pid is CONSUMER,
# also added to BG_PIDS for the file's teardown.
start_consumer() {
	pg_recvlogical -d "$src_URL" --slot "$1" --start --no-loop -f /dev/null \
		-o proto_version=1 -o publication_names="${2:-none}" 3>&- &
	CONSUMER=$!
	BG_PIDS="${BG_PIDS:-} $CONSUMER"
	wait_until 20 slot_active "$1"
}
