/*
 * Threads rather than processes: the workers share the plan, the part queue
 * and the frame pool without copying, a frame goes to the writer as a
 * pointer, and PQcancel() stops any worker from the supervising thread.
 * libpq is thread-safe as long as each connection stays with one thread.
 *
 * Ordering: a worker hands over the frames of a part in order, the last one
 * marked; the writer handles hand-overs in FIFO order, so when it has seen
 * the last frame of every part of a table, everything of that table is on
 * the output, and TABLEDONE can follow.
 */
#include "session.h"
#include "snapworker.h"
#include "buf.h"
#include "common.h"
#include "conn.h"
#include "log.h"
#include "record.h"
#include "timedwait.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Room kept free in a frame for its ENDCOPY line. */
#define ENDCOPY_ROOM 32

struct slot {
	struct slot *next;
	char *data;					/* frame_size bytes, allocated on first use */
	bool big;					/* grown for one row larger than a frame */
	size_t len;
	int table;
	uint64_t rows;
	uint64_t bytes;
	bool part_last;				/* the last frame of its part */
	struct buf chunk;			/* the CHUNK line written before the frame, or empty */
	size_t last_row;			/* offset of the frame's last row (for its key) */
};

struct worker {
	struct snaprun *run;
	pthread_t th;
	PGcancel *cancel;			/* under run->mu; NULL when not connected */
};

struct snaprun {
	const struct snap_plan *plan;
	struct snaprun_opts o;
	struct out *out;

	pthread_mutex_t mu;
	pthread_cond_t cv_free;		/* a slot came back to the pool */
	pthread_cond_t cv_queue;	/* a slot was handed to the writer */
	pthread_cond_t cv_main;		/* progress, failure, end, a worker exited */

	struct slot *slots;
	int nslots;
	struct slot *free_list;
	struct slot *q_head, *q_tail;
	bool big_busy;				/* a slot is grown (at most one at a time) */
	int next_part;
	bool *taken;				/* parts a worker took */
	bool time_up;				/* chunked: the group's time is up */
	struct snap_tstat *st;
	int tables_done;
	enum snaprun_state state;
	bool abort;
	int err_code;
	char err_msg[1400];

	struct worker *w;
	int nworkers;
	int running;				/* worker threads not yet exited */
	pthread_t writer;
	bool writer_started;
};

static void
fail_locked(struct snaprun *r, int code, const char *fmt, va_list ap)
{
	if (!r->abort)
	{
		vsnprintf(r->err_msg, sizeof(r->err_msg), fmt, ap);
		r->err_code = code;
		r->state = SNAPRUN_FAILED;
	}
	r->abort = true;
	pthread_cond_broadcast(&r->cv_free);
	pthread_cond_broadcast(&r->cv_queue);
	pthread_cond_broadcast(&r->cv_main);
}

void
snaprun_fail(struct snaprun *r, int code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&r->mu);
	va_start(ap, fmt);
	fail_locked(r, code, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&r->mu);
}

/* "public.t" or "public.t (part 3 of 8)" for messages. */
static void
part_name(const struct snaprun *r, const struct snap_part *part, char *out, size_t len)
{
	const struct snap_table *t = &r->plan->tables[part->table];

	if (t->nparts > 1)
		snprintf(out, len, "%s.%s (part %d of %d)", t->schema, t->name, part->index, t->nparts);
	else
		snprintf(out, len, "%s.%s", t->schema, t->name);
}

static void
fail_pg(struct snaprun *r, const char *what, const struct pgerr *err)
{
	char text[PGERR_TEXT_MAX];

	snaprun_fail(r, EXIT_RUNTIME, "%s: %s", what, pgerr_text(err, NULL, text, sizeof(text)));
}

static struct slot *
get_slot(struct snaprun *r)
{
	struct slot *s;

	pthread_mutex_lock(&r->mu);
	while (r->free_list == NULL && !r->abort)
		pthread_cond_wait(&r->cv_free, &r->mu);
	if (r->abort)
	{
		pthread_mutex_unlock(&r->mu);
		return NULL;
	}
	s = r->free_list;
	r->free_list = s->next;
	pthread_mutex_unlock(&r->mu);
	if (s->data == NULL)
		s->data = xmalloc(r->o.frame_size);
	s->next = NULL;
	s->len = 0;
	s->rows = 0;
	s->bytes = 0;
	s->part_last = false;
	buf_reset(&s->chunk);
	return s;
}

