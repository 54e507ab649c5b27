#include "applier_int.h"
#include "applyerr.h"
#include "buf.h"
#include "coalesce.h"
#include "common.h"
#include "conn.h"
#include "escape.h"
#include "log.h"
#include "session.h"
#include "sig.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


bool
applier_wants_commit(const struct applier *a)
{
	return a->hot_row;
}

static void
hot_reset(struct applier *a)
{
	memset(a->hot, 0, sizeof(a->hot));
	a->hot_row = false;
}

/* Count one more change of the row that the WHERE values of sig identify. */
static void
hot_count(struct applier *a, const struct rc_rel *rel, const struct field *where)
{
	uint64_t h = 1469598103934665603ULL ^ (uintptr_t) rel;
	size_t slot;

	for (int i = 0; i < rel->ncols; i++)
		if (a->sig.data[3 + 2 * i] == 'v')
		{
			for (size_t k = 0; k < where[i].n; k++)
				h = (h ^ (unsigned char) where[i].p[k]) * 1099511628211ULL;
			h = (h ^ 0xff) * 1099511628211ULL;
		}
	slot = h % HOT_SLOTS;
	if (a->hot[slot].hash != h)
	{
		a->hot[slot].hash = h;
		a->hot[slot].count = 0;
	}
	if (++a->hot[slot].count >= HOT_ROW_LIMIT)
		a->hot_row = true;
}

bool
applier_txn_open(const struct applier *a)
{
	return a->txn_open || coalesce_rows(a->held) > 0;
}

uint64_t
applier_rows(const struct applier *a)
{
	return a->rows;
}

/* --- results ----------------------------------------------------------- */

static bool
lost(struct applier *a, struct apply_err *err)
{
	apply_err_set(err, EXIT_RUNTIME, "lost the target connection: %s",
				  applyerr_conn_msg(a->conn));
	err->retry = true;
	return false;
}

static bool
handle(struct applier *a, struct pending *p, PGresult *res, struct apply_err *err)
{
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
	{
		applyerr_result(p, res, a->conn, err);
		if (a->cancelled)
			apply_err_set(err, EXIT_DONE, "stopped by signal while the target was busy: the open batch is rolled back");
		return false;
	}
	return applyerr_check_count(p, res, err);
}

/*
 * Collect results until at most 'upto' remain in flight; block only when
 * 'block'. Every result is checked the moment it is read.
 */
static bool
drain(struct applier *a, size_t upto, bool block, struct apply_err *err)
{
	bool asked = false;

	for (;;)
	{
		if (!PQconsumeInput(a->conn))
			return lost(a, err);
		while (a->npend > 0 && !PQisBusy(a->conn))
		{
			struct pending *p = &a->ring[a->head];
			PGresult *res = PQgetResult(a->conn);

			if (res == NULL)
			{
				if (!a->got_current)
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
				bool ok = a->got_current ? false : handle(a, p, res, err);

				if (a->got_current)
					apply_err_set(err, EXIT_RUNTIME, "unexpected extra result from the target");
				PQclear(res);
				if (!ok)
					return false;
				a->got_current = true;
				continue;
			}
			a->got_current = false;
			a->head = (a->head + 1) % RING_SIZE;
			a->npend--;
		}
		if (a->npend <= upto || !block)
			return true;
		/* The server holds results back until a Sync or a flush request. */
		if (!a->synced && !asked)
		{
			if (!PQsendFlushRequest(a->conn))
				return lost(a, err);
			asked = true;
		}
		if (PQflush(a->conn) != 0)
			return lost(a, err);
		struct pollfd pfd[3] = {{PQsocket(a->conn), POLLIN, 0}, {sig_fd(), POLLIN, 0},
								{a->side_fd ? a->side_fd() : -1, POLLIN, 0}};

		/* Negative descriptors are ignored by poll(). */
		if (poll(pfd, 3, -1) < 0 && errno != EINTR)
			return lost(a, err);
		if (pfd[2].fd >= 0 && pfd[2].revents)
			a->side_read();
		/* A statement waiting on a lock must not hold a stop request off:
		 * cancel it; the batch then fails and is rolled back. */
		if (sig_stop_requested() && !a->cancelled)
		{
			PGcancel *c = PQgetCancel(a->conn);
			char msg[256];

			if (c != NULL)
			{
				PQcancel(c, msg, sizeof(msg));
				PQfreeCancel(c);
			}
			a->cancelled = true;
		}
	}
}

