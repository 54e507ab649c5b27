#include "applyreport.h"
#include "applysession.h"
#include "checkpoint.h"
#include "common.h"
#include "cpwriter.h"
#include "log.h"
#include "srcstatus.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The checkpoint file is rewritten at most this often, unless forced. */
#define CHECKPOINT_EVERY_MS 200

lsn_t
applyreport_checkpoint_lsn(const struct apply_state *a)
{
	lsn_t flushed = a->fw ? flushwatch_flushed(a->fw) : LSN_INVALID;
	lsn_t lsn = flushed < a->carried ? flushed : a->carried;

	return lsn > a->cp_floor ? lsn : a->cp_floor;
}

/*
 * Learn which commits the target has flushed (forced: flush them all). A
 * failure leaves the file where it was: the meta session is replaced by
 * the next heartbeat, or the target is gone and a restart finds it again.
 */
static void
learn_flushed(struct apply_state *a, bool force)
{
	static bool warned;			/* once until it works again: it is asked every 200 ms */
	struct pgerr pe;
	char text[PGERR_TEXT_MAX];

	if (a->fw == NULL || a->meta == NULL || PQstatus(a->meta) != CONNECTION_OK)
		return;
	if (flushwatch_poll(a->fw, a->meta, force, &pe))
		warned = false;
	else if (!warned)
	{
		warned = true;
		log_warn("cannot learn which commits the target has flushed: %s", pgerr_text(&pe, NULL, text, sizeof(text)));
	}
}

void
applyreport_checkpoint(struct apply_state *a, bool force)
{
	struct checkpoint cp;
	char err[512];
	lsn_t lsn;

	if (!a->job_ready)
		return;
	/* Also without a file: a new session's continuity check relies on it. */
	learn_flushed(a, force && a->checkpoint_path);
	if (a->checkpoint_path == NULL)
		return;
	lsn = applyreport_checkpoint_lsn(a);
	/* Nothing applied yet on a new job: no file, which every reader takes
	 * as "nothing confirmed" (a 0/0 one would read as a slot gone past it). */
	if (lsn == LSN_INVALID)
		return;
	if (a->cp_ever && a->cp_written == lsn && a->cp_timeline == a->timeline)
	{
		/* Posted already: forced, it must be on disk before we go on. */
		if (force && cpwriter_wait(a->cpw, err, sizeof(err)) != 0)
			log_fatal(EXIT_RUNTIME, "%s", err);
		return;
	}
	if (!force && now_ms() - a->cp_last_ms < CHECKPOINT_EVERY_MS)
		return;
	memset(&cp, 0, sizeof(cp));
	cp.lsn = lsn;
	snprintf(cp.sysid, sizeof(cp.sysid), "%s", a->sysid);
	cp.timeline = a->timeline;
	snprintf(cp.slot, sizeof(cp.slot), "%s", strcmp(a->slot, "-") == 0 ? "" : a->slot);
	/* A thread writes it: the loop never waits on its fsyncs, except when
	 * forced (a stop, a new timeline, a snapshot loaded), where what comes
	 * next relies on the file. */
	if (a->cpw == NULL)
		a->cpw = cpwriter_new(a->checkpoint_path);
	if (cpwriter_failed(a->cpw, err, sizeof(err)) != 0)
		log_fatal(EXIT_RUNTIME, "%s", err);
	cpwriter_post(a->cpw, &cp);
	if (force && cpwriter_wait(a->cpw, err, sizeof(err)) != 0)
		log_fatal(EXIT_RUNTIME, "%s", err);
	a->cp_written = lsn;
	a->cp_timeline = a->timeline;
	a->cp_last_ms = now_ms();
	a->cp_ever = true;
}

void
applyreport_heartbeat(struct apply_state *a, bool force, bool stopped, const char *state)
{
	struct src_status src;
	bool known = a->conn_file && srcstatus_read(a->conn_file, &src);
	struct hb_stats st = {
		.state = state,
		.connection_state = known ? srcstatus_name(src.state) : NULL,
		/* The job's connections lost and made again: source and target. */
		.reconnects = (known ? src.reconnects : 0) + a->reconnects,
		.source_version = a->source_version[0] ? a->source_version : NULL,
		.received = a->received,
		.applied = a->durable,
		.transactions = a->transactions,
		.changes = a->changes,
		.last_apply_at = a->last_apply_at,
		.last_commit_time = a->commit_time[0] ? a->commit_time : NULL,
	};

	struct apply_err err;

	if (a->hb == NULL)
		return;
	/*
	 * Lost alone (the apply session still works): open it again, once per
	 * heartbeat. A failure keeps the broken one, whose errors then lead the
	 * apply session into applyrecover_session().
	 */
	if (a->meta && PQstatus(a->meta) == CONNECTION_BAD && heartbeat_wait_ms(a->hb) == 0)
	{
		PGconn *c = applysession_connect(a->conninfo, &err);

		if (c != NULL && applysession_meta(c, &err))
		{
			PQfinish(a->meta);
			a->meta = c;
			a->reconnects++;
			if (a->ap)
				applier_set_meta(a->ap, c);
		}
		else
		{
			PQfinish(c);
			log_warn("cannot write the heartbeat: %s", err.msg);
		}
	}
	heartbeat_tick(a->hb, a->meta, &st, force, stopped);
}

