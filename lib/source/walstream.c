#include "walstream.h"
#include "buf.h"
#include "common.h"
#include "log.h"
#include "pgoutput.h"
#include "spool.h"
#include "walencode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records collect here and go to the output in chunks of about this size. */
#define WS_CHUNK (64 * 1024)

/* Counters for logs. */
struct ws_stats {
	uint64_t transactions, changes, streamed, aborted, bytes;
};

struct walstream {
	struct walstream_config cfg;
	struct out *out;
	struct buf rb;
	struct walenc *enc;
	struct spool *spool;
	struct pgo_msg *msg;
	bool in_txn;				/* BEGIN written, COMMIT not yet */
	size_t txn_start;			/* in_txn: where its BEGIN starts in rb */
	uint32_t txn_xid;
	bool in_stream;				/* between STREAM START and STREAM STOP */
	lsn_t pos;					/* header start, last COMMIT end or POSITION */
	lsn_t written;				/* pos, or a later keepalive position */
	lsn_t written_before;		/* the most written by the streams before this one */
	uint64_t last_position_ms;
	int exit_code;
	struct ws_stats st;
	struct buf history;			/* what headers carry as history= */
};

static enum ws_status
failed(struct walstream *ws, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum ws_status
failed(struct walstream *ws, int code, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	ws->exit_code = code;
	return WS_FAILED;
}

struct walstream *
ws_new(const struct walstream_config *cfg, struct out *out)
{
	struct walstream *ws = xcalloc(1, sizeof(*ws));

	ws->cfg = *cfg;
	ws->out = out;
	ws->enc = walenc_new();
	ws->spool = spool_new(cfg->spool_dir, cfg->max_message);
	ws->msg = xmalloc(sizeof(*ws->msg));
	return ws;
}

void
ws_free(struct walstream *ws)
{
	if (ws == NULL)
		return;
	walenc_free(ws->enc);
	spool_free(ws->spool);
	free(ws->msg);
	buf_free(&ws->rb);
	buf_free(&ws->history);
	free(ws);
}

static enum ws_status
out_status(struct walstream *ws, enum out_status st)
{
	if (st == OUT_CLOSED)
		return WS_CLOSED;
	if (st == OUT_ERROR)
	{
		ws->exit_code = EXIT_RUNTIME;
		return WS_FAILED;
	}
	return WS_OK;
}

/*
 * Hand the first n bytes of rb to the output; at_boundary: they end
 * between transactions, where a compressed frame may end. An open
 * transaction's BEGIN is then at the start of rb, or already handed on.
 */
static enum ws_status
drain_to(struct walstream *ws, size_t n, bool at_boundary)
{
	enum out_status st = OUT_OK;

	if (n > 0)
	{
		ws->st.bytes += n;
		st = out_write(ws->out, ws->rb.data, n);
		memmove(ws->rb.data, ws->rb.data + n, ws->rb.len - n);
		ws->rb.len -= n;
		ws->txn_start = 0;
	}
	if (st == OUT_OK && at_boundary)
		st = out_boundary(ws->out);
	return out_status(ws, st);
}

static enum ws_status
drain(struct walstream *ws)
{
	return drain_to(ws, ws->rb.len, !ws->in_txn);
}

static enum ws_status
maybe_drain(struct walstream *ws)
{
	return ws->rb.len >= WS_CHUNK ? drain(ws) : WS_OK;
}

enum ws_status
ws_flush(struct walstream *ws)
{
	enum ws_status st = drain(ws);

	return st == WS_OK ? out_status(ws, out_flush(ws->out)) : st;
}

enum ws_status
ws_flush_whole(struct walstream *ws)
{
	enum ws_status st;

	if (!ws->in_txn)
		return ws_flush(ws);
	/* Nothing before the BEGIN: the transaction's earlier chunks went on
	 * already, and no frame may end inside it. */
	st = drain_to(ws, ws->txn_start, ws->txn_start > 0);
	return st == WS_OK ? out_status(ws, out_flush(ws->out)) : st;
}

/* BEGIN of a transaction, remembering where it starts (ws_flush_whole). */
static void
open_txn(struct walstream *ws, uint32_t xid, lsn_t commit_lsn, int64_t when)
{
	ws->txn_start = ws->rb.len;
	walenc_begin(&ws->rb, xid, commit_lsn, when);
	ws->in_txn = true;
	ws->txn_xid = xid;
}

enum ws_status
ws_begin_stream(struct walstream *ws, const char *sysid, uint32_t timeline,
				const char *slot, lsn_t start, int server_version_num)
{
	spool_reset(ws->spool);
	ws->in_txn = false;
	ws->in_stream = false;
	if (ws->written > ws->written_before)
		ws->written_before = ws->written;
	ws->pos = start;
	ws->written = start;
	walenc_header(ws->enc, &ws->rb, sysid, timeline, slot, start, server_version_num,
				  buf_cstr(&ws->history));
	return drain(ws);
}

void
ws_set_history(struct walstream *ws, const char *history)
{
	buf_reset(&ws->history);
	buf_puts(&ws->history, history);
}

static bool
reached(const struct walstream *ws, lsn_t lsn)
{
	return ws->cfg.endpos != LSN_INVALID && lsn >= ws->cfg.endpos;
}

/* A change, relation, type, origin or transactional message inside an open
 * transaction: from the connection or replayed from the spool. Relation and
 * type messages come here from outside a transaction too (ws_message). */
static enum ws_status
in_txn_message(struct walstream *ws, const struct pgo_msg *m)
{
	char err[512];
	size_t before = ws->rb.len;

	switch (m->type)
	{
		case PGO_RELATION:
			walenc_relation(ws->enc, m);
			return WS_OK;
		case PGO_TYPE:
			walenc_type(ws->enc, m);
			return WS_OK;
		case PGO_ORIGIN:
			walenc_origin(&ws->rb, m);
			return WS_OK;
		case PGO_MESSAGE:
			if (!(m->u.message.flags & PGO_MESSAGE_TRANSACTIONAL))
				return failed(ws, EXIT_RUNTIME, "protocol violation: non-transactional message inside transaction %u",
							  ws->txn_xid);
			if (!walenc_own_message(m))
				walenc_message(&ws->rb, m);
			break;
		case PGO_INSERT:
		case PGO_UPDATE:
		case PGO_DELETE:
		case PGO_TRUNCATE:
			if (!walenc_change(ws->enc, &ws->rb, m, err, sizeof(err)))
				return failed(ws, EXIT_RUNTIME, "cannot encode %s in transaction %u: %s",
							  pgo_type_name(m->type), ws->txn_xid, err);
			ws->st.changes++;
			break;
		default:
			return failed(ws, EXIT_RUNTIME, "protocol violation: %s message inside transaction %u",
						  pgo_type_name(m->type), ws->txn_xid);
	}
	/* The reader's line limit is the same --max-message-bytes: a record it
	 * would reject must stop here, not there. */
	if (ws->rb.len - before > ws->cfg.max_message)
		return failed(ws, EXIT_RUNTIME, "%s in transaction %u is %zu bytes as a stream record, over the limit of %zu bytes (--max-message-bytes)",
					  pgo_type_name(m->type), ws->txn_xid, ws->rb.len - before, ws->cfg.max_message);
	return maybe_drain(ws);
}

static enum ws_status
commit(struct walstream *ws, uint32_t xid, lsn_t commit_lsn, lsn_t end_lsn, int64_t when)
{
	walenc_commit(&ws->rb, xid, commit_lsn, end_lsn, when);
	ws->in_txn = false;
	ws->pos = ws->written = end_lsn;
	ws->st.transactions++;
	/* Nothing else can commit between commit_lsn and end_lsn. */
	if (reached(ws, end_lsn))
		return WS_ENDPOS;
	return maybe_drain(ws);
}

static enum ws_status
stream_commit(struct walstream *ws, const struct pgo_msg *c)
{
	uint32_t xid = c->xid;
	lsn_t commit_lsn = c->u.commit.commit_lsn, end_lsn = c->u.commit.end_lsn;
	int64_t when = c->u.commit.commit_time;
	char err[512];
	const unsigned char *p;
	size_t n;
	int rc;
	enum ws_status st;

	if (reached(ws, commit_lsn))
		return WS_ENDPOS;
	if (!spool_replay_open(ws->spool, xid, err, sizeof(err)))
		return failed(ws, EXIT_RUNTIME, "protocol violation: %s", err);
	open_txn(ws, xid, commit_lsn, when);
	/* c points into ws->msg, which the replayed messages overwrite. */
	while ((rc = spool_replay_next(ws->spool, &p, &n, err, sizeof(err))) == 1)
	{
		if (!pgo_decode(p, n, true, ws->msg, err, sizeof(err)))
			return failed(ws, EXIT_RUNTIME, "cannot decode streamed message of transaction %u: %s", xid, err);
		if ((st = in_txn_message(ws, ws->msg)) != WS_OK)
			return st;
	}
	spool_replay_close(ws->spool);
	if (rc < 0)
		return failed(ws, EXIT_RUNTIME, "%s", err);
	ws->st.streamed++;
	return commit(ws, xid, commit_lsn, end_lsn, when);
}

/* Inside STREAM START ... STOP: spool, after reading the (sub)xid only;
 * the message is decoded in full when its transaction commits. */
static enum ws_status
spool_message(struct walstream *ws, const unsigned char *p, size_t n)
{
	char err[512];
	uint32_t sub = 0;

	if (pgo_streamed_has_xid((char) p[0]))
	{
		if (n < 5)
			return failed(ws, EXIT_RUNTIME, "cannot decode streamed %s message: too short", pgo_type_name((char) p[0]));
		sub = ((uint32_t) p[1] << 24) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 8) | p[4];
	}
	else if (p[0] != PGO_ORIGIN)
		return failed(ws, EXIT_RUNTIME, "protocol violation: %s message inside a stream block",
					  pgo_type_name((char) p[0]));
	if (!spool_append(ws->spool, sub, p, n, err, sizeof(err)))
		return failed(ws, EXIT_RUNTIME, "%s", err);
	return WS_OK;
}

