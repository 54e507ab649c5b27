# Supervision of child pipelines for bootstrap and run: wait for the first
# child to end, a deadline or a stop signal, then stop the rest. Sourced by
# bin/pgsync. A child is never left running behind a returned result.

now_ms() {
	local t=$EPOCHREALTIME
	echo $((${t%.*} * 1000 + 10#${t#*.} / 1000))
}

# Wait (bounded) for the stderr relay of a child that ended, so its last
# error line is on file before anyone reads it.
reap_relay() {
	local pid=$1 relay=${RELAY_OF[$1]:-} fifo=${RELAY_FIFO[$1]:-} i fd
	[[ -n $relay ]] || return 0
	# A child stopped before it opened its end of the FIFO leaves its relay
	# waiting in open() for a writer, for ever. Be that writer for a moment
	# (read-write never waits): the relay then reads the end of it.
	if [[ -n $fifo && -p $fifo ]] && pid_running "$relay"; then
		exec {fd}<>"$fifo" && exec {fd}>&-
	fi
	for ((i = 0; i < 50; i++)); do
		pid_running "$relay" || break
		sleep 0.1
	done
	# It ignores SIGTERM, to relay a child's last words after a Ctrl-C.
	kill -KILL "$relay" 2>/dev/null
	wait "$relay" 2>/dev/null
	unset 'RELAY_OF[$pid]' 'RELAY_FIFO[$pid]'
}

# supervise DEADLINE_MS NAME:PID...: wait until every child ended (SUP_RESULT
# ok), one failed (failed: SUP_NAME, SUP_RC; the others are stopped), the
# deadline passed (timeout) or a stop signal arrived (signal). On timeout and
# signal every child is stopped. A child that exits 0 while others still run
# is fine: a pipeline's producer finishes first.
supervise() {
	local deadline=$1 spec pid left
	shift
	local -A name_of=()
	local -a pids=()
	for spec in "$@"; do
		pid=${spec##*:}
		name_of[$pid]=${spec%:*}
		pids+=("$pid")
	done
	SUP_RESULT=ok SUP_NAME="" SUP_RC=0
	while ((${#pids[@]})); do
		left=$((deadline - $(now_ms)))
		if ((left <= 0)); then
			SUP_RESULT=timeout
			break
		fi
		wait_any $((left < 1000 ? left : 1000)) "${pids[@]}"
		# The copy's progress display, when one is on (lib/pgsync/progress.sh).
		[[ $WAIT_WHAT != tick ]] || progress_tick
		case $WAIT_WHAT in
		signal)
			SUP_RESULT=signal
			break
			;;
		exit)
			forget_child "$WAIT_PID"
			reap_relay "$WAIT_PID"
			local -a rest=()
			for pid in "${pids[@]}"; do [[ $pid == "$WAIT_PID" ]] || rest+=("$pid"); done
			pids=("${rest[@]}")
			if ((WAIT_RC != 0)); then
				SUP_RESULT=failed SUP_NAME=${name_of[$WAIT_PID]} SUP_RC=$WAIT_RC
				break
			fi
			;;
		esac
	done
	for pid in "${pids[@]}"; do
		stop_pid "$pid" 10
		reap_relay "$pid"
	done
	[[ $SUP_RESULT == ok ]]
}

# The pgsync holding the job lock: of the processes fuser finds with it
# open (its command substitutions and their psql inherit it while they
# run, and the caller may have opened it to try it), the one whose parent
# is none of them.
job_lock_holder() {
	local p pp
	local -a pids=()
	read -r -a pids < <(fuser "$STATE_DIR/lock" 2>/dev/null)
	for p in "${pids[@]}"; do
		[[ $p != "$$" ]] || continue
		pp=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$p/stat" 2>/dev/null) || continue
		[[ " ${pids[*]} " != *" $pp "* ]] || continue
		printf '%s\n' "$p"
		return 0
	done
}

# wake_run: a pgsync run holding the job lock looks at its job now instead
# of at its next heartbeat interval (SIGUSR1 ends its wait: verify's
# request, switchover's record). Only a pgsync run traps SIGUSR1; anything
# else holding the lock would die of it, so only a run gets it. Prints the
# holder's pid.
wake_run() {
	local pid
	pid=$(job_lock_holder) || return 0
	[[ -n $pid ]] || return 0
	if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -q pgsync &&
		tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qx run; then
		kill -USR1 "$pid" 2>/dev/null
	fi
	printf '%s\n' "$pid"
}
