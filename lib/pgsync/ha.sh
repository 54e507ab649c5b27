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
	local mode=${1:-check} key=${CFG[source.failover_slot]:-auto} row v rec
	row=$(sql src <<<"SELECT current_setting('server_version_num')::int, pg_is_in_recovery()") || return 0
	IFS=$'\x1f' read -r v rec <<<"$row"
	if [[ $key == on ]] && ((v < 170000)); then
		finding fail source "source.failover_slot = on needs PostgreSQL 17 or later, and the source runs $((v / 10000))" \
			"set source.failover_slot = off or leave it out (a failover of a source before 17 always ends the job with a resync)"
	elif [[ $key == on && $rec == t ]]; then
		finding fail source "source.failover_slot = on, but the source is a standby (in recovery)" \
			"point PGSYNC_SOURCE_URL at the primary (several hosts with target_session_attrs=primary find it)"
	elif [[ $mode == check && $rec == f ]] && ((v >= 170000)); then
		ha_check_failover
	fi
}

# --- failover readiness ----------------------------------------------------------
# The standbys a failover may promote are named in PGSYNC_STANDBY_URLS, one
# connection string or URL each, separated by ";" (percent-encode a ";" in a
# URL). They are shown without their password, like every connection.

# ha_standbys: the entries of PGSYNC_STANDBY_URLS, one a line.
ha_standbys() {
	local -a list
	local u
	IFS=';' read -r -a list <<<"${PGSYNC_STANDBY_URLS:-}"
	for u in "${list[@]}"; do
		u=${u#"${u%%[![:space:]]*}"}
		u=${u%"${u##*[![:space:]]}"}
		[[ -z $u ]] || printf '%s\n' "$u"
	done
}

# The facts of one standby in one row: in recovery, version, the slot sync
# settings, whether primary_conninfo names a dbname ("" when the role may
# not read it: pg_read_all_settings), and the job's slot there.
read -r -d '' HA_STANDBY_SQL <<'SQL'
SELECT pg_is_in_recovery(), current_setting('server_version_num')::int,
       coalesce(current_setting('sync_replication_slots', true), ''),
       current_setting('hot_standby_feedback'), current_setting('primary_slot_name'),
       coalesce((SELECT (setting ~ '(^|\s)dbname\s*=|^postgres(ql)?://[^?]*/[^/?]+')::text
                   FROM pg_settings WHERE name = 'primary_conninfo'), ''),
       s.slot_name IS NOT NULL,
       coalesce((to_jsonb(s) ->> 'synced')::boolean, false), coalesce(s.temporary, false),
       coalesce(to_jsonb(s) ->> 'invalidation_reason', CASE WHEN s.wal_status = 'lost' THEN 'wal_removed' END, '')
  FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = :'slot'
SQL

# ha_standby URL: lines LEVEL<US>MESSAGE<US>FIX about one standby (LEVEL ok,
# info, warn, fail); HA_READY 1 when a promotion of it keeps the job.
ha_standby() {
	local url=$1 row rec v sync hsf pslot dbname has synced temp invalid
	HA_READY=0
	HA_LINES=()
	if ! row=$(PGAPPNAME=pgsync "$PSQL" -X -q -A -t -F $'\x1f' -v ON_ERROR_STOP=1 -d "$url" -v slot="$SLOT" \
		<<<"$HA_STANDBY_SQL" 2>"$WORK/psql.err"); then
		HA_LINES+=("warn"$'\x1f'"cannot connect: $(sql_error)"$'\x1f'"check PGSYNC_STANDBY_URLS and that the standby runs")
		return
	fi
	IFS=$'\x1f' read -r rec v sync hsf pslot dbname has synced temp invalid <<<"$row"
	if [[ $rec != t ]]; then
		HA_LINES+=("warn"$'\x1f'"is not in recovery: not a standby (promoted, or a primary of its own)"$'\x1f'"remove it from PGSYNC_STANDBY_URLS, or rebuild it as a standby")
		return
	fi
	if ((v < 170000)); then
		HA_LINES+=("warn"$'\x1f'"runs PostgreSQL $((v / 10000)): slots are synchronized to standbys from 17 on, so a promotion of it ends the job with a resync"$'\x1f'"upgrade the standby to 17 or later")
		return
	fi
	local ready=1
	[[ $sync == on ]] || {
		ready=0
		HA_LINES+=("warn"$'\x1f'"sync_replication_slots is off: the job's slot is not synchronized to it"$'\x1f'"ALTER SYSTEM SET sync_replication_slots = on; SELECT pg_reload_conf() on the standby")
	}
	[[ $hsf == on ]] || {
		ready=0
		HA_LINES+=("warn"$'\x1f'"hot_standby_feedback is off: slot synchronization needs it"$'\x1f'"ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf() on the standby")
	}
	[[ -n $pslot ]] || {
		ready=0
		HA_LINES+=("warn"$'\x1f'"primary_slot_name is empty: slot synchronization needs the standby's own physical slot on the primary"$'\x1f'"create a physical slot on the primary and set primary_slot_name on the standby")
	}
	case $dbname in
	true) ;;
	false)
		ready=0
		HA_LINES+=("warn"$'\x1f'"primary_conninfo names no dbname: slot synchronization needs one"$'\x1f'"add dbname=<the job's database> to primary_conninfo on the standby")
		;;
	*) HA_LINES+=("info"$'\x1f'"cannot read primary_conninfo (the role needs pg_read_all_settings): whether it names a dbname is not checked"$'\x1f'"") ;;
	esac
	if [[ $has != t ]]; then
		ready=0
		HA_LINES+=("warn"$'\x1f'"replication slot $SLOT is not on it (not synchronized yet: the primary's slot must move first, which decoding and pgsync's heartbeats do)"$'\x1f'"wait for it, and check the standby's log for \"could not synchronize replication slot\"")
	elif [[ $synced != t ]]; then
		ready=0
		HA_LINES+=("fail"$'\x1f'"replication slot $SLOT on it is not a synced copy of the primary's: it blocks the synchronization of every slot"$'\x1f'"drop it on the standby (SELECT pg_drop_replication_slot('$SLOT')) if nothing uses it")
	elif [[ -n $invalid ]]; then
		ready=0
		HA_LINES+=("warn"$'\x1f'"the synced copy of replication slot $SLOT is invalidated ($invalid): a promotion of it ends the job with a resync"$'\x1f'"see the standby's log; the copy is synchronized anew once the cause is gone")
	elif [[ $temp == t ]]; then
		ready=0
		HA_LINES+=("warn"$'\x1f'"the synced copy of replication slot $SLOT is not persistent yet: a promotion now would drop it"$'\x1f'"wait: it becomes persistent once the primary's slot passed what the standby has")
	fi
	((ready == 0)) || HA_LINES+=("ok"$'\x1f'"ready for a failover: replication slot $SLOT is synced, persistent and valid"$'\x1f'"")
	HA_READY=$ready
}

