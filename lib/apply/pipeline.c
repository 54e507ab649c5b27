#include "pipeline.h"
#include "applyerr.h"
#include "buf.h"
#include "common.h"
#include "escape.h"
#include "log.h"
#include "sig.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Results in flight. Each costs the server about 25 bytes of output, so the
 * ring stays far below socket buffer sizes and the server never blocks
 * writing results while we block writing statements.
 */
#define RING_SIZE 4096
/* Look at arrived results every this many statements. */
#define CONSUME_EVERY 64

struct pipeline {
	PGconn *conn;
	struct relcache *rc;
	int (*side_fd)(void);		/* see pipeline_new() */
	void (*side_read)(void);

	struct pending ring[RING_SIZE];
	size_t head, npend;
	bool got_current;			/* the head's result arrived; its NULL is next */
	bool synced;				/* nothing sent since the last Sync */
	unsigned since_consume;
	bool cancelled;				/* a stop request cancelled the running statement */

	bool txn_open;
	bool in_copy;
	struct apply_txn txn;		/* the statements' error context (applyerr.h) */

	/* Parameters of the statement being built: reused, nothing allocated per row. */
	struct buf vals;
	size_t *offs;				/* into vals; SIZE_MAX: NULL */
	const char **params;
	struct buf sql;
};

struct pipeline *
pipeline_new(PGconn *conn, struct relcache *rc, int (*side_fd)(void), void (*side_read)(void))
{
	struct pipeline *pl = xcalloc(1, sizeof(*pl));

	pl->conn = conn;
	pl->rc = rc;
	pl->side_fd = side_fd;
	pl->side_read = side_read;
	pl->synced = true;
	pl->offs = xmalloc(sizeof(*pl->offs) * PIPELINE_MAX_PARAMS);
	pl->params = xmalloc(sizeof(*pl->params) * PIPELINE_MAX_PARAMS);
	return pl;
}

void
pipeline_free(struct pipeline *pl)
{
	if (pl == NULL)
		return;
	buf_free(&pl->vals);
	buf_free(&pl->sql);
	free(pl->offs);
	free(pl->params);
	free(pl);
}

bool
pipeline_txn_open(const struct pipeline *pl)
{
	return pl->txn_open;
}

bool
pipeline_in_copy(const struct pipeline *pl)
{
	return pl->in_copy;
}

/* --- results ----------------------------------------------------------- */

static bool
lost(struct pipeline *pl, struct apply_err *err)
{
	apply_err_set(err, EXIT_RUNTIME, "lost the target connection: %s",
				  applyerr_conn_msg(pl->conn));
	err->retry = true;
	return false;
}

static bool
handle(struct pipeline *pl, struct pending *p, PGresult *res, struct apply_err *err)
{
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
	{
		applyerr_result(p, res, pl->conn, err);
		if (pl->cancelled)
			apply_err_set(err, EXIT_DONE, "stopped by signal while the target was busy: the open batch is rolled back");
		return false;
	}
	return applyerr_check_count(p, res, err);
}

/* Block until the target sends something, the side input is readable or
 * a signal arrives; a stop request cancels the running statement. */
static bool
wait_target(struct pipeline *pl, struct apply_err *err)
{
	struct pollfd pfd[3] = {{PQsocket(pl->conn), POLLIN, 0}, {sig_fd(), POLLIN, 0},
							{pl->side_fd ? pl->side_fd() : -1, POLLIN, 0}};

	/* Negative descriptors are ignored by poll(). */
	if (poll(pfd, 3, -1) < 0 && errno != EINTR)
		return lost(pl, err);
	if (pfd[2].fd >= 0 && pfd[2].revents)
		pl->side_read();
	/* A statement waiting on a lock must not hold a stop request off:
	 * cancel it; the batch then fails and is rolled back. */
	if (sig_stop_requested() && !pl->cancelled)
	{
		PGcancel *c = PQgetCancel(pl->conn);
		char msg[256];

		if (c != NULL)
		{
			PQcancel(c, msg, sizeof(msg));
			PQfreeCancel(c);
		}
		pl->cancelled = true;
	}
	return true;
}

