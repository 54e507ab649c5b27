# pgsync switchover: the switch of the application from the source to the
# target in one command. Fence the application's roles on the source, wait
# until the target applied everything the source had written by then, set
# the target's sequences to the source's values, optionally compare the
# tables, and record SWITCHED_OVER; pgsync run stops on seeing it. Sourced by
# bin/pgsync.
#
# The fence is default_transaction_read_only = on for each role in
# switchover.fence_roles, as that role's setting in the source database
# (ALTER ROLE ... IN DATABASE ... SET: it wins over a role-wide or a
# database-wide setting), and its sessions there terminated. It is done over
# PGSYNC_SOURCE_ADMIN_URL when set (a role with CREATEROLE, ADMIN OPTION on
# the fenced roles on 16 and later, and pg_signal_backend), since the
# replication role may do neither. What it changes is recorded in the
# target's pgsync.fence before it changes it, so that every failure before
# the switchover is recorded puts it back, and so can --undo-fence after a
# kill or a crash and after a switchover.

# The fenced roles' own setting in this database (p NULL: none) as a JSON
# array of {r: role, d: database, p: previous}. Input: :'roles'.
read -r -d '' FENCE_ROLES_SQL <<'SQL'
SELECT coalesce(jsonb_agg(jsonb_build_object('r', u.r, 'd', current_database(), 'p',
         (SELECT substr(c, length('default_transaction_read_only=') + 1)
            FROM pg_db_role_setting s CROSS JOIN LATERAL unnest(s.setconfig) AS c
           WHERE s.setrole = a.oid AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND c LIKE 'default\_transaction\_read\_only=%'))), '[]')
  FROM unnest(string_to_array(:'roles', ',')) AS u(r)
  JOIN pg_roles a ON a.rolname = u.r
SQL

# Who may fence: one row a problem (what, fix). Input: :'roles'.
read -r -d '' FENCE_PRIVS_SQL <<'SQL'
WITH me AS (SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user),
r AS (SELECT u.r, a.rolsuper FROM unnest(string_to_array(:'roles', ',')) AS u(r) LEFT JOIN pg_roles a ON a.rolname = u.r)
SELECT format('role %s in switchover.fence_roles does not exist on the source', r.r),
       format('create it, or remove %s from switchover.fence_roles', r.r)
  FROM r WHERE r.rolsuper IS NULL
UNION ALL
SELECT format('role %s in switchover.fence_roles is a superuser, which pgsync never fences', r.r),
       format('remove %s from switchover.fence_roles and keep it from writing (or stop the application and use --no-fence)', r.r)
  FROM r WHERE r.rolsuper
UNION ALL
SELECT format('role %s in switchover.fence_roles is the role pgsync fences with', r.r),
       format('remove %s from switchover.fence_roles', r.r)
  FROM r WHERE r.r = current_user
UNION ALL
SELECT format('role %I cannot change the settings of role %s (ALTER ROLE ... SET)', current_user, r.r),
       CASE WHEN NOT me.rolcreaterole THEN format('ALTER ROLE %I CREATEROLE', current_user)
            ELSE format('GRANT %I TO %I WITH ADMIN OPTION', r.r, current_user) END
  FROM r CROSS JOIN me
 WHERE NOT me.rolsuper AND NOT r.rolsuper
   AND NOT (me.rolcreaterole AND (current_setting('server_version_num')::int < 160000
                                  OR pg_has_role(r.r, 'MEMBER WITH ADMIN OPTION')))
UNION ALL
SELECT format('role %I cannot terminate the sessions of other roles', current_user),
       format('GRANT pg_signal_backend TO %I', current_user)
  FROM me WHERE NOT me.rolsuper AND NOT pg_has_role('pg_signal_backend', 'USAGE')
SQL

# shellcheck source=lib/pgsync/supervise.sh
source "$PGSYNC_LIBDIR/supervise.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/supervise.sh"

SW_FENCED=0