static void
put_free_locked(struct snaprun *r, struct slot *s)
{
	if (s->big)
	{
		/* Back to a frame's size: the memory of one large row is lent. */
		free(s->data);
		s->data = NULL;
		s->big = false;
		r->big_busy = false;
	}
	s->next = r->free_list;
	r->free_list = s;
	pthread_cond_broadcast(&r->cv_free);
}

/*
 * Grow the empty frame s for one row of need bytes that does not fit in a
 * frame. One grown frame at a time, so memory stays within (workers + 1)
 * frames plus one --max-message-bytes row. False when the run must stop.
 */
static bool
grow_slot(struct snaprun *r, struct slot *s, size_t need)
{
	pthread_mutex_lock(&r->mu);
	while (r->big_busy && !r->abort)
		pthread_cond_wait(&r->cv_free, &r->mu);
	if (r->abort)
	{
		pthread_mutex_unlock(&r->mu);
		return false;
	}
	r->big_busy = true;
	pthread_mutex_unlock(&r->mu);
	s->data = xrealloc(s->data, s->len + need + ENDCOPY_ROOM);
	s->big = true;
	return true;
}

/* Hand a slot to the writer; false (and the slot back in the pool) on abort. */
static bool
submit(struct snaprun *r, struct slot *s)
{
	bool ok;

	pthread_mutex_lock(&r->mu);
	ok = !r->abort;
	if (ok)
	{
		if (r->q_tail)
			r->q_tail->next = s;
		else
			r->q_head = s;
		r->q_tail = s;
		pthread_cond_signal(&r->cv_queue);
	}
	else
		put_free_locked(r, s);
	pthread_mutex_unlock(&r->mu);
	return ok;
}

static void
frame_open(struct snaprun *r, struct slot *s, int table)
{
	const struct snap_table *t = &r->plan->tables[table];

	s->table = table;
	memcpy(s->data, t->frame_header, t->frame_header_len);
	s->len = t->frame_header_len;
}

static void
frame_close(struct slot *s, bool keep_empty)
{
	if (s->rows == 0 && !keep_empty)
	{
		s->len = 0;				/* nothing to say: write no frame at all */
		return;
	}
	s->len += (size_t) snprintf(s->data + s->len, ENDCOPY_ROOM, "%s\t%llu\n", REC_ENDCOPY,
								(unsigned long long) s->rows);
}

static bool
time_is_up(struct snaprun *r)
{
	return __atomic_load_n(&r->time_up, __ATOMIC_RELAXED);
}

/* The CHUNK line of frame s: the whole of chunk (lo, hi]. */
static void
chunk_line(const struct snap_table *t, struct slot *s, char *const *lo, char *const *hi)
{
	buf_reset(&s->chunk);
	chunkplan_record(&s->chunk, t->schema, t->name, t->key, lo, hi);
}

/* The key of the frame's last row (after its "ROW" TAB). */
static char **
last_key(const struct snap_table *t, const struct slot *s)
{
	return chunkplan_row_key(t->key, s->data + s->last_row + 4, s->len - s->last_row - 4);
}

/* The group's time is up in the middle of a part: stop its COPY. The
 * session's transaction is aborted after it, so the worker ends too. */
static void
stop_copy(PGconn *conn)
{
	PGcancel *cancel = PQgetCancel(conn);
	char errbuf[256];
	PGresult *res;
	char *row;
	int len;

	if (cancel)
	{
		PQcancel(cancel, errbuf, sizeof(errbuf));
		PQfreeCancel(cancel);
	}
	while ((len = PQgetCopyData(conn, &row, 0)) >= 0)
		PQfreemem(row);
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);
}

/*
 * Copy one part into frames. False when the run must stop (or, with
 * *cut, when the group's time ended the part: the rest stays to copy).
 *
 * A part of a table with a chunk key is read in key order and cut into
 * chunks of one frame each: a chunk ends where its frame fills or reaches
 * chunk_rows, at the key of its last row, and the next one starts there;
 * the part's last chunk ends at the part's end. So the chunks cover the
 * part's range without a gap, an empty part being one empty chunk.
 */
