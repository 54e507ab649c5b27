/*
 * Loading a snapshot section, the reader's side: the caller's thread reads
 * the stream, checks the frames, and cuts each frame into chunks that go, in
 * order, to one worker of lib/loadworker (the one with the least queued, so
 * several workers load one large table).
 *
 * Memory: a worker's queue holds at most QUEUE_CHUNKS chunks of CHUNK_SIZE
 * bytes (one default 8 MB frame, so the reader can go on to the next worker
 * while this one loads), plus the chunk each worker is sending and the one
 * the reader fills: about jobs x (QUEUE_CHUNKS + 1) chunks, whatever the
 * frame or table size.
 */
#include "session.h"
#include "snapload.h"
#include "buf.h"
#include "catalog.h"
#include "common.h"
#include "conn.h"
#include "escape.h"
#include "hash.h"
#include "loadworker.h"
#include "log.h"
#include "sig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most columns a table has (MaxTupleAttributeNumber) plus the fields
 * before them in a COPY line. */
#define MAX_FIELDS (1664 + 8)

struct reader {
	struct loader *L;
	struct input *in;
	struct chunk *cur;			/* being filled, NULL outside a frame */
	struct lworker *target;		/* the frame's worker */
	struct ltable *t;			/* the frame's table */
	uint64_t frame_rows, frame_bytes, frame_line;
	bool chunks;				/* a CHUNKS section */
	struct chunkrec *ck;		/* the CHUNK read for the next frame, then the frame's */
	struct ltable *ck_table;	/* its table */
	struct field *f;
	struct buf tmp;
	void (*tick)(void);
};

static bool
put_bytes(struct reader *R, const char *p, size_t n)
{
	while (n > 0)
	{
		size_t room = CHUNK_SIZE - R->cur->len, k;

		if (room == 0)
		{
			loader_push(R->L, R->target, R->cur);
			R->cur = loader_get_chunk(R->L);
			R->cur->t = R->t;
			R->cur->copy_line = R->frame_line;
			continue;
		}
		k = n < room ? n : room;
		memcpy(R->cur->data + R->cur->len, p, k);
		R->cur->len += k;
		p += k;
		n -= k;
	}
	return true;
}

static char *
unescape_name(struct reader *R, const struct field *f)
{
	bool is_null;

	buf_reset(&R->tmp);
	if (!copy_unescape(f->p, f->n, &R->tmp, &is_null) || is_null)
		return NULL;
	return xstrdup(buf_cstr(&R->tmp));
}

/* The table named by fields f[0], f[1] (schema, table); created on first use. */
static int
lookup_table(struct reader *R, const struct field *f, bool keyed, struct ltable **out)
{
	struct loader *L = R->L;
	size_t keylen = (size_t) (f[1].p + f[1].n - f[0].p);
	uint64_t h = hash_bytes(HASH_INIT, f[0].p, keylen) % NBUCKETS;
	struct ltable *t;
	struct pgerr err;

	for (t = L->buckets[h]; t; t = t->next)
		if (t->keylen == keylen && memcmp(t->key, f[0].p, keylen) == 0)
		{
			*out = t;
			return EXIT_DONE;
		}
	t = xcalloc(1, sizeof(*t));
	t->schema = unescape_name(R, &f[0]);
	t->name = unescape_name(R, &f[1]);
	if (t->schema == NULL || t->name == NULL)
	{
		free(t->schema);
		free(t->name);
		free(t);
		loader_fail(L, EXIT_UNSUPPORTED, "%s:%llu: malformed schema or table name", L->input,
			 (unsigned long long) input_lineno(R->in));
		return EXIT_UNSUPPORTED;
	}
	t->keyed = keyed;
	t->key = xmalloc(keylen);
	memcpy(t->key, f[0].p, keylen);
	t->keylen = keylen;
	t->next = L->buckets[h];
	L->buckets[h] = t;
	L->ntables++;
	if (!loader_set_state(L->ctl, L, t, false, &err))
	{
		loader_fail_pg(L, t, input_lineno(R->in), &err);
		return L->err_code;
	}
	*out = t;
	return EXIT_DONE;
}