static bool
push(struct applier *a, const struct pending *p, struct apply_err *err)
{
	a->ring[(a->head + a->npend) % RING_SIZE] = *p;
	a->npend++;
	a->synced = p->kind == PK_SYNC;
	if (++a->since_consume >= CONSUME_EVERY)
	{
		a->since_consume = 0;
		return drain(a, SIZE_MAX, false, err);
	}
	return true;
}

/* Room for n more pending results. */
static bool
room(struct applier *a, size_t n, struct apply_err *err)
{
	if (a->npend + n <= RING_SIZE)
		return true;
	return drain(a, RING_SIZE / 2, true, err);
}

static bool
send_simple(struct applier *a, const char *sql, enum pend_kind kind, struct apply_err *err)
{
	struct pending p = {.kind = kind};

	if (!room(a, 1, err))
		return false;
	if (!PQsendQueryParams(a->conn, sql, 0, NULL, NULL, NULL, NULL, 0))
		return lost(a, err);
	return push(a, &p, err);
}

static bool
sync_all(struct applier *a, struct apply_err *err)
{
	struct pending p = {.kind = PK_SYNC};

	if (!room(a, 1, err))
		return false;
	if (!PQpipelineSync(a->conn))
		return lost(a, err);
	return push(a, &p, err) && drain(a, 0, true, err);
}

bool
ap_ensure_txn(struct applier *a, struct apply_err *err)
{
	if (a->txn_open)
		return true;
	a->txn_open = true;
	return send_simple(a, "BEGIN", PK_BEGIN, err);
}

/* --- statements -------------------------------------------------------- */

/* Append the decoded value of f as a parameter (NULL for \N). */
bool
ap_add_param(struct applier *a, size_t i, const struct field *f)
{
	bool isnull;
	size_t start = a->vals.len;

	if (field_is_null(f->p, f->n))
	{
		a->offs[i] = SIZE_MAX;
		return true;
	}
	if (memchr(f->p, '\\', f->n) == NULL)
		buf_append(&a->vals, f->p, f->n);
	else if (!copy_unescape(f->p, f->n, &a->vals, &isnull))
		return false;
	buf_putc(&a->vals, '\0');
	a->offs[i] = start;
	return true;
}

/* Point the statement's parameters at values [base, base + n) of a->vals. */
static void
fix_params(struct applier *a, size_t base, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a->params[i] = a->offs[base + i] == SIZE_MAX ? NULL : a->vals.data + a->offs[base + i];
}

/* Send the statement of a->sig with the values from base on. */
bool
ap_send_stmt_at(struct applier *a, struct rc_rel *rel, struct pending *p, size_t base, int nparams,
			 struct apply_err *err)
{
	bool created;
	struct rc_stmt *s = relcache_stmt(a->rc, rel, a->sig.data, a->sig.len, &a->sql, &created);

	fix_params(a, base, (size_t) nparams);
	if (!room(a, 2, err))
		return false;
	if (s == NULL)
	{
		relcache_sql(rel, a->sig.data, &a->sql);
		if (!PQsendQueryParams(a->conn, buf_cstr(&a->sql), nparams, NULL, a->params, NULL, NULL, 0))
			return lost(a, err);
		return push(a, p, err);
	}
	if (created)
	{
		struct pending pp = {.kind = PK_PREPARE, .rel = rel, .op = p->op};

		log_debug("prepared %s for %s: %s", s->name, rel->display, buf_cstr(&a->sql));
		if (!PQsendPrepare(a->conn, s->name, buf_cstr(&a->sql), s->nparams, NULL))
			return lost(a, err);
		if (!push(a, &pp, err))
			return false;
	}
	if (!PQsendQueryPrepared(a->conn, s->name, nparams, a->params, NULL, NULL, 0))
		return lost(a, err);
	return push(a, p, err);
}

static bool
send_stmt(struct applier *a, struct rc_rel *rel, struct pending *p, int nparams,
		  struct apply_err *err)
{
	return ap_send_stmt_at(a, rel, p, 0, nparams, err);
}

