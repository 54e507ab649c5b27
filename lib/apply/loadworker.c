/*
 * The target side of loading a snapshot section: a pool of worker threads,
 * each with its own target connection, loading whole frames (one transaction
 * each) from a bounded queue of chunks, and the pgsync.table_sync rows.
 *
 * A table is marked done when its TABLEDONE was read and every one of its
 * frames committed: whichever of the reader (at TABLEDONE, through
 * loader_table_done()) and the worker (at the last commit) sees both first
 * claims it, under the lock. The fields of that protocol are touched here
 * only. A worker
 * that sees TABLEDONE before committing the last frame marks the table done
 * in that frame's own transaction.
 * Loader sessions commit with synchronous_commit off: once every frame
 * committed, snapload makes one synchronous commit, which flushes the
 * WAL of them all before the caller records the position.
 */
#include "loadworker.h"
#include "common.h"
#include "log.h"
#include "session.h"
#include "sig.h"
#include "timedwait.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
fail_locked(struct loader *L, int code, const char *fmt, va_list ap)
{
	if (!L->failed)
	{
		vsnprintf(L->err_msg, sizeof(L->err_msg), fmt, ap);
		L->err_code = code;
		L->failed = true;
	}
	pthread_cond_broadcast(&L->cv_space);
	pthread_cond_broadcast(&L->cv_work);
}

void
loader_fail(struct loader *L, int code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&L->mu);
	va_start(ap, fmt);
	fail_locked(L, code, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&L->mu);
}

static void
interrupted_locked(struct loader *L)
{
	if (!L->failed)
	{
		snprintf(L->err_msg, sizeof(L->err_msg), "%s: interrupted inside the snapshot section: the copy is incomplete",
				 L->input);
		L->err_code = EXIT_RUNTIME;
		L->failed = true;
	}
	pthread_cond_broadcast(&L->cv_space);
	pthread_cond_broadcast(&L->cv_work);
}

/*
 * The row of a COPY error ("COPY t, line 3, column ..."), 0 when none. Only
 * the COPY context line counts: an input function may add its own first,
 * such as "JSON data, line 1: ..." for a bad json value.
 */
static uint64_t
copy_error_row(const PGresult *res)
{
	const char *ctx = res ? PQresultErrorField(res, PG_DIAG_CONTEXT) : NULL;

	for (const char *p = ctx; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
	{
		const char *eol = strchr(p, '\n'), *l;

		if (strncmp(p, "COPY ", 5) != 0)
			continue;
		l = strstr(p, ", line ");
		if (l && (eol == NULL || l < eol))
			return strtoull(l + 7, NULL, 10);
	}
	return 0;
}

void
loader_fail_pg(struct loader *L, const struct ltable *t, uint64_t line, struct pgerr *err)
{
	char text[PGERR_TEXT_MAX];

	/* The same classification as a change's, and no row value in the line. */
	pgerr_redact(err);
	loader_fail(L, pgerr_exit(err), "%s:%llu: cannot load %s.%s: %s", L->input,
				(unsigned long long) line, t->schema, t->name, pgerr_text(err, NULL, text, sizeof(text)));
}

/* table_sync: 'copying' with counters reset (done = false), or 'done'. */
static bool
set_state(PGconn *conn, const struct loader *L, const struct ltable *t, bool done,
		  struct pgerr *err)
{
	char rows[24], bytes[24];
	const char *params[6] = {L->o->job, t->schema, t->name, L->chunks_lsn, rows, bytes};

	if (done && L->chunks_lsn && !t->st->keyed)
	{
		snprintf(rows, sizeof(rows), "%llu", (unsigned long long) t->st->rows);
		snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long) t->st->bytes);
		return conn_command(conn, "WITH d AS (UPDATE pgsync.table_sync SET state = 'done', finished_at = now()"
							" WHERE job = $1 AND schema_name = $2 AND table_name = $3 RETURNING job)"
							" INSERT INTO pgsync.table_chunk (job, schema_name, table_name, lsn, rows, bytes)"
							" SELECT job, $2, $3, $4::pg_catalog.pg_lsn, $5::int8, $6::int8 FROM d",
							6, params, err);
	}
	if (done)
		return conn_command(conn, "UPDATE pgsync.table_sync SET state = 'done', finished_at = now()"
							" WHERE job = $1 AND schema_name = $2 AND table_name = $3",
							3, params, err);
	if (L->chunks_lsn && t->st->keyed)
		return conn_command(conn, "INSERT INTO pgsync.table_sync AS s (job, schema_name, table_name,"
							" state, rows_copied, bytes_copied, started_at, finished_at)"
							" VALUES ($1, $2, $3, 'copying', 0, 0, now(), NULL)"
							" ON CONFLICT (job, schema_name, table_name) DO UPDATE SET state = 'copying',"
							" started_at = coalesce(s.started_at, now()), finished_at = NULL",
							3, params, err);
	return conn_command(conn, "INSERT INTO pgsync.table_sync AS s (job, schema_name, table_name,"
						" state, rows_copied, bytes_copied, started_at, finished_at)"
						" VALUES ($1, $2, $3, 'copying', 0, 0, now(), NULL)"
						" ON CONFLICT (job, schema_name, table_name) DO UPDATE SET state = 'copying',"
						" rows_copied = 0, bytes_copied = 0, started_at = now(), finished_at = NULL",
						3, params, err);
}

