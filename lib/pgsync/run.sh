# pgsync run: prove continuity, then stream pg-walcat | pg-apply under
# supervision, with the WAL retention monitor every heartbeat interval.
# Sourced by bin/pgsync. It never skips WAL and never drops a slot: when
# continuity cannot be proven the job becomes RESYNC_REQUIRED (exit 4).

# shellcheck source=lib/pgsync/supervise.sh
source "$PGSYNC_LIBDIR/supervise.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/supervise.sh"
# shellcheck source=lib/pgsync/verify.sh
[[ $COMMAND != run ]] || source "$PGSYNC_LIBDIR/verify.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/verify.sh"

readonly RESYNC_ACTION="pgsync cleanup --yes && pgsync bootstrap --restart-snapshot"

resync() {
	local reason=$1
	# A program that found another server at the source's address.
	wrong_server_cause "$reason" && another_server "$reason"
	[[ -z ${WALCAT_PID:-} ]] || stop_stream
	set_state RESYNC_REQUIRED "$reason"
	die $EX_RESYNC "job $JOB requires a resync: $reason; $RESYNC_ACTION"
}

# another_server WHY: the source is another server than the job's (a
# mistyped URL, a failover, a copy restored from an older backup): nothing
# of the job's is touched, and the mark clears once the job's own server
# answers again.
another_server() {
	local reason=$1
	[[ $reason == *"nothing was dropped"* ]] || reason=$(wrong_server "$reason")
	[[ -z ${WALCAT_PID:-} ]] || stop_stream
	set_state RESYNC_REQUIRED "$reason"
	die $EX_RESYNC "job $JOB cannot continue: $reason, then pgsync run continues without a resync"
}

# The applied position the target records (after bootstrap: the consistent
# point at least).
applied_position() {
	if [[ -n $JOB_APPLIED ]]; then
		printf '%s' "$JOB_APPLIED"
	else
		printf '%s' "$JOB_CONSISTENT"
	fi
}

# Continuity: the same source, the slot still there and valid, and not
# confirmed past what the target applied. Returns 1 when the source cannot
# be reached, 2 when the target cannot (runtime problems, retried).
check_continuity() {
	local applied
	job_lineage || return 1
	slot_load || return 1
	slot_continuity
	# Read after the slot: while the stream runs both move, and the slot
	# never confirms what the target has not committed.
	applied=$(sql tgt <<<"SELECT coalesce(applied_lsn, consistent_lsn)::text FROM pgsync.job WHERE job = :'job'") || return 2
	if [[ -n $applied && -n $SLOT_CONFIRMED ]] && ! lsn_ge "$applied" "$SLOT_CONFIRMED"; then
		resync "replication slot $SLOT confirmed $SLOT_CONFIRMED, beyond the target's applied position $applied: the changes in between are gone from the slot"
	fi
	return 0
}

# job_lineage: the source is the job's server (source_lineage), with the
# applied position read before as what the job took from it; another
# server is another_server. Each check that passes records the restart_lsn
# the one before saw (record_restart_floor). Returns 1 when the source
# cannot be asked.
LINEAGE_SEEN=""
job_lineage() {
	source_lineage "$(applied_position)"
	case $? in
	0) ;;
	4) another_server "$LINEAGE_WHY" ;;
	*) return 1 ;;
	esac
	record_restart_floor
	return 0
}

# The job's slot never restarts below a restart_lsn it had: the server
# writes a new one to disk before it is used. An older copy of the server
# has an older one (lib/source/lineage.h). The floor recorded is the value
# one check older than the last, which the server had surely written by the
# time it answered again. greatest(): a floor only rises. Only on the job's
# recorded timeline: after a failover pg-apply records the new one and
# clears the floor, which the new primary's slot then starts again.
LINEAGE_SEEN_TLI=""
record_restart_floor() {
	if [[ -n $LINEAGE_SEEN && -n $RESTART_FLOOR_COLUMN && $LINEAGE_SEEN != "$JOB_RESTART_FLOOR" &&
		$LINEAGE_SEEN_TLI == "$SOURCE_TIMELINE" && (-z $JOB_TIMELINE || $JOB_TIMELINE == "$SOURCE_TIMELINE") ]]; then
		if job_update "slot_restart_lsn = greatest(slot_restart_lsn, :'r')" r="$LINEAGE_SEEN"; then
			[[ -n $JOB_RESTART_FLOOR ]] && lsn_ge "$JOB_RESTART_FLOOR" "$LINEAGE_SEEN" || JOB_RESTART_FLOOR=$LINEAGE_SEEN
		else
			log_warn "cannot record the slot's restart_lsn in pgsync.job: $(sql_error)"
		fi
	fi
	LINEAGE_SEEN=$LINEAGE_RESTART LINEAGE_SEEN_TLI=$SOURCE_TIMELINE
}

