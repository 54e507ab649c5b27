/*
 * Loading a snapshot or chunk section, the reader's side: the caller's thread reads
 * the stream, has the stream's parser check each line (lib/stream: the
 * grammar and the counts of frames and tables are its), and cuts each frame
 * into chunks that go, in order, to one worker of loadworker (the one with
 * the least queued, so several workers load one large table). Whether a
 * table is done is loadworker's: this side only says it read TABLEDONE.
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
#include "loadworker.h"
#include "log.h"
#include "sig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
	struct loader *L;
	struct input *in;
	struct streamread *sr;		/* the stream's parser: the grammar is checked there */
	struct chunk *cur;			/* being filled, NULL outside a frame */
	struct lworker *target;		/* the frame's worker */
	struct ltable *t;			/* the frame's table */
	const char *shown;			/* ... named for messages, as the stream writes it */
	uint64_t frame_line;
	struct chunkrec *ck;		/* the CHUNK read for the next frame, then the frame's */
	struct buf tmp;
	void (*tick)(void);
};

static void
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

/* The loader's table of a table the stream names: added on first use. */
static struct ltable *
table_of(struct reader *R, struct sr_table *st)
{
	if (st->user == NULL)
		st->user = loader_add_table(R->L, st, input_lineno(R->in));
	return st->user;
}

/* Build "COPY schema.table (cols) FROM STDIN" from the frame's column fields. */
static void
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
		bool is_null;

		/* The parser checked that each name unescapes. */
		buf_reset(&R->tmp);
		copy_unescape(cols[i].p, cols[i].n, &R->tmp, &is_null);
		q = conn_quote_ident(R->L->ctl, buf_cstr(&R->tmp));
		buf_printf(&sql, "%s%s", i ? ", " : " (", q);
		free(q);
	}
	buf_puts(&sql, ncols ? ") FROM STDIN" : " FROM STDIN");
	t->copy_sql = buf_cstr(&sql);
}