/*
 * Mark the table done unless someone did: for the worker whose commit came
 * after the reader's TABLEDONE, or the reader that read TABLEDONE after the
 * last commit.
 */
static bool
claim_done(struct loader *L, PGconn *conn, struct ltable *t, struct pgerr *err)
{
	if (!set_state(conn, L, t, true, err))
		return false;
	pthread_mutex_lock(&L->mu);
	L->ndone++;
	pthread_mutex_unlock(&L->mu);
	return true;
}

/* The chunk the frame is, in the frame's transaction: recorded exactly
 * when its rows are on the target. */
static bool
record_chunk(PGconn *conn, const struct loader *L, const struct ltable *t, const struct chunk *c,
			 struct pgerr *err)
{
	char rows[24], bytes[24];
	const char *params[9] = {L->o->job, t->schema, t->name, c->ck->cols, c->ck->lo, c->ck->hi,
		L->chunks_lsn, rows, bytes};

	snprintf(rows, sizeof(rows), "%llu", (unsigned long long) c->nrows);
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long) c->nbytes);
	return conn_command(conn, "INSERT INTO pgsync.table_chunk (job, schema_name, table_name, key_columns,"
						" lo, hi, lsn, rows, bytes) VALUES ($1, $2, $3, $4::text[], $5::text[], $6::text[],"
						" $7::pg_catalog.pg_lsn, $8::int8, $9::int8)",
						9, params, err);
}

/* A table copied in one piece is one chunk covering it all, recorded with
 * its done (the frame transaction that marks it done). */
static bool
record_whole(PGconn *conn, const struct loader *L, const struct ltable *t, struct pgerr *err)
{
	char rows[24], bytes[24];
	const char *params[6] = {L->o->job, t->schema, t->name, L->chunks_lsn, rows, bytes};

	snprintf(rows, sizeof(rows), "%llu", (unsigned long long) t->st->rows);
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long) t->st->bytes);
	return conn_command(conn, "INSERT INTO pgsync.table_chunk (job, schema_name, table_name, lsn, rows, bytes)"
						" VALUES ($1, $2, $3, $4::pg_catalog.pg_lsn, $5::int8, $6::int8)",
						6, params, err);
}

void
chunkrec_free(struct chunkrec *ck)
{
	if (ck == NULL)
		return;
	free(ck->cols);
	free(ck->lo);
	free(ck->hi);
	free(ck);
}

struct ltable *
loader_add_table(struct loader *L, const struct sr_table *st, uint64_t line)
{
	struct ltable *t = xcalloc(1, sizeof(*t));
	struct pgerr err;

	t->st = st;
	t->schema = st->schema;
	t->name = st->table;
	t->next = L->tables;
	L->tables = t;
	L->ntables++;
	if (!set_state(L->ctl, L, t, false, &err))
	{
		loader_fail_pg(L, t, line, &err);
		return NULL;
	}
	return t;
}

/* After TABLEDONE no frame of the table is started any more (the stream's
 * parser refuses one), so dispatched only grows before tabledone is set. */
struct lworker *
loader_frame_start(struct loader *L, struct ltable *t)
{
	struct lworker *w = loader_pick(L);

	pthread_mutex_lock(&L->mu);
	t->dispatched++;
	pthread_mutex_unlock(&L->mu);
	return w;
}