static bool
copy_part(struct snaprun *r, PGconn *conn, const struct snap_part *part, bool *cut)
{
	const struct snap_table *t = &r->plan->tables[part->table];
	size_t limit = r->o.frame_size - ENDCOPY_ROOM;
	bool keyed = t->key != NULL;
	char **lo = NULL;
	struct slot *s;
	PGresult *res;
	struct pgerr err;
	char what[600], name[512];

	part_name(r, part, name, sizeof(name));
	snprintf(what, sizeof(what), "cannot copy %s", name);
	res = PQexec(conn, part->sql);
	if (res == NULL || PQresultStatus(res) != PGRES_COPY_OUT)
	{
		pgerr_set(&err, conn, res);
		PQclear(res);
		fail_pg(r, what, &err);
		return false;
	}
	PQclear(res);
	if ((s = get_slot(r)) == NULL)
		return false;
	frame_open(r, s, part->table);
	for (;;)
	{
		char *row;
		int len = PQgetCopyData(conn, &row, 0);
		size_t need;

		if (len == -1)
			break;
		if (len < 0)
		{
			/* The server's error (with its SQLSTATE) is in the result. */
			res = PQgetResult(conn);
			pgerr_set(&err, conn, res);
			PQclear(res);
			fail_pg(r, what, &err);
			return false;
		}
		/* "ROW" TAB row; a row of zero columns is just the LF. */
		need = (size_t) len + (t->ncols > 0 ? 4 : 3);
		if (keyed && (time_is_up(r) || (s->rows > 0 && (s->len + need > limit || s->rows >= r->o.chunk_rows))))
		{
			bool stop = time_is_up(r);
			char **hi = s->rows > 0 ? last_key(t, s) : NULL;

			if (s->rows > 0)
			{
				chunk_line(t, s, lo ? lo : part->lo, hi);
				frame_close(s, true);
				chunk_values_free(lo, t->key->nkey);
				lo = hi;
				if (!submit(r, s))
				{
					chunk_values_free(lo, t->key->nkey);
					PQfreemem(row);
					return false;
				}
				s = NULL;
			}
			if (stop)
			{
				if (s)
				{
					pthread_mutex_lock(&r->mu);
					put_free_locked(r, s);
					pthread_mutex_unlock(&r->mu);
				}
				chunk_values_free(lo, t->key->nkey);
				PQfreemem(row);
				stop_copy(conn);
				*cut = true;
				return true;
			}
			if ((s = get_slot(r)) == NULL)
			{
				chunk_values_free(lo, t->key->nkey);
				PQfreemem(row);
				return false;
			}
			/* This row starts the next chunk: handled below as any row. */
			frame_open(r, s, part->table);
		}
		else if (!keyed && s->len + need > limit && s->rows > 0)
		{
			frame_close(s, false);
			if (!submit(r, s) || (s = get_slot(r)) == NULL)
			{
				PQfreemem(row);
				return false;
			}
			frame_open(r, s, part->table);
		}
		if (s->len + need > limit)
		{
			/* The ROW line without its LF is what pg-apply measures. */
			if (need - 1 > r->o.max_row)
			{
				PQfreemem(row);
				snaprun_fail(r, EXIT_UNSUPPORTED, "%s: a row of %d bytes is longer than --max-message-bytes (%zu bytes)",
							 what, len, r->o.max_row);
				return false;
			}
			if (!grow_slot(r, s, need))
			{
				PQfreemem(row);
				return false;
			}
		}
		s->last_row = s->len;
		memcpy(s->data + s->len, t->ncols > 0 ? "ROW\t" : "ROW", t->ncols > 0 ? 4 : 3);
		s->len += t->ncols > 0 ? 4 : 3;
		memcpy(s->data + s->len, row, (size_t) len);
		s->len += (size_t) len;
		s->rows++;
		s->bytes += (uint64_t) len;
		PQfreemem(row);
	}
	res = PQgetResult(conn);
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pgerr_set(&err, conn, res);
		PQclear(res);
		fail_pg(r, what, &err);
		return false;
	}
	PQclear(res);
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);
	if (keyed)
	{
		chunk_line(t, s, lo ? lo : part->lo, part->hi);
		chunk_values_free(lo, t->key->nkey);
	}
	/* In a chunk section a table copied in one piece has a frame too, if
	 * empty: the loader tells it from one whose chunks were all done. */
	frame_close(s, r->o.chunked);
	s->part_last = true;
	return submit(r, s);
}