# The job row's slot_restart_lsn (lib/apply/catalog.c) on a catalog from
# before it: the catalog's own DDL adds it when we may; otherwise the floor
# is not recorded and an older copy of the server is found only while its
# WAL is behind. Sets RESTART_FLOOR_COLUMN.
RESTART_FLOOR_COLUMN=""
restart_floor_column() {
	local r
	r=$(sql tgt <<<"SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgsync.job'::regclass AND attname = 'slot_restart_lsn' AND NOT attisdropped)") ||
		die $EX_RUNTIME "cannot read the target ($TGT_DISPLAY): $(sql_error)"
	if [[ $r == f ]] && ! pgsync-config --catalog-sql | sql tgt -1 >/dev/null; then
		log_warn "cannot add slot_restart_lsn to pgsync.job ($(sql_error)): run pgsync run once as the catalog's owner, so that a copy of the source restored from an older backup is always refused"
		return 0
	fi
	RESTART_FLOOR_COLUMN=1
}

# After slot_load: missing or invalidated means the WAL the job needs is gone.
slot_continuity() {
	((SLOT_EXISTS)) || resync "replication slot $SLOT no longer exists on the source"
	if [[ $SLOT_WAL_STATUS == lost || -n $SLOT_INVALID ]]; then
		resync "replication slot $SLOT was invalidated (wal_status ${SLOT_WAL_STATUS:-unknown}${SLOT_INVALID:+, $SLOT_INVALID}): the WAL the job needs was removed"
	fi
}

# The WAL retention check: log line, alarm, and with action stop, PAUSED.
# Returns 1 when the job must pause.
wal_retention() {
	local alarm=${CFG[safety.wal_retention_alarm_bytes]}
	log_info "wal monitor: slot $SLOT retains ${SLOT_RETAINED:-?} bytes of WAL (alarm at $alarm), slot lag ${SLOT_LAG:-?} bytes, wal_status ${SLOT_WAL_STATUS:-?}"
	[[ -n $SLOT_RETAINED ]] && ((SLOT_RETAINED > alarm)) || return 0
	local msg="WAL retention alarm: slot $SLOT retains $SLOT_RETAINED bytes of WAL, above safety.wal_retention_alarm_bytes = $alarm"
	if [[ ${CFG[safety.wal_retention_action]} == stop ]]; then
		PAUSE_REASON="$msg; paused by safety.wal_retention_action = stop (the slot still retains its WAL; only pgsync cleanup --yes releases it)"
		return 1
	fi
	log_warn "$msg (safety.wal_retention_action = warn)"
	return 0
}

pause() {
	[[ -z ${WALCAT_PID:-} ]] || stop_stream
	set_state PAUSED "$PAUSE_REASON"
	die $EX_PREFLIGHT "job $JOB paused: $PAUSE_REASON; raise the alarm or set safety.wal_retention_action = warn, then pgsync run"
}

# The target's record is authoritative: hand it to pg-walcat as the position
# to start from, through the C programs' own checkpoint writer (temp file,
# fsync, rename, fsync of the directory), so the file has one writer's rules.
write_checkpoint() {
	local applied
	applied=$(applied_position)
	[[ -n $applied ]] || return 0
	{
		printf '%s\n' "$applied"
		[[ -n $JOB_SYSID ]] && printf 'sysid=%s\n' "$JOB_SYSID"
		[[ -n $JOB_TIMELINE ]] && printf 'timeline=%s\n' "$JOB_TIMELINE"
		printf 'slot=%s\n' "$SLOT"
	} | pgsync-config --write-checkpoint "$STATE_DIR/applied.lsn" ||
		die $EX_RUNTIME "cannot write $STATE_DIR/applied.lsn"
}