bool
loader_table_done(struct loader *L, struct ltable *t, uint64_t line)
{
	struct pgerr err;
	bool claim;

	pthread_mutex_lock(&L->mu);
	t->tabledone = true;
	claim = t->committed == t->dispatched && !t->claimed;
	if (claim)
		t->claimed = true;
	pthread_mutex_unlock(&L->mu);
	if (claim && !claim_done(L, L->ctl, t, &err))
	{
		loader_fail_pg(L, t, line, &err);
		return false;
	}
	return true;
}

int
loader_tables_done(struct loader *L)
{
	int n;

	pthread_mutex_lock(&L->mu);
	n = L->ndone;
	pthread_mutex_unlock(&L->mu);
	return n;
}

/*
 * One frame is in: commit it with its counters. When TABLEDONE was read
 * already and this is the table's last uncommitted frame, its transaction
 * also marks the table done: one transaction a table fewer (most tables of
 * a many-table copy are one frame), and done commits with the last rows.
 * If that commit fails the loader fails, and nothing else claims the table.
 */
static bool
commit_frame(struct lworker *w, struct chunk *c, struct pgerr *err, PGresult **failed_res)
{
	struct loader *L = w->L;
	struct ltable *t = c->t;
	PGresult *res;
	char rows[24], bytes[24];
	const char *params[6] = {L->o->job, t->schema, t->name, rows, bytes, NULL};
	bool last, claim;

	if (PQputCopyEnd(w->conn, NULL) != 1)
	{
		pgerr_set(err, w->conn, NULL);
		return false;
	}
	res = PQgetResult(w->conn);
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pgerr_set(err, w->conn, res);
		*failed_res = res;
		return false;
	}
	PQclear(res);
	while ((res = PQgetResult(w->conn)) != NULL)
		PQclear(res);
	/* After TABLEDONE no frame of the table is dispatched any more. */
	pthread_mutex_lock(&L->mu);
	last = t->tabledone && t->committed + 1 == t->dispatched && !t->claimed;
	if (last)
		t->claimed = true;
	pthread_mutex_unlock(&L->mu);
	snprintf(rows, sizeof(rows), "%llu", (unsigned long long) c->nrows);
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long) c->nbytes);
	params[5] = last ? "t" : "f";
	if (!conn_command(w->conn, "UPDATE pgsync.table_sync SET rows_copied = rows_copied + $4,"
					  " bytes_copied = bytes_copied + $5,"
					  " state = CASE WHEN $6::boolean THEN 'done' ELSE state END,"
					  " finished_at = CASE WHEN $6::boolean THEN clock_timestamp() ELSE finished_at END"
					  " WHERE job = $1 AND schema_name = $2 AND table_name = $3",
					  6, params, err) ||
		(c->ck && !record_chunk(w->conn, L, t, c, err)) ||
		(last && L->chunks_lsn && !t->st->keyed && !record_whole(w->conn, L, t, err)) ||
		!conn_command(w->conn, "COMMIT", 0, NULL, err))
		return false;
	pthread_mutex_lock(&L->mu);
	t->committed++;
	if (last)
		L->ndone++;
	/* TABLEDONE may have been read while this frame committed. */
	claim = !last && t->tabledone && t->committed == t->dispatched && !t->claimed;
	if (claim)
		t->claimed = true;
	pthread_mutex_unlock(&L->mu);
	return !claim || claim_done(L, w->conn, t, err);
}

/* Handle one chunk; false with err filled when the frame failed. */
static bool
load_chunk(struct lworker *w, struct chunk *c, struct pgerr *err, PGresult **failed_res)
{
	if (c->first)
	{
		PGresult *res;

		if (!conn_command(w->conn, "BEGIN", 0, NULL, err))
			return false;
		res = PQexec(w->conn, c->t->copy_sql);
		if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN)
		{
			pgerr_set(err, w->conn, res);
			PQclear(res);
			return false;
		}
		PQclear(res);
	}
	if (c->len > 0 && PQputCopyData(w->conn, c->data, (int) c->len) != 1)
	{
		*failed_res = PQgetResult(w->conn);
		pgerr_set(err, w->conn, *failed_res);
		return false;
	}
	if (c->abort)
	{
		PGresult *res;

		PQputCopyEnd(w->conn, "frame abandoned");
		while ((res = PQgetResult(w->conn)) != NULL)
			PQclear(res);
		PQclear(PQexec(w->conn, "ROLLBACK"));
	}
	else if (c->last)
		return commit_frame(w, c, err, failed_res);
	return true;
}