# ha_primary: lines about the primary's side (after failover_resolve):
# the job's slot a failover slot, synchronized_standby_slots naming only
# existing, active physical slots, and not empty while standbys stream.
ha_primary() {
	local row fo sss streaming name state
	HA_LINES=()
	row=$(sql src <<'SQL'
SELECT coalesce((SELECT failover::text FROM pg_replication_slots WHERE slot_name = :'slot'), ''),
       current_setting('synchronized_standby_slots'),
       (SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical' AND active)
SQL
	) || return 0
	IFS=$'\x1f' read -r fo sss streaming <<<"$row"
	if [[ $fo == f ]]; then
		if [[ $FAILOVER_SLOT == on ]]; then
			HA_LINES+=("info"$'\x1f'"replication slot $SLOT is no failover slot yet: pgsync run makes it one (source.failover_slot = ${CFG[source.failover_slot]})"$'\x1f'"")
		else
			HA_LINES+=("info"$'\x1f'"replication slot $SLOT is no failover slot (source.failover_slot = off): a failover ends the job with a resync"$'\x1f'"")
		fi
	fi
	local -a names
	IFS=',' read -r -a names <<<"$sss"
	for name in "${names[@]}"; do
		name=${name//[[:space:]\"]/}
		[[ -n $name ]] || continue
		state=$(sql src -v s="$name" <<<"SELECT CASE WHEN slot_type <> 'physical' THEN 'not physical' WHEN NOT active THEN 'inactive' ELSE 'ok' END FROM pg_replication_slots WHERE slot_name = :'s'") || return 0
		case ${state:-missing} in
		ok) ;;
		missing)
			HA_LINES+=("warn"$'\x1f'"synchronized_standby_slots names $name, which does not exist: logical decoding waits for it, and the job stalls"$'\x1f'"remove $name from synchronized_standby_slots (ALTER SYSTEM SET synchronized_standby_slots = '...'; SELECT pg_reload_conf())") ;;
		*)
			HA_LINES+=("warn"$'\x1f'"synchronized_standby_slots names $name, which is $state: logical decoding waits for its standby, and the job stalls while it is down"$'\x1f'"bring its standby back, or remove $name from synchronized_standby_slots (ALTER SYSTEM SET synchronized_standby_slots = '...'; SELECT pg_reload_conf())") ;;
		esac
	done
	if [[ -z ${sss//[[:space:]]/} ]] && { ((streaming > 0)) || [[ -n $(ha_standbys) ]]; }; then
		HA_LINES+=("warn"$'\x1f'"synchronized_standby_slots is empty while standbys exist: the target may apply what a standby never received, and a failover to that standby then ends the job (exit 4)"$'\x1f'"set synchronized_standby_slots to the standbys' physical slots (primary_slot_name of each)")
	fi
}

# ha_check_failover: check's findings for a 17+ primary and each standby.
ha_check_failover() {
	local line level msg fix url display
	failover_resolve
	((FAILOVER_SERVER >= 170000)) || return 0
	ha_primary
	for line in "${HA_LINES[@]}"; do
		IFS=$'\x1f' read -r level msg fix <<<"$line"
		finding "$level" source "$msg" "$fix"
	done
	while IFS= read -r url; do
		display=$(pgsync-config --display-url <<<"$url" 2>/dev/null) || display="(a standby URL pgsync-config cannot read)"
		ha_standby "$url"
		for line in "${HA_LINES[@]}"; do
			IFS=$'\x1f' read -r level msg fix <<<"$line"
			finding "$level" "standby $display" "$msg" "$fix"
		done
	done < <(ha_standbys)
}

# ha_status FORMAT: status's document on stdin, with whether a promotion of
# each standby in PGSYNC_STANDBY_URLS would keep the job, and why not: a
# "failover:" line (text), a "failover" object (json), the
# pgsync_failover_ready{standby=...} gauge (prom). Without standbys named
# the document passes unchanged.
ha_status() {
	local format=$1 doc url display fo="" why entries="" any=0 line level msg
	doc=$(cat) || return 1
	if [[ -z $(ha_standbys) ]]; then
		printf '%s\n' "$doc"
		return 0
	fi
	((HAVE_SOURCE)) && fo=$(sql src <<<"SELECT coalesce((SELECT to_jsonb(s) ->> 'failover' FROM pg_replication_slots s WHERE slot_name = :'slot'), '')" 2>/dev/null)
	while IFS= read -r url; do
		display=$(pgsync-config --display-url <<<"$url" 2>/dev/null) || display="(unreadable standby URL)"
		why=""
		case $fo in
		true)
			ha_standby "$url"
			for line in "${HA_LINES[@]}"; do
				IFS=$'\x1f' read -r level msg _ <<<"$line"
				[[ -z $why && ($level == warn || $level == fail) ]] && why=$msg
			done
			((HA_READY)) || why=${why:-not ready}
			;;
		false) why="replication slot $SLOT on the primary is no failover slot (source.failover_slot)" ;;
		*) why="the primary's replication slot $SLOT cannot be read (source unreachable, missing, or before PostgreSQL 17)" ;;
		esac
		[[ -n $why ]] || any=1
		entries+=${entries:+$'\x1e'}$display$'\x1f'$([[ -z $why ]] && echo true || echo false)$'\x1f'$why
	done < <(ha_standbys)
	case $format in
	json)
		sql tgt -v doc="$doc" -v list="$entries" -v any="$any" <<'SQL'
