# High-availability sources: the job's slot as a failover slot
# (source.failover_slot) and, for check and status, whether the job would
# survive a promotion of a standby now. Sourced by bin/pgsync for every
# command; bootstrap, run, check and status call it.

# failover_resolve: what source.failover_slot means for this source now, in
# FAILOVER_SLOT (on or off) and FAILOVER_OPT (pg-slot's option); exit 3 when
# it is on and the source cannot have a failover slot (before 17, a
# standby). auto is on only where on would be accepted: below 17 the
# default changes nothing.
failover_resolve() {
	local key=${CFG[source.failover_slot]:-auto} row v rec
	row=$(sql src <<<"SELECT current_setting('server_version_num')::int, pg_is_in_recovery()") ||
		die $EX_RUNTIME "cannot read the source ($SRC_DISPLAY): $(sql_error)"
	IFS=$'\x1f' read -r v rec <<<"$row"
	FAILOVER_SLOT=off
	if [[ $key == on ]]; then
		((v >= 170000)) || die $EX_PREFLIGHT "source.failover_slot = on needs PostgreSQL 17 or later, and the source ($SRC_DISPLAY) runs $((v / 10000)): set source.failover_slot = off or leave it out"
		[[ $rec == f ]] || die $EX_PREFLIGHT "source.failover_slot = on, but the source ($SRC_DISPLAY) is a standby (in recovery): point PGSYNC_SOURCE_URL at the primary (several hosts with target_session_attrs=primary find it)"
		FAILOVER_SLOT=on
	elif [[ $key == auto ]] && ((v >= 170000)) && [[ $rec == f ]]; then
		FAILOVER_SLOT=on
	fi
	FAILOVER_OPT=--no-failover
	[[ $FAILOVER_SLOT == off ]] || FAILOVER_OPT=--failover
	FAILOVER_SERVER=$v
}

# failover_slot_follow: run, before streaming: the job's slot made a
# failover slot, or no longer one, when source.failover_slot says otherwise
# than the slot (pg-slot alter; the slot must be idle, and is, before
# pg-walcat starts).
failover_slot_follow() {
	local now out
	failover_resolve
	((FAILOVER_SERVER >= 170000)) || return 0
	now=$(sql src <<<"SELECT failover FROM pg_replication_slots WHERE slot_name = :'slot'") || return 0
	[[ -n $now ]] || return 0
	[[ ($now == t && $FAILOVER_SLOT == on) || ($now == f && $FAILOVER_SLOT == off) ]] && return 0
	out=$(pg-slot alter -d "$SRC" --slot "$SLOT" "$FAILOVER_OPT" --wait 10s --log-level "$LOG_LEVEL_NAME" 2>&1) ||
		die $EX_RUNTIME "cannot make replication slot $SLOT ${FAILOVER_OPT#--} for source.failover_slot = ${CFG[source.failover_slot]}: ${out##*error: }"
	log_info "replication slot $SLOT: ${FAILOVER_OPT#--} now, as source.failover_slot = ${CFG[source.failover_slot]} says"
}

# ha_check MODE: check's and bootstrap's findings about high availability.
# source.failover_slot = on where no failover slot can be is a failure
# before anything is created.
ha_check() {
	local key=${CFG[source.failover_slot]:-auto} row v rec
	row=$(sql src <<<"SELECT current_setting('server_version_num')::int, pg_is_in_recovery()") || return 0
	IFS=$'\x1f' read -r v rec <<<"$row"
	if [[ $key == on ]] && ((v < 170000)); then
		finding fail source "source.failover_slot = on needs PostgreSQL 17 or later, and the source runs $((v / 10000))" \
			"set source.failover_slot = off or leave it out (a failover of a source before 17 always ends the job with a resync)"
	elif [[ $key == on && $rec == t ]]; then
		finding fail source "source.failover_slot = on, but the source is a standby (in recovery)" \
			"point PGSYNC_SOURCE_URL at the primary (several hosts with target_session_attrs=primary find it)"
	fi
}
