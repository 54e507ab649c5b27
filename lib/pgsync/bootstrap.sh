# pgsync bootstrap: job row, slot with an exported snapshot, target tables
# from pg_dump at that snapshot, the copy of what the publications publish
# (pg-snapshot-dump --publication | pg-apply: row filters, column lists), the
# indexes and constraints, then state CATCHING_UP. Sourced by bin/pgsync.
#
# The job row is written (INITIALIZING, slot_owned) before the slot exists,
# so a crash in between leaves a record that the next bootstrap may drop it.
# A slot this bootstrap created is dropped when the copy does not complete;
# a slot the job did not create is never touched.

# shellcheck source=lib/pgsync/check.sh
source "$PGSYNC_LIBDIR/check.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/check.sh"
# shellcheck source=lib/pgsync/supervise.sh
source "$PGSYNC_LIBDIR/supervise.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/supervise.sh"
# shellcheck source=lib/pgsync/schema.sh
source "$PGSYNC_LIBDIR/schema.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/schema.sh"
# shellcheck source=lib/pgsync/chunked.sh
source "$PGSYNC_LIBDIR/chunked.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/chunked.sh"

# CHUNKED: resources.snapshot_mode = chunked (lib/pgsync/chunked.sh).
BS_SLOT_CREATED=0 BS_PHASE=preparing SLOT_PID="" SLOT_HOLD="" SLOT_OUT="" CHUNKED=0

# Release the exported snapshot: EOF on pg-slot's stdin ends its hold.
release_snapshot() {
	[[ -n $SLOT_PID ]] || return 0
	[[ -n $SLOT_HOLD ]] && exec {SLOT_HOLD}>&-
	[[ -n $SLOT_OUT ]] && exec {SLOT_OUT}<&-
	SLOT_HOLD="" SLOT_OUT=""
	supervise $(($(now_ms) + 30000)) "pg-slot:$SLOT_PID"
	if [[ $SUP_RESULT == timeout ]]; then
		log_warn "pg-slot did not release the snapshot within 30 s: stopped"
	fi
	SLOT_PID=""
	CLOSE_FDS=()
}

# bootstrap_fail EXIT_CODE REASON: the copy did not complete. Stop what runs,
# drop the slot this bootstrap created (it could only retain WAL), record
# both in last_error and exit. The job stays SNAPSHOTTING. A chunked copy
# keeps its slot and the chunks it copied: the next bootstrap continues.
bootstrap_fail() {
	local code=$1 reason=$2 pid slotnote=""
	trap '' INT TERM HUP
	for pid in "${CHILDREN[@]}"; do
		[[ $pid == "$SLOT_PID" ]] && continue
		stop_pid "$pid" 10
	done
	if [[ -n $SLOT_PID ]]; then
		kill -TERM "$SLOT_PID" 2>/dev/null
		release_snapshot
	fi
	# A table whose copy did not finish is no longer being copied; its
	# started_at says that this attempt touched it (status: interrupted).
	sql tgt >/dev/null <<<"UPDATE pgsync.table_sync SET state = 'pending' WHERE job = :'job' AND state = 'copying'" ||
		log_warn "cannot record the interrupted tables in pgsync.table_sync: $(sql_error)"
	local state=SNAPSHOTTING next="start over with pgsync bootstrap --restart-snapshot"
	if ((CHUNKED)); then
		chunked_kept_note
		slotnote=$CH_KEPT_NOTE next="run pgsync bootstrap again to continue"
		((CH_SLOT_READY)) || state=INITIALIZING
	elif ((BS_SLOT_CREATED)); then
		if drop_owned_slot; then
			slotnote="; replication slot $SLOT was dropped"
			job_update "slot_owned = false" >/dev/null
			log_info "dropped replication slot $SLOT, which this bootstrap created: the copy is all-or-nothing, so it could only retain WAL"
		else
			slotnote="; replication slot $SLOT could not be dropped ($(sql_error)): drop it with pgsync cleanup --yes"
			log_error "cannot drop replication slot $SLOT: $(sql_error)"
		fi
	fi
	((CHUNKED || BS_SLOT_CREATED)) || state=INITIALIZING
	# Starting over cannot mend a missing privilege: say what can.
	if [[ $reason == *"permission denied"* || $reason == *"SQLSTATE 42501"* ]]; then
		next="grant the privilege it names (pgsync check tests each one bootstrap needs), then pgsync bootstrap"
		code=$EX_PREFLIGHT
	fi
	set_state "$state" "bootstrap failed while $BS_PHASE: $reason$slotnote"
	log_error "bootstrap of job $JOB failed while $BS_PHASE: $reason$slotnote; $next"
	exit "$code"
}

