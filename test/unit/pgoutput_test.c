/* pgoutput_test - the pgoutput decoder on hand-built messages laid out as
 * PostgreSQL's proto.c writes them, plus every truncation of each. */
#include "unit.h"
#include "pgoutput.h"

#include <stdint.h>
#include <stdlib.h>

static unsigned char mb[4096];
static size_t ml;

static void m_reset(char type) { ml = 0; mb[ml++] = (unsigned char) type; }
static void m8(unsigned v) { mb[ml++] = (unsigned char) v; }
static void m16(unsigned v) { m8(v >> 8 & 0xff); m8(v & 0xff); }
static void m32(uint32_t v) { m16(v >> 16); m16(v & 0xffff); }
static void m64(uint64_t v) { m32((uint32_t) (v >> 32)); m32((uint32_t) v); }
static void mstr(const char *s) { size_t n = strlen(s) + 1; memcpy(mb + ml, s, n); ml += n; }
static void mtext(const char *s) { m8('t'); m32((uint32_t) strlen(s)); memcpy(mb + ml, s, strlen(s)); ml += strlen(s); }

static struct pgo_msg *msg;
static char err[256];

static bool
dec(bool in_stream)
{
	return pgo_decode(mb, ml, in_stream, msg, err, sizeof(err));
}

/* Every strict prefix of the current message must be rejected, cleanly. */
static void
all_prefixes_fail(bool in_stream)
{
	size_t full = ml;
	int bad = 0;

	for (size_t n = 0; n < full; n++)
	{
		/* A copy of exactly n bytes, so ASan catches any read past it. */
		unsigned char *copy = malloc(n ? n : 1);

		memcpy(copy, mb, n);
		if (pgo_decode(copy, n, in_stream, msg, err, sizeof(err)))
			bad++;
		else if (err[0] == '\0')
			bad++;
		free(copy);
	}
	CHECK(bad == 0);
	/* And one trailing byte too many. */
	mb[full] = 0;
	CHECK(!pgo_decode(mb, full + 1, in_stream, msg, err, sizeof(err)));
	CHECK(strstr(err, "trailing") != NULL);
	ml = full;
}

static void
test_begin_commit(void)
{
	m_reset('B');
	m64(0x16B3748);
	m64(1234567890123LL);
	m32(741);
	CHECK(dec(false));
	CHECK(msg->type == PGO_BEGIN);
	CHECK(msg->u.begin.final_lsn == 0x16B3748);
	CHECK(msg->u.begin.commit_time == 1234567890123LL);
	CHECK(msg->xid == 741);
	all_prefixes_fail(false);

	m_reset('C');
	m8(0);
	m64(0x100);
	m64(0x130);
	m64((uint64_t) -5);
	CHECK(dec(false));
	CHECK(msg->type == PGO_COMMIT);
	CHECK(msg->u.commit.commit_lsn == 0x100 && msg->u.commit.end_lsn == 0x130);
	CHECK(msg->u.commit.commit_time == -5);
	all_prefixes_fail(false);

	mb[1] = 1;					/* unknown flags */
	CHECK(!dec(false));
	CHECK(strstr(err, "flags") != NULL);
}

static void
test_origin_type_message(void)
{
	m_reset('O');
	m64(0xABCDEF);
	mstr("node_a");
	CHECK(dec(false));
	CHECK(msg->u.origin.lsn == 0xABCDEF);
	CHECK(msg->u.origin.name.len == 6 && memcmp(msg->u.origin.name.p, "node_a", 6) == 0);
	all_prefixes_fail(false);

	m_reset('Y');
	m32(16400);
	mstr("public");
	mstr("mood");
	CHECK(dec(false));
	CHECK(msg->u.typ.typoid == 16400);
	CHECK(msg->u.typ.nspname.len == 6 && msg->u.typ.typname.len == 4);
	all_prefixes_fail(false);

	/* Inside a stream the type message starts with the xid. */
	m_reset('Y');
	m32(900);
	m32(16400);
	mstr("");
	mstr("mood");
	CHECK(dec(true));
	CHECK(msg->has_xid && msg->xid == 900);
	CHECK(msg->u.typ.nspname.len == 0);
	all_prefixes_fail(true);

	m_reset('M');
	m8(1);
	m64(0x500);
	mstr("app");
	m32(3);
	m8(0); m8(0xff); m8('\n');
	CHECK(dec(false));
	CHECK(msg->u.message.flags == PGO_MESSAGE_TRANSACTIONAL);
	CHECK(msg->u.message.lsn == 0x500);
	CHECK(msg->u.message.prefix.len == 3);
	CHECK(msg->u.message.content.len == 3 && (unsigned char) msg->u.message.content.p[1] == 0xff);
	all_prefixes_fail(false);

	/* A length far beyond the message, and a negative one. */
	m_reset('M');
	m8(0);
	m64(0x500);
	mstr("p");
	m32(0x7fffffff);
	CHECK(!dec(false));
	CHECK(strstr(err, "truncated") != NULL);
	m_reset('M');
	m8(0);
	m64(0x500);
	mstr("p");
	m32(0xffffffff);
	CHECK(!dec(false));
	CHECK(strstr(err, "negative") != NULL);
}

