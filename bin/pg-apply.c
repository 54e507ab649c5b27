/*
 * pg-apply - apply a change stream (formats/stream-v1.md) to a target
 * database exactly once. Progress lives in the target (pgsync.job), written
 * in the same transaction as the changes it covers; a checkpoint file
 * repeats the durable position for pg-walcat --ack-file and pg-ack.
 * Here: options, the main loop and what each record does. The checkpoint
 * file, heartbeat and exit on error are in bin/apply/applyreport.c, replacing a
 * lost target session in bin/apply/applyrecover.c, their shared state in
 * bin/apply/applystate.h: pg-apply's own modules, not library.
 */
#include "applier.h"
#include "applyrecover.h"
#include "applyreport.h"
#include "applysession.h"
#include "applystate.h"
#include "catalog.h"
#include "chunkfilter.h"
#include "cli.h"
#include "common.h"
#include "conn.h"
#include "heartbeat.h"
#include "identity.h"
#include "input.h"
#include "jobrow.h"
#include "lineage.h"
#include "log.h"
#include "lsn.h"
#include "pace.h"
#include "relcache.h"
#include "replay.h"
#include "session.h"
#include "sig.h"
#include "snapload.h"
#include "streamread.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define LOCK_WAIT_MS 10000

static const char usage_text[] =
	"usage: pg-apply [-d CONNINFO] [--job NAME] [--checkpoint FILE] [-j N]\n"
	"                [--max-batch-bytes SIZE] [--max-batch-delay DURATION]\n"
	"                [--max-message-bytes SIZE] [--heartbeat-interval DURATION]\n"
	"                [--copy-threshold ROWS] [--no-merge-updates] [--connection-file FILE]\n"
	"                [--key-collations FILE] [--synchronous-commit LEVEL]\n"
	"                [--max-retries N] [--no-loop] [-q] [--log-level LEVEL] [--json] [FILE...]\n";

static const char help_text[] =
	"\n"
	"Apply a pgsync change stream (plain or zstd) to the target exactly once.\n"
	"FILEs are read in order as one stream; none or \"-\" reads stdin.\n"
	"\n"
	"  -d, --dbname=CONNINFO          target connection (default: libpq environment)\n"
	"      --job=NAME                 pgsync.job row to record progress in\n"
	"                                 (default: the slot named in the stream header)\n"
	"      --checkpoint=FILE          write the durable position to FILE\n"
	"  -j, --jobs=N                   parallel connections for a snapshot section (1-256, default 4)\n"
	"      --max-batch-bytes=SIZE     commit after this much stream text (16MB)\n"
	"      --max-batch-delay=DURATION commit after this long (100ms)\n"
	"      --max-message-bytes=SIZE   longest accepted line (1kB-1GB, default 32MB)\n"
	"      --heartbeat-interval=DURATION  pgsync.job_runtime update interval (10s, 0: off)\n"
	"      --copy-threshold=ROWS      insert run length that switches to COPY (32, 0: never)\n"
	"      --no-merge-updates         send every update, even of a row updated again in the batch\n"
	"      --connection-file=FILE     report the source connection's state that\n"
	"                                 pg-walcat --connection-file keeps in FILE\n"
	"      --key-collations=FILE      the target collations that order the text keys of a\n"
	"                                 chunked copy as the source does (pgsync writes it)\n"
	"      --synchronous-commit=LEVEL the apply session's synchronous_commit (off: the\n"
	"                                 checkpoint waits for the target's WAL flush instead)\n"
	"      --max-retries=N            reconnect attempts to the target before giving up (10)\n"
	"      --no-loop                  exit 1 when the target session is lost instead of reconnecting\n"
	"  -q, --quiet                    log warnings and errors only\n"
	"      --log-level=LEVEL          debug, info, warn or error (info)\n"
	"      --json                     log JSON lines\n"
	"  -h, --help                     show this help\n"
	"  -V, --version                  show the version\n";

static struct apply_state A;

static double
wall_seconds(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double) tv.tv_sec + tv.tv_usec / 1e6;
}

/*
 * While the applier waits for the target (a commit, a full pipeline), the
 * input is read ahead: otherwise the pipe fills, and pg-walcat and the
 * source's decoding stop until the target is done.
 */
static int
read_ahead_fd(void)
{
	return A.in ? input_readahead_fd(A.in) : -1;
}

static void
read_ahead(void)
{
	if (A.in)
		input_readahead(A.in);
}

/* --- the chunks of a chunked copy --------------------------------------- */

