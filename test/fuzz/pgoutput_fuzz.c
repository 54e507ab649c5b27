/*
 * pgoutput_fuzz.c - libFuzzer target for the pgoutput decoder (pgoutput.c).
 *
 * Beyond "never reads outside the buffer" (ASan sees the exact allocation
 * libFuzzer hands over), it checks that a message the decoder accepts is
 * exactly what PostgreSQL's proto.c would have written for the decoded
 * struct: the harness re-encodes the struct and compares byte for byte, so a
 * field read at the wrong offset or width, or bytes silently skipped, show
 * up. A rejected message must come with a reason.
 *
 * Run with FUZZ_STRICT=1 on the seed corpus (captured from real
 * servers by test/fuzz/capture-pgoutput) to check every real message decodes.
 *
 * Input layout: byte 0 bit 0 = the message came inside a streamed block
 * (between STREAM START and STREAM STOP); the rest is one message as it
 * follows the 'w' XLogData header in CopyData.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgoutput.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pgo_msg msg;
static unsigned char *enc;
static size_t enclen, enccap;

static void
check(int cond, const char *what)
{
	if (!cond)
	{
		fprintf(stderr, "pgoutput_fuzz: invariant violated: %s\n", what);
		abort();
	}
}

static void
put(const void *p, size_t n)
{
	if (enclen + n > enccap)
	{
		enccap = (enclen + n) * 2 + 64;
		enc = realloc(enc, enccap);
		check(enc != NULL, "out of memory");
	}
	if (n)
		memcpy(enc + enclen, p, n);
	enclen += n;
}

static void put8(unsigned v) { unsigned char c = (unsigned char) v; put(&c, 1); }
static void put16(unsigned v) { put8(v >> 8 & 0xff); put8(v & 0xff); }
static void put32(uint32_t v) { put16(v >> 16); put16(v & 0xffff); }
static void put64(uint64_t v) { put32((uint32_t) (v >> 32)); put32((uint32_t) v); }

/* A string the decoder returned: inside the message and NUL-terminated there. */
static void
putstr(const struct pgo_str *s, const uint8_t *buf, size_t len)
{
	check((const uint8_t *) s->p >= buf && (const uint8_t *) s->p + s->len < buf + len,
		  "string inside the message");
	check(s->p[s->len] == '\0' && memchr(s->p, '\0', s->len) == NULL, "string ends at its NUL");
	put(s->p, s->len + 1);
}

static void
puttuple(const struct pgo_tuple *t, const uint8_t *buf, size_t len)
{
	check(t->ncols <= PGO_MAX_COLS, "column count within the limit");
	put16(t->ncols);
	for (unsigned i = 0; i < t->ncols; i++)
	{
		const struct pgo_col *c = &t->cols[i];

		put8((unsigned char) c->kind);
		if (c->kind == PGO_TEXT || c->kind == PGO_BINARY)
		{
			check(c->len == 0 || ((const uint8_t *) c->p >= buf &&
								  (const uint8_t *) c->p + c->len <= buf + len),
				  "value inside the message");
			put32(c->len);
			put(c->p, c->len);
		}
		else
			check(c->kind == PGO_NULL || c->kind == PGO_UNCHANGED, "known column kind");
	}
}