static void
test_relation(void)
{
	m_reset('R');
	m32(16385);
	mstr("public");
	mstr("users");
	m8('d');
	m16(3);
	m8(1); mstr("id"); m32(23); m32((uint32_t) -1);
	m8(0); mstr("name"); m32(1043); m32(68);
	m8(0); mstr("bio"); m32(25); m32((uint32_t) -1);
	CHECK(dec(false));
	CHECK(msg->type == PGO_RELATION && !msg->has_xid);
	CHECK(msg->u.rel.relid == 16385);
	CHECK(msg->u.rel.replident == 'd');
	CHECK(msg->u.rel.natts == 3);
	CHECK(msg->attrs[0].flags == PGO_ATTR_KEY && msg->attrs[0].typoid == 23 && msg->attrs[0].typmod == -1);
	CHECK(msg->attrs[1].name.len == 4 && msg->attrs[1].typmod == 68);
	CHECK(msg->attrs[2].flags == 0);
	all_prefixes_fail(false);

	/* Unknown replica identity. */
	m_reset('R');
	m32(1);
	mstr("s");
	mstr("t");
	m8('x');
	m16(0);
	CHECK(!dec(false));
	CHECK(strstr(err, "replica identity") != NULL);

	/* Too many attributes for any PostgreSQL relation. */
	m_reset('R');
	m32(1);
	mstr("s");
	mstr("t");
	m8('f');
	m16(PGO_MAX_COLS + 1);
	CHECK(!dec(false));
	CHECK(strstr(err, "attributes") != NULL);

	/* A name without its terminating NUL. */
	m_reset('R');
	m32(1);
	mb[ml++] = 's';
	CHECK(!dec(false));
	CHECK(strstr(err, "truncated") != NULL);
}

static void
test_changes(void)
{
	/* INSERT (1, NULL, unchanged, 'a\tb') */
	m_reset('I');
	m32(16385);
	m8('N');
	m16(4);
	mtext("1");
	m8('n');
	m8('u');
	mtext("a\tb");
	CHECK(dec(false));
	CHECK(msg->type == PGO_INSERT && msg->u.change.relid == 16385);
	CHECK(msg->newtup.ncols == 4);
	CHECK(msg->newtup.cols[0].kind == 't' && msg->newtup.cols[0].len == 1 && msg->newtup.cols[0].p[0] == '1');
	CHECK(msg->newtup.cols[1].kind == 'n');
	CHECK(msg->newtup.cols[2].kind == 'u');
	CHECK(msg->newtup.cols[3].len == 3);
	all_prefixes_fail(false);

	/* Streamed insert: xid first. */
	m_reset('I');
	m32(1001);
	m32(16385);
	m8('N');
	m16(1);
	mtext("");
	CHECK(dec(true));
	CHECK(msg->has_xid && msg->xid == 1001 && msg->newtup.cols[0].len == 0);
	/* The same bytes outside a stream do not parse as an insert. */
	CHECK(!dec(false));
	all_prefixes_fail(true);

	/* Insert with a wrong marker. */
	m_reset('I');
	m32(1);
	m8('K');
	m16(0);
	CHECK(!dec(false));
	CHECK(strstr(err, "'N'") != NULL);

	/* UPDATE N only. */
	m_reset('U');
	m32(7);
	m8('N');
	m16(1);
	mtext("x");
	CHECK(dec(false));
	CHECK(msg->u.change.old_kind == 0 && msg->newtup.ncols == 1 && msg->oldtup.ncols == 0);
	all_prefixes_fail(false);

	/* UPDATE K + N. */
	m_reset('U');
	m32(7);
	m8('K');
	m16(2);
	mtext("1");
	m8('n');
	m8('N');
	m16(2);
	mtext("2");
	mtext("b");
	CHECK(dec(false));
	CHECK(msg->u.change.old_kind == 'K' && msg->oldtup.ncols == 2 && msg->newtup.ncols == 2);
	CHECK(msg->oldtup.cols[1].kind == 'n' && msg->newtup.cols[1].p[0] == 'b');
	all_prefixes_fail(false);

	/* UPDATE O + N with a binary column: the decoder accepts it. */
	m_reset('U');
	m32(7);
	m8('O');
	m16(1);
	m8('b'); m32(2); m8(0); m8(1);
	m8('N');
	m16(1);
	mtext("z");
	CHECK(dec(false));
	CHECK(msg->u.change.old_kind == 'O' && msg->oldtup.cols[0].kind == 'b' && msg->oldtup.cols[0].len == 2);
	all_prefixes_fail(false);

	/* UPDATE K without the following N. */
	m_reset('U');
	m32(7);
	m8('K');
	m16(0);
	m8('K');
	m16(0);
	CHECK(!dec(false));

	/* DELETE K and O; DELETE N is wrong. */
	m_reset('D');
	m32(9);
	m8('K');
	m16(1);
	mtext("5");
	CHECK(dec(false));
	CHECK(msg->u.change.old_kind == 'K' && msg->oldtup.ncols == 1);
	all_prefixes_fail(false);
	mb[5] = 'O';
	CHECK(dec(false) && msg->u.change.old_kind == 'O');
	mb[5] = 'N';
	CHECK(!dec(false));
	CHECK(strstr(err, "delete") != NULL);

	/* Unknown column kind. */
	m_reset('I');
	m32(1);
	m8('N');
	m16(1);
	m8('q');
	CHECK(!dec(false));
	CHECK(strstr(err, "unknown kind") != NULL);

	/* A negative column length. */
	m_reset('I');
	m32(1);
	m8('N');
	m16(1);
	m8('t');
	m32(0x80000000u);
	CHECK(!dec(false));
	CHECK(strstr(err, "negative") != NULL);

	/* More columns than any tuple can have. */
	m_reset('I');
	m32(1);
	m8('N');
	m16(PGO_MAX_COLS + 1);
	CHECK(!dec(false));
	CHECK(strstr(err, "columns") != NULL);
}