/*
 * Read when a stream starts (and by applyrecover after a new session): what
 * the copy's chunks hold decides which changes below their positions apply.
 */
static void
chunks_load(void)
{
	struct apply_err err;

	if (!chunkfilter_load(&A.cf, A.meta, A.job, A.applied, &A.kc, &err))
		applyreport_fail(&A, &err);
}

/* "; N keys placed by the target, X us each", or "" when none was. */
static const char *
chunks_placed(char *out, size_t len)
{
	uint64_t n, us;

	out[0] = '\0';
	if (A.cf == NULL)
		return out;
	chunkfilter_lookups(A.cf, &n, &us);
	if (n > 0)
		snprintf(out, len, "; %llu keys placed by the target, %.1f us each", (unsigned long long) n,
				 (double) us / (double) n);
	return out;
}

/* Once the target holds everything below the last chunk, nothing is filtered. */
static void
chunks_passed(void)
{
	char l[LSN_BUFSZ], placed[120];

	if (A.cf == NULL || A.durable < chunkfilter_until(A.cf))
		return;
	log_info("applied past the last chunk's position %s: changes are no longer filtered (%llu left out as already copied%s)",
			 lsn_format(chunkfilter_until(A.cf), l), (unsigned long long) chunkfilter_skipped(A.cf),
			 chunks_placed(placed, sizeof(placed)));
	chunkfilter_free(A.cf);
	A.cf = NULL;
}

/* A change, or what of it the chunks copied after it do not hold already. */
static bool
apply_change(const struct sr_record *rec, struct apply_err *err)
{
	if (A.cf != NULL && A.commit_lsn < chunkfilter_until(A.cf))
		return chunkfilter_change(A.cf, A.ap, rec, err);
	return applier_change(A.ap, rec, err);
}

/* --- batches ----------------------------------------------------------- */

/*
 * Commit the open batch, unless part of it lies in a zstd frame whose
 * checksum was not checked yet: then it stays open (commit_due) until the
 * frame's end has been read. Nothing of a damaged frame is ever committed.
 * False when the target session was lost and replaced (see applyrecover_session()).
 */
static bool
commit_batch(void)
{
	struct apply_err err;

	A.commit_due = false;
	if (!A.batch_dirty && (A.ap == NULL || !applier_txn_open(A.ap)))
		return true;
	/*
	 * Only between source transactions: the progress row says A.applied,
	 * which ends at the last COMMIT read. A batch due while its frame was
	 * unverified reaches here again at each line of the next transaction,
	 * and the frame may check out in its middle: committing then would keep
	 * part of that transaction beyond the recorded position.
	 */
	if (A.txn_sent || (A.in && !input_settle(A.in)))
	{
		A.commit_due = true;
		return true;
	}
	if (!applier_commit(A.ap, A.applied, A.batch_commit_time[0] ? A.batch_commit_time : NULL, &err))
	{
		applyrecover_session(&A, &err);
		return false;
	}
	A.durable = A.applied;
	flushwatch_committed(A.fw, A.durable);
	A.retries = 0;
	if (A.batch_commit_time[0])
		memcpy(A.commit_time, A.batch_commit_time, sizeof(A.commit_time));
	A.transactions += A.batch_txns;
	A.changes += applier_rows(A.ap) - A.rows_mark;
	A.rows_mark = applier_rows(A.ap);
	A.last_apply_at = wall_seconds();
	apply_state_batch_clear(&A);
	chunks_passed();
	applyrecover_window_settle(&A, true, replay_bytes(A.rp) > A.settle_bytes);
	applyreport_checkpoint(&A, false);
	return true;
}

/*
 * Forget the open batch: the producer sends it again. When exiting, a
 * failed rollback does not matter: closing the session rolls back.
 */
static void
rollback_batch(bool exiting)
{
	struct apply_err err;
	bool ok = A.ap == NULL || applier_rollback(A.ap, &err);

	if (A.ap)
		A.rows_mark = applier_rows(A.ap);
	A.applied = A.durable;
	A.commit_due = false;
	apply_state_batch_clear(&A);
	A.skipping = false;
	applyrecover_window_settle(&A, false, true);
	if (!ok && !exiting)
		applyrecover_session(&A, &err);
}

