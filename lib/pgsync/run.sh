# pgsync run: prove continuity, then stream pg-walcat | pg-apply under
# supervision, with the WAL retention monitor every heartbeat interval.
# Sourced by bin/pgsync. It never skips WAL and never drops a slot: when
# continuity cannot be proven the job becomes RESYNC_REQUIRED (exit 4).

# shellcheck source=lib/pgsync/supervise.sh
source "$PGSYNC_LIBDIR/supervise.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/supervise.sh"

readonly RESYNC_ACTION="pgsync cleanup --yes && pgsync bootstrap --restart-snapshot"

resync() {
	local reason=$1
	[[ -z ${WALCAT_PID:-} ]] || stop_stream
	set_state RESYNC_REQUIRED "$reason"
	die $EX_RESYNC "job $JOB requires a resync: $reason; $RESYNC_ACTION"
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

# Continuity at start: the same source, the slot still there and valid, and
# not confirmed past what the target applied. Returns 1 when the source
# cannot be reached (a runtime problem, retried by the stream itself).
check_continuity() {
	local sysid applied
	if ! sysid=$(source_sysid); then
		log_warn "cannot reach the source ($SRC_DISPLAY) to verify continuity: $(sql_error)"
		return 1
	fi
	if [[ -n $JOB_SYSID && $sysid != "$JOB_SYSID" ]]; then
		resync "the source system identifier is $sysid, but the job was copied from $JOB_SYSID: this is another server"
	fi
	slot_load || {
		log_warn "cannot read the slot on the source: $(sql_error)"
		return 1
	}
	slot_continuity
	applied=$(applied_position)
	if [[ -n $applied && -n $SLOT_CONFIRMED ]] && ! lsn_ge "$applied" "$SLOT_CONFIRMED"; then
		resync "replication slot $SLOT confirmed $SLOT_CONFIRMED, beyond the target's applied position $applied: the changes in between are gone from the slot"
	fi
	return 0
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
# to start from (atomically: temp file, fsync, rename).
write_checkpoint() {
	local applied tmp=$STATE_DIR/applied.lsn.tmp
	applied=$(applied_position)
	[[ -n $applied ]] || return 0
	{
		printf '%s\n' "$applied"
		[[ -n $JOB_SYSID ]] && printf 'sysid=%s\n' "$JOB_SYSID"
		[[ -n $JOB_TIMELINE ]] && printf 'timeline=%s\n' "$JOB_TIMELINE"
		printf 'slot=%s\n' "$SLOT"
	} >"$tmp" && sync "$tmp" && mv -f "$tmp" "$STATE_DIR/applied.lsn" ||
		die $EX_RUNTIME "cannot write $STATE_DIR/applied.lsn"
}

start_stream() {
	rm -f "$WORK/stream.fifo"
	mkfifo "$WORK/stream.fifo"
	local hb=${CFG[safety.heartbeat_interval]}
	mkdir -p "$STATE_DIR/spool"
	spawn pg-walcat - "$WORK/stream.fifo" pg-walcat -d "$SRC" --slot "$SLOT" --publication "$PUB" \
		--ack-file "$STATE_DIR/applied.lsn" --max-message-bytes "${CFG[resources.max_message_bytes]}" \
		--spool-dir "$STATE_DIR/spool" --connection-file "$STATE_DIR/connection" --log "$LOG_LEVEL_NAME"
	WALCAT_PID=$SPAWN_PID
	spawn pg-apply "$WORK/stream.fifo" - pg-apply -d "$TGT" --job "$JOB" --checkpoint "$STATE_DIR/applied.lsn" \
		--jobs "${CFG[resources.max_parallel_copies]}" --max-batch-bytes "${CFG[resources.max_batch_bytes]}" \
		--max-message-bytes "${CFG[resources.max_message_bytes]}" --heartbeat-interval "$hb" \
		--connection-file "$STATE_DIR/connection" --log-level "$LOG_LEVEL_NAME"
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

# Once per heartbeat interval: CATCHING_UP -> STREAMING when the applied
# position reached the WAL end seen at connect; slot health; retention.
monitor_tick() {
	local applied
	if [[ -z $WAL_END_AT_CONNECT ]]; then
		# The source was out of reach at start: prove continuity now.
		check_continuity || return 0
		WAL_END_AT_CONNECT=$SLOT_CURRENT
	fi
	if [[ $RUN_STATE == CATCHING_UP ]]; then
		applied=$(sql tgt <<<"SELECT coalesce(applied_lsn::text, '') FROM pgsync.job WHERE job = :'job'") || applied=""
		if [[ -n $applied && -n $WAL_END_AT_CONNECT ]] && lsn_ge "$applied" "$WAL_END_AT_CONNECT"; then
			set_state STREAMING ""
			RUN_STATE=STREAMING
			log_info "job $JOB caught up with $WAL_END_AT_CONNECT, the source WAL end at connect: state STREAMING"
		fi
	fi
	if ! slot_load; then
		log_warn "wal monitor: cannot read slot $SLOT on the source: $(sql_error)"
		return 0
	fi
	slot_continuity
	wal_retention || pause
	sequences_follow
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
	RESYNC_REQUIRED)
		die $EX_RESYNC "job $JOB requires a resync (${JOB_LAST_ERROR:-continuity lost}): $RESYNC_ACTION" ;;
	esac
	[[ $JOB_SLOT == "$SLOT" ]] || die $EX_USAGE "job $JOB streams from slot $JOB_SLOT, but source.slot is $SLOT"

	if check_continuity; then
		WAL_END_AT_CONNECT=$SLOT_CURRENT
		wal_retention || pause
	else
		WAL_END_AT_CONNECT=""
	fi
	RUN_STATE=CATCHING_UP
	set_state CATCHING_UP
	log_info "job $JOB: streaming slot $SLOT from $SRC_DISPLAY into $TGT_DISPLAY from $(applied_position), state CATCHING_UP until $WAL_END_AT_CONNECT"

	local attempts=0 max=${CFG[safety.max_retries]} backoff progress_mark
	local hb_s
	hb_s=$(ms_to_s "$HEARTBEAT_MS")
	while :; do
		write_checkpoint
		progress_mark=$(applied_position)
		start_stream
		local first_name="" first_rc=0
		while :; do
			wait_any "$hb_s" "$WALCAT_PID" "$APPLY_PID"
			case $WAIT_WHAT in
			signal)
				log_info "stopping job $JOB on SIG$STOP_SIGNAL"
				stop_stream
				sequences_follow
				log_info "job $JOB stopped cleanly (state $RUN_STATE); pgsync run resumes it"
				return $EX_OK
				;;
			tick) monitor_tick ;;
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
		[[ -z $STOP_SIGNAL ]] || return $EX_OK
		job_load
		[[ $(applied_position) != "$progress_mark" ]] && attempts=0
		attempts=$((attempts + 1))
		if ((attempts > max)); then
			set_state ERROR "$why (after $max retries)"
			die $EX_RUNTIME "job $JOB stopped: $why; gave up after $max retries without progress; pgsync run"
		fi
		backoff=$((1 << (attempts - 1)))
		((backoff > 60)) && backoff=60
		log_warn "$why; retry $attempts of $max in $backoff s"
		wait_any "$backoff"
		if [[ $WAIT_WHAT == signal ]]; then
			log_info "job $JOB stopped on SIG$STOP_SIGNAL while waiting to retry"
			return $EX_OK
		fi
	done
}