# start_stream [pg-walcat options]: verify adds --endpos. APPLY_ARGS: more
# pg-apply options (the chunked catch-up's key collations).
APPLY_ARGS=()
start_stream() {
	rm -f "$WORK/stream.fifo"
	mkfifo "$WORK/stream.fifo"
	local hb=${CFG[safety.heartbeat_interval]}
	mkdir -p "$STATE_DIR/spool"
	spawn pg-walcat - "$WORK/stream.fifo" pg-walcat -d "$SRC" --slot "$SLOT" --publication "$PUB" \
		--ack-file "$STATE_DIR/applied.lsn" --max-message-bytes "${CFG[resources.max_message_bytes]}" \
		--spool-dir "$STATE_DIR/spool" --connection-file "$STATE_DIR/connection" --log-level "$LOG_LEVEL_NAME" "$@"
	WALCAT_PID=$SPAWN_PID
	spawn pg-apply "$WORK/stream.fifo" - pg-apply -d "$TGT" --job "$JOB" --checkpoint "$STATE_DIR/applied.lsn" \
		--jobs "${CFG[resources.max_parallel_copies]}" --max-batch-bytes "${CFG[resources.max_batch_bytes]}" \
		--max-message-bytes "${CFG[resources.max_message_bytes]}" --heartbeat-interval "$hb" \
		--connection-file "$STATE_DIR/connection" --log-level "$LOG_LEVEL_NAME" "${APPLY_ARGS[@]}"
	APPLY_PID=$SPAWN_PID
}

stop_stream() {
	local pid
	for pid in $WALCAT_PID $APPLY_PID; do
		pid_running "$pid" || [[ -n ${RELAY_OF[$pid]:-} ]] || continue
		stop_pid "$pid" 30
		reap_relay "$pid"
	done
	WALCAT_PID="" APPLY_PID=""
}

# Once per heartbeat interval: both servers answer (an outage is tracked);
# CATCHING_UP -> STREAMING when the applied position reached the WAL end
# seen at connect; slot health; retention. Sets SWITCHED when pgsync
# switchover recorded the job's switchover: the stream must stop, the
# target being the application's database from then on.
monitor_tick() {
	local applied rc state
	if ! applied=$(sql tgt <<<"SELECT coalesce(applied_lsn::text, '') || E'\x1f' || state FROM pgsync.job WHERE job = :'job'"); then
		outage target "$(sql_error)"
		return 0
	fi
	IFS=$'\x1f' read -r applied state <<<"$applied"
	if [[ $state == SWITCHED_OVER ]]; then
		SWITCHED=1
		return 0
	fi
	outage_over target && return 0
	if [[ -z $WAL_END_AT_CONNECT ]]; then
		# The source was out of reach at start or after an outage:
		# prove continuity now (another server is a resync).
		check_continuity
		rc=$?
		case $rc in
		1) outage source "$(sql_error)" ;;
		2) outage target "$(sql_error)" ;;
		esac
		((rc == 0)) || return 0
		outage_over source && return 0
		WAL_END_AT_CONNECT=$SLOT_CURRENT
		log_info "job $JOB: continuity verified, state CATCHING_UP until $WAL_END_AT_CONNECT"
	else
		# Which server is this, at every tick: another server (or an
		# older copy of the job's) stops the stream even before
		# pg-walcat reconnects to it, which asks itself. A probe that
		# cannot be made (no WAL sender free, say) records nothing.
		job_lineage || LINEAGE_SEEN=""
		if ! slot_load; then
			outage source "$(sql_error)"
			return 0
		fi
	fi
	outage_over source && return 0
	if [[ $RUN_STATE == CATCHING_UP && -n $applied ]] && lsn_ge "$applied" "$WAL_END_AT_CONNECT"; then
		set_state STREAMING ""
		RUN_STATE=STREAMING
		log_info "job $JOB caught up with $WAL_END_AT_CONNECT, the source WAL end at connect: state STREAMING"
	fi
	slot_continuity
	wal_retention || pause
	sequences_follow
	verify_serve
}

# --- outages and retries ------------------------------------------------------
# A server that does not answer is retried for as long as safety.max_retries
# retries back off (1, 2, 4 ... 60 s each): pg-walcat (and pg-apply) ride out
# an outage themselves, run restarts the pipeline when one of them ends.
# last_error says what is going on while the target can record it.

backoff_s() {
	local b=60
	(($1 <= 6)) && b=$((1 << ($1 - 1)))
	echo "$b"
}

retry_budget_s() {
	local i total=0
	for ((i = 1; i <= ${CFG[safety.max_retries]}; i++)); do
		total=$((total + $(backoff_s "$i")))
	done
	echo "$total"
}

# give_up WHY: the retries are spent: ERROR with last_error, exit 1.
give_up() {
	local why=$1 max=${CFG[safety.max_retries]}
	[[ -z ${WALCAT_PID:-} ]] || stop_stream
	set_state ERROR "$why (after $max retries)"
	die $EX_RUNTIME "job $JOB stopped: $why; gave up after $max retries without progress; pgsync run"
}

declare -A DOWN_SINCE=() DOWN_AT=() DOWN_MSG=()

server_display() {
	[[ $1 == source ]] && printf '%s' "$SRC_DISPLAY" || printf '%s' "$TGT_DISPLAY"
}

