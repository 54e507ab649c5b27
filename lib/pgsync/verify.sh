# pgsync verify: the source and the target compared exactly, at one
# consistent point, while both keep running. Sourced by bin/pgsync (verify)
# and by run.sh, which serves verify's request to pause its stream.
#
# The point: a temporary slot created with an exported snapshot gives the
# source's state at its consistent point L. The job's stream is then taken
# exactly to L (pg-walcat --endpos L: every transaction committing below L,
# nothing after), the target's snapshot is exported there, and streaming
# resumes. A running pgsync run does that itself when asked (a request file
# in the state directory); a stopped job's stream is run by verify. Both
# snapshots are then fixed states that must hold the same rows.
#
# The comparison is pg-verify's (lib/verify/compare.h): each table's rows
# are cut into ranges of the hash of their key (4096 by the first three hex
# digits, each differing range into 4096 more, ...); both servers hash each
# range themselves (count and the sum of the rows' hashes) and send only
# that; ranges that differ are cut again until few rows are left, whose key
# hashes and row hashes are compared. A table without a key is compared the
# same way with the whole row as its key, so duplicates count. Row values
# never leave the servers; keys are shown only with --show-keys.

[[ ${COMMAND:-} == run ]] || source "$PGSYNC_LIBDIR/run.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/run.sh"
# In run, verify's SIGUSR1 ends the wait for the next heartbeat interval
# early (wait_any counts it as a tick); set before run takes the job lock,
# which is how verify finds it.
[[ ${COMMAND:-} != run ]] || trap 'WAKE_NOW=1' USR1

# pg-verify's VERIFY_RANGES_MAX (lib/verify/compare.h), for the warning of
# a table whose differing rows were counted, not itemized.
readonly VERIFY_RANGES_MAX=256

# --- the pause, served by pgsync run ---------------------------------------------
# Files in the state directory: verify.request (verify's pid), then run
# writes verify.paused; verify writes verify.endpos (L); run writes
# verify.reached ("ok LSN" or "failed REASON"); verify writes verify.resume.

verify_files_clear() {
	rm -f "$STATE_DIR"/verify.{request,paused,endpos,reached,resume}
}

# verify_gave_up MESSAGE: verify's side failed (or was interrupted): run
# resumes streaming once the files are gone.
verify_gave_up() {
	verify_files_clear
	[[ -z $STOP_SIGNAL ]] || die $EX_RUNTIME "verify interrupted by SIG$STOP_SIGNAL"
	die $EX_RUNTIME "$1"
}