step_timeout() {
	bootstrap_fail $EX_RUNTIME "resources.snapshot_timeout ($(ms_to_s "${CFG[resources.snapshot_timeout]%ms}") s) expired"
}

# Map a supervised step that did not succeed to bootstrap_fail.
step_failed() {
	local what=$1
	case $SUP_RESULT in
	timeout) step_timeout ;;
	signal) bootstrap_fail $EX_RUNTIME "interrupted by SIG$STOP_SIGNAL" ;;
	esac
	local msg
	msg=$(child_lasterr "$SUP_NAME") || msg=""
	local code=$SUP_RC
	# Only the pg-* programs speak pgsync's exit codes: psql exits 3 for an
	# error in a script, pg_restore 1 for anything.
	[[ $SUP_NAME == pg-* ]] && ((code >= 1 && code <= 5)) || code=$EX_RUNTIME
	bootstrap_fail "$code" "$what: $SUP_NAME exited with status $SUP_RC${msg:+: $msg}"
}

# Which target tables exist (one name a line, in configuration order).
target_existing_tables() {
	sql tgt <<'SQL'
SELECT u.t FROM unnest(:'tables'::text[]) WITH ORDINALITY AS u(t, ord)
 WHERE to_regclass(format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2))) IS NOT NULL
 ORDER BY u.ord
SQL
}

# Decide what to do with an existing job row and slot; sets TRUNCATE_SET.
bootstrap_plan() {
	local t
	TRUNCATE_SET=()
	job_load
	slot_load || die $EX_RUNTIME "cannot read replication slots on the source ($SRC_DISPLAY): $(sql_error)"
	local owned=0
	if ((JOB_EXISTS)) && [[ $JOB_SLOT_OWNED == t && -n $JOB_SLOT && $JOB_SLOT != "$SLOT" ]]; then
		die $EX_USAGE "job $JOB owns slot $JOB_SLOT but source.slot is $SLOT: restore source.slot = $JOB_SLOT, or pgsync cleanup --yes with it first"
	fi
	((JOB_EXISTS)) && [[ $JOB_SLOT_OWNED == t && $JOB_SLOT == "$SLOT" ]] && owned=1
	# A slot the job owns is dropped or replaced below: only on the job's
	# own server. The identifier is recorded before the slot is created.
	if ((owned)); then
		prove_job_slot "$( ((SLOT_EXISTS)) && echo drop || echo replace)"
	else
		source_identify || die $EX_RUNTIME "cannot identify the source ($SRC_DISPLAY): $(sql_error)"
	fi
	if ((JOB_EXISTS && !RESTART_SNAPSHOT)); then
		case $JOB_STATE in
		INITIALIZING | SNAPSHOTTING) ;;
		*) die $EX_PREFLIGHT "job $JOB is already bootstrapped (state $JOB_STATE): pgsync run continues it, pgsync bootstrap --restart-snapshot copies again" ;;
		esac
	fi
	if ((SLOT_EXISTS)); then
		((owned)) || die $EX_PREFLIGHT "replication slot $SLOT already exists and job $JOB did not create it: pgsync never touches it; choose another source.slot, or drop the slot yourself if nothing uses it"
		if ((RESTART_SNAPSHOT)); then
			log_info "dropping replication slot $SLOT of job $JOB to start over"
		else
			log_info "dropping replication slot $SLOT left by an interrupted bootstrap of job $JOB (state $JOB_STATE)"
		fi
		drop_owned_slot || die $EX_RUNTIME "cannot drop replication slot $SLOT: $(sql_error) (is pgsync run still using it?)"
		job_update "slot_owned = false" >/dev/null
	fi
	if ((RESTART_SNAPSHOT)); then
		mapfile -t TRUNCATE_SET < <(target_existing_tables)
	elif ((JOB_EXISTS)); then
		# Rows in tables this job's incomplete copy touched are its own.
		local chunks=f
		catalog_exists table_chunk && chunks=t
		mapfile -t TRUNCATE_SET < <(sql tgt -v chunks="$chunks" <<'SQL'
SELECT u.t FROM unnest(:'tables'::text[]) WITH ORDINALITY AS u(t, ord)
  JOIN pgsync.table_sync s ON s.job = :'job' AND s.schema_name = split_part(u.t, E'\t', 1)
   AND s.table_name = split_part(u.t, E'\t', 2)
   AND (s.state <> 'pending' OR s.started_at IS NOT NULL OR (:'chunks' = 't' AND EXISTS (
        SELECT 1 FROM pgsync.table_chunk c WHERE c.job = s.job AND c.schema_name = s.schema_name AND c.table_name = s.table_name)))
 WHERE to_regclass(format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2))) IS NOT NULL
 ORDER BY u.ord