static enum ws_status
own_or_plain_message(struct walstream *ws, const struct pgo_msg *m)
{
	if (m->u.message.flags & PGO_MESSAGE_TRANSACTIONAL)
	{
		if (!ws->in_txn)
			return failed(ws, EXIT_RUNTIME, "protocol violation: transactional message outside a transaction");
		return in_txn_message(ws, m);
	}
	if (ws->in_txn)
		return failed(ws, EXIT_RUNTIME, "protocol violation: non-transactional message inside transaction %u",
					  ws->txn_xid);
	/*
	 * Its LSN is where its WAL record ends, and it is decoded in WAL order:
	 * every commit below that LSN has been sent. A record ending past endpos
	 * may start at or after it, where the next run begins: leave it there.
	 */
	if (ws->cfg.endpos != LSN_INVALID && m->u.message.lsn > ws->cfg.endpos)
		return WS_ENDPOS;
	if (walenc_own_message(m))
	{
		if (m->u.message.lsn > ws->pos)
		{
			ws->pos = ws->written = m->u.message.lsn;
			walenc_position(&ws->rb, ws->pos);
		}
	}
	else
		walenc_message(&ws->rb, m);
	if (reached(ws, m->u.message.lsn))
		return WS_ENDPOS;
	return maybe_drain(ws);
}