# fence_problems: every reason the fence cannot be set, one a line (what,
# fix, separated by 0x1f); also used by check.
fence_problems() {
	local me admdb srcdb
	sql adm -v roles="${CFG[switchover.fence_roles]}" <<<"$FENCE_PRIVS_SQL" || return 1
	admdb=$(sql adm <<<"SELECT current_database()") || return 1
	IFS=$'\x1f' read -r me srcdb < <(sql src <<<"SELECT current_user, current_database()") || return 1
	if [[ $admdb != "$srcdb" ]]; then
		printf '%s\x1f%s\n' "PGSYNC_SOURCE_ADMIN_URL connects to database $admdb, the source is $srcdb" \
			"let PGSYNC_SOURCE_ADMIN_URL name database $srcdb"
	fi
	if [[ ",${CFG[switchover.fence_roles]}," == *",$me,"* ]]; then
		printf '%s\x1f%s\n' "role $me in switchover.fence_roles is the role pgsync replicates with" \
			"remove $me from switchover.fence_roles"
	fi
}

# check, with switchover.fence_roles: the fence can be set. Findings via
# check.sh's finding().
fence_check() {
	local rows what fix who
	[[ -n ${CFG[switchover.fence_roles]} ]] || return 0
	if ! rows=$(fence_problems); then
		finding fail source "cannot read the roles to fence over ${ADM_DISPLAY}: $(sql_error)" \
			"check PGSYNC_SOURCE_ADMIN_URL (or, without it, PGSYNC_SOURCE_URL)"
		return 0
	fi
	if [[ -z $rows ]]; then
		who=$(sql adm <<<"SELECT current_user") || who="?"
		finding ok source "role $who can fence ${CFG[switchover.fence_roles]//,/, } for pgsync switchover"
		return 0
	fi
	while IFS=$'\x1f' read -r what fix; do
		[[ -n $what ]] && finding fail source "switchover: $what" "$fix"
	done <<<"$rows"
}

# fence_record: the fenced roles' present settings into pgsync.fence, before
# anything changes. A row already there (a fence an interrupted switchover
# left) keeps its setting: that is the one to restore, not the fence's "on".
fence_record() {
	local json
	json=$(sql adm -v roles="${CFG[switchover.fence_roles]}" <<<"$FENCE_ROLES_SQL") || return 1
	sql tgt -v roles="$json" >/dev/null <<'SQL'
INSERT INTO pgsync.fence (job, role_name, database_name, previous)
SELECT :'job', x.r, x.d, x.p FROM jsonb_to_recordset((:'roles')::jsonb) AS x(r text, d text, p text)
    ON CONFLICT (job, role_name) DO NOTHING
SQL
}

# fence_set: the settings, then the sessions of the fenced roles in this
# database, which keep the settings they started with. A session that read
# the settings before they were committed but shows in pg_stat_activity
# only once it has finished starting is caught by a second pass a moment
# later; that pass spares sessions seen to start after the commit, if this
# role may see when sessions started (pg_read_all_stats), and terminates
# the rest (harmless: a new one is fenced). Sets FENCE_TERMINATED.
fence_set() {
	local out pass at="" left n
	FENCE_TERMINATED=0
	sql adm -v roles="${CFG[switchover.fence_roles]}" >/dev/null <<'SQL' || return 1
SELECT format('ALTER ROLE %I IN DATABASE %I SET default_transaction_read_only = on', r, current_database())
  FROM unnest(string_to_array(:'roles', ',')) AS r \gexec
SQL
	for pass in 1 2; do
		((pass == 1)) || sleep 0.2
		# A session may end by itself before it is terminated (false, with
		# a warning): what counts is which are still there afterwards, in
		# a statement of its own (pg_stat_activity is read once a
		# transaction).
		out=$(sql adm -v roles="${CFG[switchover.fence_roles]}" -v at="$at" <<'SQL'
SELECT coalesce(nullif(:'at', ''), clock_timestamp()::text), count(*),
       coalesce(string_agg(a.pid::text, ',') FILTER (WHERE NOT pg_terminate_backend(a.pid, 5000)), '')
  FROM pg_stat_activity a
 WHERE a.usename = ANY (string_to_array(:'roles', ',')) AND a.datname = current_database()
   AND a.pid <> pg_backend_pid()
   AND coalesce(a.backend_start < nullif(:'at', '')::timestamptz, true)
SQL
		) || return 1
		IFS=$'\x1f' read -r at n left <<<"$out"
		FENCE_TERMINATED=$((FENCE_TERMINATED + n))
		[[ -n $left ]] || continue
		left=$(sql adm -v pids="$left" <<<"SELECT count(*) FROM pg_stat_activity WHERE pid = ANY (string_to_array(:'pids', ',')::int[])") ||
			return 1
		if ((left > 0)); then
			printf 'ERROR:  %s sessions of the fenced roles did not end within 5 s of pg_terminate_backend\n' "$left" >"$WORK/psql.err"
			return 1
		fi
	done
}

