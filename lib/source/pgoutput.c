#include "pgoutput.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
 * A bounds-checked reader over the message. Every getter fails (and stays
 * failed) when the buffer is too short, so decoding code can read a whole
 * message and check once; nothing is ever read past end.
 */
struct rd {
	const unsigned char *p, *end;
	bool bad;
	const char *what;			/* the field that did not fit */
};

static bool
need(struct rd *r, size_t n, const char *what)
{
	if (r->bad)
		return false;
	if ((size_t) (r->end - r->p) < n)
	{
		r->bad = true;
		r->what = what;
		return false;
	}
	return true;
}

static uint8_t
get8(struct rd *r, const char *what)
{
	if (!need(r, 1, what))
		return 0;
	return *r->p++;
}

static uint16_t
get16(struct rd *r, const char *what)
{
	uint16_t v;

	if (!need(r, 2, what))
		return 0;
	v = (uint16_t) ((r->p[0] << 8) | r->p[1]);
	r->p += 2;
	return v;
}

static uint32_t
get32(struct rd *r, const char *what)
{
	uint32_t v;

	if (!need(r, 4, what))
		return 0;
	v = ((uint32_t) r->p[0] << 24) | ((uint32_t) r->p[1] << 16) |
		((uint32_t) r->p[2] << 8) | (uint32_t) r->p[3];
	r->p += 4;
	return v;
}

static uint64_t
get64(struct rd *r, const char *what)
{
	uint64_t hi = get32(r, what);
	uint64_t lo = get32(r, what);

	return (hi << 32) | lo;
}

/* A NUL-terminated string; the NUL must be inside the buffer. */
static struct pgo_str
getstr(struct rd *r, const char *what)
{
	struct pgo_str s = {"", 0};
	const unsigned char *nul;

	if (r->bad)
		return s;
	nul = memchr(r->p, '\0', (size_t) (r->end - r->p));
	if (nul == NULL)
	{
		r->bad = true;
		r->what = what;
		return s;
	}
	s.p = (const char *) r->p;
	s.len = (uint32_t) (nul - r->p);
	r->p = nul + 1;
	return s;
}

static const unsigned char *
getbytes(struct rd *r, size_t n, const char *what)
{
	const unsigned char *p;

	if (!need(r, n, what))
		return NULL;
	p = r->p;
	r->p += n;
	return p;
}

static bool
fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen)
	{
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return false;
}

static bool
read_tuple(struct rd *r, struct pgo_tuple *t, char *err, size_t errlen)
{
	uint16_t n = get16(r, "tuple column count");

	if (r->bad)
		return false;
	if (n > PGO_MAX_COLS)
		return fail(err, errlen, "tuple has %u columns, more than %d", n, PGO_MAX_COLS);
	t->ncols = n;
	for (uint16_t i = 0; i < n; i++)
	{
		struct pgo_col *c = &t->cols[i];
		uint32_t len;

		c->kind = (char) get8(r, "column kind");
		c->p = NULL;
		c->len = 0;
		switch (c->kind)
		{
			case PGO_NULL:
			case PGO_UNCHANGED:
				break;
			case PGO_TEXT:
			case PGO_BINARY:
				len = get32(r, "column length");
				if (!r->bad && len > INT32_MAX)
					return fail(err, errlen, "column %u has negative length", i + 1);
				c->p = (const char *) getbytes(r, len, "column value");
				c->len = len;
				break;
			default:
				if (r->bad)
					return false;
				return fail(err, errlen, "column %u has unknown kind 0x%02x", i + 1,
							(unsigned) (unsigned char) c->kind);
		}
		if (r->bad)
			return false;
	}
	return true;
}

static bool
read_relation(struct rd *r, struct pgo_msg *m, char *err, size_t errlen)
{
	m->u.rel.relid = get32(r, "relation id");
	m->u.rel.nspname = getstr(r, "namespace");
	m->u.rel.relname = getstr(r, "relation name");
	m->u.rel.replident = (char) get8(r, "replica identity");
	m->u.rel.natts = get16(r, "attribute count");
	if (r->bad)
		return false;
	if (!strchr("dfin", m->u.rel.replident) || m->u.rel.replident == '\0')
		return fail(err, errlen, "relation has unknown replica identity 0x%02x",
					(unsigned) (unsigned char) m->u.rel.replident);
	if (m->u.rel.natts > PGO_MAX_COLS)
		return fail(err, errlen, "relation has %u attributes, more than %d",
					m->u.rel.natts, PGO_MAX_COLS);
	for (uint16_t i = 0; i < m->u.rel.natts; i++)
	{
		struct pgo_attr *a = &m->attrs[i];

		a->flags = get8(r, "attribute flags");
		a->name = getstr(r, "attribute name");
		a->typoid = get32(r, "attribute type");
		a->typmod = (int32_t) get32(r, "attribute type modifier");
		if (r->bad)
			return false;
	}
	return true;
}