enum ws_status
ws_message(struct walstream *ws, const unsigned char *p, size_t n)
{
	struct pgo_msg *m = ws->msg;
	char err[512];
	enum ws_status st;

	if (n > ws->cfg.max_message)
		return failed(ws, EXIT_RUNTIME, "a change of %zu bytes exceeds the limit of %zu bytes (--max-message-bytes)",
					  n, ws->cfg.max_message);
	if (ws->in_stream && n > 0 && p[0] != PGO_STREAM_STOP)
		return spool_message(ws, p, n);
	if (!pgo_decode(p, n, false, m, err, sizeof(err)))
		return failed(ws, EXIT_RUNTIME, "cannot decode pgoutput message: %s", err);

	switch (m->type)
	{
		case PGO_BEGIN:
			if (ws->in_txn)
				return failed(ws, EXIT_RUNTIME, "protocol violation: begin inside transaction %u", ws->txn_xid);
			if (reached(ws, m->u.begin.final_lsn))
				return WS_ENDPOS;
			open_txn(ws, m->xid, m->u.begin.final_lsn, m->u.begin.commit_time);
			return WS_OK;
		case PGO_COMMIT:
			if (!ws->in_txn)
				return failed(ws, EXIT_RUNTIME, "protocol violation: commit outside a transaction");
			return commit(ws, ws->txn_xid, m->u.commit.commit_lsn, m->u.commit.end_lsn,
						  m->u.commit.commit_time);
		case PGO_RELATION:
		case PGO_TYPE:
			return in_txn_message(ws, m);
		case PGO_MESSAGE:
			return own_or_plain_message(ws, m);
		case PGO_STREAM_START:
			if (ws->in_txn)
				return failed(ws, EXIT_RUNTIME, "protocol violation: stream start inside transaction %u", ws->txn_xid);
			if (!spool_start(ws->spool, m->xid, m->u.stream_start.first_segment, err, sizeof(err)))
				return failed(ws, EXIT_RUNTIME, "%s", err);
			ws->in_stream = true;
			return WS_OK;
		case PGO_STREAM_STOP:
			if (!ws->in_stream)
				return failed(ws, EXIT_RUNTIME, "protocol violation: stream stop outside a stream block");
			ws->in_stream = false;
			if (!spool_stop(ws->spool, err, sizeof(err)))
				return failed(ws, EXIT_RUNTIME, "%s", err);
			return WS_OK;
		case PGO_STREAM_COMMIT:
			if (ws->in_txn)
				return failed(ws, EXIT_RUNTIME, "protocol violation: stream commit inside transaction %u", ws->txn_xid);
			return stream_commit(ws, m);
		case PGO_STREAM_ABORT:
			if (!spool_abort(ws->spool, m->xid, m->u.stream_abort.subxid, err, sizeof(err)))
				return failed(ws, EXIT_RUNTIME, "%s", err);
			if (m->xid == m->u.stream_abort.subxid)
				ws->st.aborted++;
			return WS_OK;
		default:
			if (!ws->in_txn)
				return failed(ws, EXIT_RUNTIME, "protocol violation: %s message outside a transaction",
							  pgo_type_name(m->type));
			st = in_txn_message(ws, m);
			return st;
	}
}