/*
 * Collect results until at most 'upto' remain in flight; block only when
 * 'block'. Every result is checked the moment it is read.
 */
static bool
drain(struct pipeline *pl, size_t upto, bool block, struct apply_err *err)
{
	bool asked = false;

	for (;;)
	{
		if (!PQconsumeInput(pl->conn))
			return lost(pl, err);
		while (pl->npend > 0 && !PQisBusy(pl->conn))
		{
			struct pending *p = &pl->ring[pl->head];
			PGresult *res = PQgetResult(pl->conn);

			if (res == NULL)
			{
				if (!pl->got_current)
				{
					apply_err_set(err, EXIT_RUNTIME, "unexpected end of results from the target");
					return false;
				}
			}
			else if (PQresultStatus(res) == PGRES_PIPELINE_SYNC)
			{
				PQclear(res);
				if (p->kind != PK_SYNC)
				{
					apply_err_set(err, EXIT_RUNTIME, "unexpected pipeline synchronisation from the target");
					return false;
				}
			}
			else
			{
				bool ok = pl->got_current ? false : handle(pl, p, res, err);

				if (pl->got_current)
					apply_err_set(err, EXIT_RUNTIME, "unexpected extra result from the target");
				PQclear(res);
				if (!ok)
					return false;
				pl->got_current = true;
				continue;
			}
			pl->got_current = false;
			pl->head = (pl->head + 1) % RING_SIZE;
			pl->npend--;
		}
		if (pl->npend <= upto || !block)
			return true;
		/* The server holds results back until a Sync or a flush request. */
		if (!pl->synced && !asked)
		{
			if (!PQsendFlushRequest(pl->conn))
				return lost(pl, err);
			asked = true;
		}
		if (PQflush(pl->conn) != 0)
			return lost(pl, err);
		if (!wait_target(pl, err))
			return false;
	}
}

void
pipeline_set_txn(struct pipeline *pl, struct apply_txn txn)
{
	pl->txn = txn;
}

struct apply_txn
pipeline_txn(const struct pipeline *pl)
{
	return pl->txn;
}

static bool
push(struct pipeline *pl, const struct pending *p, struct apply_err *err)
{
	struct pending *slot = &pl->ring[(pl->head + pl->npend) % RING_SIZE];

	*slot = *p;
	slot->txn = pl->txn;
	pl->npend++;
	pl->synced = p->kind == PK_SYNC;
	if (++pl->since_consume >= CONSUME_EVERY)
	{
		pl->since_consume = 0;
		return drain(pl, SIZE_MAX, false, err);
	}
	return true;
}

/* Room for n more pending results. */
static bool
room(struct pipeline *pl, size_t n, struct apply_err *err)
{
	if (pl->npend + n <= RING_SIZE)
		return true;
	return drain(pl, RING_SIZE / 2, true, err);
}

bool
pipeline_wait(struct pipeline *pl, struct apply_err *err)
{
	return pl->npend == 0 || drain(pl, 0, true, err);
}

bool
pipeline_sql(struct pipeline *pl, const char *sql, const struct pending *p, struct apply_err *err)
{
	return pipeline_sql_params(pl, sql, 0, NULL, p, err);
}

bool
pipeline_sql_params(struct pipeline *pl, const char *sql, int nparams, const char *const *params,
					const struct pending *p, struct apply_err *err)
{
	if (!room(pl, 1, err))
		return false;
	if (!PQsendQueryParams(pl->conn, sql, nparams, NULL, params, NULL, NULL, 0))
		return lost(pl, err);
	return push(pl, p, err);
}