# fence_undo: every recorded role gets back its own setting, then its record
# goes. Prints how many were restored.
fence_undo() {
	local rows
	rows=$(sql tgt <<<"SELECT jsonb_build_object('r', role_name, 'd', database_name, 'p', previous) FROM pgsync.fence WHERE job = :'job'") ||
		return 1
	[[ -n $rows ]] || {
		echo 0
		return 0
	}
	{ psql_set rows "[${rows//$'\n'/,}]" && cat <<'SQL'; } | sql adm >/dev/null || return 1
SELECT CASE WHEN x.p IS NULL THEN format('ALTER ROLE %I IN DATABASE %I RESET default_transaction_read_only', x.r, x.d)
            ELSE format('ALTER ROLE %I IN DATABASE %I SET default_transaction_read_only = %L', x.r, x.d, x.p) END
  FROM jsonb_to_recordset((:'rows')::jsonb) AS x(r text, d text, p text)
 WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = x.r) \gexec
SQL
	sql tgt >/dev/null <<<"DELETE FROM pgsync.fence WHERE job = :'job'" || return 1
	grep -c . <<<"$rows"
}

# --- the guard -------------------------------------------------------------------
# A switchover killed outright (SIGKILL runs no trap) would leave its fence.
# From the fence until it is undone or the switchover recorded, a guard
# process waits on a FIFO that only this process holds open for writing:
# "done" means nothing is left to do; the end of the input without it means
# this process is gone, and the guard undoes the fence unless the job was
# switched over. It holds switchover.lock, inherited, until it is through.

GUARD_FD=""
guard_start() {
	local fifo=$WORK/guard.fifo
	rm -f "$fifo"
	mkfifo "$fifo" || return 1
	(
		trap '' INT TERM HUP
		local line="" n state
		exec {r}<"$fifo"
		IFS= read -r line <&"$r"
		[[ $line != "done" ]] || exit 0
		# The service file is this process's copy of the one it inherited:
		# the path of the one that was gone went with it.
		export PGSERVICEFILE=/proc/$BASHPID/fd/$SVC_FD
		state=$(sql tgt <<<"SELECT state FROM pgsync.job WHERE job = :'job'")
		if [[ $state != SWITCHED_OVER ]] && n=$(fence_undo) && ((n > 0)); then
			log_warn "switchover of job $JOB was killed: its guard undid the fence of $n roles on the source"
		elif [[ $state != SWITCHED_OVER ]]; then
			log_error "switchover of job $JOB was killed and its guard cannot undo the fence: $(sql_error); run pgsync switchover --undo-fence"
		fi
		rm -rf "$WORK"
	) &
	exec {GUARD_FD}>"$fifo"
}

guard_done() {
	[[ -n $GUARD_FD ]] || return 0
	printf 'done\n' >&"$GUARD_FD"
	exec {GUARD_FD}>&-
	GUARD_FD=""
}

# --- the steps -------------------------------------------------------------------

declare -a SW_STEPS=() SW_STEP_MS=()
SW_T0=0 SW_STEP_T=0 SW_FENCE_MS="" SW_DONE_MS=""

step_begin() {
	SW_STEP=$1 SW_STEP_T=$(now_ms)
	log_info "switchover: $1"
}
step_end() {
	SW_STEPS+=("$SW_STEP")
	SW_STEP_MS+=($(($(now_ms) - SW_STEP_T)))
}

# switchover_fail CODE MESSAGE: before the switchover is recorded, every
# failure (and a stop signal) puts the fence back and says so.
switchover_fail() {
	local code=$1 msg=$2 n
	if ((SW_FENCED)); then
		if n=$(fence_undo); then
			msg+="; the fence is undone: the source's roles are writable again and the job goes on streaming"
		else
			msg+="; the fence could NOT be undone ($(sql_error)): run pgsync switchover --undo-fence"
		fi
		SW_FENCED=0
		guard_done
	else
		msg+="; nothing was changed on the source"
	fi
	die "$code" "switchover of job $JOB failed: $msg"
}

