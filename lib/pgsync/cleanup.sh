# pgsync cleanup: drop the job's replication slot (only one the job owns,
# proven on the job's own server) and its pgsync.job row, and clear the
# state directory. Sourced by bin/pgsync. The replicated tables and their
# data stay: cleanup removes only what pgsync made to replicate them.

cmd_cleanup() {
	((CLEANUP_YES)) || die $EX_USAGE "cleanup drops the job's replication slot and its pgsync.job row: confirm with --yes"
	setup_connections yes
	lock_job
	job_load
	if ((!JOB_EXISTS)); then
		log_info "job $JOB has no pgsync.job row in the target ($TGT_DISPLAY): nothing to clean up"
	fi
	slot_load || die $EX_RUNTIME "cannot read replication slots on the source ($SRC_DISPLAY): $(sql_error)"
	if ((JOB_EXISTS)) && [[ $JOB_SLOT_OWNED == t && -n $JOB_SLOT ]]; then
		if [[ $JOB_SLOT != "$SLOT" ]]; then
			die $EX_USAGE "job $JOB owns slot $JOB_SLOT but the configuration names $SLOT: restore source.slot = $JOB_SLOT to clean up"
		fi
		# Also when the slot is missing: on another server the job's
		# real slot would be orphaned with the job row gone.
		prove_job_slot drop
		if ((SLOT_EXISTS)); then
			[[ $SLOT_ACTIVE == t ]] && log_info "slot $SLOT is in use by pid $SLOT_ACTIVE_PID: waiting up to 10 s for it to be released"
			drop_owned_slot || die $EX_RUNTIME "cannot drop replication slot $SLOT: $(sql_error) (stop pgsync run for job $JOB first)"
			log_info "dropped replication slot $SLOT on the source ($SRC_DISPLAY): its WAL is released"
		else
			log_info "replication slot $SLOT does not exist on the source: nothing to drop"
		fi
	elif ((SLOT_EXISTS)); then
		log_warn "replication slot $SLOT exists but job $JOB does not own it: left untouched"
	fi
	if ((JOB_EXISTS)); then
		sql tgt >/dev/null <<<"DELETE FROM pgsync.job WHERE job = :'job'" ||
			die $EX_RUNTIME "cannot delete job $JOB from the target: $(sql_error)"
		log_info "deleted job $JOB from pgsync.job (with its table_sync, table_chunk and job_runtime rows); the replicated tables keep their data"
	fi
	rm -rf "$STATE_DIR/applied.lsn" "$STATE_DIR"/schema.* "$STATE_DIR/snapshot.progress" "$STATE_DIR/connection" \
		"$STATE_DIR/spool" "$STATE_DIR/source"
	return $EX_OK
}