static bool
simple(struct pipeline *pl, const char *sql, enum pend_kind kind, struct apply_err *err)
{
	struct pending p = {.kind = kind};

	return pipeline_sql(pl, sql, &p, err);
}

bool
pipeline_prepared(struct pipeline *pl, const char *name, int nparams, const char *const *params,
				  const struct pending *p, struct apply_err *err)
{
	if (!room(pl, 1, err))
		return false;
	if (!PQsendQueryPrepared(pl->conn, name, nparams, params, NULL, NULL, 0))
		return lost(pl, err);
	return push(pl, p, err);
}

/* Every result in and checked. */
static bool
sync_all(struct pipeline *pl, struct apply_err *err)
{
	struct pending p = {.kind = PK_SYNC};

	if (!room(pl, 1, err))
		return false;
	if (!PQpipelineSync(pl->conn))
		return lost(pl, err);
	return push(pl, &p, err) && drain(pl, 0, true, err);
}

/* --- the transaction --------------------------------------------------- */

bool
pipeline_begin(struct pipeline *pl, struct apply_err *err)
{
	if (pl->txn_open)
		return true;
	pl->txn_open = true;
	return simple(pl, "BEGIN", PK_BEGIN, err);
}

bool
pipeline_commit(struct pipeline *pl, struct apply_err *err)
{
	/* Every result must be in and checked before COMMIT is even sent. */
	if (!sync_all(pl, err) || !simple(pl, "COMMIT", PK_COMMIT, err) || !sync_all(pl, err))
		return false;
	pl->txn_open = false;
	return true;
}

bool
pipeline_rollback(struct pipeline *pl, struct apply_err *err)
{
	if (!pl->txn_open)
		return true;
	if (!sync_all(pl, err) || !simple(pl, "ROLLBACK", PK_ROLLBACK, err) || !sync_all(pl, err))
		return false;
	pl->txn_open = false;
	return true;
}

/* --- statements -------------------------------------------------------- */

void
pipeline_params_reset(struct pipeline *pl)
{
	buf_reset(&pl->vals);
}

bool
pipeline_param(struct pipeline *pl, size_t i, const struct field *f)
{
	bool isnull;
	size_t start = pl->vals.len;

	if (field_is_null(f->p, f->n))
	{
		pl->offs[i] = SIZE_MAX;
		return true;
	}
	if (memchr(f->p, '\\', f->n) == NULL)
		buf_append(&pl->vals, f->p, f->n);
	else if (!copy_unescape(f->p, f->n, &pl->vals, &isnull))
		return false;
	buf_putc(&pl->vals, '\0');
	pl->offs[i] = start;
	return true;
}

bool
pipeline_bad_value(const struct rc_rel *rel, const char *op, struct apply_err *err)
{
	apply_err_set(err, EXIT_UNSUPPORTED, "cannot apply %s to %s: malformed value", op, rel->display);
	return false;
}

/* Point the statement's parameters at values [base, base + n). */
static void
fix_params(struct pipeline *pl, size_t base, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pl->params[i] = pl->offs[base + i] == SIZE_MAX ? NULL : pl->vals.data + pl->offs[base + i];
}

/*
 * Deallocate the statements the cache retired (their table was redefined,
 * or too many were prepared): their names are never used again, and a long
 * run through many redefinitions or tables would otherwise pile them up in
 * the target session. Not transactional, so a rollback of the batch does
 * not bring them back.
 */
static bool
deallocate_retired(struct pipeline *pl, struct apply_err *err)
{
	char name[sizeof(((struct rc_stmt *) 0)->name)], sql[64 + sizeof(name)];
	struct pending p = {.kind = PK_DEALLOCATE};

	while (relcache_retired(pl->rc, name, sizeof(name)))
	{
		log_debug("deallocating %s", name);
		snprintf(sql, sizeof(sql), "DEALLOCATE %s", name);
		if (!pipeline_sql(pl, sql, &p, err))
			return false;
	}
	return true;
}