/* Returns only when the last batch was lost with its session: replay it. */
static void
finish(bool signalled)
{
	char l[LSN_BUFSZ], placed[120];

	/* Also a batch not yet verified: the producer sends it again. */
	if (sr_in_txn(A.sr) || !input_settle(A.in))
		rollback_batch(true);
	else if (!commit_batch())
		return;
	applyreport_checkpoint(&A, true);
	applyreport_heartbeat(&A, true, true, "STOPPED");
	if (A.job_ready)
		log_info("%s: applied %llu transactions, skipped %llu already applied; position %s%s",
				 signalled ? "stopped by signal" : "end of stream",
				 (unsigned long long) A.transactions, (unsigned long long) A.skipped,
				 lsn_format(A.durable, l), chunks_placed(placed, sizeof(placed)));
	applyrecover_drop_sessions(&A);
	replay_free(A.rp);
	exit(EXIT_DONE);
}

/* --- the job row ------------------------------------------------------- */

/*
 * A header on another timeline than the one the target recorded: the
 * lineage rule (lineage_judge(), the one pg-walcat judged by) on the
 * history the header carries. The same history is recorded as the job's
 * timeline at once, so that no stream of the old one is taken after it;
 * anything else ends with nothing of the new timeline applied.
 */
static void
follow_timeline(const struct sr_record *rec)
{
	struct lineage hist;
	struct apply_err err;
	char msg[512];

	if (rec->timeline == A.timeline)
		return;
	if (!lineage_parse_feature(rec->history.p, rec->history.n, rec->timeline, &hist))
		applyreport_fail_at(&A, EXIT_CONTINUITY, "stream on timeline %u carries a malformed history: resync required",
							rec->timeline);
	if (lineage_judge(A.timeline, A.applied, &hist, msg, sizeof(msg)) != LINEAGE_FOLLOWS)
		applyreport_fail_at(&A, EXIT_CONTINUITY, "%s: resync required, nothing of timeline %u applied",
							msg, rec->timeline);
	if (!jobrow_set_timeline(A.meta, A.job, rec->timeline, &err))
		applyreport_fail(&A, &err);
	log_info("%s: job \"%s\" goes on on timeline %u", msg, A.job, rec->timeline);
	A.timeline = A.scfg.id.timeline = rec->timeline;
	/* The checkpoint names the timeline too, even at the same position. */
	applyreport_checkpoint(&A, true);
}

static void
init_job(const struct sr_record *rec)
{
	struct job_identity id;
	struct apply_err err;
	struct applier_opts ao;
	uint32_t recorded = 0;

	if (A.job_opt)
		snprintf(A.job, sizeof(A.job), "%s", A.job_opt);
	else if (strcmp(rec->slot, "-") == 0)
		log_fatal(EXIT_USAGE, "the stream names no slot: use --job NAME");
	else
		snprintf(A.job, sizeof(A.job), "%s", rec->slot);
	memcpy(A.sysid, rec->sysid, sizeof(A.sysid));
	memcpy(A.slot, rec->slot, sizeof(A.slot));
	A.timeline = rec->timeline;
	memcpy(id.sysid, A.sysid, sizeof(id.sysid));
	memcpy(id.slot, A.slot, sizeof(id.slot));
	id.timeline = A.timeline;

	/* One applier per job: a second one would apply twice. */
	if (!jobrow_lock(A.conn, A.job, LOCK_WAIT_MS, &err) ||
		!jobrow_open(A.meta, A.job, &id, &A.durable, &recorded, A.commit_time, sizeof(A.commit_time), &err))
		applyreport_fail(&A, &err);
	/* The checkpoint belongs to the timeline the target recorded. */
	id.timeline = recorded;
	if (A.checkpoint_path && !jobrow_check_checkpoint(A.checkpoint_path, A.job, &id, A.durable, &A.cp_floor, &err))
		applyreport_fail(&A, &err);
	A.applied = A.received = A.durable;
	A.timeline = id.timeline = recorded;
	A.fw = flushwatch_new(strcmp(A.synchronous_commit, "off") != 0, A.job);
	flushwatch_restart(A.fw, A.durable);

	A.rc = relcache_new(A.job);
	if (!relcache_load_tables(A.rc, A.meta, &err))
		applyreport_fail(&A, &err);
	ao.job = A.job;
	ao.copy_threshold = A.copy_threshold;
	ao.merge_updates = !A.no_merge;
	ao.synchronous_commit = A.synchronous_commit;
	ao.side_fd = read_ahead_fd;
	ao.side_read = read_ahead;
	/* Part of what the batch may take: 4 MB, less for small batches. */
	ao.held_bytes = A.max_batch_bytes < 4 * 1024 * 1024 ? (size_t) A.max_batch_bytes : 4 * 1024 * 1024;
	if ((A.ap = applier_new(A.conn, A.meta, A.rc, &ao, &A.replica_role, &err)) == NULL)
		applyreport_fail(&A, &err);
	A.scfg = (struct applysession_cfg) {A.conninfo, A.job, id, A.rc, ao, LOCK_WAIT_MS, A.max_retries};
	if (!A.replica_role)
		log_info("no permission to set session_replication_role: triggers and foreign keys stay active on the target");
	A.hb = heartbeat_new(A.job, A.heartbeat_ms);
	A.job_ready = true;
	follow_timeline(rec);
	applyreport_checkpoint(&A, true);
	applyreport_heartbeat(&A, true, false, "STREAMING");
}