bool
ap_bad_value(struct applier *a, struct rc_rel *rel, const char *op, struct apply_err *err)
{
	apply_err_set(err, EXIT_UNSUPPORTED, "cannot apply %s to %s: malformed value", op, rel->display);
	return false;
}

/* An INSERT from the stream's values (fields of one COPY row). */
static bool
insert_row(struct applier *a, struct rc_rel *rel, const struct field *v, uint64_t xid,
		   lsn_t commit_lsn, struct apply_err *err)
{
	struct pending p = {.kind = PK_CHANGE, .op = 'I', .rel = rel, .xid = xid, .commit_lsn = commit_lsn};

	buf_reset(&a->sig);
	buf_putc(&a->sig, 'I');
	buf_putc(&a->sig, '-');
	buf_reset(&a->vals);
	for (int i = 0; i < rel->ncols; i++)
	{
		buf_putc(&a->sig, 's');
		buf_putc(&a->sig, '-');
		if (!ap_add_param(a, (size_t) i, &v[i]))
			return ap_bad_value(a, rel, "insert", err);
	}
	return send_stmt(a, rel, &p, rel->ncols, err);
}

bool
ap_update_delete(struct applier *a, struct rc_rel *rel, const struct sr_record *rec,
			  uint64_t xid, lsn_t commit_lsn, struct apply_err *err)
{
	bool upd = rec->type == SR_UPDATE;
	char kind = rec->kind;
	const struct field *where = kind == 'N' ? rec->newv : rec->oldv;
	struct pending p = {.kind = PK_CHANGE, .op = upd ? 'U' : 'D', .kind2 = kind,
						.rel = rel, .xid = xid, .commit_lsn = commit_lsn};
	int nset = 0, nwhere = 0, n = 0;

	buf_reset(&a->sig);
	buf_putc(&a->sig, p.op);
	buf_putc(&a->sig, kind);
	for (int i = 0; i < rel->ncols; i++)
	{
		bool inwhere = kind == 'O' || rel->cols[i].key;
		char s = '-', w = '-';

		if (upd && !field_is_unchanged(rec->newv[i].p, rec->newv[i].n) &&
			!(kind == 'N' && rel->cols[i].key))
			s = 's';
		if (inwhere)
			w = field_is_null(where[i].p, where[i].n) ? 'n' : 'v';
		nset += s == 's';
		nwhere += w != '-';
		buf_putc(&a->sig, s);
		buf_putc(&a->sig, w);
	}
	if (nwhere == 0)
	{
		apply_err_set(err, EXIT_UNSUPPORTED,
					  "cannot apply %s to %s: the stream names no key columns (replica identity nothing?)",
					  upd ? "update" : "delete", rel->display);
		return false;
	}
	/* Only key columns and unchanged values: set the key to itself so the
	 * statement still proves the row exists. */
	if (upd && nset == 0)
		for (int i = 0; i < rel->ncols; i++)
			if (a->sig.data[3 + 2 * i] != '-')
				a->sig.data[2 + 2 * i] = 's';

	hot_count(a, rel, where);
	buf_reset(&a->vals);
	for (int i = 0; i < rel->ncols; i++)
		if (a->sig.data[2 + 2 * i] == 's' && !ap_add_param(a, (size_t) n++, upd ? &rec->newv[i] : &where[i]))
			return ap_bad_value(a, rel, upd ? "update" : "delete", err);
	for (int i = 0; i < rel->ncols; i++)
		if (a->sig.data[3 + 2 * i] == 'v' && !ap_add_param(a, (size_t) n++, &where[i]))
			return ap_bad_value(a, rel, upd ? "update" : "delete", err);
	return send_stmt(a, rel, &p, n, err);
}

/* --- insert runs and COPY ---------------------------------------------- */