static int
malformed(struct reader *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
malformed(struct reader *R, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	loader_fail(R->L, EXIT_UNSUPPORTED, "%s:%llu: %s", R->L->input,
		 (unsigned long long) input_lineno(R->in), msg);
	return EXIT_UNSUPPORTED;
}

/* Build "COPY schema.table (cols) FROM STDIN" from the frame's column fields. */
static int
build_copy_sql(struct reader *R, struct ltable *t, const struct field *cols, int ncols)
{
	struct buf sql = BUF_INIT;
	char *q;

	q = conn_quote_ident(R->L->ctl, t->schema);
	buf_printf(&sql, "COPY %s.", q);
	free(q);
	q = conn_quote_ident(R->L->ctl, t->name);
	buf_puts(&sql, q);
	free(q);
	for (int i = 0; i < ncols; i++)
	{
		char *name = unescape_name(R, &cols[i]);

		if (name == NULL)
		{
			buf_free(&sql);
			return malformed(R, "malformed column name in the frame of %s.%s", t->schema, t->name);
		}
		q = conn_quote_ident(R->L->ctl, name);
		buf_printf(&sql, "%s%s", i ? ", " : " (", q);
		free(q);
		free(name);
	}
	buf_puts(&sql, ncols ? ") FROM STDIN" : " FROM STDIN");
	t->copy_sql = buf_cstr(&sql);
	return EXIT_DONE;
}

static int
start_frame(struct reader *R, size_t nf)
{
	struct field *f = R->f;
	uint64_t ncols;
	struct ltable *t;
	int rc;

	if (nf < 4 || nf > MAX_FIELDS || !field_u64(&f[3], &ncols) || ncols != nf - 4)
		return malformed(R, "malformed COPY record: expected schema, table, a column count and that many names");
	if ((rc = lookup_table(R, &f[1], false, &t)) != EXIT_DONE)
		return rc;
	if (t->tabledone)
		return malformed(R, "frame of %s.%s after its TABLEDONE", t->schema, t->name);
	/* In a chunk section a table is copied either in key chunks, every
	 * frame after its CHUNK, or in one piece, no frame with a CHUNK. */
	if (R->ck && R->ck_table != t)
		return malformed(R, "frame of %s.%s after a CHUNK of another table", t->schema, t->name);
	if (R->chunks && t->keyed && R->ck == NULL)
		return malformed(R, "frame of %s.%s without its CHUNK", t->schema, t->name);
	{
		const char *cols = f[3].p;
		size_t colslen = (size_t) (f[nf - 1].p + f[nf - 1].n - cols);

		if (t->copy_sql == NULL)
		{
			t->cols = xmalloc(colslen + 1);
			memcpy(t->cols, cols, colslen);
			t->colslen = colslen;
			t->ncols = (int) ncols;
			if ((rc = build_copy_sql(R, t, &f[4], (int) ncols)) != EXIT_DONE)
				return rc;
		}
		else if (colslen != t->colslen || memcmp(cols, t->cols, colslen) != 0)
			return malformed(R, "frame of %s.%s names other columns than its first frame",
							 t->schema, t->name);
	}
	R->t = t;
	R->target = loader_pick(R->L);
	R->frame_rows = R->frame_bytes = 0;
	R->frame_line = input_lineno(R->in);
	R->cur = loader_get_chunk(R->L);
	R->cur->t = t;
	R->cur->first = true;
	R->cur->copy_line = R->frame_line;
	pthread_mutex_lock(&R->L->mu);
	t->dispatched++;
	pthread_mutex_unlock(&R->L->mu);
	return EXIT_DONE;
}

/*
 * Is everything read so far in zstd frames whose checksum matched? A
 * compressed snapshot must end a zstd frame after each snapshot frame (as
 * pg-snapshot-dump -z does): what is loaded is then always verified first.
 */
static bool
verified(struct reader *R)
{
	if (input_settle(R->in))
		return true;
	if (input_error(R->in)[0])
		loader_fail(R->L, EXIT_RUNTIME, "%s (after line %llu)", input_error(R->in),
					(unsigned long long) input_lineno(R->in));
	else
		malformed(R, "the compressed frame goes on past the end of a snapshot frame, so it cannot be "
				  "verified before loading: decompress it first, or write it with pg-snapshot-dump -z");
	return false;
}

static int
end_frame(struct reader *R, const char *line, size_t len)
{
	struct field f[3];
	uint64_t n;
	size_t nf = rec_split(line, len, f, 2);

	if (nf != 2 || !field_u64(&f[1], &n))
		return malformed(R, "malformed ENDCOPY record in the frame of %s.%s", R->t->schema, R->t->name);
	if (n != R->frame_rows)
		return malformed(R, "ENDCOPY of %s.%s counts %llu rows, the frame has %llu", R->t->schema,
						 R->t->name, (unsigned long long) n, (unsigned long long) R->frame_rows);
	/* The frame's last chunk makes a worker commit it: only once the
	 * compressed frame around it is verified. */
	if (!verified(R))
		return EXIT_UNSUPPORTED;
	R->cur->last = true;
	R->cur->ck = R->ck;
	R->ck = NULL;
	R->cur->nrows = R->frame_rows;
	R->cur->nbytes = R->frame_bytes;
	R->t->rows += R->frame_rows;
	R->t->bytes += R->frame_bytes;
	loader_push(R->L, R->target, R->cur);
	R->cur = NULL;
	return EXIT_DONE;
}

static int
table_done(struct reader *R, size_t nf)
{
	struct loader *L = R->L;
	struct ltable *t;
	uint64_t rows, bytes;
	struct pgerr err;
	bool claim;
	int rc;

	if (nf != 5 || !field_u64(&R->f[3], &rows) || !field_u64(&R->f[4], &bytes))
		return malformed(R, "malformed TABLEDONE record: expected schema, table, rows and bytes");
	/* A table first named by its TABLEDONE in a chunk section had all its
	 * key chunks copied by earlier sections (one copied in one piece always
	 * has a frame, if empty). */
	if ((rc = lookup_table(R, &R->f[1], R->chunks, &t)) != EXIT_DONE)
		return rc;
	if (!verified(R))
		return EXIT_UNSUPPORTED;
	if (t->tabledone)
		return malformed(R, "second TABLEDONE for %s.%s", t->schema, t->name);
	if (rows != t->rows || bytes != t->bytes)
		return malformed(R, "TABLEDONE of %s.%s counts %llu rows and %llu bytes, its frames had %llu and %llu",
						 t->schema, t->name, (unsigned long long) rows, (unsigned long long) bytes,
						 (unsigned long long) t->rows, (unsigned long long) t->bytes);
	pthread_mutex_lock(&L->mu);
	t->tabledone = true;
	claim = t->committed == t->dispatched && !t->claimed;
	if (claim)
		t->claimed = true;
	pthread_mutex_unlock(&L->mu);
	L->total_rows += rows;
	L->total_bytes += bytes;
	if (claim)
	{
		if (!loader_set_state(L->ctl, L, t, true, &err))
		{
			loader_fail_pg(L, t, input_lineno(R->in), &err);
			return L->err_code;
		}
		pthread_mutex_lock(&L->mu);
		L->ndone++;
		pthread_mutex_unlock(&L->mu);
	}
	return EXIT_DONE;
}

/* Values fields f[0..n) as a text[] literal; NULL when all are \N
 * (unbounded), an empty string for a malformed field or some \N. */
static char *
array_literal(struct reader *R, const struct field *f, size_t n)
{
	struct buf lit = BUF_INIT;
	size_t nulls = 0;

	buf_putc(&lit, '{');
	for (size_t i = 0; i < n; i++)
	{
		bool is_null;

		buf_reset(&R->tmp);
		if (!copy_unescape(f[i].p, f[i].n, &R->tmp, &is_null))
		{
			buf_free(&lit);
			return xstrdup("");
		}
		nulls += is_null;
		buf_puts(&lit, i ? ",\"" : "\"");
		for (size_t j = 0; j < R->tmp.len; j++)
		{
			if (R->tmp.data[j] == '"' || R->tmp.data[j] == '\\')
				buf_putc(&lit, '\\');
			buf_putc(&lit, R->tmp.data[j]);
		}
		buf_putc(&lit, '"');
	}
	buf_putc(&lit, '}');
	if (nulls == n)
	{
		buf_free(&lit);
		return NULL;
	}
	if (nulls > 0)
	{
		buf_free(&lit);
		return xstrdup("");
	}
	return buf_cstr(&lit);
}

/* CHUNK: the next frame is the whole of key range (lo, hi] of a table. */
static int
read_chunk(struct reader *R, size_t nf)
{
	struct field *f = R->f;
	struct chunkrec *ck;
	uint64_t nkey;
	struct ltable *t;
	int rc;

	if (!R->chunks)
		return malformed(R, "CHUNK outside a chunk section");
	if (nf < 4 || !field_u64(&f[3], &nkey) || nkey == 0 || nkey > 32 || nf != 4 + 3 * nkey)
		return malformed(R, "malformed CHUNK record: expected schema, table, a key column count, the key columns, the lo and the hi values");
	if (R->ck)
		return malformed(R, "CHUNK after a CHUNK: expected its frame");
	if ((rc = lookup_table(R, &f[1], true, &t)) != EXIT_DONE)
		return rc;
	if (!t->keyed)
		return malformed(R, "CHUNK of %s.%s, which this section copies in one piece", t->schema, t->name);
	if (t->tabledone)
		return malformed(R, "CHUNK of %s.%s after its TABLEDONE", t->schema, t->name);
	ck = xcalloc(1, sizeof(*ck));
	ck->cols = array_literal(R, &f[4], nkey);
	ck->lo = array_literal(R, &f[4 + nkey], nkey);
	ck->hi = array_literal(R, &f[4 + 2 * nkey], nkey);
	if (ck->cols == NULL || ck->cols[0] == '\0' || (ck->lo && ck->lo[0] == '\0') ||
		(ck->hi && ck->hi[0] == '\0'))
	{
		chunkrec_free(ck);
		return malformed(R, "malformed CHUNK of %s.%s: a bad value, or a bound with some but not all values \\N",
						 t->schema, t->name);
	}
	R->ck = ck;
	R->ck_table = t;
	return EXIT_DONE;
}

/* Read up to SNAPSHOTDONE (CHUNKSDONE). EXIT_DONE with *position, or an error code. */
static int
read_section(struct reader *R, lsn_t start, lsn_t *position)
{
	for (;;)
	{
		const char *line;
		size_t len, nf;
		enum input_status st = input_next(R->in, &line, &len, 1000);

		if (st == IN_AGAIN || (st == IN_LINE && R->cur == NULL))
		{
			if (R->tick)
				R->tick();
			if (sig_fd() >= 0 && sig_stop_requested())
			{
				loader_fail(R->L, EXIT_RUNTIME, "%s:%llu: interrupted inside the snapshot section: the copy is incomplete",
					 R->L->input, (unsigned long long) input_lineno(R->in));
				return EXIT_RUNTIME;
			}
			if (loader_failed(R->L))
				return R->L->err_code;
			if (st == IN_AGAIN)
				continue;
		}
		if (st == IN_EOF || st == IN_TRUNCATED)
		{
			if (R->cur)
				loader_fail(R->L, EXIT_RUNTIME, "%s:%llu: truncated: the stream ends inside a frame of %s.%s",
					 R->L->input, (unsigned long long) input_lineno(R->in), R->t->schema, R->t->name);
			else
				loader_fail(R->L, EXIT_RUNTIME, "%s:%llu: truncated: the stream ends inside the snapshot section",
					 R->L->input, (unsigned long long) input_lineno(R->in));
			return EXIT_RUNTIME;
		}
		if (st == IN_TOOLONG)
		{
			/* The line being read is the one after the last returned. */
			loader_fail(R->L, EXIT_UNSUPPORTED, "%s: line %llu is longer than --max-message-bytes (%zu bytes)",
						R->L->input, (unsigned long long) input_lineno(R->in) + 1, input_max_line(R->in));
			return EXIT_UNSUPPORTED;
		}
		if (st != IN_LINE)
		{
			loader_fail(R->L, EXIT_RUNTIME, "%s (after line %llu)", input_error(R->in),
				 (unsigned long long) input_lineno(R->in));
			return EXIT_RUNTIME;
		}
		if (R->cur)
		{
			/* Inside a frame: a row goes on as COPY text, without "ROW"
			 * (which stands alone only for a table of no columns). */
			if (len >= 3 && memcmp(line, "ROW", 3) == 0 &&
				(len == 3 ? R->t->ncols == 0 : line[3] == '\t' && R->t->ncols > 0))
			{
				size_t skip = len == 3 ? 3 : 4;

				put_bytes(R, line + skip, len - skip);
				put_bytes(R, "\n", 1);
				R->frame_rows++;
				R->frame_bytes += len - skip + 1;
				continue;
			}
			if (len >= 8 && memcmp(line, "ENDCOPY\t", 8) == 0)
			{
				int rc = end_frame(R, line, len);

				if (rc != EXIT_DONE)
					return rc;
				continue;
			}
			return malformed(R, "expected ROW or ENDCOPY in the frame of %s.%s", R->t->schema, R->t->name);
		}
		nf = rec_split(line, len, R->f, MAX_FIELDS);
		if (field_eq(&R->f[0], REC_COPY))
		{
			int rc = start_frame(R, nf);

			if (rc != EXIT_DONE)
				return rc;
		}
		else if (field_eq(&R->f[0], REC_TABLEDONE))
		{
			int rc = table_done(R, nf);

			if (rc != EXIT_DONE)
				return rc;
		}
		else if (field_eq(&R->f[0], REC_CHUNK))
		{
			int rc = read_chunk(R, nf);

			if (rc != EXIT_DONE)
				return rc;
		}
		else if (field_eq(&R->f[0], R->chunks ? REC_CHUNKSDONE : REC_SNAPSHOTDONE))
		{
			const char *name = R->chunks ? REC_CHUNKSDONE : REC_SNAPSHOTDONE;

			if (nf != 2 || !field_lsn(&R->f[1], position))
				return malformed(R, "malformed %s record: expected a position", name);
			if (*position != start)
				return malformed(R, "%s position differs from its %s", name, R->chunks ? REC_CHUNKS : REC_SNAPSHOT);
			if (R->ck)
				return malformed(R, "%s after a CHUNK: expected its frame", name);
			return verified(R) ? EXIT_DONE : EXIT_UNSUPPORTED;
		}
		else if (field_is_name(&R->f[0]))
			return malformed(R, "unexpected %.*s record inside the snapshot section",
							 (int) (R->f[0].n > 16 ? 16 : R->f[0].n), R->f[0].p);
		else
			return malformed(R, "malformed record inside the snapshot section");
	}
}

static void
free_tables(struct loader *L)
{
	for (int i = 0; i < NBUCKETS; i++)
		for (struct ltable *t = L->buckets[i], *n; t; t = n)
		{
			n = t->next;
			free(t->key);
			free(t->schema);
			free(t->name);
			free(t->cols);
			free(t->copy_sql);
			free(t);
		}
}

/*
 * The frames were committed with synchronous_commit off. WAL is flushed in
 * order, so one synchronous commit of a transaction that wrote WAL makes
 * every earlier commit of every session durable: the section is on disk
 * before the caller records its position, whatever the caller's session or
 * the server's default says. (A transaction that only took an xid writes no
 * WAL before its commit record and is not flushed: it must write a row.)
 * A section without tables has nothing to flush.
 */
static bool
flush_all(struct loader *L, struct pgerr *err)
{
	const char *params[1] = {L->o->job};

	return conn_command(L->ctl, "BEGIN", 0, NULL, err) &&
		conn_command(L->ctl, "SET LOCAL synchronous_commit = on", 0, NULL, err) &&
		conn_command(L->ctl, "UPDATE pgsync.table_sync SET finished_at = finished_at"
					 " WHERE (job, schema_name, table_name) = (SELECT job, schema_name, table_name"
					 "   FROM pgsync.table_sync WHERE job = $1 LIMIT 1)",
					 1, params, err) &&
		conn_command(L->ctl, "COMMIT", 0, NULL, err);
}

int
snapload_section(struct input *in, const struct field *f, size_t nf,
				 const struct snapload_opts *opts, lsn_t *position)
{
	struct loader L;
	struct reader R;
	struct pgerr err;
	char text[PGERR_TEXT_MAX];
	uint64_t ntables, t0 = now_ms();
	lsn_t start;
	int rc;

	bool chunks = field_eq(&f[0], REC_CHUNKS);
	char lsnbuf[LSN_BUFSZ];

	if (nf != 4 || !field_lsn(&f[1], &start) || !field_u64(&f[3], &ntables) ||
		!copy_field_valid(f[2].p, f[2].n))
	{
		log_error("%s:%llu: malformed %s record: expected a position, a snapshot name and a table count",
				  input_name(in), (unsigned long long) input_lineno(in), chunks ? REC_CHUNKS : REC_SNAPSHOT);
		return EXIT_UNSUPPORTED;
	}
	loader_init(&L, opts, input_name(in));
	if (chunks)
		L.chunks_lsn = lsn_format(start, lsnbuf);

	L.ctl = session_open(opts->conninfo, SESSION_SQL, &err);
	if (L.ctl == NULL)
	{
		char shown[512];

		conn_display(opts->conninfo, shown, sizeof(shown));
		log_error("cannot connect to the target (%s): %s", shown, err.msg);
		free_tables(&L);
		loader_free(&L);
		return EXIT_RUNTIME;
	}
	if (!catalog_ensure(L.ctl, &err) ||
		!conn_command(L.ctl, "SET synchronous_commit = off", 0, NULL, &err))
	{
		log_error("cannot prepare the target for the snapshot: %s", pgerr_text(&err, NULL, text, sizeof(text)));
		PQfinish(L.ctl);
		free_tables(&L);
		loader_free(&L);
		return pgerr_exit_code_setup(err.sqlstate);
	}

	memset(&R, 0, sizeof(R));
	R.L = &L;
	R.in = in;
	R.tick = opts->tick;
	R.chunks = chunks;
	R.f = xcalloc(MAX_FIELDS + 1, sizeof(*R.f));
	rc = loader_start(&L);
	if (rc == EXIT_DONE)
		rc = read_section(&R, start, position);
	loader_stop(&L, R.cur, R.target);
	R.cur = NULL;
	if (rc == EXIT_DONE && L.failed)
		rc = L.err_code;
	/* A chunk section completes the tables it can in its time; its count
	 * is what it may name at most. */
	if (rc == EXIT_DONE && chunks && (uint64_t) L.ntables > ntables)
	{
		log_error("%s:%llu: chunk section names %d tables, its CHUNKS said %llu", L.input,
				  (unsigned long long) input_lineno(in), L.ntables, (unsigned long long) ntables);
		rc = EXIT_UNSUPPORTED;
	}
	else if (rc == EXIT_DONE && !chunks && (L.ndone != L.ntables || (uint64_t) L.ntables != ntables))
	{
		log_error("%s:%llu: snapshot section incomplete: %d of %llu tables done", L.input,
				  (unsigned long long) input_lineno(in), L.ndone, (unsigned long long) ntables);
		rc = EXIT_UNSUPPORTED;
	}
	else if (rc != EXIT_DONE)
		log_error("%s", L.err_msg[0] ? L.err_msg : "snapshot load failed");
	else if (!flush_all(&L, &err))
	{
		log_error("cannot flush the loaded snapshot on the target: %s", pgerr_text(&err, NULL, text, sizeof(text)));
		rc = EXIT_RUNTIME;
	}
	else if (chunks)
		log_info("chunk section loaded: %d tables, %d of them now done, in %.1f s with %d connections",
				 L.ntables, L.ndone, (double) (now_ms() - t0) / 1000.0, L.nw);
	else
		log_info("snapshot loaded: %d tables, %llu rows, %llu bytes in %.1f s with %d connections",
				 L.ntables, (unsigned long long) L.total_rows, (unsigned long long) L.total_bytes,
				 (double) (now_ms() - t0) / 1000.0, L.nw);
	PQfinish(L.ctl);
	chunkrec_free(R.ck);
	buf_free(&R.tmp);
	free(R.f);
	free_tables(&L);
	loader_free(&L);
	return rc;
}