/* --- records ----------------------------------------------------------- */

/*
 * A position the stream carried: read (received), and the most any stream
 * of this run reached (carried), which bounds what the checkpoint file may
 * say (applyreport_checkpoint()).
 */
static void
saw(lsn_t lsn)
{
	if (lsn > A.received)
		A.received = lsn;
	if (lsn > A.carried)
		A.carried = lsn;
}

static void
on_header(const struct sr_record *rec)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ], why[256];

	if (rec->server.n > 0 && rec->server.n < sizeof(A.source_version))
		snprintf(A.source_version, sizeof(A.source_version), "%.*s", (int) rec->server.n, rec->server.p);
	if (!A.job_ready)
		init_job(rec);
	/* A later timeline is judged below (lineage_judge()). */
	else if (!identity_same(A.sysid, rec->sysid, why, sizeof(why)))
		applyreport_fail_at(&A, EXIT_CONTINUITY,
				"%s (the stream changed source); nothing of it is applied: resync required, "
				"unless the job's own server answers again", why);
	else if (strcmp(rec->slot, A.slot) != 0)
		applyreport_fail_at(&A, EXIT_CONTINUITY,
				"stream from source %s timeline %u slot \"%s\" follows one from source %s timeline %u slot \"%s\": resync required",
				rec->sysid, rec->timeline, rec->slot, A.sysid, A.timeline, A.slot);
	else
	{
		if (rec->interrupted)
		{
			log_warn("%s:%llu: stream restarted inside transaction %llu: discarding the uncommitted batch; the producer sends it again",
					 input_name(A.in), (unsigned long long) input_lineno(A.in), (unsigned long long) rec->open_xid);
			rollback_batch(false);
		}
		follow_timeline(rec);
	}
	/* The tables of the stream before are undefined now (committed before
	 * the header was read, see on_line()): no replay may reach back past it. */
	applyrecover_window_settle(&A, true, true);
	replay_forget_relations(A.rp);
	/* A stream that starts past what the target holds cannot contain the
	 * transactions in between (a slot recreated, or advanced by someone
	 * else): applying it would silently leave a hole. */
	if (rec->lsn > A.applied && A.applied != 0)
		applyreport_fail_at(&A, EXIT_CONTINUITY,
				"stream starts at %s, after the applied position %s: the transactions in between are not in this stream, resync required",
				lsn_format(rec->lsn, a), lsn_format(A.applied, b));
	/* The batch, committed now or once its compressed frame is verified. */
	A.skip_below = A.applied;
	/* The chunks do not change between two streams of one run (a chunk
	 * section reads them again itself). */
	if (A.cf == NULL)
		chunks_load();
}


/*
 * The target already holds everything below its applied position, so a
 * snapshot taken at or below it is in there: replaying a whole archive (base
 * snapshot plus segments) onto the target it built changes nothing.
 */
static bool open_next_input(void);

static void
skip_snapshot(lsn_t at, const char *done)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ];
	const char *line;
	size_t len;

	log_info("%s:%llu: snapshot at %s is already applied (position %s): skipped",
			 input_name(A.in), (unsigned long long) input_lineno(A.in),
			 lsn_format(at, a), lsn_format(A.applied, b));
	saw(at);
	for (;;)
	{
		struct sr_record rec;

		switch (input_next(A.in, &line, &len, -1))
		{
			case IN_LINE:
				/* Parsed as any line: the parser then knows the section ended. */
				if (!sr_parse(A.sr, line, len, &rec))
					applyreport_fail_at(&A, EXIT_UNSUPPORTED, "%s", sr_error(A.sr));
				if (!sr_in_section(A.sr))
					return;
				break;
			case IN_EOF:
				if (open_next_input())
					break;
				/* fall through */
			case IN_TRUNCATED:
				applyreport_fail_in(&A, false, EXIT_RUNTIME, "stream truncated at line %llu: the snapshot section has no %s",
						(unsigned long long) input_lineno(A.in) + 1, done);
			case IN_AGAIN:
				break;
			case IN_TOOLONG:
				applyreport_line_too_long(&A);
			case IN_ERROR:
				applyreport_read_failed(&A);
		}
	}
}