# outage source|target MESSAGE: the server did not answer this tick.
outage() {
	local which=$1 msg=$2 budget display
	budget=$(retry_budget_s)
	display=$(server_display "$which")
	if [[ -z ${DOWN_SINCE[$which]:-} ]]; then
		DOWN_SINCE[$which]=$SECONDS
		DOWN_AT[$which]=$(date -u +%H:%M:%S)
		DOWN_MSG[$which]=$msg
		log_warn "the $which ($display) does not answer: $msg; retrying for up to $budget s (safety.max_retries)"
		if [[ $which == source ]]; then
			job_update "last_error = :'err'" \
				err="the source ($display) does not answer since ${DOWN_AT[$which]} UTC: $msg; pg-walcat reconnects for up to $budget s" ||
				log_warn "cannot record last_error: $(sql_error)"
		fi
	fi
	if ((SECONDS - DOWN_SINCE[$which] > budget)); then
		give_up "the $which ($display) did not answer for $((SECONDS - DOWN_SINCE[$which])) s: $msg"
	fi
}

# outage_over source|target: true when it answers again after an outage.
# The job catches up from here, and continuity is proven again (next tick)
# before it counts as STREAMING.
outage_over() {
	local which=$1 secs
	[[ -n ${DOWN_SINCE[$which]:-} ]] || return 1
	secs=$((SECONDS - DOWN_SINCE[$which]))
	log_info "the $which ($(server_display "$which")) answers again after $secs s"
	RUN_STATE=CATCHING_UP WAL_END_AT_CONNECT=""
	set_state CATCHING_UP "the $which ($(server_display "$which")) did not answer for $secs s from ${DOWN_AT[$which]} UTC: ${DOWN_MSG[$which]}; catching up"
	unset 'DOWN_SINCE[$which]'
	return 0
}

# The exit status that explains a stream that ended: the more specific of
# the two programs' statuses wins; our own SIGTERM's results do not count.
# Sets END_NAME, END_STATUS (its real status) and END_RC (what it means).
classify_end() {
	local first_name=$1 first_rc=$2 other_name=$3 other_rc=$4 code
	END_NAME=$first_name END_STATUS=$first_rc END_RC=$first_rc
	for code in 4 5 3 2 1; do
		if ((first_rc == code)); then
			return
		fi
		if ((other_rc == code && code != 1)); then
			END_NAME=$other_name END_STATUS=$other_rc END_RC=$other_rc
			return
		fi
	done
	# Success or a signal: the stream must not end while run supervises
	# it, so this counts as a runtime failure.
	END_RC=1
}

cmd_run() {
	need_programs pg-walcat pg-apply psql
	setup_connections yes
	lock_job
	trap_stop
	job_load
	((JOB_EXISTS)) || die $EX_PREFLIGHT "job $JOB does not exist in the target ($TGT_DISPLAY): run pgsync bootstrap first"
	case $JOB_STATE in
	INITIALIZING | SNAPSHOTTING)
		die $EX_PREFLIGHT "job $JOB has not completed its bootstrap (state $JOB_STATE${JOB_LAST_ERROR:+: $JOB_LAST_ERROR}): run pgsync bootstrap${JOB_LAST_ERROR:+ --restart-snapshot}" ;;
	SWITCHED_OVER)
		die $EX_PREFLIGHT "job $JOB was switched over: the target takes the application's writes and is not replicated into again; pgsync cleanup --yes drops the job's slot" ;;
	RESYNC_REQUIRED)
		if ! wrong_server_cause "$JOB_LAST_ERROR"; then
			die $EX_RESYNC "job $JOB requires a resync (${JOB_LAST_ERROR:-continuity lost}): $RESYNC_ACTION"
		fi
		source_lineage "$(applied_position)"
		case $? in
		0) ;;
		4) another_server "$LINEAGE_WHY" ;;
		*) die $EX_RUNTIME "cannot reach the source ($SRC_DISPLAY): $(sql_error); job $JOB is RESYNC_REQUIRED because $JOB_LAST_ERROR" ;;
		esac
		log_info "job $JOB: the source at $SRC_DISPLAY is the job's own server again (system identifier $JOB_SYSID): the resync was required only by another server"
		;;
	esac
	[[ $JOB_SLOT == "$SLOT" ]] || die $EX_USAGE "job $JOB streams from slot $JOB_SLOT, but source.slot is $SLOT"
	restart_floor_column

	if check_continuity; then
		failover_slot_follow
		record_source_server "$SOURCE_SYSID" || log_warn "cannot write $STATE_DIR/source"
		WAL_END_AT_CONNECT=$SLOT_CURRENT
		wal_retention || pause
	else
		log_warn "cannot reach the source ($SRC_DISPLAY) to verify continuity: $(sql_error); streaming starts, continuity is verified once it answers"
		WAL_END_AT_CONNECT=""
	fi
	RUN_STATE=CATCHING_UP
	set_state CATCHING_UP
	log_info "job $JOB: streaming slot $SLOT from $SRC_DISPLAY into $TGT_DISPLAY from $(applied_position), state CATCHING_UP until $WAL_END_AT_CONNECT"

	local attempts=0 max=${CFG[safety.max_retries]} backoff progress_mark why
	SWITCHED=0
	while :; do
		write_checkpoint
		progress_mark=$(applied_position)
		stream_once || return $EX_OK
		why=$STREAM_WHY
		# Progress since the last start begins the count anew.
		job_read && [[ $(applied_position) != "$progress_mark" ]] && attempts=0
		while :; do
			attempts=$((attempts + 1))
			((attempts > max)) && give_up "$why"
			backoff=$(backoff_s "$attempts")
			log_warn "$why; retry $attempts of $max in $backoff s"
			wait_any $((backoff * 1000))
			if [[ $WAIT_WHAT == signal ]]; then
				log_info "job $JOB stopped on SIG$STOP_SIGNAL while waiting to retry"
				return $EX_OK
			fi
			# The target is authoritative: without it there is nothing to
			# start from, so an unreadable job row is one more failed try.
			job_read && break
			why="cannot read the target ($TGT_DISPLAY): $(sql_error)"
		done
		if [[ $JOB_STATE == SWITCHED_OVER ]]; then
			log_info "job $JOB was switched over: the stream is not restarted"
			return $EX_OK
		fi
		# Behind the source again: continuity is proven anew, and the job
		# is STREAMING (last_error cleared) once it caught up.
		RUN_STATE=CATCHING_UP WAL_END_AT_CONNECT=""
		set_state CATCHING_UP "$why (retry $attempts of $max)"
	done
}