bool
pipeline_stmt(struct pipeline *pl, struct rc_rel *rel, const char *sig, size_t siglen,
			  const struct pending *p, size_t base, int nparams, struct apply_err *err)
{
	bool created;
	struct rc_stmt *s;

	/* What the cache retired, also for this one, goes before it is prepared. */
	s = relcache_stmt(pl->rc, rel, sig, siglen, &pl->sql, &created);
	if (!deallocate_retired(pl, err))
		return false;
	fix_params(pl, base, (size_t) nparams);
	if (!room(pl, 2, err))
		return false;
	if (s == NULL)
	{
		relcache_sql(rel, sig, &pl->sql);
		if (!PQsendQueryParams(pl->conn, buf_cstr(&pl->sql), nparams, NULL, pl->params, NULL, NULL, 0))
			return lost(pl, err);
		return push(pl, p, err);
	}
	if (created)
	{
		struct pending pp = {.kind = PK_PREPARE, .rel = rel, .op = p->op};

		log_debug("prepared %s for %s: %s", s->name, rel->display, buf_cstr(&pl->sql));
		if (!PQsendPrepare(pl->conn, s->name, buf_cstr(&pl->sql), s->nparams, NULL))
			return lost(pl, err);
		if (!push(pl, &pp, err))
			return false;
	}
	if (!PQsendQueryPrepared(pl->conn, s->name, nparams, pl->params, NULL, NULL, 0))
		return lost(pl, err);
	return push(pl, p, err);
}

/* --- COPY -------------------------------------------------------------- */

bool
pipeline_copy_start(struct pipeline *pl, const char *sql, const struct pending *p,
					struct apply_err *err)
{
	PGresult *res;

	/* COPY is not allowed in pipeline mode: empty the pipeline first. */
	if (!sync_all(pl, err))
		return false;
	if (!PQexitPipelineMode(pl->conn))
		return lost(pl, err);
	res = PQexec(pl->conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		applyerr_result(p, res, pl->conn, err);
		PQclear(res);
		return false;
	}
	PQclear(res);
	pl->in_copy = true;
	return true;
}

bool
pipeline_copy_data(struct pipeline *pl, const char *data, size_t len, struct apply_err *err)
{
	if (len > 0 && PQputCopyData(pl->conn, data, (int) len) != 1)
		return lost(pl, err);
	return true;
}

bool
pipeline_copy_end(struct pipeline *pl, const char *abort_msg, const struct pending *p,
				  struct apply_err *err)
{
	PGresult *res;
	bool ok = true;

	if (PQputCopyEnd(pl->conn, abort_msg) != 1)
		return lost(pl, err);
	pl->in_copy = false;
	while ((res = PQgetResult(pl->conn)) != NULL)
	{
		if (ok && abort_msg == NULL && PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			applyerr_result(p, res, pl->conn, err);
			ok = false;
		}
		PQclear(res);
	}
	if (!ok)
		return false;
	if (PQstatus(pl->conn) != CONNECTION_OK)
		return lost(pl, err);
	if (!PQenterPipelineMode(pl->conn))
		return lost(pl, err);
	pl->synced = true;
	return true;
}

void
pipeline_abandon(struct pipeline *pl, const char *why)
{
	if (PQstatus(pl->conn) != CONNECTION_OK)
		return;
	if (pl->in_copy)
	{
		pl->in_copy = false;
		(void) PQputCopyEnd(pl->conn, why);
		(void) PQflush(pl->conn);
		return;					/* the COPY's error aborts the transaction */
	}
	if (!pl->txn_open || PQpipelineStatus(pl->conn) == PQ_PIPELINE_OFF)
		return;
	/* A Sync first: after an error the server skips everything up to one. */
	if (PQpipelineSync(pl->conn) && PQsendQueryParams(pl->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0))
		(void) PQpipelineSync(pl->conn);
	(void) PQflush(pl->conn);
	pl->txn_open = false;
}