/* The heartbeat goes on while a snapshot section loads. */
static void
snapshot_tick(void)
{
	applyreport_heartbeat(&A, false, false, "SNAPSHOTTING");
}

/* False when the target session was lost first (see applyrecover_session()). */
static bool
on_snapshot(const struct sr_record *rec)
{
	struct snapload_opts so = {A.conninfo, A.jobs, A.job, A.replica_role, snapshot_tick};
	struct apply_err err;
	char l[LSN_BUFSZ], l2[LSN_BUFSZ];
	bool chunks = rec->type == SR_CHUNKS;
	lsn_t pos = 0;
	int rc;

	if (A.batch_dirty && !input_settled(A.in))
		applyreport_fail_at(&A, EXIT_UNSUPPORTED, "a snapshot section starts inside the compressed frame of the transactions "
				"before it, which cannot be verified before it loads");
	if (!commit_batch())
		return false;
	if (A.skip_below != 0 && rec->lsn <= A.skip_below)
	{
		skip_snapshot(rec->lsn, chunks ? REC_CHUNKSDONE : REC_SNAPSHOTDONE);
		return true;
	}
	applyreport_heartbeat(&A, true, false, "SNAPSHOTTING");
	rc = snapload_section(A.in, A.sr, rec, &so, &pos);
	if (rc != EXIT_DONE)
	{
		applyreport_checkpoint(&A, true);
		exit(rc);
	}
	/* A chunk section's position is its own snapshot's, above the job's:
	 * the chunks are recorded with it, the job's progress stays. */
	if (chunks)
	{
		log_info("chunks loaded at %s; the job's position stays %s", lsn_format(pos, l),
				 lsn_format(A.applied, l2));
		/* Changes after it in this stream are judged by these chunks too. */
		chunks_load();
		return true;
	}
	if (!jobrow_snapshot_done(A.meta, A.job, pos, &err))
		applyreport_fail(&A, &err);
	A.durable = A.applied = A.skip_below = pos;
	flushwatch_committed(A.fw, pos);
	saw(pos);
	applyreport_checkpoint(&A, true);
	if (!relcache_load_tables(A.rc, A.meta, &err))
		applyreport_fail(&A, &err);
	log_info("snapshot loaded; changes continue from %s", lsn_format(pos, l));
	applyreport_heartbeat(&A, true, false, "STREAMING");
	return true;
}

/*
 * Apply one line. False when the target session was lost and replaced: the
 * line is then applied again from the replay (see applyrecover_session()),
 * and nothing of it may be used here any more.
 *
 * A full batch is committed when the next line is read, and when that line
 * carries a position only once it has checked out: a COMMIT whose end is
 * bogus is caught by the next BEGIN before it reaches the target. Other
 * lines may redefine what held changes refer to: the batch goes first.
 */