enum ws_status
ws_keepalive(struct walstream *ws, lsn_t wal_end, uint64_t now)
{
	if (ws->in_txn)
		return WS_OK;
	/* Everything before wal_end was decoded, so every commit below it sent. */
	if (reached(ws, wal_end))
		return WS_ENDPOS;
	if (wal_end > ws->written)
		ws->written = wal_end;
	if (wal_end > ws->pos && now - ws->last_position_ms >= 1000)
	{
		ws->pos = wal_end;
		ws->last_position_ms = now;
		walenc_position(&ws->rb, wal_end);
		return maybe_drain(ws);
	}
	return WS_OK;
}

void
ws_set_endpos(struct walstream *ws, lsn_t endpos)
{
	ws->cfg.endpos = endpos;
}

enum ws_status
ws_end(struct walstream *ws)
{
	walenc_end(&ws->rb, ws->cfg.endpos);
	return ws_flush(ws);
}

bool
ws_in_transaction(const struct walstream *ws)
{
	return ws->in_txn;
}

lsn_t
ws_written(const struct walstream *ws)
{
	return ws->written;
}

lsn_t
ws_written_ever(const struct walstream *ws)
{
	return ws->written > ws->written_before ? ws->written : ws->written_before;
}

int
ws_exit_code(const struct walstream *ws)
{
	return ws->exit_code ? ws->exit_code : EXIT_RUNTIME;
}

static void
ws_stats(const struct walstream *ws, struct ws_stats *st)
{
	*st = ws->st;
	st->bytes += ws->rb.len;
}

void
ws_log_stats(const struct walstream *ws)
{
	struct ws_stats st;
	char a[LSN_BUFSZ];

	ws_stats(ws, &st);
	log_info("at %s: %llu transactions (%llu streamed, %llu aborted), %llu changes, %llu bytes written",
			 lsn_format(ws->pos, a), (unsigned long long) st.transactions,
			 (unsigned long long) st.streamed, (unsigned long long) st.aborted,
			 (unsigned long long) st.changes, (unsigned long long) st.bytes);
}
