#include "applyrecover.h"
#include "applyreport.h"
#include "common.h"
#include "log.h"
#include "replay.h"
#include "streamread.h"

#include <stdlib.h>

/*
 * Committing in the middle of a line (a->in_line), that line starts the new
 * window with the stream's state from before it.
 */
void
applyrecover_window_settle(struct apply_state *a, bool keep_line, bool force)
{
	struct pgerr pe;
	char text[PGERR_TEXT_MAX];

	if (a->fw && flushwatch_pending(a->fw))
	{
		if (!force)
			return;
		if (a->meta == NULL || !flushwatch_poll(a->fw, a->meta, true, &pe))
			log_warn("cannot flush the target's commits: %s",
					 a->meta ? pgerr_text(&pe, NULL, text, sizeof(text)) : "no session");
	}
	keep_line = keep_line && a->in_line;
	replay_reset(a->rp, keep_line);
	if (keep_line)
		a->mark = a->premark;
	else
		sr_mark(a->sr, &a->mark);
	a->window_lsn = a->durable;
}

/* The sessions, as lib/apply/applysession.c handles them. */
static struct applysession
sessions(const struct apply_state *a)
{
	struct applysession s = {a->conn, a->meta, a->ap, a->replica_role, a->retries};

	return s;
}

static void
set_sessions(struct apply_state *a, const struct applysession *s)
{
	a->conn = s->conn;
	a->meta = s->meta;
	a->ap = s->ap;
	a->replica_role = s->replica_role;
	a->retries = s->retries;
}

void
applyrecover_drop_sessions(struct apply_state *a)
{
	struct applysession s = sessions(a);

	applysession_close(&s);
	set_sessions(a, &s);
}

/*
 * The target session failed in a way a new one may not (lost, the server
 * restarting, a serialization failure or deadlock): open new sessions, ask
 * the target what it committed, and apply again what was read since the
 * last commit, skipping what the target already has. Exits when that
 * cannot be done: not retryable, --no-loop, the lines were not all kept,
 * or --max-retries attempts failed.
 */
void
applyrecover_session(struct apply_state *a, const struct apply_err *why)
{
	struct apply_err err = *why;
	struct applysession s;
	char l[LSN_BUFSZ];
	lsn_t committed, flushed;
	bool ok;

	if (!why->retry || a->no_loop)
	{
		if (why->retry)
			log_error("not reconnecting (--no-loop)");
		applyreport_fail(a, why);
	}
	if (replay_overflowed(a->rp))
	{
		apply_err_set(&err, EXIT_RUNTIME,
					  "%s; the stream read since the last flushed commit on the target (%zu bytes) is more than pg-apply keeps to apply again (twice --max-batch-bytes): not reconnecting, a restarted producer sends it again",
					  why->msg, replay_bytes(a->rp));
		applyreport_fail(a, &err);
	}
	log_warn("%s: reconnecting", why->msg);
	s = sessions(a);
	committed = a->durable;
	/* Below what the target flushed, it lost what it must keep; above, a
	 * crash took back asynchronous commits (flushwatch.h). */
	flushed = flushwatch_flushed(a->fw) > a->cp_floor ? flushwatch_flushed(a->fw) : a->cp_floor;
	ok = applysession_recover(&a->scfg, &s, flushed, &a->durable, a->commit_time, sizeof(a->commit_time), &err);
	set_sessions(a, &s);
	if (!ok && err.code == EXIT_DONE)
	{
		log_info("%s; position %s", err.msg, lsn_format(a->durable, l));
		applyreport_checkpoint(a, true);
		exit(EXIT_DONE);
	}
	if (!ok)
		applyreport_fail(a, &err);
	flushwatch_restart(a->fw, a->durable);
	if (a->durable < a->window_lsn)
	{
		char l2[LSN_BUFSZ];

		/* Only when a flush failed (applyrecover_window_settle()). */
		apply_err_set(&err, EXIT_RUNTIME,
					  "the target restarted without the transactions it had committed after %s up to %s, which it had not flushed yet, and pg-apply no longer holds them: not reconnecting, a restarted producer sends them again from the checkpoint",
					  lsn_format(a->durable, l), lsn_format(committed, l2));
		applyreport_fail(a, &err);
	}
	if (a->durable < committed)
		log_warn("the target restarted without the transactions it had committed after %s, which it had not flushed yet: applying them again",
				 lsn_format(a->durable, l));
	a->reconnects++;
	a->applied = a->durable;
	/* Read again from the target that now decides what was applied. */
	if (!chunkfilter_load(&a->cf, a->meta, a->job, a->durable, &a->kc, &err))
		applyreport_fail(a, &err);
	if (a->durable > a->received)
		a->received = a->durable;
	a->skip_below = a->durable;
	a->rows_mark = 0;
	a->skipping = a->commit_due = false;
	apply_state_batch_clear(a);
	replay_start(a->rp);
	sr_rewind(a->sr, &a->mark);
	applyreport_checkpoint(a, true);
	applyreport_heartbeat(a, true, false, "STREAMING");
	log_info("reconnected to the target (applied position %s): applying again what was read since", lsn_format(a->durable, l));
}