/* INSERT, UPDATE, DELETE after the optional xid. */
static bool
read_change(struct rd *r, struct pgo_msg *m, char *err, size_t errlen)
{
	char action;

	m->u.change.relid = get32(r, "relation id");
	m->u.change.old_kind = 0;
	m->oldtup.ncols = 0;
	m->newtup.ncols = 0;
	action = (char) get8(r, "tuple marker");
	if (r->bad)
		return false;
	if (m->type == PGO_INSERT)
	{
		if (action != 'N')
			return fail(err, errlen, "insert: expected new tuple marker 'N', got 0x%02x",
						(unsigned) (unsigned char) action);
		return read_tuple(r, &m->newtup, err, errlen);
	}
	if (m->type == PGO_DELETE)
	{
		if (action != 'K' && action != 'O')
			return fail(err, errlen, "delete: expected old tuple marker 'K' or 'O', got 0x%02x",
						(unsigned) (unsigned char) action);
		m->u.change.old_kind = action;
		return read_tuple(r, &m->oldtup, err, errlen);
	}
	if (action == 'K' || action == 'O')
	{
		m->u.change.old_kind = action;
		if (!read_tuple(r, &m->oldtup, err, errlen))
			return false;
		action = (char) get8(r, "new tuple marker");
		if (r->bad)
			return false;
	}
	if (action != 'N')
		return fail(err, errlen, "update: expected tuple marker 'N', 'K' or 'O', got 0x%02x",
					(unsigned) (unsigned char) action);
	return read_tuple(r, &m->newtup, err, errlen);
}

bool
pgo_streamed_has_xid(char type)
{
	switch (type)
	{
		case PGO_RELATION:
		case PGO_TYPE:
		case PGO_INSERT:
		case PGO_UPDATE:
		case PGO_DELETE:
		case PGO_TRUNCATE:
		case PGO_MESSAGE:
			return true;
		default:
			return false;
	}
}

bool
pgo_decode(const unsigned char *buf, size_t len, bool in_stream,
		   struct pgo_msg *m, char *err, size_t errlen)
{
	struct rd r = {buf, buf + len, false, NULL};
	bool ok = true;
	uint32_t msglen;

	if (err && errlen)
		err[0] = '\0';
	m->has_xid = false;
	m->xid = 0;
	if (len == 0)
		return fail(err, errlen, "empty message");
	m->type = (char) get8(&r, "type");

	if (in_stream && pgo_streamed_has_xid(m->type))
	{
		m->has_xid = true;
		m->xid = get32(&r, "transaction id");
	}