static bool
copy_start(struct applier *a, struct apply_err *err)
{
	struct rc_rel *rel = a->run_rel;
	PGresult *res;

	/* COPY is not allowed in pipeline mode: empty the pipeline first. */
	if (!sync_all(a, err))
		return false;
	if (!PQexitPipelineMode(a->conn))
		return lost(a, err);
	buf_reset(&a->sql);
	buf_printf(&a->sql, "COPY %s (", rel->qname);
	for (int i = 0; i < rel->ncols; i++)
		buf_printf(&a->sql, "%s%s", i ? ", " : "", rel->cols[i].qname);
	buf_puts(&a->sql, ") FROM STDIN");
	res = PQexec(a->conn, buf_cstr(&a->sql));
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		struct pending p = {.kind = PK_COPY, .op = 'I', .rel = rel, .xid = a->run_xid,
							.commit_lsn = a->run_commit};

		applyerr_result(&p, res, a->conn, err);
		PQclear(res);
		return false;
	}
	PQclear(res);
	a->in_copy = true;
	log_debug("copying a run of inserts into %s", rel->display);
	return true;
}

static bool
copy_put(struct applier *a, struct apply_err *err)
{
	if (a->run_buf.len > 0 && PQputCopyData(a->conn, a->run_buf.data, (int) a->run_buf.len) != 1)
		return lost(a, err);
	buf_reset(&a->run_buf);
	return true;
}

static bool
copy_end(struct applier *a, const char *abort_msg, struct apply_err *err)
{
	struct pending p = {.kind = PK_COPY, .op = 'I', .rel = a->run_rel, .xid = a->run_xid,
						.commit_lsn = a->run_commit};
	PGresult *res;
	bool ok = true;

	if (abort_msg == NULL && !copy_put(a, err))
		return false;
	if (PQputCopyEnd(a->conn, abort_msg) != 1)
		return lost(a, err);
	a->in_copy = false;
	while ((res = PQgetResult(a->conn)) != NULL)
	{
		if (ok && abort_msg == NULL && PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			applyerr_result(&p, res, a->conn, err);
			ok = false;
		}
		PQclear(res);
	}
	if (!ok)
		return false;
	if (PQstatus(a->conn) != CONNECTION_OK)
		return lost(a, err);
	if (!PQenterPipelineMode(a->conn))
		return lost(a, err);
	a->synced = true;
	return true;
}

/* Send what the run buffered as single-row statements. */
static bool
run_as_statements(struct applier *a, struct apply_err *err)
{
	struct rc_rel *rel = a->run_rel;
	struct field *f = xmalloc(sizeof(*f) * ((size_t) rel->ncols + 1));
	const char *p = a->run_buf.data, *end = p + a->run_buf.len;
	bool ok = true;

	while (ok && p < end)
	{
		const char *nl = memchr(p, '\n', (size_t) (end - p));

		rec_split(p, (size_t) (nl - p), f, (size_t) rel->ncols);
		ok = insert_row(a, rel, f, a->run_xid, a->run_commit, err);
		p = nl + 1;
	}
	free(f);
	buf_reset(&a->run_buf);
	return ok;
}

bool
ap_end_run(struct applier *a, struct apply_err *err)
{
	bool ok;

	if (a->run_rel == NULL)
		return true;
	ok = a->in_copy ? copy_end(a, NULL, err) : run_as_statements(a, err);
	a->run_rel = NULL;
	a->run_rows = 0;
	return ok;
}

static bool
run_add(struct applier *a, const struct sr_record *rec, struct apply_err *err)
{
	buf_append(&a->run_buf, rec->copy_row, rec->copy_len);
	buf_putc(&a->run_buf, '\n');
	a->run_rows++;
	if (a->in_copy)
		return a->run_buf.len < COPY_CHUNK || copy_put(a, err);
	if (a->run_rows >= (size_t) a->copy_threshold || a->run_buf.len >= RUN_BYTES_MAX)
		return copy_start(a, err) && copy_put(a, err);
	return true;
}

/* --- public ------------------------------------------------------------ */

static struct rc_rel *
resolve(struct applier *a, struct sr_rel *srel, struct apply_err *err)
{
	struct rc_rel *r = srel->user;
	bool dropped;

	if (r != NULL && r->gen == srel->gen)
		return r;
	/* Buffered and held rows are in the old layout: send them first. */
	if (r != NULL && (!ap_end_run(a, err) || !held_send(a, err)))
		return NULL;
	/* Pending results may point at statements about to be replaced. */
	if (a->npend > 0 && !drain(a, 0, true, err))
		return NULL;
	return relcache_get(a->rc, a->meta, srel, &dropped, err);
}

