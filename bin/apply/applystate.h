/*
 * applystate.h - one pg-apply run: options, sessions, reader and positions,
 * owned by bin/pg-apply.c and lent to applyreport and applyrecover.
 * Only pg-apply makes one; no module keeps its own copy of a position here.
 */
#ifndef PGSYNC_APPLYSTATE_H
#define PGSYNC_APPLYSTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "applier.h"
#include "applysession.h"
#include "chunkfilter.h"
#include "flushwatch.h"
#include "heartbeat.h"
#include "input.h"
#include "lsn.h"
#include "pace.h"
#include "keyorder.h"
#include "relcache.h"
#include "replay.h"
#include "streamread.h"

struct apply_state {
	/* options */
	const char *conninfo, *job_opt, *checkpoint_path, *conn_file, *keycoll_file;
	const char *synchronous_commit;	/* the apply session's (--synchronous-commit) */
	int jobs, copy_threshold, max_retries;
	bool no_merge, no_loop;
	uint64_t max_batch_bytes, max_batch_delay_ms, max_message_bytes, heartbeat_ms;
	char **files;
	int nfiles, cur;
	struct input *in;

	PGconn *conn, *meta;
	struct streamread *sr;
	struct relcache *rc;
	struct applier *ap;
	struct chunkfilter *cf;		/* the chunks of a chunked copy; NULL: no filter */
	struct key_colls kc;		/* --key-collations: how the target orders text keys */
	struct heartbeat *hb;
	struct applysession_cfg scfg;	/* to open the sessions again */
	bool replica_role;

	/*
	 * What was read since the last target commit, to apply again on a new
	 * session (lib/apply/replay.h), and the stream's transaction state there.
	 */
	struct replay *rp;
	struct sr_mark mark, premark;	/* ... and before the line being applied */
	/*
	 * The window starts after this committed position. It starts again
	 * only once every commit in it is flushed (a crash of the target may
	 * take back the rest, and they are applied again from it), flushed by
	 * a synchronous write when it holds more than settle_bytes.
	 */
	lsn_t window_lsn;
	size_t settle_bytes;
	bool in_line;
	int retries;				/* reconnect attempts since the last commit */
	uint32_t reconnects;		/* target sessions replaced */

	/* the job and the identity of its source */
	bool job_ready;
	char job[256], sysid[24], slot[128], source_version[16];
	uint32_t timeline;

	/*
	 * positions: committed on the target (its progress row; "durable" for a
	 * session, which a new one finds again, but a crash of the target may
	 * take back what is not flushed yet), applied in the open batch, seen
	 */
	lsn_t durable, applied, received;
	struct flushwatch *fw;		/* which commits are on the target's disk */
	/* the target's progress when the current stream began: what is below
	 * it is already applied (never a position this stream promised) */
	lsn_t skip_below;
	char commit_time[40], batch_commit_time[40];

	/* the source transaction being read */
	bool skipping;
	/* some change of it is in the open batch: the batch holds part of a
	 * transaction and A.applied does not cover it, so it must not commit */
	bool txn_sent;
	uint64_t xid;
	lsn_t commit_lsn;

	/* the open batch */
	bool batch_dirty;
	bool commit_due;			/* full at its last COMMIT: commit once the next line checks out */
	uint64_t batch_bytes, batch_start_ms, batch_txns;

	struct pace pace;			/* is the producer live (lib/apply/pace.h) */

	uint64_t transactions, skipped;
	uint64_t changes, rows_mark;	/* rows committed; applier_rows() at the last batch end */
	double last_apply_at;
	/*
	 * The checkpoint file: what it says (position and timeline) once
	 * written, and what it said when pg-apply began (cp_floor, never gone
	 * below). It says the position flushed on the target (flushwatch.h),
	 * but never more than the streams read so far carried (carried): after
	 * a kill the file may lag the target, and pg-walcat, started from the
	 * file, refuses an acknowledgement past what it wrote.
	 */
	lsn_t carried, cp_floor, cp_written;
	struct cpwriter *cpw;		/* writes it (cpwriter.h) */
	uint32_t cp_timeline;
	uint64_t cp_last_ms;
	bool cp_ever;
};

/* The batch is empty again: after a commit, a rollback or a new session. */
static inline void
apply_state_batch_clear(struct apply_state *a)
{
	a->batch_dirty = false;
	a->batch_bytes = a->batch_txns = 0;
	a->batch_start_ms = 0;
	a->batch_commit_time[0] = '\0';
	a->txn_sent = false;
}
#endif