SQL
		)
	fi
	local -a busy=()
	while IFS=$'\x1f' read -r t _; do
		[[ -n $t ]] || continue
		in_list "$t" "${TRUNCATE_SET[@]}" || busy+=("$t")
	done < <(target_nonempty_tables)
	if ((${#busy[@]})); then
		die $EX_PREFLIGHT "target table $(table_shown "${busy[@]}") already has rows: bootstrap copies only into empty tables; empty them, or use pgsync bootstrap --restart-snapshot, which truncates them"
	fi
}

create_publication() {
	local exists
	exists=$(sql src <<<"SELECT count(*) FROM pg_publication WHERE pubname = :'pub'") ||
		die $EX_RUNTIME "cannot read publications on the source: $(sql_error)"
	[[ $exists == 0 ]] || return 0
	sql src >/dev/null <<'SQL' || die $EX_PREFLIGHT "cannot create publication $PUB on the source: $(sql_error)"
SELECT format('CREATE PUBLICATION %I FOR TABLE %s', :'pub',
              string_agg(format('%I.%I', split_part(t, E'\t', 1), split_part(t, E'\t', 2)), ', '))
  FROM unnest(:'tables'::text[]) AS t
\gexec
SQL
	log_info "created publication $PUB FOR TABLE ${CFG[replication.tables]} on the source (safety.auto_create_publication)"
}

# A fresh job row: INITIALIZING and slot_owned before the slot exists.
reset_job_row() {
	local truncate
	truncate=$(sql_array "${TRUNCATE_SET[@]}")
	# The server quotes the names (format's %I); no TRUNCATE when the list
	# is empty (HAVING leaves no row for \gexec to run).
	sql tgt -v truncate="$truncate" -v sysid="$SOURCE_SYSID" -v timeline="$SOURCE_TIMELINE" >/dev/null <<'SQL' ||
BEGIN;
SELECT format('TRUNCATE %s', string_agg(format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2)), ', ' ORDER BY u.ord))
  FROM unnest(:'truncate'::text[]) WITH ORDINALITY AS u(t, ord)
HAVING count(*) > 0
\gexec
DELETE FROM pgsync.job WHERE job = :'job';
INSERT INTO pgsync.job (job, state, slot, slot_owned, publication, source_sysid, source_timeline)
VALUES (:'job', 'INITIALIZING', :'slot', true, :'pub', :'sysid', :'timeline');
INSERT INTO pgsync.table_sync (job, schema_name, table_name)
SELECT :'job', split_part(t, E'\t', 1), split_part(t, E'\t', 2) FROM unnest(:'tables'::text[]) AS t;
COMMIT;
SQL
		die $EX_RUNTIME "cannot prepare job $JOB in the target: $(sql_error)"
	((${#TRUNCATE_SET[@]})) && log_info "truncated target tables $(table_shown "${TRUNCATE_SET[@]}")"
	rm -f "$STATE_DIR/applied.lsn" "$STATE_DIR"/schema.* "$STATE_DIR/snapshot.progress" "$STATE_DIR/connection"
	record_source_server "$SOURCE_SYSID" || die $EX_RUNTIME "cannot write $STATE_DIR/source"
}

# open_snapshot_slot NAME [pg-slot options]: create slot NAME and export its
# snapshot; pg-slot holds it while its stdin stays open (release_snapshot
# ends it). Sets SNAP_NAME and SNAP_LSN; returns 1 when pg-slot ended
# without creating the slot (SUP_* say how).
open_snapshot_slot() {
	local name=$1 line="" rc
	shift
	rm -f "$WORK/slot.in" "$WORK/slot.out"
	mkfifo "$WORK/slot.in" "$WORK/slot.out"
	local hold_ms=$((${CFG[resources.snapshot_timeout]%ms} + 600000))
	spawn pg-slot "$WORK/slot.in" "$WORK/slot.out" pg-slot create -d "$SRC" --slot "$name" \
		--export-snapshot --hold-timeout "${hold_ms}ms" --log-level "$LOG_LEVEL_NAME" "$@"
	SLOT_PID=$SPAWN_PID
	exec {SLOT_HOLD}>"$WORK/slot.in" {SLOT_OUT}<"$WORK/slot.out"
	# Later children must not inherit the hold: only we may end it.
	CLOSE_FDS=("$SLOT_HOLD" "$SLOT_OUT")
	# Creating the slot waits for transactions running on the source to
	# end: that wait counts against resources.snapshot_timeout too.
	while :; do
		[[ -z $STOP_SIGNAL ]] || bootstrap_fail $EX_RUNTIME "interrupted by SIG$STOP_SIGNAL"
		IFS= read -r -t 1 -u "$SLOT_OUT" line && break
		rc=$?
		if ((rc <= 128)); then
			supervise $(($(now_ms) + 10000)) "pg-slot:$SLOT_PID"
			SLOT_PID=""
			return 1
		fi
		(($(now_ms) < BS_DEADLINE)) || step_timeout
	done
	local got
	IFS=$'\t' read -r got SNAP_LSN SNAP_NAME <<<"$line"
	if [[ $got != "$name" || ! $SNAP_LSN =~ ^[0-9A-F]+/[0-9A-F]+$ || -z $SNAP_NAME || $SNAP_NAME == - ]]; then
		bootstrap_fail $EX_RUNTIME "unexpected output from pg-slot create"
	fi
}

# Create the job's slot and export its snapshot. Sets SNAP_NAME and
# CONSISTENT_LSN.
create_slot() {
	BS_PHASE="creating the replication slot"
	failover_resolve
	if ! open_snapshot_slot "$SLOT" "$FAILOVER_OPT"; then
		# pg-slot ended without creating the slot, maybe because a slot
		# of that name appeared meanwhile: that one is not ours.
		job_update "slot_owned = false" >/dev/null
		step_failed "creating replication slot $SLOT"
		bootstrap_fail $EX_RUNTIME "pg-slot ended without creating slot $SLOT"
	fi
	BS_SLOT_CREATED=1 CONSISTENT_LSN=$SNAP_LSN
	log_info "created replication slot $SLOT at consistent point $CONSISTENT_LSN, snapshot $SNAP_NAME exported"
	BS_PHASE="recording the consistent point"
	job_update "state = 'SNAPSHOTTING', consistent_lsn = :'lsn'" lsn="$CONSISTENT_LSN" ||
		bootstrap_fail $EX_RUNTIME "cannot record the consistent point: $(sql_error)"
}

# The planner's row estimates of the tables (their partitions summed) into
# table_sync.rows_estimate, for status to show the copy's progress against.
record_estimates() {
	local est
	est=$(src_at_snapshot "$(cat <<'SQL'
SELECT coalesce(jsonb_object_agg(u.t, e.n), '{}')
  FROM unnest(:'tables'::text[]) AS u(t)
  CROSS JOIN LATERAL (SELECT format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2))::regclass AS r) q
  CROSS JOIN LATERAL (
    -- pg_partition_tree lists nothing for a table that is not partitioned
    SELECT sum(c.reltuples)::bigint AS n FROM pg_class c
     WHERE c.relkind = 'r' AND c.reltuples >= 0
       AND (c.oid = q.r OR c.oid IN (SELECT relid FROM pg_partition_tree(q.r)))) e;
SQL
	)") && sql tgt -v est="$est" >/dev/null <<'SQL' || log_warn "cannot record the tables' row estimates: $(sql_error)"
UPDATE pgsync.table_sync s SET rows_estimate = e.value::bigint
  FROM jsonb_each_text(:'est'::jsonb) e
 WHERE s.job = :'job' AND s.schema_name || E'\t' || s.table_name = e.key AND e.value IS NOT NULL
SQL
}

# copy_pipeline WHAT DUMP_ARG...: pg-snapshot-dump at the current snapshot,
# with DUMP_ARG... besides what every copy passes, into pg-apply, supervised
# to the end; WHAT names the step in errors. Both copy modes use it.
copy_pipeline() {
	local what=$1 copies=${CFG[resources.max_parallel_copies]} dump_pid
	shift
	rm -f "$WORK/copy.fifo"
	mkfifo "$WORK/copy.fifo"
	spawn pg-snapshot-dump - "$WORK/copy.fifo" pg-snapshot-dump -d "$SRC" --snapshot "$SNAP_NAME" "$@" \
		--slot "$SLOT" --publication "$PUB" --jobs "$copies" \
		--max-message-bytes "${CFG[resources.max_message_bytes]}" \
		--progress-file "$STATE_DIR/snapshot.progress" \
		--connection-file "$STATE_DIR/connection" --log-level "$LOG_LEVEL_NAME"
	dump_pid=$SPAWN_PID
	spawn pg-apply "$WORK/copy.fifo" - pg-apply -d "$TGT" --job "$JOB" --checkpoint "$STATE_DIR/applied.lsn" \
		--jobs "$copies" --max-batch-bytes "${CFG[resources.max_batch_bytes]}" \
		--max-message-bytes "${CFG[resources.max_message_bytes]}" \
		--heartbeat-interval "${CFG[safety.heartbeat_interval]}" --connection-file "$STATE_DIR/connection" \
		--log-level "$LOG_LEVEL_NAME"
	progress_start
	supervise "$BS_DEADLINE" "pg-snapshot-dump:$dump_pid" "pg-apply:$SPAWN_PID"
	progress_end
	[[ $SUP_RESULT == ok ]] || step_failed "$what"
}

copy_tables() {
	record_estimates
	BS_PHASE="copying tables"
	copy_pipeline "copying tables" --position "$CONSISTENT_LSN" --frame-size "${CFG[resources.buffer_size_kb]}kB"
	local row ndone total
	row=$(sql tgt <<'SQL'
SELECT count(*) FILTER (WHERE s.state = 'done'), count(*),
       coalesce(sum(s.rows_copied), 0), coalesce(sum(s.bytes_copied), 0),
       coalesce((SELECT applied_lsn::text FROM pgsync.job WHERE job = :'job'), '')
  FROM pgsync.table_sync s WHERE s.job = :'job'
SQL
	) || bootstrap_fail $EX_RUNTIME "cannot read the copy's result: $(sql_error)"
	local rows bytes applied
	IFS=$'\x1f' read -r ndone total rows bytes applied <<<"$row"
	if [[ $ndone != "${#TABLES[@]}" || $total != "${#TABLES[@]}" ]]; then
		bootstrap_fail $EX_UNSUPPORTED "the copy ended with $ndone of ${#TABLES[@]} tables done"
	fi
	if [[ $applied != "$CONSISTENT_LSN" ]]; then
		bootstrap_fail $EX_UNSUPPORTED "the target recorded position ${applied:-none} after the copy, expected the consistent point $CONSISTENT_LSN"
	fi
	COPIED_ROWS=$rows COPIED_BYTES=$bytes
}

cmd_bootstrap() {
	need_programs pg-slot pg-snapshot-dump pg-apply psql
	setup_connections yes
	lock_job
	trap_stop
	log_info "bootstrap of job $JOB: ${#TABLES[@]} tables from $SRC_DISPLAY to $TGT_DISPLAY"

	preflight bootstrap
	local f level where msg fix
	for f in "${FINDINGS[@]}"; do
		IFS=$'\x1f' read -r level where msg fix <<<"$f"
		case $level in
		fail) log_error "$where: $msg${fix:+; fix: $fix}" ;;
		warn) log_warn "$where: $msg${fix:+; fix: $fix}" ;;
		esac
	done
	((CHECK_FAILS == 0)) || die $EX_PREFLIGHT "bootstrap refused: $CHECK_FAILS prerequisite(s) missing (pgsync check lists them all)"

	catalog_ensure
	if [[ ${CFG[resources.snapshot_mode]:-single} == chunked ]]; then
		CHUNKED=1
		chunked_bootstrap
		return
	fi
	bootstrap_plan
	if [[ ${CFG[safety.auto_create_publication]} == true ]]; then
		create_publication
	fi
	reset_job_row
	BS_DEADLINE=$(($(now_ms) + ${CFG[resources.snapshot_timeout]%ms}))
	create_slot
	sequences_prepare
	create_target_tables
	sequences_bootstrap
	((${#DEF_MISSING[@]} + ${#DEF_PENDING[@]} == 0)) ||
		suspend_autovacuum "${DEF_MISSING[@]}" "${DEF_PENDING[@]}" "${PARTS_MISSING[@]}" "${PARTS_PENDING[@]}"
	copy_tables
	BS_PHASE="releasing the snapshot"
	release_snapshot
	restore_post_data
	job_update "state = 'CATCHING_UP', consistent_lsn = :'lsn', snapshot_done_at = now(), last_error = NULL" \
		lsn="$CONSISTENT_LSN" || die $EX_RUNTIME "cannot record the end of the bootstrap of job $JOB: $(sql_error)"
	log_info "bootstrap of job $JOB complete: ${#TABLES[@]} tables, $COPIED_ROWS rows, $COPIED_BYTES bytes copied at $CONSISTENT_LSN; state CATCHING_UP, continue with pgsync run"
	return $EX_OK
}