static void
encode(const struct pgo_msg *m, const uint8_t *buf, size_t len, bool in_stream)
{
	enclen = 0;
	put8((unsigned char) m->type);
	if (m->has_xid)
		put32(m->xid);
	switch (m->type)
	{
		case PGO_BEGIN:
			put64(m->u.begin.final_lsn);
			put64((uint64_t) m->u.begin.commit_time);
			put32(m->xid);
			break;
		case PGO_COMMIT:
			put8(m->u.commit.flags);
			put64(m->u.commit.commit_lsn);
			put64(m->u.commit.end_lsn);
			put64((uint64_t) m->u.commit.commit_time);
			break;
		case PGO_ORIGIN:
			put64(m->u.origin.lsn);
			putstr(&m->u.origin.name, buf, len);
			break;
		case PGO_RELATION:
			check(m->u.rel.natts <= PGO_MAX_COLS, "attribute count within the limit");
			check(m->u.rel.replident && strchr("dfin", m->u.rel.replident) != NULL, "known replica identity");
			put32(m->u.rel.relid);
			putstr(&m->u.rel.nspname, buf, len);
			putstr(&m->u.rel.relname, buf, len);
			put8((unsigned char) m->u.rel.replident);
			put16(m->u.rel.natts);
			for (unsigned i = 0; i < m->u.rel.natts; i++)
			{
				put8(m->attrs[i].flags);
				putstr(&m->attrs[i].name, buf, len);
				put32(m->attrs[i].typoid);
				put32((uint32_t) m->attrs[i].typmod);
			}
			break;
		case PGO_TYPE:
			put32(m->u.typ.typoid);
			putstr(&m->u.typ.nspname, buf, len);
			putstr(&m->u.typ.typname, buf, len);
			break;
		case PGO_INSERT:
			put32(m->u.change.relid);
			check(m->u.change.old_kind == 0, "insert has no old tuple");
			put8('N');
			puttuple(&m->newtup, buf, len);
			break;
		case PGO_UPDATE:
			put32(m->u.change.relid);
			if (m->u.change.old_kind)
			{
				check(m->u.change.old_kind == 'K' || m->u.change.old_kind == 'O', "old tuple kind");
				put8((unsigned char) m->u.change.old_kind);
				puttuple(&m->oldtup, buf, len);
			}
			put8('N');
			puttuple(&m->newtup, buf, len);
			break;
		case PGO_DELETE:
			put32(m->u.change.relid);
			check(m->u.change.old_kind == 'K' || m->u.change.old_kind == 'O', "old tuple kind");
			put8((unsigned char) m->u.change.old_kind);
			puttuple(&m->oldtup, buf, len);
			break;
		case PGO_TRUNCATE:
			put32(m->u.truncate.nrelids);
			put8(m->u.truncate.flags);
			for (uint32_t i = 0; i < m->u.truncate.nrelids; i++)
				put32(pgo_truncate_relid(m, i));
			break;
		case PGO_MESSAGE:
			put8(m->u.message.flags);
			put64(m->u.message.lsn);
			putstr(&m->u.message.prefix, buf, len);
			put32(m->u.message.content.len);
			check(m->u.message.content.len == 0 ||
				  ((const uint8_t *) m->u.message.content.p >= buf &&
				   (const uint8_t *) m->u.message.content.p + m->u.message.content.len <= buf + len),
				  "message content inside the message");
			put(m->u.message.content.p, m->u.message.content.len);
			break;
		case PGO_STREAM_START:
			put32(m->xid);
			/* Only 1 means "first": compare the byte leniently below. */
			put8(m->u.stream_start.first_segment ? 1 : buf[len - 1]);
			break;
		case PGO_STREAM_STOP:
			break;
		case PGO_STREAM_COMMIT:
			put32(m->xid);
			put8(m->u.commit.flags);
			put64(m->u.commit.commit_lsn);
			put64(m->u.commit.end_lsn);
			put64((uint64_t) m->u.commit.commit_time);
			break;
		case PGO_STREAM_ABORT:
			put32(m->xid);
			put32(m->u.stream_abort.subxid);
			if (m->u.stream_abort.has_info)
			{
				put64(m->u.stream_abort.abort_lsn);
				put64((uint64_t) m->u.stream_abort.abort_time);
			}
			break;
		default:
			check(0, "decoder accepted an unknown message type");
	}
	(void) in_stream;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	bool in_stream;
	const uint8_t *buf;
	size_t len;

	if (size < 1)
		return 0;
	in_stream = data[0] & 1;
	buf = data + 1;
	len = size - 1;
	memset(err, 'x', sizeof(err));
	if (!pgo_decode(buf, len, in_stream, &msg, err, sizeof(err)))
	{
		/* FUZZ_STRICT=1: every input is a captured real message
		 * (the seed corpus) and must decode. */
		if (getenv("FUZZ_STRICT"))
		{
			fprintf(stderr, "pgoutput_fuzz: real message rejected: %s\n", err);
			abort();
		}
		check(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0' && err[0] != 'x',
			  "a rejected message has a reason");
		check(strchr(err, '\n') == NULL, "the reason is one line");
		return 0;
	}
	check(msg.type == (char) buf[0], "type is the first byte");
	check(msg.has_xid == (in_stream && strchr("RYIUDTM", msg.type) != NULL),
		  "xid only for changes inside a stream");
	encode(&msg, buf, len, in_stream);
	check(enclen == len && memcmp(enc, buf, len) == 0,
		  "accepted message re-encodes to the same bytes");
	(void) pgo_type_name(msg.type);
	return 0;
}