# verify_alive PID: PID is a pgsync still running (a stale request's pid
# may have been reused by another process).
verify_alive() {
	[[ $1 =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q pgsync
}

# verify_wait_file FILE SECONDS PID: wait for FILE while PID lives. Fails
# when PID is gone, the time is up, or we are asked to stop.
verify_wait_file() {
	local file=$1 deadline=$(($(now_ms) + $2 * 1000)) pid=$3
	until [[ -s $file ]]; do
		[[ -z $STOP_SIGNAL ]] && verify_alive "$pid" && (($(now_ms) < deadline)) || return 1
		sleep 0.05
	done
}

# run, at every heartbeat interval: when verify asks, stop the stream, take
# it to verify's L, hold still until verify has its target snapshot, then
# stream on. Whatever happens to verify, streaming resumes.
verify_serve() {
	local req=$STATE_DIR/verify.request vpid lsn started
	[[ -s $req ]] || return 0
	vpid=$(<"$req")
	if ! verify_alive "$vpid"; then
		verify_files_clear
		return 0
	fi
	started=$(now_ms)
	log_info "verify (pid $vpid) asks for a consistent point: stopping the stream"
	stop_stream
	job_load
	# When the stream stopped, so that verify reports the whole pause.
	printf '%s %s\n' "$(applied_position)" "$started" >"$STATE_DIR/verify.paused"
	# Creating verify's slot waits for the source's running transactions.
	if verify_wait_file "$STATE_DIR/verify.endpos" 600 "$vpid"; then
		lsn=$(<"$STATE_DIR/verify.endpos")
		write_checkpoint
		start_stream --endpos "$lsn"
		if supervise $(($(now_ms) + 600000)) "pg-walcat:$WALCAT_PID" "pg-apply:$APPLY_PID"; then
			job_load
			printf 'ok %s\n' "$(applied_position)" >"$STATE_DIR/verify.reached.tmp"
		else
			printf 'failed %s exited with status %s\n' "$SUP_NAME" "$SUP_RC" >"$STATE_DIR/verify.reached.tmp"
		fi
		WALCAT_PID="" APPLY_PID=""
		mv -f "$STATE_DIR/verify.reached.tmp" "$STATE_DIR/verify.reached"
		verify_wait_file "$STATE_DIR/verify.resume" 120 "$vpid" ||
			log_warn "verify (pid $vpid) did not take its snapshot: resuming"
	else
		log_warn "verify (pid $vpid) did not send its consistent point: resuming"
	fi
	verify_files_clear
	log_info "stream paused $(($(now_ms) - started)) ms for verify${lsn:+ at $lsn}"
	[[ -z $STOP_SIGNAL ]] || return 0
	job_load
	write_checkpoint
	start_stream
}

# --- the consistent point, verify's side -------------------------------------------

VERIFY_SLOT_PID="" VERIFY_SLOT_HOLD="" VERIFY_TGT_HOLD_PID=""

# Ask a running pgsync run to pause; with the job stopped (we got its lock),
# run the stream to L ourselves. Sets VERIFY_LSN, VERIFY_SRC_SNAP,
# VERIFY_TGT_SNAP and VERIFY_PAUSE_MS.
verify_point() {
	local running=1 t0 line
	state_dir_ready
	exec {LOCK_FD}>>"$STATE_DIR/lock"
	flock -n "$LOCK_FD" && running=0
	local pid_file=$STATE_DIR/verify.request
	[[ ! -s $pid_file ]] || ! verify_alive "$(<"$pid_file")" ||
		die $EX_PREFLIGHT "another pgsync verify (pid $(<"$pid_file")) is running for job $JOB"
	verify_files_clear
	# Also with the job stopped: a second verify then knows of this one.
	printf '%s\n' "$$" >"$pid_file.tmp" && mv -f "$pid_file.tmp" "$pid_file"
	VERIFY_RUNNING=$running
	if ((running)); then
		log_info "job $JOB is running: asking pgsync run for a consistent point"
		local runpid
		runpid=$(wake_run)
		# The job lock's holder answers; without fuser, wait on time alone.
		verify_wait_file "$STATE_DIR/verify.paused" $((3 * HEARTBEAT_MS / 1000 + 30)) "${runpid:-$$}" || {
			verify_gave_up "pgsync run for job $JOB did not pause its stream within $((3 * HEARTBEAT_MS / 1000 + 30)) s (is the job lock held by a bootstrap or cleanup?)"
		}
	fi
	t0=$(now_ms)
	if ((running)); then
		line=$(<"$STATE_DIR/verify.paused")
		[[ ${line##* } =~ ^[0-9]+$ ]] && t0=${line##* }
	fi
	verify_source_snapshot
	if ((running)); then
		[[ -s $STATE_DIR/verify.paused ]] || {
			verify_gave_up "pgsync run for job $JOB stopped waiting for the consistent point (creating the temporary slot waits for the source's running transactions to end)"
		}
		printf '%s\n' "$VERIFY_LSN" >"$STATE_DIR/verify.endpos"
		verify_wait_file "$STATE_DIR/verify.reached" 660 "${runpid:-$$}" || {
			verify_gave_up "pgsync run for job $JOB did not reach $VERIFY_LSN"
		}
		line=$(<"$STATE_DIR/verify.reached")
		[[ $line == "ok "* ]] || {
			verify_gave_up "pgsync run for job $JOB could not stream to $VERIFY_LSN: ${line#failed }"
		}
	else
		log_info "job $JOB is stopped: streaming it to $VERIFY_LSN"
		job_load
		check_continuity || die $EX_RUNTIME "cannot reach the source ($SRC_DISPLAY): $(sql_error)"
		write_checkpoint
		start_stream --endpos "$VERIFY_LSN"
		supervise $(($(now_ms) + 600000)) "pg-walcat:$WALCAT_PID" "pg-apply:$APPLY_PID" || {
			local why
			why=$(child_lasterr "$SUP_NAME") || why=""
			die $EX_RUNTIME "cannot stream job $JOB to $VERIFY_LSN: $SUP_NAME ${SUP_RESULT/failed/exited with status $SUP_RC}${why:+: $why}"
		}
	fi
	job_load
	local applied
	applied=$(applied_position)
	# Below L is fine (nothing left to apply below it); past it, the target
	# holds changes the source's snapshot does not.
	if [[ -n $applied ]] && ! lsn_ge "$VERIFY_LSN" "$applied"; then
		verify_gave_up "the target applied up to $applied, past the consistent point $VERIFY_LSN"
	fi
	verify_target_snapshot
	((running)) && printf 'resume\n' >"$STATE_DIR/verify.resume"
	VERIFY_PAUSE_MS=$(($(now_ms) - t0))
	((running)) || VERIFY_PAUSE_MS=0
	log_info "consistent point $VERIFY_LSN: source snapshot $VERIFY_SRC_SNAP, target snapshot $VERIFY_TGT_SNAP"
}

# A temporary slot's consistent point and exported snapshot, held by
# pg-slot until we close its stdin (the server drops the slot then).
verify_source_snapshot() {
	local line="" name rc
	rm -f "$WORK/vslot.in" "$WORK/vslot.out"
	mkfifo "$WORK/vslot.in" "$WORK/vslot.out"
	spawn pg-slot "$WORK/vslot.in" "$WORK/vslot.out" pg-slot create -d "$SRC" --slot "pgsync_verify_$$" \
		--export-snapshot --temporary --log-level warn
	VERIFY_SLOT_PID=$SPAWN_PID
	exec {VERIFY_SLOT_HOLD}>"$WORK/vslot.in"
	local out_fd
	exec {out_fd}<"$WORK/vslot.out"
	CLOSE_FDS+=("$VERIFY_SLOT_HOLD" "$out_fd")
	IFS= read -r -t 600 -u "$out_fd" line
	rc=$?
	exec {out_fd}<&-
	if ((rc != 0)) || [[ -z $line ]]; then
		verify_gave_up "cannot create a temporary replication slot on the source: $(child_lasterr pg-slot || echo "pg-slot ended")"
	fi
	IFS=$'\t' read -r name VERIFY_LSN VERIFY_SRC_SNAP <<<"$line"
}

# The target's snapshot, exported by a psql that holds its transaction open
# until its stdin closes.
verify_target_snapshot() {
	rm -f "$WORK/vtgt.in" "$WORK/vtgt.out"
	mkfifo "$WORK/vtgt.in" "$WORK/vtgt.out"
	spawn vhold "$WORK/vtgt.in" "$WORK/vtgt.out" "$PSQL" -X -q -A -t -v ON_ERROR_STOP=1 -d "$TGT"
	VERIFY_TGT_HOLD_PID=$SPAWN_PID
	local in_fd out_fd
	exec {in_fd}>"$WORK/vtgt.in" {out_fd}<"$WORK/vtgt.out"
	CLOSE_FDS+=("$in_fd")
	VERIFY_TGT_IN=$in_fd
	printf 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;\nSELECT pg_export_snapshot();\n' >&"$in_fd"
	IFS= read -r -t 60 -u "$out_fd" VERIFY_TGT_SNAP || {
		verify_gave_up "cannot export a snapshot on the target: $(child_lasterr vhold || echo "psql ended")"
	}
	exec {out_fd}<&-
}

verify_release() {
	[[ -z $VERIFY_SLOT_HOLD ]] || exec {VERIFY_SLOT_HOLD}>&-
	[[ -z ${VERIFY_TGT_IN:-} ]] || exec {VERIFY_TGT_IN}>&-
	VERIFY_SLOT_HOLD="" VERIFY_TGT_IN=""
	local pid
	for pid in $VERIFY_SLOT_PID $VERIFY_TGT_HOLD_PID; do
		supervise $(($(now_ms) + 30000)) "hold:$pid"
	done
	VERIFY_SLOT_PID="" VERIFY_TGT_HOLD_PID=""
}

# --- the comparison -----------------------------------------------------------

# verify_table_file FILE TABLE...: the tables for pg-verify --tables, in the
# order given, each as its pg-snapshot-dump --list-tables line (the
# publications' row filter and column list); a table the publications do
# not publish: schema and name alone. A TABLE is "schema<TAB>name" (see
# table_list), written in the stream's escaping as the lines are: of the
# characters a configured name may hold only the backslash is escaped.
# Never a joined list, and never a name split on a dot.
verify_table_file() {
	local file=$1
	shift
	printf '%s\n' "${@//\\/\\\\}" | awk -F '\t' '
		NR == FNR { if ($0 != "") line[$1 "\t" $2] = $0; next }
		$0 in line { print line[$0]; next }
		{ print }' \
		<(printf '%s\n' "$VERIFY_RESOLVED") - >"$file"
}

# verify_table NAME: the configured table --table NAME names, into ITEM:
# NAME as replication.tables takes it (pgsync-config reads it: SQL's quotes
# for a name with a dot or a comma), else as messages show it (schema.name).
verify_table() {
	local name=$1 x
	local found
	ITEM=""
	if found=$(pgsync-config -c "$CONFIG" "${CONFIG_SETS[@]}" --set "replication.tables=$name" \
		--list replication.tables 2>/dev/null) && [[ $found != *$'\n'* ]]; then
		found=${found//\\\\/\\}
		in_list "$found" "${TABLES[@]}" && ITEM=$found && return 0
	fi
	for x in "${TABLES[@]}"; do
		[[ ${x/$'\t'/.} == "$name" ]] && ITEM=$x && return 0
	done
	return 1
}

# --- the command ----------------------------------------------------------------

# The job's verify columns (lib/apply/catalog.c) on a catalog from before them:
# the catalog's own DDL adds them when we may; otherwise the result is only
# printed. Sets VERIFY_RECORD.
verify_catalog() {
	local r
	VERIFY_RECORD=1
	r=$(sql tgt <<<"SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgsync.job'::regclass AND attname = 'verify_outcome' AND NOT attisdropped)") ||
		die $EX_RUNTIME "cannot read the target ($TGT_DISPLAY): $(sql_error)"
	[[ $r == f ]] || return 0
	pgsync-config --catalog-sql | sql tgt -1 >/dev/null && return 0
	log_warn "cannot add the verify columns to pgsync.job ($(sql_error)): the result is not recorded; run pgsync verify once as the catalog's owner"
	VERIFY_RECORD=0
}

cmd_verify() {
	need_programs pg-slot pg-snapshot-dump pg-walcat pg-apply pg-verify psql
	setup_connections yes
	trap_stop
	job_load
	((JOB_EXISTS)) || die $EX_PREFLIGHT "job $JOB does not exist in the target ($TGT_DISPLAY): run pgsync bootstrap first"
	verify_catalog
	case $JOB_STATE in
	INITIALIZING | SNAPSHOTTING) die $EX_PREFLIGHT "job $JOB has not completed its bootstrap (state $JOB_STATE): nothing to verify yet" ;;
	RESYNC_REQUIRED) die $EX_RESYNC "job $JOB requires a resync (${JOB_LAST_ERROR:-continuity lost}): $RESYNC_ACTION" ;;
	esac
	[[ $JOB_SLOT == "$SLOT" ]] || die $EX_USAGE "job $JOB streams from slot $JOB_SLOT, but source.slot is $SLOT"
	local t
	local -a tables=()
	for t in "${VERIFY_TABLES[@]}"; do
		verify_table "$t" || die $EX_USAGE "table $t is not in replication.tables"
		tables+=("$ITEM")
	done
	((${#tables[@]})) || tables=("${TABLES[@]}")
	local jobs=${VERIFY_JOBS:-${CFG[resources.max_parallel_copies]}}
	# The row filters and column lists, resolved as the copy resolves them.
	VERIFY_RESOLVED=$(pg-snapshot-dump -d "$SRC" --publication "$PUB" --list-tables --log-level error 2>"$WORK/resolve.err") ||
		die $EX_RUNTIME "cannot resolve the tables of publication $PUB: $(sed -n '$s/^pg-snapshot-dump: error: //p' "$WORK/resolve.err")"

	verify_point

	local started n=${#tables[@]} i=0 line
	started=$(now_ms)
	mkdir -p "$WORK/verify"
	verify_table_file "$WORK/verify/tables" "${tables[@]}"
	# At most --jobs tables at a time, each with one session a side; one
	# line a table on stdout (split into verify/N for verify_report), the
	# keys in verify/N.keys.
	spawn pg-verify - "$WORK/verify/results" pg-verify --source "$SRC" --target "$TGT" \
		--source-snapshot "$VERIFY_SRC_SNAP" --target-snapshot "$VERIFY_TGT_SNAP" \
		--tables "$WORK/verify/tables" --keys-dir "$WORK/verify" --jobs "$jobs" --log-level "$LOG_LEVEL_NAME"
	# 0 identical, 5 different, 1 a table failed: each has its line.
	supervise $(($(now_ms) + 7 * 86400000)) "pg-verify:$SPAWN_PID" || [[ $SUP_RESULT == failed && ($SUP_RC == 1 || $SUP_RC == 5) ]] || {
		verify_release
		((VERIFY_RUNNING)) || verify_files_clear
		[[ -z $STOP_SIGNAL ]] || die $EX_RUNTIME "verify interrupted by SIG$STOP_SIGNAL"
		die $EX_RUNTIME "cannot compare the tables: pg-verify ${SUP_RESULT/failed/exited with status $SUP_RC}: $(child_lasterr pg-verify || echo "no message")"
	}
	verify_release
	# run clears the files of a running job's verify itself.
	((VERIFY_RUNNING)) || verify_files_clear
	[[ -z $STOP_SIGNAL ]] || die $EX_RUNTIME "verify interrupted by SIG$STOP_SIGNAL"
	while IFS= read -r line; do
		printf '%s\n' "$line" >"$WORK/verify/$i"
		i=$((i + 1))
	done <"$WORK/verify/results"
	# A pg-verify that ended early (exit 1) left the rest without a line.
	for (( ; i < n; i++)); do printf 'error\tno result from pg-verify\n' >"$WORK/verify/$i"; done
	verify_report "$n" "$(($(now_ms) - started))"
}

# verify_report N ELAPSED_MS: print the results, record them in pgsync.job,
# exit 0 (identical) or 5.
verify_report() {
	local n=$1 elapsed=$2 i line tab rs rt m o d err
	local outcome=identical total_rows=0 errors=0 itemized
	local json="" kind key
	for ((i = 0; i < n; i++)); do
		line=$(<"$WORK/verify/$i") || line=$'error\tno result'
		if [[ $line == error$'\t'* ]]; then
			err=${line#error$'\t'}
			log_error "verify: ${err}"
			errors=$((errors + 1))
			continue
		fi
		IFS=$'\t' read -r tab rs rt m o d itemized <<<"$line"
		((itemized)) || log_warn "verify: $tab: rows differ in more than $VERIFY_RANGES_MAX ranges: counted from the ranges, the differing ones at least, keys not listed"
		local compared=$((rs + o))
		total_rows=$((total_rows + compared))
		((m + o + d == 0)) || outcome=different
		if ((STATUS_JSON)); then
			local keys=""
			if ((VERIFY_SHOW_KEYS)); then
				keys=$(awk -F '\t' '
					{ k[$1] = k[$1] (k[$1] == "" ? "" : ",") $2 }
					END { printf ",\"keys\":{\"missing_on_target\":[%s],\"only_on_target\":[%s],\"differing\":[%s]}", k["missing"], k["only"], k["differing"] }' \
					"$WORK/verify/$i.keys")
			fi
			json+="${json:+,}{\"table\":\"$(json_str "$tab")\",\"rows_compared\":$compared,\"rows_source\":$rs,\"rows_target\":$rt,\"missing_on_target\":$m,\"only_on_target\":$o,\"differing\":$d,\"itemized\":$( ((itemized)) && echo true || echo false)$keys}"
		else
			printf '%s: %d rows compared, %d missing on target, %d only on target, %d differing\n' "$tab" "$compared" "$m" "$o" "$d"
			if ((VERIFY_SHOW_KEYS)); then
				while IFS=$'\t' read -r kind key; do
					case $kind in
					missing) printf '  missing on target: %s\n' "$key" ;;
					only) printf '  only on target: %s\n' "$key" ;;
					differing) printf '  differing: %s\n' "$key" ;;
					esac
				done < <(sort "$WORK/verify/$i.keys")
			fi
		fi
	done
	if ((errors)); then
		((!VERIFY_RECORD)) ||
			job_update "verified_at = now(), verified_lsn = :'lsn', verify_outcome = 'error'" lsn="$VERIFY_LSN" >/dev/null
		die $EX_RUNTIME "verify of job $JOB failed for $errors table(s)"
	fi
	((!VERIFY_RECORD)) || job_update "verified_at = now(), verified_lsn = :'lsn', verify_outcome = :'oc'" lsn="$VERIFY_LSN" oc="$outcome" ||
		log_error "cannot record the verification in pgsync.job: $(sql_error)"
	if ((STATUS_JSON)); then
		printf '{"format_version":1,"job":"%s","verified_lsn":"%s","outcome":"%s","rows_compared":%d,"pause_ms":%d,"elapsed_ms":%d,"tables":[%s]}\n' \
			"$(json_str "$JOB")" "$VERIFY_LSN" "$outcome" "$total_rows" "$VERIFY_PAUSE_MS" "$elapsed" "$json"
	fi
	log_info "verify of job $JOB at $VERIFY_LSN: $outcome ($n tables, $total_rows rows compared in $elapsed ms; the stream paused $VERIFY_PAUSE_MS ms)"
	[[ $outcome == identical ]] || exit $EX_UNSUPPORTED
	return $EX_OK
}