# stream_once: pg-walcat | pg-apply until one of them ends (STREAM_WHY says
# how; return 0) or a stop signal (both stopped; return 1). An end that no
# retry can mend (exit 2 to 5) ends run here.
stream_once() {
	local first_name="" first_rc=0
	start_stream
	while :; do
		wait_any "$HEARTBEAT_MS" "$WALCAT_PID" "$APPLY_PID"
		case $WAIT_WHAT in
		signal)
			log_info "stopping job $JOB on SIG$STOP_SIGNAL"
			stop_stream
			sequences_follow
			log_info "job $JOB stopped cleanly (state $RUN_STATE); pgsync run resumes it"
			return 1
			;;
		tick)
			monitor_tick
			if ((SWITCHED)); then
				stop_stream
				log_info "job $JOB was switched over: stream stopped, the target takes the application's writes"
				return 1
			fi
			;;
		exit)
			[[ $WAIT_PID == "$WALCAT_PID" ]] && first_name=pg-walcat || first_name=pg-apply
			first_rc=$WAIT_RC
			forget_child "$WAIT_PID"
			reap_relay "$WAIT_PID"
			break
			;;
		esac
	done
	local other_pid=$APPLY_PID other_name=pg-apply
	[[ $first_name == pg-apply ]] && other_pid=$WALCAT_PID other_name=pg-walcat
	stop_pid "$other_pid" 30
	reap_relay "$other_pid"
	WALCAT_PID="" APPLY_PID=""
	classify_end "$first_name" "$first_rc" "$other_name" "$STOPPED_RC"
	local why
	why=$(child_lasterr "$END_NAME") || why=""
	why="$END_NAME exited with status $END_STATUS${why:+: $why}"
	# A change over the limit comes again on every retry: only raising the
	# limit mends it, so it is an ERROR at once, naming the key.
	why=$(config_names "$why")
	if [[ $why == *"resources.max_message_bytes"* ]]; then
		set_state ERROR "$why"
		die "$END_RC" "job $JOB stopped: $why; raise resources.max_message_bytes, then pgsync run"
	fi
	case $END_RC in
	4) resync "$why" ;;
	5)
		set_state ERROR "$why"
		die $EX_UNSUPPORTED "job $JOB stopped: $why; fix the target schema or investigate the divergence, then pgsync run"
		;;
	2 | 3)
		# Configuration and prerequisites: the state stays, the cause
		# is recorded.
		job_update "last_error = :'err'" err="$why" || log_error "cannot record last_error: $(sql_error)"
		die "$END_RC" "job $JOB stopped: $why"
		;;
	esac
	[[ -z $STOP_SIGNAL ]] || return 1
	STREAM_WHY=$why
	return 0
}