/* Connect and import the snapshot: the same data for every worker. */
static PGconn *
worker_connect(struct worker *w)
{
	struct snaprun *r = w->run;
	struct pgerr err;
	struct buf sql = BUF_INIT;
	PGconn *conn = session_open(r->o.conninfo, SESSION_SQL, &err);
	char *lit;

	if (conn == NULL)
	{
		char shown[512];

		conn_display(r->o.conninfo, shown, sizeof(shown));
		snaprun_fail(r, EXIT_RUNTIME, "cannot connect to the source (%s): %s", shown, err.msg);
		return NULL;
	}
	pthread_mutex_lock(&r->mu);
	w->cancel = PQgetCancel(conn);
	pthread_mutex_unlock(&r->mu);
	if (!conn_command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0, NULL, &err))
	{
		fail_pg(r, "cannot start a copy session", &err);
		return conn;
	}
	lit = PQescapeLiteral(conn, r->o.snapshot, strlen(r->o.snapshot));
	buf_printf(&sql, "SET TRANSACTION SNAPSHOT %s", lit ? lit : "''");
	PQfreemem(lit);
	if (!conn_command(conn, buf_cstr(&sql), 0, NULL, &err))
	{
		char what[300];

		snprintf(what, sizeof(what), "cannot import snapshot \"%s\" (the session that exported it must stay open until every worker has started)",
				 r->o.snapshot);
		fail_pg(r, what, &err);
	}
	buf_free(&sql);
	return conn;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct snaprun *r = w->run;
	PGconn *conn = worker_connect(w);
	PGcancel *cancel;

	for (;;)
	{
		const struct snap_part *part;
		struct snap_tstat *st;
		bool cut = false;
		int i;

		pthread_mutex_lock(&r->mu);
		while (r->next_part < r->plan->nparts && r->taken[r->next_part])
			r->next_part++;
		i = r->next_part;
		/* Once the group's time is up, only the rest of a table copied in
		 * one piece that has started: it is all or nothing. */
		if (r->time_up)
			for (i = r->next_part; i < r->plan->nparts; i++)
				if (!r->taken[i] && r->plan->tables[r->plan->parts[i].table].key == NULL &&
					r->st[r->plan->parts[i].table].started)
					break;
		if (r->abort || i >= r->plan->nparts)
		{
			pthread_mutex_unlock(&r->mu);
			break;
		}
		r->taken[i] = true;
		part = &r->plan->parts[i];
		st = &r->st[part->table];
		if (!st->started)
		{
			st->started = true;
			st->started_ms = now_ms();
		}
		pthread_mutex_unlock(&r->mu);
		if (!copy_part(r, conn, part, &cut) || cut)
			break;
	}
	pthread_mutex_lock(&r->mu);
	cancel = w->cancel;
	w->cancel = NULL;
	pthread_mutex_unlock(&r->mu);
	PQfreeCancel(cancel);
	PQfinish(conn);
	pthread_mutex_lock(&r->mu);
	r->running--;
	pthread_cond_broadcast(&r->cv_main);
	pthread_cond_broadcast(&r->cv_queue);	/* the last one ends a chunk section */
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Write b through out; on failure make the run fail (mu not held). */
static bool
writer_put(struct snaprun *r, const char *p, size_t n, bool flush)
{
	enum out_status st = n ? out_write(r->out, p, n) : OUT_OK;

	/* Whole frames and records only: a compressed frame may end here. */
	if (st == OUT_OK)
		st = out_boundary(r->out);
	if (st == OUT_OK && flush)
		st = out_flush(r->out);
	if (st == OUT_CLOSED)
		snaprun_fail(r, EXIT_RUNTIME, "the output was closed before the copy finished");
	else if (st != OUT_OK)
		snaprun_fail(r, EXIT_RUNTIME, "cannot write the output stream");
	return st == OUT_OK;
}