static void
test_truncate(void)
{
	m_reset('T');
	m32(2);
	m8(PGO_TRUNCATE_CASCADE | PGO_TRUNCATE_RESTART_SEQS);
	m32(16385);
	m32(16390);
	CHECK(dec(false));
	CHECK(msg->u.truncate.nrelids == 2);
	CHECK(msg->u.truncate.flags == 3);
	CHECK(pgo_truncate_relid(msg, 0) == 16385 && pgo_truncate_relid(msg, 1) == 16390);
	all_prefixes_fail(false);

	/* A relation count far beyond the message. */
	m_reset('T');
	m32(0x40000000);
	m8(0);
	m32(1);
	CHECK(!dec(false));
	CHECK(strstr(err, "do not fit") != NULL);
}

static void
test_streams(void)
{
	m_reset('S');
	m32(5000);
	m8(1);
	CHECK(dec(false));
	CHECK(msg->type == PGO_STREAM_START && msg->xid == 5000 && msg->u.stream_start.first_segment);
	all_prefixes_fail(false);

	m_reset('E');
	CHECK(dec(true));
	CHECK(msg->type == PGO_STREAM_STOP);
	all_prefixes_fail(true);

	m_reset('c');
	m32(5000);
	m8(0);
	m64(0x2000);
	m64(0x2030);
	m64(99);
	CHECK(dec(false));
	CHECK(msg->type == PGO_STREAM_COMMIT && msg->xid == 5000);
	CHECK(msg->u.commit.commit_lsn == 0x2000 && msg->u.commit.end_lsn == 0x2030);
	all_prefixes_fail(false);

	m_reset('A');
	m32(5000);
	m32(5003);
	CHECK(dec(false));
	CHECK(msg->xid == 5000 && msg->u.stream_abort.subxid == 5003 && !msg->u.stream_abort.has_info);
	all_prefixes_fail(false);

	/* Protocol 4, parallel streaming: abort LSN and time follow. */
	m64(0x3000);
	m64(77);
	CHECK(dec(false));
	CHECK(msg->u.stream_abort.has_info && msg->u.stream_abort.abort_lsn == 0x3000);
	/* Anything between the two layouts is malformed. */
	ml -= 4;
	CHECK(!dec(false));
}

static void
test_garbage(void)
{
	/* Unknown type bytes, including the two-phase ones never requested. */
	const char *types = "bPKrpX\0z";

	for (int i = 0; i < 8; i++)
	{
		m_reset(types[i]);
		m32(1);
		CHECK(!dec(false));
		CHECK(strstr(err, "unknown message type") != NULL);
	}
	CHECK(!pgo_decode(mb, 0, false, msg, err, sizeof(err)));
	CHECK(strstr(err, "empty") != NULL);

	/* A pseudo-random byte soup never crashes the decoder. */
	uint32_t seed = 12345;
	int accepted = 0;

	for (int i = 0; i < 200000; i++)
	{
		size_t n = (size_t) (seed % 64);

		for (size_t j = 0; j < n; j++)
		{
			seed = seed * 1103515245u + 12345u;
			mb[j] = (unsigned char) (seed >> 16);
		}
		if (n > 0)
			mb[0] = (unsigned char) "BCORYIUDTMSEcA"[seed % 14];
		seed = seed * 1103515245u + 12345u;
		if (pgo_decode(mb, n, seed & 1, msg, err, sizeof(err)))
			accepted++;
	}
	CHECK(accepted > 0);		/* some short messages (stream stop) are valid */
}

int
main(void)
{
	msg = malloc(sizeof(*msg));
	test_begin_commit();
	test_origin_type_message();
	test_relation();
	test_changes();
	test_truncate();
	test_streams();
	test_garbage();
	CHECK_STR(pgo_type_name('I'), "insert");
	CHECK_STR(pgo_type_name('?'), "unknown");
	free(msg);
	return unit_done("pgoutput");
}