/* Milliseconds the main loop may sleep before a timer needs it. */
int
applyreport_wait_ms(const struct apply_state *a)
{
	uint64_t w = 1000;
	int fw_ms = a->job_ready && a->fw ? flushwatch_wait_ms(a->fw) : -1;

	if (a->hb && heartbeat_wait_ms(a->hb) < w)
		w = heartbeat_wait_ms(a->hb);
	if (a->checkpoint_path && a->cp_ever && a->cp_written != applyreport_checkpoint_lsn(a))
	{
		uint64_t since = now_ms() - a->cp_last_ms;

		w = since >= CHECKPOINT_EVERY_MS ? 0 : (CHECKPOINT_EVERY_MS - since < w ? CHECKPOINT_EVERY_MS - since : w);
	}
	/* Commits the target has not flushed yet: ask again. */
	if (fw_ms >= 0 && (uint64_t) fw_ms < w)
		w = (uint64_t) fw_ms;
	return (int) w;
}

void
applyreport_tick(struct apply_state *a)
{
	applyreport_checkpoint(a, false);
	applyreport_heartbeat(a, false, false, "STREAMING");
}

/*
 * End the open target transaction by rollback before the session closes: a
 * COPY in flight fails with the error (a success would hand the server the
 * rows sent so far), then the session goes. Nothing waits on the target.
 */
void
applyreport_abandon(struct apply_state *a, const char *why)
{
	char msg[300];

	if (a->conn == NULL)
		return;
	snprintf(msg, sizeof(msg), "pg-apply stopped: %s", why);
	if (a->ap)
		applier_abandon(a->ap, msg);
	PQfinish(a->conn);
	a->conn = NULL;
}

void
applyreport_fail(struct apply_state *a, const struct apply_err *err)
{
	if (err->code == EXIT_DONE)
	{
		/* Stopped by a signal while the target was busy: a clean stop. */
		log_info("%s", err->msg);
		applyreport_abandon(a, err->msg);
		applyreport_checkpoint(a, true);
		applyreport_heartbeat(a, true, true, "STOPPED");
		exit(EXIT_DONE);
	}
	log_error("%s", err->msg);
	applyreport_abandon(a, err->msg);
	applyreport_checkpoint(a, true);
	exit(err->code);
}

/* An error about the input, located by input name (and line number). */
void
applyreport_fail_in(struct apply_state *a, bool with_line, int code, const char *fmt, ...)
{
	struct apply_err e;
	va_list ap;
	int n;

	if (with_line)
		n = snprintf(e.msg, sizeof(e.msg), "%s:%llu: ", input_name(a->in),
					 (unsigned long long) input_lineno(a->in));
	else
		n = snprintf(e.msg, sizeof(e.msg), "%s: ", input_name(a->in));
	va_start(ap, fmt);
	vsnprintf(e.msg + n, sizeof(e.msg) - (size_t) n, fmt, ap);
	va_end(ap);
	e.code = code;
	applyreport_fail(a, &e);
}

/* A read or decompression error: one line, nothing more of the batch. */
void
applyreport_read_failed(struct apply_state *a)
{
	struct apply_err e;

	if (input_lineno(a->in) > 0)
		snprintf(e.msg, sizeof(e.msg), "%s (after line %llu)", input_error(a->in),
				 (unsigned long long) input_lineno(a->in));
	else
		snprintf(e.msg, sizeof(e.msg), "%s", input_error(a->in));
	e.code = EXIT_RUNTIME;
	applyreport_fail(a, &e);
}

void
applyreport_line_too_long(struct apply_state *a)
{
	applyreport_fail_in(a, false, EXIT_UNSUPPORTED, "line %llu is longer than --max-message-bytes (%llu bytes)",
						(unsigned long long) input_lineno(a->in) + 1,
						(unsigned long long) a->max_message_bytes);
}
