/*
 * jobrow.h - the pgsync.job row pg-apply records its progress in: one
 * applier per job at a time (a session advisory lock), the row created on
 * first use with the source identity of the stream, and the identity and
 * checkpoint-file checks that prove continuity. Never changes state or
 * slot_owned of an existing row: those belong to the orchestrator.
 */
#ifndef PGSYNC_JOBROW_H
#define PGSYNC_JOBROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "lsn.h"
#include "relcache.h"

struct job_identity {
	char sysid[24];
	uint32_t timeline;
	char slot[128];				/* "-" for a stream tied to no slot */
};

/* Take the job's advisory lock on conn, waiting up to wait_ms for a
 * predecessor's session to go away. */
bool jobrow_lock(PGconn *conn, const char *job, uint64_t wait_ms, struct apply_err *err);

/*
 * Create the row when missing (state STREAMING), record the identity in a
 * row that has none yet, and refuse (exit 4) a row of another source system
 * or slot. Returns the applied position (0/0 when none), the timeline it was
 * applied on (*recorded; the caller judges another one by lineage_judge())
 * and the commit time of the last applied transaction ("" when none).
 */
bool jobrow_open(PGconn *meta, const char *job, const struct job_identity *id,
				 lsn_t *applied, uint32_t *recorded, char *commit_time, size_t commit_time_len,
				 struct apply_err *err);

/* The source's new timeline, once the lineage rule found it the same history. */
bool jobrow_set_timeline(PGconn *meta, const char *job, uint32_t timeline, struct apply_err *err);

/* A checkpoint file must belong to the same source and not claim more than
 * the target has applied. A missing file is fine. *in_file: the position it
 * says (0 when missing). */
bool jobrow_check_checkpoint(const char *path, const char *job,
							 const struct job_identity *id, lsn_t applied,
							 lsn_t *in_file, struct apply_err *err);

/* A snapshot section completed: its position is now the applied one. */
bool jobrow_snapshot_done(PGconn *meta, const char *job, lsn_t position,
						  struct apply_err *err);

#endif