SELECT jsonb_pretty(:'doc'::jsonb || jsonb_build_object('failover', jsonb_build_object(
  'ready', :'any' = '1',
  'standbys', (SELECT jsonb_agg(jsonb_build_object('standby', split_part(e, E'\x1f', 1),
                 'ready', split_part(e, E'\x1f', 2)::boolean, 'reason', nullif(split_part(e, E'\x1f', 3), '')))
                 FROM unnest(string_to_array(:'list', E'\x1e')) e))))
SQL
		;;
	prom)
		printf '%s\n' "$doc"
		printf '# HELP pgsync_failover_ready Whether a promotion of the standby now would keep the job (1) or end it with a resync (0).\n# TYPE pgsync_failover_ready gauge\n'
		while IFS=$'\x1f' read -r display level msg; do
			display=${display//\\/\\\\}
			printf 'pgsync_failover_ready{pgsync_job="%s",standby="%s"} %d\n' "$JOB" "${display//\"/\\\"}" "$([[ $level == true ]] && echo 1 || echo 0)"
		done < <(tr '\036' '\n' <<<"$entries")
		;;
	*)
		printf '%s\n' "$doc"
		while IFS=$'\x1f' read -r display level msg; do
			if [[ $level == true ]]; then
				printf 'failover:        ready to %s\n' "$display"
			else
				printf 'failover:        NOT ready to %s: %s\n' "$display" "$msg"
			fi
		done < <(tr '\036' '\n' <<<"$entries")
		;;
	esac
}
