# A primary and a physical standby for the high-availability tests, on top
# of lib/cluster:
#
#   load lib/cluster
#   load lib/ha
#   setup_file() { ha_start prim stby; cluster_start tgt; }
#   ... ha_promote stby; cluster_stop prim --mode immediate ...
#
# ha_start PRIMARY STANDBY [OPTION...] starts PRIMARY on PGSYNC_MAJOR
# (default 17), with pg-cluster start's OPTIONs (--set name=value: the
# standby's copy has them too), and makes STANDBY a streaming physical
# standby of it from a cold copy of its data directory (the downloaded majors have no pg_basebackup): the primary
# is stopped cleanly, copied, and both are started. The standby streams
# through a physical slot STANDBY_phys on the primary, with
# hot_standby_feedback and, from 17, sync_replication_slots on and dbname in
# primary_conninfo (what slot synchronization needs); the primary names the
# physical slot in synchronized_standby_slots, so that no logical walsender
# sends a change the standby has not received. Both clusters are registered
# like any other, so cluster_stop_all removes them. Call it before anything
# else is created on the primary: the copy is taken at once.

# shellcheck source=test/lib/cluster.bash
source "$(dirname "${BASH_SOURCE[0]}")/cluster.bash"

ha_major() {
	printf '%s\n' "${PGSYNC_MAJOR:-17}"
}

ha_start() {
	local prim=$1 stby=$2 major base pdir sdir pport
	shift 2
	major=$(ha_major)
	cluster_start "$prim" --major "$major" --set hot_standby_feedback=on --set wal_keep_size=256MB "$@" || return
	psql_at "$prim" -c "SELECT pg_create_physical_replication_slot('${stby}_phys')" >/dev/null || return
	cluster_stop "$prim" --mode fast || return
	pdir=$(cluster_dir "$prim") || return
	pport=$(<"$pdir/port")
	base=$(dirname "$pdir")
	sdir=$base/$stby
	mkdir -p "$sdir" || return
	grep -qxF "$sdir" "$base/.clusters" 2>/dev/null || printf '%s\n' "$sdir" >>"$base/.clusters"
	cp -a "$pdir/data" "$sdir/data" || return
	# The copy's own slots would be stale copies of the primary's.
	rm -rf "$sdir/data/pg_replslot/"* "$sdir/data/postmaster.pid" "$sdir/data/postmaster.opts"
	# Its own socket directory and a port of its own (0: pg-cluster picks one).
	sed -i -e "s|$pdir/sock|$sdir/sock|" -e 's/^port = [0-9]*$/port = 0/' "$sdir/data/pgsync.conf"
	{
		echo "primary_conninfo = 'host=$pdir/sock port=$pport user=postgres dbname=postgres application_name=$stby'"
		echo "primary_slot_name = '${stby}_phys'"
		echo "hot_standby_feedback = on"
		((major < 17)) || echo "sync_replication_slots = on"
	} >>"$sdir/data/pgsync.conf"
	# Only the primary waits for the standby: a promoted standby naming a
	# slot it does not have would stall its own logical decoding.
	((major < 17)) || echo "synchronized_standby_slots = '${stby}_phys'" >>"$pdir/data/pgsync.conf"
	touch "$sdir/data/standby.signal"
	[[ $EUID -ne 0 ]] || chown postgres:postgres "$sdir/data/standby.signal" "$sdir/data/pgsync.conf"
	cluster_start "$prim" >/dev/null || return
	cluster_start "$stby" >/dev/null || return
	wait_until 60 sql_is "$prim" 1 "SELECT count(*) FROM pg_stat_replication WHERE application_name = '$stby' AND state = 'streaming'"
}

# ha_promote STANDBY: promote it (waits until it is a primary) and make it
# open a new WAL segment's worth of history at once.
ha_promote() {
	[[ $(psql_at "$1" -c "SELECT pg_promote(true, 60)") == t ]]
}

# ha_slot_synced STANDBY SLOT: the standby holds a synced, persistent,
# valid copy of SLOT (the only kind a promotion keeps).
ha_slot_synced() {
	sql_is "$1" t "SELECT coalesce(bool_and(synced AND NOT temporary AND invalidation_reason IS NULL), false)
		FROM pg_replication_slots WHERE slot_name = '$2'"
}

# ha_caught_up PRIMARY STANDBY: the standby replayed all the primary wrote.
ha_caught_up() {
	local lsn
	lsn=$(psql_at "$1" -c "SELECT pg_current_wal_lsn()") || return
	sql_is "$2" t "SELECT pg_last_wal_replay_lsn() >= '$lsn'"
}

# ha_url PRIMARY STANDBY [ROLE]: one libpq conninfo naming both servers,
# that connects to whichever is the primary (libpq multi-host).
ha_url() {
	local a b role=${3:-postgres}
	a=$(cluster_dir "$1") || return
	b=$(cluster_dir "$2") || return
	printf 'host=%s,%s port=%s,%s user=%s dbname=postgres target_session_attrs=primary\n' \
		"$a/sock" "$b/sock" "$(<"$a/port")" "$(<"$b/port")" "$role"
}