static bool
worker_setup(struct lworker *w)
{
	struct loader *L = w->L;
	struct pgerr err;
	char shown[512];

	w->conn = session_open(L->o->conninfo, SESSION_SQL, &err);
	if (w->conn == NULL)
	{
		conn_display(L->o->conninfo, shown, sizeof(shown));
		loader_fail(L, EXIT_RUNTIME, "cannot connect to the target (%s): %s", shown, err.msg);
		return false;
	}
	pthread_mutex_lock(&L->mu);
	w->cancel = PQgetCancel(w->conn);
	pthread_mutex_unlock(&L->mu);
	if (!conn_command(w->conn, "SET synchronous_commit = off", 0, NULL, &err))
	{
		char text[PGERR_TEXT_MAX];

		loader_fail(L, EXIT_RUNTIME, "cannot set up a target session: %s", pgerr_text(&err, NULL, text, sizeof(text)));
		return false;
	}
	if (L->o->replica_role && !session_replica_role(w->conn, &err))
	{
		pthread_mutex_lock(&L->mu);
		if (!L->warned_role)
			log_warn("cannot set session_replication_role = replica (%s): triggers and foreign keys fire during the copy",
					 err.msg);
		L->warned_role = true;
		pthread_mutex_unlock(&L->mu);
	}
	return true;
}

static void *
worker_main(void *arg)
{
	struct lworker *w = arg;
	struct loader *L = w->L;
	bool ok = worker_setup(w);

	pthread_mutex_lock(&L->mu);
	L->ready++;
	pthread_cond_broadcast(&L->cv_space);
	pthread_mutex_unlock(&L->mu);
	for (;;)
	{
		struct chunk *c;
		bool stop, failed;

		pthread_mutex_lock(&L->mu);
		while (w->head == NULL)
			pthread_cond_wait(&L->cv_work, &L->mu);
		c = w->head;
		w->head = c->next;
		if (w->head == NULL)
			w->tail = NULL;
		w->queued--;
		failed = L->failed;
		pthread_mutex_unlock(&L->mu);
		stop = c->stop;
		/* After any failure, drain without loading, so the reader never waits. */
		if (ok && !stop && !failed)
		{
			struct pgerr err;
			PGresult *res = NULL;

			if (!load_chunk(w, c, &err, &res))
			{
				loader_fail_pg(L, c->t, c->copy_line + copy_error_row(res), &err);
				PQclear(res);
				ok = false;
			}
		}
		chunkrec_free(c->ck);
		c->ck = NULL;
		pthread_mutex_lock(&L->mu);
		c->next = L->pool;
		L->pool = c;
		pthread_cond_broadcast(&L->cv_space);
		pthread_mutex_unlock(&L->mu);
		if (stop)
			break;
	}
	/* An unfinished frame is rolled back with the session. */
	pthread_mutex_lock(&L->mu);
	PQfreeCancel(w->cancel);
	w->cancel = NULL;
	pthread_mutex_unlock(&L->mu);
	PQfinish(w->conn);
	w->conn = NULL;
	pthread_mutex_lock(&L->mu);
	L->alive--;
	pthread_cond_broadcast(&L->cv_space);
	pthread_mutex_unlock(&L->mu);
	return NULL;
}

/*
 * Wait (mu held) for a chunk to come back. The reader's waits wake up every
 * second, so that a signal stops the load even while the target is stuck
 * (a lock, a full disk).
 */
static void
wait_space(struct loader *L)
{
	struct timespec ts;

	tw_deadline(&ts, 1000);
	if (pthread_cond_timedwait(&L->cv_space, &L->mu, &ts) == ETIMEDOUT &&
		sig_fd() >= 0 && sig_stop_requested())
		interrupted_locked(L);
}

struct chunk *
loader_get_chunk(struct loader *L)
{
	struct chunk *c;

	pthread_mutex_lock(&L->mu);
	while (L->pool == NULL && L->allocated >= L->max_chunks)
		wait_space(L);
	if (L->pool)
	{
		c = L->pool;
		L->pool = c->next;
	}
	else
	{
		c = xcalloc(1, sizeof(*c));
		c->data = xmalloc(CHUNK_SIZE);
		L->allocated++;
	}
	pthread_mutex_unlock(&L->mu);
	{
		char *data = c->data;

		memset(c, 0, sizeof(*c));
		c->data = data;
	}
	return c;
}