/* TABLEDONE of table t (mu not held). */
static bool
writer_tabledone(struct snaprun *r, struct buf *line, int t)
{
	const struct snap_table *tb = &r->plan->tables[t];
	uint64_t rows, bytes;
	bool ok;

	pthread_mutex_lock(&r->mu);
	rows = r->st[t].rows;
	bytes = r->st[t].bytes;
	pthread_mutex_unlock(&r->mu);
	buf_reset(line);
	rec_start(line, REC_TABLEDONE);
	rec_valuez(line, tb->schema);
	rec_valuez(line, tb->name);
	rec_u64(line, rows);
	rec_u64(line, bytes);
	rec_finish(line);
	ok = writer_put(r, line->data, line->len, false);
	pthread_mutex_lock(&r->mu);
	if (ok && !r->abort)
	{
		r->st[t].done = true;
		r->st[t].finished_ms = now_ms();
		r->tables_done++;
		pthread_cond_broadcast(&r->cv_main);
	}
	pthread_mutex_unlock(&r->mu);
	return ok;
}

static void *
writer_main(void *arg)
{
	struct snaprun *r = arg;
	const struct snap_plan *plan = r->plan;
	struct buf line = BUF_INIT;
	bool flushed = true;

	pthread_mutex_lock(&r->mu);
	/* Chunked: a table whose chunks were all done before has nothing left
	 * to copy but its TABLEDONE. */
	for (int t = 0; t < plan->ntables && r->o.chunked && !r->abort; t++)
		if (plan->tables[t].nparts == 0 && !plan->tables[t].whole_done)
		{
			pthread_mutex_unlock(&r->mu);
			bool ok = writer_tabledone(r, &line, t);

			pthread_mutex_lock(&r->mu);
			if (!ok)
				break;
		}
	while (!r->abort)
	{
		struct slot *s;
		int t;
		bool table_done;

		/* The end: every table copied, or (chunked) every worker stopped
		 * and everything it handed over written. */
		if (r->o.chunked ? r->running == 0 && r->q_head == NULL : r->tables_done == plan->ntables)
		{
			pthread_mutex_unlock(&r->mu);
			buf_reset(&line);
			rec_start(&line, r->o.chunked ? REC_CHUNKSDONE : REC_SNAPSHOTDONE);
			rec_lsn(&line, r->o.position);
			rec_finish(&line);
			bool ok = writer_put(r, line.data, line.len, true);

			pthread_mutex_lock(&r->mu);
			if (ok && !r->abort)
			{
				r->state = SNAPRUN_DONE;
				pthread_cond_broadcast(&r->cv_main);
			}
			break;
		}
		if (r->q_head == NULL)
		{
			/* About to wait for the workers: let the reader have it all. */
			if (!flushed)
			{
				pthread_mutex_unlock(&r->mu);
				writer_put(r, NULL, 0, true);
				flushed = true;
				pthread_mutex_lock(&r->mu);
			}
			else
				pthread_cond_wait(&r->cv_queue, &r->mu);
			continue;
		}
		s = r->q_head;
		r->q_head = s->next;
		if (r->q_head == NULL)
			r->q_tail = NULL;
		pthread_mutex_unlock(&r->mu);

		/* The CHUNK line and its frame go out as one: no compressed frame
		 * ends between them. */
		bool ok = s->chunk.len == 0 || out_write(r->out, s->chunk.data, s->chunk.len) == OUT_OK;

		if (ok)
			ok = writer_put(r, s->data, s->len, false);
		else
			snaprun_fail(r, EXIT_RUNTIME, "cannot write the output stream");

		flushed = flushed && s->len == 0;
		pthread_mutex_lock(&r->mu);
		t = s->table;
		r->st[t].rows += s->rows;
		r->st[t].bytes += s->bytes;
		table_done = s->part_last && ++r->st[t].parts_done == plan->tables[t].nparts;
		put_free_locked(r, s);
		if (!ok || r->abort)
			break;
		if (table_done)
		{
			pthread_mutex_unlock(&r->mu);
			ok = writer_tabledone(r, &line, t);
			flushed = false;
			pthread_mutex_lock(&r->mu);
			if (!ok || r->abort)
				break;
		}
	}
	pthread_mutex_unlock(&r->mu);
	buf_free(&line);
	return NULL;
}