static bool
on_line(const char *line, size_t len)
{
	struct sr_record rec;
	struct apply_err err;

	/* A header between transactions ends the batch too, before it is
	 * parsed: it forgets the tables, which a replay still needs. */
	if ((A.commit_due && !sr_line_has_position(line, len)) ||
		(sr_line_is(line, len, SR_HEADER) && !sr_in_txn(A.sr)))
	{
		if (!commit_batch())
			return false;
	}
	if (!sr_parse(A.sr, line, len, &rec))
		applyreport_fail_at(&A, EXIT_UNSUPPORTED, "%s", sr_error(A.sr));
	if (A.commit_due && !commit_batch())
		return false;
	switch (rec.type)
	{
		case SR_HEADER:
			on_header(&rec);
			saw(rec.lsn);
			break;
		case SR_RELATION:
		case SR_TYPE:
		case SR_ORIGIN:
			break;
		case SR_BEGIN:
			A.xid = rec.xid;
			A.commit_lsn = rec.lsn;
			applier_set_txn(A.ap, rec.xid, rec.lsn);
			/* Below the target's progress at the header: applied before.
			 * Read it to its COMMIT and drop it. (Never compared with what
			 * this stream promised: positions only grow within a stream,
			 * which the reader checks, so a bogus promise is an error
			 * rather than a reason to skip.) */
			A.skipping = rec.lsn < A.skip_below;
			if (A.skipping)
				A.skipped++;
			else if (A.batch_start_ms == 0)
				A.batch_start_ms = now_ms();
			break;
		case SR_INSERT:
		case SR_UPDATE:
		case SR_DELETE:
		case SR_TRUNCATE:
			if (A.skipping)
				break;
			A.txn_sent = true;
			if (!apply_change(&rec, &err))
			{
				applyrecover_session(&A, &err);
				return false;
			}
			break;
		case SR_MESSAGE:
			log_debug("ignoring a logical message at line %llu", (unsigned long long) input_lineno(A.in));
			break;
		case SR_COMMIT:
			saw(rec.end_lsn);
			if (A.skipping)
			{
				A.skipping = false;
				break;
			}
			if (rec.end_lsn > A.applied)
				A.applied = rec.end_lsn;
			A.txn_sent = false;
			snprintf(A.batch_commit_time, sizeof(A.batch_commit_time), "%.*s", (int) rec.time.n, rec.time.p);
			A.batch_txns++;
			A.batch_dirty = true;
			A.batch_bytes += len + 1;
			/* The replay's window too: what it holds is bounded by the batch. */
			if (A.batch_bytes >= A.max_batch_bytes || now_ms() - A.batch_start_ms >= A.max_batch_delay_ms ||
				applier_wants_commit(A.ap) || replay_bytes(A.rp) >= A.max_batch_bytes)
				A.commit_due = true;
			return true;
		case SR_POSITION:
		case SR_END:
			saw(rec.lsn);
			if (rec.lsn > A.applied)
			{
				A.applied = rec.lsn;
				A.batch_dirty = true;
			}
			break;
		case SR_SNAPSHOT:
		case SR_CHUNKS:
			if (!on_snapshot(&rec))
				return false;
			break;
		case SR_COPY:
		case SR_ROW:
		case SR_ENDCOPY:
		case SR_TABLEDONE:
		case SR_SNAPSHOTDONE:
		case SR_CHUNK:
		case SR_CHUNKSDONE:
			/* on_snapshot() reads the section to its end. */
			break;
	}
	if (sr_in_txn(A.sr) && !A.skipping)
		A.batch_bytes += len + 1;
	return true;
}

/*
 * Keep the line for a replay, then apply it. Nothing to replay when no
 * batch is open outside a transaction: the window starts again.
 */
static void
apply_line(const char *line, size_t len)
{
	bool ok;

	replay_record(A.rp, line, len);
	sr_mark(A.sr, &A.premark);
	A.in_line = true;
	ok = on_line(line, len);
	A.in_line = false;
	if (ok && !sr_in_txn(A.sr) && !A.batch_dirty && !(A.ap && applier_txn_open(A.ap)))
		applyrecover_window_settle(&A, false, false);
}

/* --- input ------------------------------------------------------------- */

static bool
open_next_input(void)
{
	const char *name;
	int fd;

	if (A.cur >= A.nfiles)
		return false;
	name = A.files[A.cur++];
	if (strcmp(name, "-") == 0)
		fd = STDIN_FILENO;
	else if ((fd = open(name, O_RDONLY | O_CLOEXEC)) < 0)
		log_fatal(EXIT_USAGE, "cannot open \"%s\": %s", name, strerror(errno));
	input_close(A.in);
	A.in = input_open(fd, name, A.max_message_bytes);
	return true;
}

/* The producer died mid-transaction or mid-line: nothing of it applies. */
static void __attribute__((noreturn))
truncated(void)
{
	unsigned long long line = (unsigned long long) input_lineno(A.in) + 1;
	bool in_txn = sr_in_txn(A.sr);
	uint64_t xid = sr_txn_xid(A.sr);

	rollback_batch(true);
	if (in_txn)
		applyreport_fail_in(&A, false, EXIT_RUNTIME, "stream truncated in transaction %llu at line %llu",
				(unsigned long long) xid, line);
	applyreport_fail_in(&A, false, EXIT_RUNTIME, "stream truncated at line %llu", line);
}

static void
wait_input(void)
{
	struct pollfd p[2] = {{input_fd(A.in), POLLIN, 0}, {sig_fd(), POLLIN, 0}};

	/* Read ahead while the batch committed: apply it now. (The poll would
	 * wait for the producer's next transaction, or a timer.) */
	if (input_ready(A.in))
		return;
	if (poll(p, 2, applyreport_wait_ms(&A)) > 0 && (p[1].revents & POLLIN))
		sig_drain();
}