stop_requested() {
	[[ -z $STOP_SIGNAL ]] || switchover_fail $EX_RUNTIME "stopped by SIG$STOP_SIGNAL in step $SW_STEP"
}

# The job's applied position (applied_lsn, or the consistent point).
applied_now() {
	sql tgt <<<"SELECT coalesce(applied_lsn, consistent_lsn) FROM pgsync.job WHERE job = :'job'"
}

# A live pgsync run: a heartbeat younger than three intervals, not stopped.
run_is_live() {
	[[ $(sql tgt -v hb_s="$(ms_to_s "$HEARTBEAT_MS")" <<'SQL'
SELECT coalesce(bool_or(stopped_at IS NULL AND heartbeat_at > now() - 3 * coalesce(heartbeat_interval_s, :'hb_s'::numeric) * interval '1 second'), false)
  FROM pgsync.job_runtime WHERE job = :'job'
SQL
	) == t ]]
}

# 1: the job streams, run is live, the lag is small, and the fence can be set.
switchover_preflight() {
	local lag problems what fix
	step_begin "checking the job"
	job_load
	((JOB_EXISTS)) || die $EX_PREFLIGHT "job $JOB does not exist in the target ($TGT_DISPLAY): pgsync bootstrap, then pgsync run"
	case $JOB_STATE in
	STREAMING) ;;
	SWITCHED_OVER)
		die $EX_PREFLIGHT "job $JOB was switched over already: the target takes the application's writes (pgsync status)" ;;
	*)
		die $EX_PREFLIGHT "job $JOB is $JOB_STATE, not STREAMING: start pgsync run and wait until pgsync status shows STREAMING" ;;
	esac
	run_is_live || die $EX_PREFLIGHT "job $JOB is STREAMING but no pgsync run is streaming it: start pgsync run, then switch over"
	lag=$(sql src -v applied="$(applied_now)" <<<"SELECT greatest(pg_wal_lsn_diff(pg_current_wal_lsn(), :'applied'::pg_lsn), 0)::bigint") ||
		die $EX_RUNTIME "cannot read the source's WAL position ($SRC_DISPLAY): $(sql_error)"
	((lag <= ${CFG[switchover.max_lag]})) ||
		die $EX_PREFLIGHT "job $JOB is $lag bytes behind the source, more than --max-lag ${CFG[switchover.max_lag]}: wait until pgsync status shows less lag, or raise --max-lag"
	if [[ $SW_FENCE != --no-fence ]]; then
		[[ -n ${CFG[switchover.fence_roles]} ]] ||
			die $EX_USAGE "switchover fences the roles in switchover.fence_roles, which is empty: list the application's roles there, or stop the application and use --no-fence"
		problems=$(fence_problems) || die $EX_RUNTIME "cannot read the fenced roles on the source ($ADM_DISPLAY): $(sql_error)"
		if [[ -n $problems ]]; then
			IFS=$'\x1f' read -r what fix <<<"${problems%%$'\n'*}"
			die $EX_PREFLIGHT "cannot fence the source: $what: $fix"
		fi
	fi
	step_end
}

# 2: the fence, recorded before it is set.
switchover_fence() {
	step_begin "fencing ${CFG[switchover.fence_roles]//,/, } on the source"
	SW_FENCE_MS=$SW_STEP_T
	if [[ -n $(sql tgt <<<"SELECT 1 FROM pgsync.fence WHERE job = :'job' LIMIT 1") ]]; then
		log_warn "an earlier switchover left its fence recorded: the settings recorded then are the ones restored"
	fi
	guard_start || switchover_fail $EX_RUNTIME "cannot start the guard of the fence in $WORK"
	SW_FENCED=1
	fence_record || switchover_fail $EX_RUNTIME "cannot record the fence in the target: $(sql_error)"
	stop_requested
	fence_set || switchover_fail $EX_RUNTIME "cannot fence the source ($ADM_DISPLAY): $(sql_error)"
	log_info "switchover: default_transaction_read_only = on for ${CFG[switchover.fence_roles]//,/, } in the source database; $FENCE_TERMINATED of their sessions terminated"
	step_end
}