static bool
truncate_rels(struct applier *a, const struct sr_record *rec, uint64_t xid, lsn_t commit_lsn,
			  struct apply_err *err)
{
	struct pending p = {.kind = PK_TRUNCATE, .op = 'T', .xid = xid, .commit_lsn = commit_lsn};

	/* Resolving and sending what waits both use a->sql: first, then build. */
	for (size_t i = 0; i < rec->ntrunc; i++)
		if (resolve(a, rec->trunc_rels[i], err) == NULL)
			return false;
	if (!ap_end_run(a, err) || !held_send(a, err) || !ap_ensure_txn(a, err) || !room(a, 1, err))
		return false;
	buf_reset(&a->sql);
	buf_puts(&a->sql, "TRUNCATE ");
	for (size_t i = 0; i < rec->ntrunc; i++)
	{
		struct rc_rel *r = rec->trunc_rels[i]->user;

		if (i == 0)
			p.rel = r;
		buf_printf(&a->sql, "%s%s", i ? ", " : "", r->qname);
	}
	if (rec->trunc_flags & SR_TRUNC_RESTART)
		buf_puts(&a->sql, " RESTART IDENTITY");
	if (rec->trunc_flags & SR_TRUNC_CASCADE)
		buf_puts(&a->sql, " CASCADE");
	if (!PQsendQueryParams(a->conn, buf_cstr(&a->sql), 0, NULL, NULL, NULL, NULL, 0))
		return lost(a, err);
	return push(a, &p, err);
}

static bool
insert(struct applier *a, struct rc_rel *rel, const struct sr_record *rec, uint64_t xid,
	   lsn_t commit_lsn, struct apply_err *err)
{
	/* A held row whose key comes back was deleted in between: in order. */
	if (rel->held > 0 && coalesce_has(a->held, rel, rel->ncols, rel->keymask, rec->newv) &&
		!held_send(a, err))
		return false;
	if (a->run_rel == rel && a->run_gen == rel->gen)
		return run_add(a, rec, err);
	if (!ap_end_run(a, err) || !ap_ensure_txn(a, err))
		return false;
	if (a->copy_threshold > 0 && rel->ncols > 0)
	{
		a->run_rel = rel;
		a->run_gen = rel->gen;
		a->run_xid = xid;
		a->run_commit = commit_lsn;
		a->run_rows = 0;
		buf_reset(&a->run_buf);
		return run_add(a, rec, err);
	}
	return insert_row(a, rel, rec->newv, xid, commit_lsn, err);
}

bool
applier_change(struct applier *a, const struct sr_record *rec, uint64_t xid,
			   lsn_t commit_lsn, struct apply_err *err)
{
	struct rc_rel *rel;
	bool in_order;

	a->rows++;
	if (rec->type == SR_TRUNCATE)
		return truncate_rels(a, rec, xid, commit_lsn, err);
	if ((rel = resolve(a, rec->rel, err)) == NULL)
		return false;
	if (rec->type == SR_INSERT)
		return insert(a, rel, rec, xid, commit_lsn, err);
	if (held_mergeable(a, rel, rec))
	{
		if (held_put(a, rel, rec, xid, commit_lsn))
			return true;
		/* Full: send what is held and hold this one; too big alone: send. */
		if (!held_send(a, err))
			return false;
		if (held_put(a, rel, rec, xid, commit_lsn))
			return true;
	}
	/*
	 * Sent now, so held rows of the table go first if this could touch one
	 * of them: a delete of another key commutes with them, anything else is
	 * kept in order.
	 */
	in_order = rel->held == 0 ||
		(rec->type == SR_DELETE && rec->kind == 'K' &&
		 !coalesce_has(a->held, rel, rel->ncols, rel->keymask, rec->oldv));
	if (!ap_end_run(a, err) || (!in_order && !held_send(a, err)) || !ap_ensure_txn(a, err))
		return false;
	return ap_update_delete(a, rel, rec, xid, commit_lsn, err);
}