static void
run(void)
{
	unsigned lines = 0;

	for (;;)
	{
		const char *line;
		size_t len;
		bool again;

		if (sig_stop_requested())
			finish(true);
		/* Lines to apply again after a lost session come first. */
		again = replay_next(A.rp, &line, &len);
		switch (again ? IN_LINE : input_next(A.in, &line, &len, 0))
		{
			case IN_LINE:
				if (!again)
					pace_add(&A.pace, len + 1);
				apply_line(line, len);
				if (++lines % 256 == 0)
				{
					pace_tick(&A.pace);
					applyreport_tick(&A);
				}
				break;
			case IN_AGAIN:
				/* Nothing more for a moment: make what we have durable. */
				if (!sr_in_txn(A.sr) && (A.batch_dirty || (A.ap && applier_txn_open(A.ap))))
				{
					if (!A.commit_due && !pace_live(&A.pace) &&
						!pace_quiet(input_fd(A.in), A.batch_start_ms, A.max_batch_delay_ms))
						break;
					if (!commit_batch())
						break;
				}
				applyreport_tick(&A);
				/* Idle, every commit flushed: the window may go. */
				if (!sr_in_txn(A.sr) && !A.batch_dirty && !(A.ap && applier_txn_open(A.ap)))
					applyrecover_window_settle(&A, false, false);
				wait_input();
				break;
			case IN_EOF:
				if (open_next_input())
					break;
				if (sr_in_txn(A.sr))
					truncated();
				finish(false);
				break;
			case IN_TRUNCATED:
				truncated();
			case IN_TOOLONG:
				applyreport_line_too_long(&A);
			case IN_ERROR:
				applyreport_read_failed(&A);
		}
	}
}

/* --- options and start ------------------------------------------------- */

enum {
	OPT_JOB = 256, OPT_CHECKPOINT, OPT_BATCH_BYTES, OPT_BATCH_DELAY, OPT_MSG_BYTES,
	OPT_HEARTBEAT, OPT_COPY, OPT_NO_MERGE, OPT_CONN_FILE, OPT_MAX_RETRIES, OPT_NO_LOOP, OPT_KEY_COLLATIONS,
	OPT_SYNC_COMMIT,
};

/* The levels PostgreSQL accepts; every one but off waits for the local flush. */
static const char *
sync_commit_level(const char *v)
{
	static const char *const levels[] = {"off", "local", "remote_write", "on", "remote_apply"};

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(v, levels[i]) == 0)
			return levels[i];
	cli_usage_error(usage_text, "invalid --synchronous-commit \"%s\": expected off, local, remote_write, on or remote_apply", v);
}