# 3: everything the source wrote until now is applied. The message written
# after reading the position makes pg-walcat report a position past it even
# when nothing else is written (a fenced source is idle).
switchover_wait() {
	local deadline applied last_probe=0 t
	step_begin "waiting for the target to apply the source's last writes"
	SW_FINAL=$(sql src <<<"SELECT pg_current_wal_lsn()") ||
		switchover_fail $EX_RUNTIME "cannot read the source's WAL position: $(sql_error)"
	deadline=$((SW_STEP_T + ${CFG[switchover.timeout]%ms}))
	while :; do
		stop_requested
		applied=$(applied_now) || switchover_fail $EX_RUNTIME "cannot read the job's applied position: $(sql_error)"
		[[ -n $applied ]] && lsn_ge "$applied" "$SW_FINAL" && break
		t=$(now_ms)
		((t < deadline)) || switchover_fail $EX_RUNTIME "the target applied only up to ${applied:-nothing}, not $SW_FINAL, within --timeout $(ms_to_s "${CFG[switchover.timeout]%ms}") s (is pgsync run streaming?)"
		if ((t - last_probe >= 1000)); then
			last_probe=$t
			sql src >/dev/null <<<"SELECT pg_logical_emit_message(false, 'pgsync.heartbeat', '')" ||
				log_debug "cannot write a position probe on the source: $(sql_error)"
		fi
		sleep 0.05
	done
	step_end
}

# 4: the sequences, exactly: the source is fenced, its values final.
switchover_sequences() {
	step_begin "setting the target's sequences to the source's"
	sequences_read || switchover_fail $EX_RUNTIME "cannot read the source's sequences: $(sql_error)"
	sequences_set exact || switchover_fail $EX_RUNTIME "cannot set the target's sequences: $(sql_error)"
	[[ -z $SEQ_MISSING ]] || switchover_fail $EX_PREFLIGHT "the target has no sequence $SEQ_MISSING for the source's: create it, then switch over again"
	SW_SEQS=$SEQ_COUNT
	step_end
}

