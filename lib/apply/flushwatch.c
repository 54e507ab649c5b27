#include "flushwatch.h"
#include "common.h"
#include "conn.h"

#include <stdlib.h>
#include <string.h>

/*
 * Commits bounded by one poll: all of them end at or below bound on the
 * target's WAL; source is the newest of them, ms when the oldest returned.
 * Polls are 200 ms apart and an entry lives until the WAL writer's next
 * flush, so a few are enough; when full, the newest absorbs the next
 * (a higher bound only delays its release).
 */
#define FW_SLOTS 16

struct fw_entry {
	lsn_t bound, source;
	uint64_t ms;
};

struct flushwatch {
	bool durable_commits;
	char *job;
	lsn_t flushed;
	/* committed since the last poll: no bound yet */
	bool unbound;
	lsn_t unbound_source;
	uint64_t unbound_ms;
	struct fw_entry q[FW_SLOTS];
	int n;
	uint64_t last_poll_ms;
};

struct flushwatch *
flushwatch_new(bool durable_commits, const char *job)
{
	struct flushwatch *w = xcalloc(1, sizeof(*w));

	w->durable_commits = durable_commits;
	w->job = xstrdup(job);
	return w;
}

void
flushwatch_free(struct flushwatch *w)
{
	if (w == NULL)
		return;
	free(w->job);
	free(w);
}

static void
mark_flushed(struct flushwatch *w, lsn_t source)
{
	if (source > w->flushed)
		w->flushed = source;
}

void
flushwatch_committed(struct flushwatch *w, lsn_t source)
{
	if (source == LSN_INVALID)
		return;
	if (w->durable_commits)
	{
		mark_flushed(w, source);
		return;
	}
	if (source <= w->flushed)
		return;
	if (!w->unbound)
		w->unbound_ms = now_ms();
	w->unbound = true;
	if (source > w->unbound_source)
		w->unbound_source = source;
}

void
flushwatch_restart(struct flushwatch *w, lsn_t committed)
{
	w->n = 0;
	w->unbound = false;
	w->unbound_source = LSN_INVALID;
	/* Found, not committed by us: flushed or not, whatever our setting. */
	if (committed > w->flushed)
	{
		w->unbound = true;
		w->unbound_source = committed;
		w->unbound_ms = now_ms();
	}
}

bool
flushwatch_pending(const struct flushwatch *w)
{
	return w->unbound || w->n > 0;
}

/* The oldest unflushed commit returned at this time. */
static uint64_t
oldest_ms(const struct flushwatch *w)
{
	return w->n > 0 ? w->q[0].ms : w->unbound_ms;
}

/* Everything noted is flushed: the caller's synchronous commit carried it. */
static void
all_flushed(struct flushwatch *w)
{
	for (int i = 0; i < w->n; i++)
		mark_flushed(w, w->q[i].source);
	if (w->unbound)
		mark_flushed(w, w->unbound_source);
	w->n = 0;
	w->unbound = false;
	w->unbound_source = LSN_INVALID;
}

/*
 * One synchronous commit that writes WAL: a row version of the job's own
 * row, unchanged. (A transaction that writes nothing commits without a
 * flush, whatever synchronous_commit says: so a job row that is gone
 * flushed nothing, and nothing counts as flushed.)
 */
static bool
flush_now(struct flushwatch *w, PGconn *conn, struct pgerr *err)
{
	const char *params[1] = {w->job};
	PGresult *res = conn_query(conn, "UPDATE pgsync.job SET applied_lsn = applied_lsn WHERE job = $1 RETURNING job",
							   1, params, 1, err);

	if (res == NULL)
		return false;
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		pgerr_printf(err, false, "cannot flush the target's WAL: the job's row is gone from pgsync.job");
		return false;
	}
	PQclear(res);
	all_flushed(w);
	return true;
}

bool
flushwatch_poll(struct flushwatch *w, PGconn *conn, bool force, struct pgerr *err)
{
	PGresult *res;
	lsn_t insert, flush;
	uint64_t now;
	int keep = 0;

	if (!flushwatch_pending(w))
		return true;
	now = now_ms();
	if (force || now - oldest_ms(w) >= FLUSHWATCH_PATIENCE_MS)
		return flush_now(w, conn, err);
	if (now - w->last_poll_ms < FLUSHWATCH_POLL_MS)
		return true;
	/* Sent after every noted commit returned: each ends at or below insert. */
	res = conn_query_one(conn, "SELECT pg_catalog.pg_current_wal_insert_lsn()::text,"
						 " pg_catalog.pg_current_wal_flush_lsn()::text", 0, NULL, 2, err);
	if (res == NULL)
		return false;
	w->last_poll_ms = now;
	if (!lsn_parse(PQgetvalue(res, 0, 0), &insert) || !lsn_parse(PQgetvalue(res, 0, 1), &flush))
	{
		pgerr_printf(err, false, "the target returned WAL positions \"%s\" and \"%s\"",
					 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
		PQclear(res);
		return false;
	}
	PQclear(res);
	if (w->unbound)
	{
		if (w->n == FW_SLOTS)
			w->n--;				/* the newest absorbs these: see FW_SLOTS */
		else
			w->q[w->n].ms = w->unbound_ms;
		w->q[w->n].bound = insert;
		w->q[w->n].source = w->unbound_source;
		w->n++;
		w->unbound = false;
		w->unbound_source = LSN_INVALID;
	}
	for (int i = 0; i < w->n; i++)
	{
		if (w->q[i].bound <= flush)
			mark_flushed(w, w->q[i].source);
		else
			w->q[keep++] = w->q[i];
	}
	w->n = keep;
	return true;
}

lsn_t
flushwatch_flushed(const struct flushwatch *w)
{
	return w->flushed;
}

int
flushwatch_wait_ms(const struct flushwatch *w)
{
	uint64_t now = now_ms(), poll_at, flush_at;

	if (!flushwatch_pending(w))
		return -1;
	poll_at = w->last_poll_ms + FLUSHWATCH_POLL_MS;
	flush_at = oldest_ms(w) + FLUSHWATCH_PATIENCE_MS;
	if (flush_at < poll_at)
		poll_at = flush_at;
	return poll_at <= now ? 0 : (int) (poll_at - now);
}