static void
parse_options(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_DBNAME_LONGOPT,
		{"job", required_argument, NULL, OPT_JOB},
		{"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
		{"jobs", required_argument, NULL, 'j'},
		{"max-batch-bytes", required_argument, NULL, OPT_BATCH_BYTES},
		{"max-batch-delay", required_argument, NULL, OPT_BATCH_DELAY},
		{"max-message-bytes", required_argument, NULL, OPT_MSG_BYTES},
		{"heartbeat-interval", required_argument, NULL, OPT_HEARTBEAT},
		{"copy-threshold", required_argument, NULL, OPT_COPY},
		{"no-merge-updates", no_argument, NULL, OPT_NO_MERGE},
		{"connection-file", required_argument, NULL, OPT_CONN_FILE},
		{"max-retries", required_argument, NULL, OPT_MAX_RETRIES},
		{"no-loop", no_argument, NULL, OPT_NO_LOOP},
		{"key-collations", required_argument, NULL, OPT_KEY_COLLATIONS},
		{"synchronous-commit", required_argument, NULL, OPT_SYNC_COMMIT},
		CLI_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static char *stdin_only[] = {"-"};
	struct cli cli = {.prog = "pg-apply", .synopsis = usage_text, .help = help_text};
	int c;

	A.jobs = 4;
	A.copy_threshold = 32;
	A.max_batch_bytes = 16 * 1024 * 1024;
	A.max_batch_delay_ms = 100;
	A.max_message_bytes = CLI_MAX_MESSAGE_DEFAULT;
	A.heartbeat_ms = 10000;
	A.max_retries = 10;
	A.synchronous_commit = "off";
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:j:" CLI_COMMON_SHORT, opts, NULL)) != -1)
	{
		switch (c)
		{
			case OPT_JOB:
				if (optarg[0] == '\0' || strlen(optarg) >= sizeof(A.job))
					cli_usage_error(usage_text, "invalid --job \"%s\": expected a name of 1 to %zu bytes",
									optarg, sizeof(A.job) - 1);
				A.job_opt = optarg;
				break;
			case OPT_CHECKPOINT: A.checkpoint_path = optarg; break;
			case 'j': A.jobs = cli_jobs(&cli, optarg); break;
			case OPT_BATCH_BYTES:
				A.max_batch_bytes = cli_size(&cli, "--max-batch-bytes", optarg, 1, UINT64_C(1) << 40);
				break;
			case OPT_BATCH_DELAY:
				A.max_batch_delay_ms = cli_duration(&cli, "--max-batch-delay", optarg, 0);
				break;
			case OPT_MSG_BYTES: A.max_message_bytes = cli_max_message(&cli, optarg); break;
			case OPT_HEARTBEAT:
				A.heartbeat_ms = cli_duration(&cli, "--heartbeat-interval", optarg, 0);
				break;
			case OPT_COPY: A.copy_threshold = (int) cli_int(&cli, "--copy-threshold", optarg, 0, 1000000); break;
			case OPT_NO_MERGE: A.no_merge = true; break;
			case OPT_CONN_FILE: A.conn_file = optarg; break;
			case OPT_MAX_RETRIES: A.max_retries = (int) cli_int(&cli, "--max-retries", optarg, 0, 1000000); break;
			case OPT_NO_LOOP: A.no_loop = true; break;
			case OPT_KEY_COLLATIONS: A.keycoll_file = optarg; break;
			case OPT_SYNC_COMMIT: A.synchronous_commit = sync_commit_level(optarg); break;
			default: cli_common(&cli, c, argv); break;
		}
	}
	A.conninfo = cli.conninfo;
	A.files = optind < argc ? argv + optind : stdin_only;
	A.nfiles = optind < argc ? argc - optind : 1;
}

/*
 * Any log_fatal() (a checkpoint file that cannot be written, a later FILE
 * that cannot be opened, out of memory) ends the open transaction as an
 * error does: by rollback, a COPY in flight failed with the message.
 */
static pthread_t main_thread;

static void
on_fatal(const char *msg)
{
	/* Only the main thread uses the apply session; a loader thread's own
	 * session (a snapshot section's COPY) ends with the process. */
	if (!pthread_equal(pthread_self(), main_thread))
		return;
	applyreport_abandon(&A, msg);
	/* What is flushed, as every other exit writes it. (A log_fatal() in
	 * here, as when writing the file is what failed, exits at once.) */
	applyreport_checkpoint(&A, true);
}

int
main(int argc, char **argv)
{
	struct apply_err err;
	struct pgerr pe;
	size_t window;

	log_init(argv[0]);
	main_thread = pthread_self();
	log_set_fatal_hook(on_fatal);
	/* No log line holds a row value, and a target trigger's notice may. */
	log_set_server_text(false);
	parse_options(argc, argv);
	sig_setup();
	/* Opened before connecting: a wrong file name is a usage error. */
	for (int i = 0; i < A.nfiles; i++)
		if (strcmp(A.files[i], "-") != 0 && access(A.files[i], R_OK) != 0)
			log_fatal(EXIT_USAGE, "cannot open \"%s\": %s", A.files[i], strerror(errno));
	if (A.keycoll_file)
	{
		char kerr[700];

		if (!keycolls_read(A.keycoll_file, &A.kc, kerr, sizeof(kerr)))
			log_fatal(EXIT_USAGE, "%s", kerr);
	}
	open_next_input();

	if ((A.conn = applysession_connect(A.conninfo, &err)) == NULL ||
		(A.meta = applysession_connect(A.conninfo, &err)) == NULL)
		log_fatal(err.code, "%s", err.msg);
	if (!catalog_ensure(A.meta, &pe))
	{
		char text[PGERR_TEXT_MAX];

		log_fatal(pgerr_exit_code_setup(pe.sqlstate), "cannot create the pgsync schema on the target: %s",
				  pgerr_text(&pe, NULL, text, sizeof(text)));
	}
	if (!applysession_meta(A.meta, &err))
		log_fatal(EXIT_RUNTIME, "%s", err.msg);
	A.sr = sr_new();
	/* Twice a batch: a batch ends at the first transaction boundary past
	 * --max-batch-bytes, so its last transaction may be about that big. */
	window = A.max_batch_bytes < 512 * 1024 ? 1024 * 1024 : (size_t) (2 * A.max_batch_bytes);
	A.rp = replay_new(window);
	/* A quarter: the batch that follows still fits in the window. */
	A.settle_bytes = window / 4;
	sr_mark(A.sr, &A.mark);
	run();
}