# 5: the comparison: pgsync verify itself, as its own process (it runs
# children and exits as any command does), given the connections this one
# was given; its report goes to stderr, the rows it compared into ours.
switchover_verify() {
	local out rc n
	local -a opts=(-c "$CONFIG" --log "$LOG_LEVEL_NAME")
	SW_ROWS=""
	((SW_VERIFY)) || return 0
	step_begin "comparing the tables (pgsync verify)"
	[[ -z $STATE_OPT ]] || opts+=(--state-dir "$STATE_OPT")
	((STATUS_JSON == 0)) || opts+=(--json)
	out=$(
		[[ -z $GUARD_FD ]] || exec {GUARD_FD}>&-
		PGSYNC_SOURCE_URL=$PGSYNC_SOURCE_URL PGSYNC_TARGET_URL=$PGSYNC_TARGET_URL \
			exec "$PGSYNC_HERE/pgsync" "${opts[@]}" verify
	)
	rc=$?
	[[ -z $out ]] || printf '%s\n' "$out" >&2
	stop_requested
	case $rc in
	0) ;;
	5) switchover_fail $EX_UNSUPPORTED "the target's tables differ from the source's (pgsync verify --show-keys names the rows)" ;;
	*) switchover_fail "$rc" "the comparison failed (pgsync verify exited with status $rc)" ;;
	esac
	if ((STATUS_JSON)); then
		[[ $out =~ \"rows_compared\":([0-9]+) ]] && SW_ROWS=${BASH_REMATCH[1]}
	else
		SW_ROWS=0
		while read -r n; do SW_ROWS=$((SW_ROWS + n)); done < <(grep -oE '[0-9]+ rows compared' <<<"$out" | cut -d' ' -f1)
	fi
	step_end
}

# 6: the record. Only a job that still streams switches over.
switchover_record() {
	local at
	step_begin "recording the switchover"
	# A synchronous commit: it flushes every commit before it, the
	# asynchronous ones of pg-apply included, before the application moves.
	at=$(sql tgt -v lsn="$SW_FINAL" <<'SQL'
SET synchronous_commit = on;
UPDATE pgsync.job SET state = 'SWITCHED_OVER', switchover_lsn = :'lsn', switched_over_at = now(),
       last_error = NULL, updated_at = now()
 WHERE job = :'job' AND state = 'STREAMING' RETURNING switched_over_at
SQL
	) || switchover_fail $EX_RUNTIME "cannot record the switchover: $(sql_error)"
	[[ -n $at ]] || switchover_fail $EX_RUNTIME "job $JOB stopped streaming during the switchover ($(sql tgt <<<"SELECT state FROM pgsync.job WHERE job = :'job'"))"
	SW_FENCED=0 SW_AT=$at
	guard_done
	step_end
	# run stops when it next looks at the job, at once when woken: until
	# then it could still apply what an unfenced role writes.
	step_begin "waiting for pgsync run to stop"
	wake_run >/dev/null
	local deadline=$(($(now_ms) + 3 * HEARTBEAT_MS + 10000))
	while run_is_live; do
		if (($(now_ms) > deadline)); then
			die $EX_RUNTIME "job $JOB is switched over (final position $SW_FINAL) but its pgsync run has not stopped: stop it before the application writes to the target"
		fi
		sleep 0.05
	done
	step_end
}

switchover_report() {
	local outage=$((SW_DONE_MS - ${SW_FENCE_MS:-$SW_T0})) i
	if ((STATUS_JSON)); then
		local steps=""
		for i in "${!SW_STEPS[@]}"; do
			steps+="${steps:+,}{\"step\":\"$(json_str "${SW_STEPS[$i]}")\",\"seconds\":$(ms_to_s "${SW_STEP_MS[$i]}")}"
		done
		printf '{"job":"%s","state":"SWITCHED_OVER","switched_over_at":"%s","final_lsn":"%s","fenced":%s,"fenced_roles":[%s],"sequences_set":%s,"rows_verified":%s,"outage_seconds":%s,"steps":[%s]}\n' \
			"$(json_str "$JOB")" "$SW_AT" "$SW_FINAL" "$([[ $SW_FENCE == --no-fence ]] && echo false || echo true)" \
			"$([[ $SW_FENCE == --no-fence ]] || printf '"%s"' "${CFG[switchover.fence_roles]//,/\",\"}")" \
			"$SW_SEQS" "${SW_ROWS:-null}" "$(ms_to_s "$outage")" "$steps"
		return
	fi
	printf 'job %s switched over at %s\n' "$JOB" "$SW_AT"
	for i in "${!SW_STEPS[@]}"; do
		printf '  %-58s %8s s\n' "${SW_STEPS[$i]}" "$(ms_to_s "${SW_STEP_MS[$i]}")"
	done
	printf 'final position:  %s (everything the source wrote below it is on the target)\n' "$SW_FINAL"
	printf 'sequences set:   %s\n' "$SW_SEQS"
	printf 'rows verified:   %s\n' "${SW_ROWS:--}"
	if [[ $SW_FENCE == --no-fence ]]; then
		printf 'outage window:   %s s (from the start of the switchover; not fenced)\n' "$(ms_to_s "$outage")"
	else
		printf 'outage window:   %s s (from fencing to done)\n' "$(ms_to_s "$outage")"
		printf 'fenced roles:    %s (read-only on the source until pgsync switchover --undo-fence)\n' "${CFG[switchover.fence_roles]//,/, }"
	fi
	printf 'next:            point the application at the target\n'
}

cmd_switchover() {
	need_programs psql
	setup_connections yes
	state_dir_ready
	# Not the job's lock, which pgsync run holds: one switchover at a time.
	exec {SW_LOCK}>>"$STATE_DIR/switchover.lock"
	flock -n "$SW_LOCK" || die $EX_PREFLIGHT "another pgsync switchover of job $JOB is running"
	catalog_ensure
	if ((SW_UNDO)); then
		local n
		n=$(fence_undo) || die $EX_RUNTIME "cannot undo the fence on the source ($ADM_DISPLAY): $(sql_error)"
		if ((n == 0)); then
			log_info "job $JOB has no fence recorded: nothing to undo"
		else
			log_info "undid the fence of $n roles on the source: each has its own default_transaction_read_only setting again"
		fi
		return $EX_OK
	fi
	trap_stop
	SW_T0=$(now_ms) SW_SEQS=0 SW_ROWS="" SW_STEP=starting
	switchover_preflight
	[[ $SW_FENCE == --no-fence ]] || switchover_fence
	switchover_wait
	switchover_sequences
	switchover_verify
	switchover_record
	SW_DONE_MS=$(now_ms)
	log_info "job $JOB switched over at $SW_FINAL: the target is ready for the application's writes"
	switchover_report
	return $EX_OK
}