/* Queue c on w, waiting while w's queue is full (stop chunks never wait). */
void
loader_push(struct loader *L, struct lworker *w, struct chunk *c)
{
	pthread_mutex_lock(&L->mu);
	while (w->queued >= QUEUE_CHUNKS && !c->stop && !L->failed)
		wait_space(L);
	c->next = NULL;
	if (w->tail)
		w->tail->next = c;
	else
		w->head = c;
	w->tail = c;
	w->queued++;
	pthread_cond_broadcast(&L->cv_work);
	pthread_mutex_unlock(&L->mu);
}

struct lworker *
loader_pick(struct loader *L)
{
	struct lworker *best = NULL;

	pthread_mutex_lock(&L->mu);
	for (int i = 0; i < L->nw; i++)
	{
		struct lworker *w = &L->w[(L->rr + i) % L->nw];

		if (best == NULL || w->queued < best->queued)
			best = w;
	}
	L->rr++;
	pthread_mutex_unlock(&L->mu);
	return best;
}

bool
loader_failed(struct loader *L)
{
	bool f;

	pthread_mutex_lock(&L->mu);
	f = L->failed;
	pthread_mutex_unlock(&L->mu);
	return f;
}

void
loader_stop(struct loader *L, struct chunk *open, struct lworker *target)
{
	char errbuf[256];
	bool cancelled = false;

	if (open)
	{
		/* The open frame is abandoned: its worker rolls it back. */
		open->abort = true;
		loader_push(L, target, open);
	}
	for (int i = 0; i < L->nw; i++)
	{
		struct chunk *c = loader_get_chunk(L);

		c->stop = true;
		loader_push(L, &L->w[i], c);
	}
	/* Wait for the last commits. After a failure or a signal, a worker may
	 * be stuck on the target (a lock): cancel what they are doing. */
	pthread_mutex_lock(&L->mu);
	while (L->alive > 0)
	{
		if (L->failed && !cancelled)
		{
			for (int i = 0; i < L->nw; i++)
				if (L->w[i].cancel)
					PQcancel(L->w[i].cancel, errbuf, sizeof(errbuf));
			cancelled = true;
		}
		wait_space(L);
	}
	pthread_mutex_unlock(&L->mu);
	for (int i = 0; i < L->nw; i++)
		pthread_join(L->w[i].th, NULL);
}

void
loader_init(struct loader *L, const struct snapload_opts *o, const char *input)
{
	memset(L, 0, sizeof(*L));
	L->o = o;
	L->input = input;
	L->nw = o->jobs > 0 ? o->jobs : 1;
	/* Full queues, the chunk each worker sends, the reader's, the stops. */
	L->max_chunks = L->nw * (QUEUE_CHUNKS + 1) + 1 + L->nw;
	pthread_mutex_init(&L->mu, NULL);
	tw_cond_init(&L->cv_work);
	tw_cond_init(&L->cv_space);
	L->w = xcalloc((size_t) L->nw, sizeof(*L->w));
}

void
loader_free(struct loader *L)
{
	for (struct ltable *t = L->tables, *n; t; t = n)
	{
		n = t->next;
		free(t->copy_sql);
		free(t);
	}
	while (L->pool)
	{
		struct chunk *c = L->pool;

		L->pool = c->next;
		free(c->data);
		free(c);
	}
	free(L->w);
	pthread_cond_destroy(&L->cv_work);
	pthread_cond_destroy(&L->cv_space);
	pthread_mutex_destroy(&L->mu);
}

int
loader_start(struct loader *L)
{
	sigset_t block, old;

	/* Signals stay with the caller's thread (lib/sig's self-pipe). */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	L->alive = L->nw;
	for (int i = 0; i < L->nw; i++)
	{
		L->w[i].L = L;
		if (pthread_create(&L->w[i].th, NULL, worker_main, &L->w[i]) != 0)
			log_fatal(EXIT_RUNTIME, "cannot start a loader thread");
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&L->mu);
	while (L->ready < L->nw)
		pthread_cond_wait(&L->cv_space, &L->mu);
	pthread_mutex_unlock(&L->mu);
	return loader_failed(L) ? L->err_code : EXIT_DONE;
}