static int
start_frame(struct reader *R, const struct sr_record *rec)
{
	struct ltable *t = table_of(R, rec->table);

	if (t == NULL)
		return R->L->err_code;
	if (t->copy_sql == NULL)
		build_copy_sql(R, t, rec->colnames, rec->table->ncols);
	R->t = t;
	R->shown = rec->table->shown;
	R->frame_line = input_lineno(R->in);
	R->target = loader_frame_start(R->L, t);
	R->cur = loader_get_chunk(R->L);
	R->cur->t = t;
	R->cur->first = true;
	R->cur->copy_line = R->frame_line;
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
end_frame(struct reader *R, const struct sr_record *rec)
{
	/* The frame's last chunk makes a worker commit it: only once the
	 * compressed frame around it is verified. */
	if (!verified(R))
		return EXIT_UNSUPPORTED;
	R->cur->last = true;
	R->cur->ck = R->ck;
	R->ck = NULL;
	R->cur->nrows = rec->nrows;
	R->cur->nbytes = rec->nbytes;
	loader_push(R->L, R->target, R->cur);
	R->cur = NULL;
	return EXIT_DONE;
}

static int
table_done(struct reader *R, const struct sr_record *rec)
{
	struct ltable *t = table_of(R, rec->table);

	if (t == NULL)
		return R->L->err_code;
	if (!verified(R))
		return EXIT_UNSUPPORTED;
	R->L->total_rows += rec->nrows;
	R->L->total_bytes += rec->nbytes;
	return loader_table_done(R->L, t, input_lineno(R->in)) ? EXIT_DONE : R->L->err_code;
}

/* Values fields f[0..n) as a text[] literal; NULL when all are \N
 * (unbounded). The parser let only valid values through, and a bound
 * either all \N or none. */
static char *
array_literal(struct reader *R, const struct field *f, int n)
{
	struct buf lit = BUF_INIT;

	if (field_is_null(f[0].p, f[0].n))
		return NULL;
	buf_putc(&lit, '{');
	for (int i = 0; i < n; i++)
	{
		bool is_null;

		buf_reset(&R->tmp);
		copy_unescape(f[i].p, f[i].n, &R->tmp, &is_null);
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
	return buf_cstr(&lit);
}

/* CHUNK: the next frame is the whole of key range (lo, hi] of a table,
 * recorded with it in pgsync.table_chunk. */
static int
read_chunk(struct reader *R, const struct sr_record *rec)
{
	struct chunkrec *ck;

	if (table_of(R, rec->table) == NULL)
		return R->L->err_code;
	ck = xcalloc(1, sizeof(*ck));
	ck->cols = array_literal(R, rec->key_cols, rec->nkey);
	ck->lo = array_literal(R, rec->lo, rec->nkey);
	ck->hi = array_literal(R, rec->hi, rec->nkey);
	R->ck = ck;
	return EXIT_DONE;
}

/* One line of the section, parsed. */
static int
on_record(struct reader *R, const char *line, size_t len, lsn_t *position, bool *end)
{
	struct sr_record rec;

	if (!sr_parse(R->sr, line, len, &rec))
		return malformed(R, "%s", sr_error(R->sr));
	switch (rec.type)
	{
		case SR_ROW:
			put_bytes(R, rec.copy_row, rec.copy_len);
			put_bytes(R, "\n", 1);
			return EXIT_DONE;
		case SR_COPY:
			return start_frame(R, &rec);
		case SR_ENDCOPY:
			return end_frame(R, &rec);
		case SR_TABLEDONE:
			return table_done(R, &rec);
		case SR_CHUNK:
			return read_chunk(R, &rec);
		case SR_SNAPSHOTDONE:
		case SR_CHUNKSDONE:
			*position = rec.lsn;
			*end = true;
			return verified(R) ? EXIT_DONE : EXIT_UNSUPPORTED;
		default:
			/* The parser lets nothing else stand inside a section. */
			return malformed(R, "unexpected %s record inside the snapshot section", sr_type_name(rec.type));
	}
}

/* Read up to SNAPSHOTDONE (CHUNKSDONE). EXIT_DONE with *position, or an error code. */
static int
read_section(struct reader *R, lsn_t *position)
{
	for (;;)
	{
		const char *line;
		size_t len;
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
				loader_fail(R->L, EXIT_RUNTIME, "%s:%llu: truncated: the stream ends inside a frame of %s",
					 R->L->input, (unsigned long long) input_lineno(R->in), R->shown);
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
		{
			bool end = false;
			int rc = on_record(R, line, len, position, &end);

			if (rc != EXIT_DONE || end)
				return rc;
		}
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
snapload_section(struct input *in, struct streamread *sr, const struct sr_record *snapshot,
				 const struct snapload_opts *opts, lsn_t *position)
{
	struct loader L;
	struct reader R;
	struct pgerr err;
	char text[PGERR_TEXT_MAX];
	uint64_t ntables = snapshot->ntables, t0 = now_ms();
	bool chunks = snapshot->type == SR_CHUNKS;
	char lsnbuf[LSN_BUFSZ];
	int rc;

	loader_init(&L, opts, input_name(in));
	if (chunks)
		L.chunks_lsn = lsn_format(snapshot->lsn, lsnbuf);

	L.ctl = session_open(opts->conninfo, SESSION_SQL, &err);
	if (L.ctl == NULL)
	{
		char shown[512];

		conn_display(opts->conninfo, shown, sizeof(shown));
		log_error("cannot connect to the target (%s): %s", shown, err.msg);
		loader_free(&L);
		return EXIT_RUNTIME;
	}
	if (!catalog_ensure(L.ctl, &err) ||
		!conn_command(L.ctl, "SET synchronous_commit = off", 0, NULL, &err))
	{
		log_error("cannot prepare the target for the snapshot: %s", pgerr_text(&err, NULL, text, sizeof(text)));
		PQfinish(L.ctl);
		loader_free(&L);
		return pgerr_exit_code_setup(err.sqlstate);
	}

	memset(&R, 0, sizeof(R));
	R.L = &L;
	R.in = in;
	R.sr = sr;
	R.tick = opts->tick;
	rc = loader_start(&L);
	if (rc == EXIT_DONE)
		rc = read_section(&R, position);
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
	else if (rc == EXIT_DONE && !chunks && (loader_tables_done(&L) != L.ntables || (uint64_t) L.ntables != ntables))
	{
		log_error("%s:%llu: snapshot section incomplete: %d of %llu tables done", L.input,
				  (unsigned long long) input_lineno(in), loader_tables_done(&L), (unsigned long long) ntables);
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
				 L.ntables, loader_tables_done(&L), (double) (now_ms() - t0) / 1000.0, L.nw);
	else
		log_info("snapshot loaded: %d tables, %llu rows, %llu bytes in %.1f s with %d connections",
				 L.ntables, (unsigned long long) L.total_rows, (unsigned long long) L.total_bytes,
				 (double) (now_ms() - t0) / 1000.0, L.nw);
	PQfinish(L.ctl);
	chunkrec_free(R.ck);
	buf_free(&R.tmp);
	loader_free(&L);
	return rc;
}