	switch (m->type)
	{
		case PGO_BEGIN:
			m->u.begin.final_lsn = get64(&r, "final lsn");
			m->u.begin.commit_time = (int64_t) get64(&r, "commit time");
			m->xid = get32(&r, "transaction id");
			break;
		case PGO_COMMIT:
			m->u.commit.flags = get8(&r, "flags");
			m->u.commit.commit_lsn = get64(&r, "commit lsn");
			m->u.commit.end_lsn = get64(&r, "end lsn");
			m->u.commit.commit_time = (int64_t) get64(&r, "commit time");
			break;
		case PGO_ORIGIN:
			m->u.origin.lsn = get64(&r, "origin lsn");
			m->u.origin.name = getstr(&r, "origin name");
			break;
		case PGO_RELATION:
			ok = read_relation(&r, m, err, errlen);
			break;
		case PGO_TYPE:
			m->u.typ.typoid = get32(&r, "type id");
			m->u.typ.nspname = getstr(&r, "type namespace");
			m->u.typ.typname = getstr(&r, "type name");
			break;
		case PGO_INSERT:
		case PGO_UPDATE:
		case PGO_DELETE:
			ok = read_change(&r, m, err, errlen);
			break;
		case PGO_TRUNCATE:
			m->u.truncate.nrelids = get32(&r, "relation count");
			m->u.truncate.flags = get8(&r, "truncate flags");
			if (!r.bad && m->u.truncate.nrelids > (size_t) (r.end - r.p) / 4)
				return fail(err, errlen, "truncate: %u relations do not fit in the message",
							m->u.truncate.nrelids);
			m->u.truncate.relids = getbytes(&r, (size_t) m->u.truncate.nrelids * 4, "relation ids");
			break;
		case PGO_MESSAGE:
			m->u.message.flags = get8(&r, "message flags");
			m->u.message.lsn = get64(&r, "message lsn");
			m->u.message.prefix = getstr(&r, "message prefix");
			msglen = get32(&r, "message length");
			if (!r.bad && msglen > INT32_MAX)
				return fail(err, errlen, "message has negative length");
			m->u.message.content.p = (const char *) getbytes(&r, msglen, "message content");
			m->u.message.content.len = msglen;
			break;
		case PGO_STREAM_START:
			m->xid = get32(&r, "transaction id");
			m->u.stream_start.first_segment = get8(&r, "first segment flag") == 1;
			break;
		case PGO_STREAM_STOP:
			break;
		case PGO_STREAM_COMMIT:
			m->xid = get32(&r, "transaction id");
			m->u.commit.flags = get8(&r, "flags");
			m->u.commit.commit_lsn = get64(&r, "commit lsn");
			m->u.commit.end_lsn = get64(&r, "end lsn");
			m->u.commit.commit_time = (int64_t) get64(&r, "commit time");
			break;
		case PGO_STREAM_ABORT:
			m->xid = get32(&r, "transaction id");
			m->u.stream_abort.subxid = get32(&r, "subtransaction id");
			/* Protocol 4 with parallel streaming adds the abort LSN and time. */
			m->u.stream_abort.has_info = !r.bad && r.end - r.p >= 16;
			m->u.stream_abort.abort_lsn = 0;
			m->u.stream_abort.abort_time = 0;
			if (m->u.stream_abort.has_info)
			{
				m->u.stream_abort.abort_lsn = get64(&r, "abort lsn");
				m->u.stream_abort.abort_time = (int64_t) get64(&r, "abort time");
			}
			break;
		default:
			return fail(err, errlen, "unknown message type 0x%02x",
						(unsigned) (unsigned char) m->type);
	}
	/* Sub-readers stop quietly at a short buffer: report it here. */
	if (r.bad)
		return fail(err, errlen, "%s message truncated at its %s",
					pgo_type_name(m->type), r.what ? r.what : "end");
	if (!ok)
		return false;
	if (r.p != r.end)
		return fail(err, errlen, "%s message has %zu unexpected trailing bytes",
					pgo_type_name(m->type), (size_t) (r.end - r.p));
	if ((m->type == PGO_COMMIT || m->type == PGO_STREAM_COMMIT) && m->u.commit.flags != 0)
		return fail(err, errlen, "%s message has unknown flags 0x%02x",
					pgo_type_name(m->type), m->u.commit.flags);
	return true;
}

uint32_t
pgo_truncate_relid(const struct pgo_msg *m, uint32_t i)
{
	const unsigned char *p = m->u.truncate.relids + (size_t) i * 4;

	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) |
		((uint32_t) p[2] << 8) | (uint32_t) p[3];
}

const char *
pgo_type_name(char type)
{
	switch (type)
	{
		case PGO_BEGIN: return "begin";
		case PGO_COMMIT: return "commit";
		case PGO_ORIGIN: return "origin";
		case PGO_RELATION: return "relation";
		case PGO_TYPE: return "type";
		case PGO_INSERT: return "insert";
		case PGO_UPDATE: return "update";
		case PGO_DELETE: return "delete";
		case PGO_TRUNCATE: return "truncate";
		case PGO_MESSAGE: return "message";
		case PGO_STREAM_START: return "stream start";
		case PGO_STREAM_STOP: return "stream stop";
		case PGO_STREAM_COMMIT: return "stream commit";
		case PGO_STREAM_ABORT: return "stream abort";
		default: return "unknown";
	}
}