struct snaprun *
snaprun_start(const struct snap_plan *plan, const struct snaprun_opts *o, struct out *out)
{
	struct snaprun *r = xcalloc(1, sizeof(*r));
	sigset_t block, old;

	r->plan = plan;
	r->o = *o;
	r->out = out;
	r->state = SNAPRUN_COPYING;
	pthread_mutex_init(&r->mu, NULL);
	tw_cond_init(&r->cv_free);
	tw_cond_init(&r->cv_queue);
	tw_cond_init(&r->cv_main);
	r->st = xcalloc((size_t) plan->ntables + 1, sizeof(*r->st));
	r->nworkers = o->jobs < plan->nparts ? o->jobs : plan->nparts;
	/* One frame per worker being filled, one being written. */
	r->nslots = r->nworkers + 1;
	r->slots = xcalloc((size_t) r->nslots, sizeof(*r->slots));
	for (int i = 0; i < r->nslots; i++)
		put_free_locked(r, &r->slots[i]);
	r->w = xcalloc((size_t) r->nworkers + 1, sizeof(*r->w));
	r->taken = xcalloc((size_t) plan->nparts + 1, sizeof(bool));
	/* Before the writer starts: it ends a chunk section when none runs. */
	r->running = r->nworkers;

	/* Signals belong to the supervising thread (lib/sig's self-pipe). */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	if (pthread_create(&r->writer, NULL, writer_main, r) != 0)
		log_fatal(EXIT_RUNTIME, "cannot start the writer thread: %s", strerror(errno));
	r->writer_started = true;
	for (int i = 0; i < r->nworkers; i++)
	{
		r->w[i].run = r;
		if (pthread_create(&r->w[i].th, NULL, worker_main, &r->w[i]) != 0)
			log_fatal(EXIT_RUNTIME, "cannot start a worker thread: %s", strerror(errno));
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

enum snaprun_state
snaprun_wait(struct snaprun *r, int timeout_ms)
{
	struct timespec ts;
	enum snaprun_state st;

	tw_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&r->mu);
	if (r->state == SNAPRUN_COPYING)
		pthread_cond_timedwait(&r->cv_main, &r->mu, &ts);
	st = r->state;
	pthread_mutex_unlock(&r->mu);
	return st;
}

int
snaprun_stats(struct snaprun *r, struct snap_tstat *stats)
{
	int done;

	pthread_mutex_lock(&r->mu);
	memcpy(stats, r->st, sizeof(*stats) * (size_t) r->plan->ntables);
	done = r->tables_done;
	pthread_mutex_unlock(&r->mu);
	return done;
}

void
snaprun_time_up(struct snaprun *r)
{
	pthread_mutex_lock(&r->mu);
	__atomic_store_n(&r->time_up, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&r->mu);
}

void
snaprun_cancel(struct snaprun *r, int wait_ms)
{
	struct timespec ts;
	char errbuf[256];

	pthread_mutex_lock(&r->mu);
	r->abort = true;
	pthread_cond_broadcast(&r->cv_free);
	pthread_cond_broadcast(&r->cv_queue);
	for (int i = 0; i < r->nworkers; i++)
		if (r->w[i].cancel)
			PQcancel(r->w[i].cancel, errbuf, sizeof(errbuf));
	tw_deadline(&ts, wait_ms);
	while (r->running > 0)
		if (pthread_cond_timedwait(&r->cv_main, &r->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&r->mu);
}

int
snaprun_error(struct snaprun *r, const char **msg)
{
	*msg = r->err_msg;
	return r->err_code ? r->err_code : EXIT_RUNTIME;
}

void
snaprun_finish(struct snaprun *r)
{
	for (int i = 0; i < r->nworkers; i++)
		pthread_join(r->w[i].th, NULL);
	if (r->writer_started)
		pthread_join(r->writer, NULL);
	for (int i = 0; i < r->nslots; i++)
	{
		free(r->slots[i].data);
		buf_free(&r->slots[i].chunk);
	}
	free(r->slots);
	free(r->taken);
	free(r->w);
	free(r->st);
	pthread_cond_destroy(&r->cv_free);
	pthread_cond_destroy(&r->cv_queue);
	pthread_cond_destroy(&r->cv_main);
	pthread_mutex_destroy(&r->mu);
	free(r);
}