bool
applier_commit(struct applier *a, lsn_t applied, const char *commit_time, struct apply_err *err)
{
	char l[LSN_BUFSZ];
	const char *params[3] = {a->job, lsn_format(applied, l), commit_time};
	struct pending p = {.kind = PK_PROGRESS};

	if (!ap_end_run(a, err) || !held_send(a, err) || !ap_ensure_txn(a, err) || !room(a, 1, err))
		return false;
	if (!PQsendQueryPrepared(a->conn, PROGRESS_STMT, 3, params, NULL, NULL, 0))
		return lost(a, err);
	/* Every result must be in and checked before COMMIT is even sent. */
	if (!push(a, &p, err) || !sync_all(a, err))
		return false;
	if (!send_simple(a, "COMMIT", PK_COMMIT, err) || !sync_all(a, err))
		return false;
	a->txn_open = false;
	hot_reset(a);
	return true;
}

bool
applier_rollback(struct applier *a, struct apply_err *err)
{
	held_drop(a);
	if (a->in_copy && !copy_end(a, "batch abandoned", err))
		return false;
	a->run_rel = NULL;
	a->run_rows = 0;
	buf_reset(&a->run_buf);
	if (!a->txn_open)
		return true;
	if (!sync_all(a, err) || !send_simple(a, "ROLLBACK", PK_ROLLBACK, err) || !sync_all(a, err))
		return false;
	a->txn_open = false;
	hot_reset(a);
	return true;
}

static bool
setup_cmd(PGconn *conn, const char *sql, struct apply_err *err)
{
	struct pgerr pe;

	if (conn_command(conn, sql, 0, NULL, &pe))
		return true;
	apply_err_set(err, pe.retryable ? EXIT_RUNTIME : EXIT_PREFLIGHT, "cannot set up the apply session: %s%s%s%s",
				  pe.msg, pe.sqlstate[0] ? " (SQLSTATE " : "", pe.sqlstate, pe.sqlstate[0] ? ")" : "");
	return false;
}

struct applier *
applier_new(PGconn *conn, PGconn *meta, struct relcache *rc, const struct applier_opts *opts,
			bool *replica_role, struct apply_err *err)
{
	struct applier *a;
	struct pgerr pe;
	PGresult *res;

	/* As the built-in apply worker: names resolve only when qualified. */
	if (!setup_cmd(conn, "SET search_path = ''", err) ||
		!setup_cmd(conn, "SET synchronous_commit = on", err))
		return NULL;
	*replica_role = session_replica_role(conn, &pe);
	if (!*replica_role && strcmp(pe.sqlstate, "42501") != 0)
	{
		apply_err_set(err, EXIT_RUNTIME, "cannot set session_replication_role: %s", pe.msg);
		return NULL;
	}
	res = PQprepare(conn, PROGRESS_STMT,
					"UPDATE pgsync.job SET applied_lsn = $2::pg_catalog.pg_lsn,"
					" applied_commit_time = coalesce($3::pg_catalog.timestamptz, applied_commit_time),"
					" updated_at = pg_catalog.now() WHERE job = $1",
					3, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pgerr_set(&pe, conn, res);
		PQclear(res);
		apply_err_set(err, EXIT_RUNTIME, "cannot prepare the progress update: %s", pe.msg);
		return NULL;
	}
	PQclear(res);
	if (!PQenterPipelineMode(conn))
	{
		apply_err_set(err, EXIT_RUNTIME, "cannot enter pipeline mode: %s", applyerr_conn_msg(conn));
		return NULL;
	}
	a = xcalloc(1, sizeof(*a));
	a->conn = conn;
	a->meta = meta;
	a->rc = rc;
	a->job = opts->job;
	a->copy_threshold = opts->copy_threshold;
	a->synced = true;
	a->replica_role = *replica_role;
	a->merge = opts->merge_updates;
	a->side_fd = opts->side_fd;
	a->side_read = opts->side_read;
	a->held = coalesce_new(opts->held_bytes, HELD_ROWS);
	a->offs = xmalloc(sizeof(*a->offs) * 2 * SR_MAX_COLS);
	a->params = xmalloc(sizeof(*a->params) * 2 * SR_MAX_COLS);
	return a;
}

void
applier_set_meta(struct applier *a, PGconn *meta)
{
	a->meta = meta;
}

void
applier_free(struct applier *a)
{
	if (a == NULL)
		return;
	coalesce_free(a->held);
	buf_free(&a->run_buf);
	buf_free(&a->sig);
	buf_free(&a->vals);
	buf_free(&a->sql);
	buf_free(&a->run_sig);
	buf_free(&a->row_sig);
	free(a->offs);
	free(a->params);
	free(a);
}
