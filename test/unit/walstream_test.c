/* walstream_test - the transaction state machine on hand-built pgoutput
 * messages: records in commit order, spooled streams, aborts, --endpos
 * decisions, keepalive positions and protocol violations. */
#include "unit.h"
#include "log.h"
#include "out.h"
/* The module itself: the test looks at its position and counters. */
#include "walstream.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned char mb[65536];
static size_t ml;
static FILE *tmp;
static struct out *out;

static void m_reset(char type) { ml = 0; mb[ml++] = (unsigned char) type; }
static void m8(unsigned v) { mb[ml++] = (unsigned char) v; }
static void m16(unsigned v) { m8(v >> 8 & 0xff); m8(v & 0xff); }
static void m32(uint32_t v) { m16(v >> 16); m16(v & 0xffff); }
static void m64(uint64_t v) { m32((uint32_t) (v >> 32)); m32((uint32_t) v); }
static void mstr(const char *s) { size_t n = strlen(s) + 1; memcpy(mb + ml, s, n); ml += n; }
static void mtext(const char *s) { m8('t'); m32((uint32_t) strlen(s)); memcpy(mb + ml, s, strlen(s)); ml += strlen(s); }

static enum ws_status
relation(struct walstream *ws, uint32_t xid, uint32_t relid, const char *name)
{
	m_reset('R');
	if (xid)
		m32(xid);
	m32(relid);
	mstr("public");
	mstr(name);
	m8('d');
	m16(2);
	m8(1); mstr("id"); m32(23); m32((uint32_t) -1);
	m8(0); mstr("v"); m32(25); m32((uint32_t) -1);
	return ws_message(ws, mb, ml);
}

static enum ws_status
begin(struct walstream *ws, uint32_t xid, uint64_t final_lsn)
{
	m_reset('B');
	m64(final_lsn);
	m64(0);
	m32(xid);
	return ws_message(ws, mb, ml);
}

static enum ws_status
send_commit(struct walstream *ws, uint64_t lsn, uint64_t end)
{
	m_reset('C');
	m8(0);
	m64(lsn);
	m64(end);
	m64(0);
	return ws_message(ws, mb, ml);
}

static enum ws_status
insert(struct walstream *ws, uint32_t xid, uint32_t relid, const char *id, const char *v)
{
	m_reset('I');
	if (xid)
		m32(xid);
	m32(relid);
	m8('N');
	m16(2);
	mtext(id);
	if (v)
		mtext(v);
	else
		m8('n');
	return ws_message(ws, mb, ml);
}

static enum ws_status
stream_start(struct walstream *ws, uint32_t xid, bool first)
{
	m_reset('S');
	m32(xid);
	m8(first ? 1 : 0);
	return ws_message(ws, mb, ml);
}

static enum ws_status
stream_stop(struct walstream *ws)
{
	m_reset('E');
	return ws_message(ws, mb, ml);
}

static enum ws_status
send_stream_commit(struct walstream *ws, uint32_t xid, uint64_t lsn, uint64_t end)
{
	m_reset('c');
	m32(xid);
	m8(0);
	m64(lsn);
	m64(end);
	m64(0);
	return ws_message(ws, mb, ml);
}

static enum ws_status
stream_abort(struct walstream *ws, uint32_t xid, uint32_t sub)
{
	m_reset('A');
	m32(xid);
	m32(sub);
	return ws_message(ws, mb, ml);
}

static enum ws_status
message(struct walstream *ws, bool transactional, uint64_t lsn, const char *prefix)
{
	m_reset('M');
	m8(transactional ? 1 : 0);
	m64(lsn);
	mstr(prefix);
	m32(2);
	m8('h'); m8('i');
	return ws_message(ws, mb, ml);
}

/* Everything written since the last call, cut down so the expected text
 * stays short: each record's name and first two fields, then "|". */
static char got[65536];

static const char *
written(struct walstream *ws, bool whole)
{
	static long pos = 0;
	char line[4096];
	size_t n = 0;

	if (whole)
		ws_flush_whole(ws);
	else
		ws_flush(ws);
	fflush(tmp);
	fseek(tmp, pos, SEEK_SET);
	got[0] = '\0';
	while (fgets(line, sizeof(line), tmp))
	{
		char *f[4] = {line, NULL, NULL, NULL};
		int nf = 1;

		for (char *p = line; *p && nf < 3; p++)
			if (*p == '\t')
			{
				*p = '\0';
				f[nf++] = p + 1;
			}
		line[strcspn(line, "\n")] = '\0';
		for (int i = 1; i < nf; i++)
			f[i][strcspn(f[i], "\t\n")] = '\0';
		if (strcmp(f[0], "POSITION") == 0)
			nf = 2;				/* not the time */
		n += (size_t) snprintf(got + n, sizeof(got) - n, "%s%s%s%s%s|", f[0],
							   nf > 1 ? " " : "", nf > 1 ? f[1] : "", nf > 2 ? " " : "",
							   nf > 2 ? f[2] : "");
	}
	pos = ftell(tmp);
	return got;
}

static const char *
drained(struct walstream *ws)
{
	return written(ws, false);
}

static struct walstream *
fresh(uint64_t endpos)
{
	struct walstream_config cfg = {1 << 20, NULL, endpos};
	struct walstream *ws = ws_new(&cfg, out);

	CHECK(ws_begin_stream(ws, "42", 1, "slot", 0x100, 150000) == WS_OK);
	drained(ws);
	return ws;
}

static void
test_plain(void)
{
	struct walstream *ws = fresh(0);

	CHECK(relation(ws, 0, 16385, "t") == WS_OK);
	CHECK(strcmp(drained(ws), "") == 0);	/* described only when used */
	CHECK(begin(ws, 700, 0x200) == WS_OK);
	CHECK(ws_in_transaction(ws));
	CHECK(insert(ws, 0, 16385, "1", NULL) == WS_OK);
	CHECK(message(ws, true, 0x1F0, "app") == WS_OK);
	CHECK(message(ws, true, 0x1F8, "pgsync.x") == WS_OK);
	CHECK(send_commit(ws, 0x200, 0x230) == WS_OK);
	CHECK(!ws_in_transaction(ws));
	CHECK_STR(drained(ws), "BEGIN 700 0/200|RELATION public t|INSERT public t|MESSAGE t 0/1F0|COMMIT 700 0/200|");
	CHECK(ws->pos == 0x230);
	/* The relation is not repeated... */
	CHECK(begin(ws, 701, 0x300) == WS_OK);
	CHECK(insert(ws, 0, 16385, "2", "x") == WS_OK);
	CHECK(send_commit(ws, 0x300, 0x330) == WS_OK);
	CHECK_STR(drained(ws), "BEGIN 701 0/300|INSERT public t|COMMIT 701 0/300|");
	/* ...unless a new header starts a new stream. */
	CHECK(ws_begin_stream(ws, "42", 1, "slot", 0x330, 150000) == WS_OK);
	CHECK(begin(ws, 702, 0x400) == WS_OK);
	CHECK(insert(ws, 0, 16385, "3", "y") == WS_OK);
	CHECK(send_commit(ws, 0x400, 0x430) == WS_OK);
	CHECK_STR(drained(ws), "PGCS 1 42|BEGIN 702 0/400|RELATION public t|INSERT public t|COMMIT 702 0/400|");
	/* The same description again is not news; a changed one is. */
	CHECK(relation(ws, 0, 16385, "t") == WS_OK);
	CHECK(begin(ws, 703, 0x500) == WS_OK);
	CHECK(insert(ws, 0, 16385, "4", "y") == WS_OK);
	CHECK(relation(ws, 0, 16385, "t2") == WS_OK);
	CHECK(insert(ws, 0, 16385, "5", "y") == WS_OK);
	CHECK(send_commit(ws, 0x500, 0x530) == WS_OK);
	CHECK_STR(drained(ws), "BEGIN 703 0/500|INSERT public t|RELATION public t2|INSERT public t2|COMMIT 703 0/500|");
	ws_free(ws);
}

/* Flushing before a wait writes whole transactions only: the lines of one
 * still arriving stay until its COMMIT. */
static void
test_flush_whole(void)
{
	struct walstream *ws = fresh(0);

	CHECK(relation(ws, 0, 16385, "t") == WS_OK);
	CHECK(begin(ws, 800, 0x600) == WS_OK);
	CHECK(insert(ws, 0, 16385, "1", NULL) == WS_OK);
	/* Nothing whole yet: nothing written. */
	CHECK_STR(written(ws, true), "");
	CHECK(send_commit(ws, 0x600, 0x630) == WS_OK);
	CHECK(begin(ws, 801, 0x700) == WS_OK);
	CHECK(insert(ws, 0, 16385, "2", "x") == WS_OK);
	CHECK_STR(written(ws, true), "BEGIN 800 0/600|RELATION public t|INSERT public t|COMMIT 800 0/600|");
	CHECK(ws_in_transaction(ws));
	CHECK(insert(ws, 0, 16385, "3", "y") == WS_OK);
	CHECK_STR(written(ws, true), "");
	CHECK(send_commit(ws, 0x700, 0x730) == WS_OK);
	/* Between transactions everything goes. */
	CHECK_STR(written(ws, true), "BEGIN 801 0/700|INSERT public t|INSERT public t|COMMIT 801 0/700|");
	CHECK(ws->pos == 0x730);
	ws_free(ws);
}

static void
test_positions(void)
{
	struct walstream *ws = fresh(0);

	CHECK(ws_keepalive(ws, 0x150, 5000) == WS_OK);
	CHECK_STR(drained(ws), "POSITION 0/150|");
	/* Rate limit: not within a second, but the server may hear it. */
	CHECK(ws_keepalive(ws, 0x160, 5500) == WS_OK);
	CHECK_STR(drained(ws), "");
	CHECK(ws_written(ws) == 0x160 && ws->pos == 0x150);
	CHECK(ws_keepalive(ws, 0x160, 6100) == WS_OK);
	CHECK_STR(drained(ws), "POSITION 0/160|");
	/* Not backwards, not inside a transaction. */
	CHECK(ws_keepalive(ws, 0x120, 9000) == WS_OK);
	CHECK(begin(ws, 1, 0x200) == WS_OK);
	CHECK(ws_keepalive(ws, 0x300, 12000) == WS_OK);
	CHECK(send_commit(ws, 0x200, 0x230) == WS_OK);
	CHECK_STR(drained(ws), "BEGIN 1 0/200|COMMIT 1 0/200|");
	/* A pgsync message outside transactions is a position; others are MESSAGE n. */
	CHECK(message(ws, false, 0x280, "pgsync.heartbeat") == WS_OK);
	CHECK(message(ws, false, 0x290, "app") == WS_OK);
	CHECK(message(ws, false, 0x270, "pgsync.heartbeat") == WS_OK);
	CHECK_STR(drained(ws), "POSITION 0/280|MESSAGE n 0/290|");
	ws_free(ws);
}

static void
test_endpos(void)
{
	struct walstream *ws;

	/* A BEGIN at endpos: that transaction is not below it. */
	ws = fresh(0x400);
	CHECK(begin(ws, 1, 0x300) == WS_OK);
	CHECK(send_commit(ws, 0x300, 0x330) == WS_OK);
	CHECK(begin(ws, 2, 0x400) == WS_ENDPOS);
	CHECK(ws_end(ws) == WS_OK);
	CHECK_STR(drained(ws), "BEGIN 1 0/300|COMMIT 1 0/300|END 0/400|");
	ws_free(ws);

	/* A COMMIT ending at or past endpos is the last one. */
	ws = fresh(0x320);
	CHECK(begin(ws, 1, 0x300) == WS_OK);
	CHECK(send_commit(ws, 0x300, 0x330) == WS_ENDPOS);
	ws_free(ws);

	/* A keepalive at endpos, but only between transactions. */
	ws = fresh(0x400);
	CHECK(ws_keepalive(ws, 0x3FF, 1000) == WS_OK);
	CHECK(begin(ws, 1, 0x380) == WS_OK);
	CHECK(ws_keepalive(ws, 0x500, 3000) == WS_OK);
	CHECK(send_commit(ws, 0x380, 0x3A0) == WS_OK);
	CHECK(ws_keepalive(ws, 0x400, 5000) == WS_ENDPOS);
	ws_free(ws);

	/* A message ending at endpos is below it; one ending past it is not. */
	ws = fresh(0x400);
	CHECK(message(ws, false, 0x400, "app") == WS_ENDPOS);
	CHECK_STR(drained(ws), "MESSAGE n 0/400|");
	ws_free(ws);
	ws = fresh(0x400);
	CHECK(message(ws, false, 0x408, "app") == WS_ENDPOS);
	CHECK_STR(drained(ws), "");
	ws_free(ws);

	/* A streamed transaction committing at endpos is left for the next run. */
	ws = fresh(0x400);
	CHECK(stream_start(ws, 9, true) == WS_OK);
	CHECK(stream_stop(ws) == WS_OK);
	CHECK(send_stream_commit(ws, 9, 0x400, 0x430) == WS_ENDPOS);
	CHECK_STR(drained(ws), "");
	ws_free(ws);
}

static void
test_streams(void)
{
	struct walstream *ws = fresh(0);
	struct ws_stats st;

	CHECK(relation(ws, 0, 16385, "t") == WS_OK);
	/* Transaction 10 and 20 stream in turns; 30 is plain and commits first. */
	CHECK(stream_start(ws, 10, true) == WS_OK);
	CHECK(insert(ws, 10, 16385, "10a", NULL) == WS_OK);
	CHECK(stream_stop(ws) == WS_OK);
	CHECK(stream_start(ws, 20, true) == WS_OK);
	CHECK(relation(ws, 20, 16390, "u") == WS_OK);
	CHECK(insert(ws, 20, 16390, "20a", NULL) == WS_OK);
	CHECK(insert(ws, 21, 16390, "20sub", NULL) == WS_OK);
	CHECK(insert(ws, 22, 16390, "20nested", NULL) == WS_OK);
	CHECK(stream_stop(ws) == WS_OK);
	CHECK_STR(drained(ws), "");
	CHECK(!ws_in_transaction(ws));
	CHECK(begin(ws, 30, 0x200) == WS_OK);
	CHECK(insert(ws, 0, 16385, "30a", NULL) == WS_OK);
	CHECK(send_commit(ws, 0x200, 0x230) == WS_OK);
	CHECK(stream_start(ws, 10, false) == WS_OK);
	CHECK(insert(ws, 10, 16385, "10b", NULL) == WS_OK);
	CHECK(stream_stop(ws) == WS_OK);
	/* Subtransaction 21 aborts: its changes and 22's (nested) go. */
	CHECK(stream_abort(ws, 20, 21) == WS_OK);
	CHECK(stream_start(ws, 20, false) == WS_OK);
	CHECK(insert(ws, 20, 16390, "20b", NULL) == WS_OK);
	CHECK(stream_stop(ws) == WS_OK);
	CHECK(send_stream_commit(ws, 20, 0x300, 0x330) == WS_OK);
	CHECK(stream_abort(ws, 10, 10) == WS_OK);
	CHECK_STR(drained(ws), "BEGIN 30 0/200|RELATION public t|INSERT public t|COMMIT 30 0/200|"
			  "BEGIN 20 0/300|RELATION public u|INSERT public u|INSERT public u|COMMIT 20 0/300|");
	ws_stats(ws, &st);
	CHECK(st.transactions == 2 && st.streamed == 1 && st.aborted == 1 && st.changes == 3);
	/* A reconnect forgets streams in flight. */
	CHECK(stream_start(ws, 40, true) == WS_OK);
	CHECK(insert(ws, 40, 16385, "40a", NULL) == WS_OK);
	CHECK(ws_begin_stream(ws, "42", 1, "slot", 0x330, 150000) == WS_OK);
	CHECK(send_stream_commit(ws, 40, 0x400, 0x430) == WS_FAILED);
	ws_free(ws);
}

static void
test_violations(void)
{
	struct walstream *ws;

	ws = fresh(0);
	CHECK(send_commit(ws, 0x200, 0x230) == WS_FAILED);
	CHECK(ws_exit_code(ws) == 1);
	ws_free(ws);

	ws = fresh(0);
	CHECK(insert(ws, 0, 16385, "1", NULL) == WS_FAILED);	/* outside a transaction */
	ws_free(ws);

	ws = fresh(0);
	CHECK(begin(ws, 1, 0x200) == WS_OK);
	CHECK(insert(ws, 0, 99999, "1", NULL) == WS_FAILED);	/* unknown relation */
	ws_free(ws);

	ws = fresh(0);
	CHECK(begin(ws, 1, 0x200) == WS_OK);
	CHECK(begin(ws, 2, 0x300) == WS_FAILED);
	ws_free(ws);

	ws = fresh(0);
	CHECK(stream_start(ws, 1, false) == WS_FAILED);			/* never began */
	ws_free(ws);

	ws = fresh(0);
	CHECK(stream_stop(ws) == WS_FAILED);
	ws_free(ws);

	ws = fresh(0);
	CHECK(relation(ws, 0, 16385, "t") == WS_OK);
	CHECK(begin(ws, 1, 0x200) == WS_OK);
	m_reset('I');
	m32(16385);
	m8('N');
	m16(3);					/* the relation has 2 columns */
	mtext("1"); mtext("2"); mtext("3");
	CHECK(ws_message(ws, mb, ml) == WS_FAILED);
	ws_free(ws);

	ws = fresh(0);
	m_reset('B');
	m64(1);
	CHECK(ws_message(ws, mb, ml) == WS_FAILED);			/* truncated */
	ws_free(ws);

	/* Over the size limit. */
	{
		struct walstream_config cfg = {64, NULL, 0};

		ws = ws_new(&cfg, out);
		CHECK(ws_begin_stream(ws, "42", 1, "s", 1, 0) == WS_OK);
		CHECK(relation(ws, 0, 16385, "t") == WS_OK);
		CHECK(begin(ws, 1, 0x200) == WS_OK);
		CHECK(insert(ws, 0, 16385, "1", "0123456789012345678901234567890123456789012345678901234567890123") == WS_FAILED);
		CHECK(ws_exit_code(ws) == 1);
		ws_free(ws);
	}
}

int
main(void)
{
	FILE *errs = tmpfile();
	int saved = dup(STDERR_FILENO), failed;
	char line[512];

	log_init("walstream_test");
	tmp = tmpfile();
	out = out_open(fileno(tmp), 0);
	test_plain();
	test_flush_whole();
	test_positions();
	test_endpos();
	/* Violations log errors by design: show them only if a check failed. */
	failed = unit_failed;
	fflush(stderr);
	dup2(fileno(errs), STDERR_FILENO);
	test_streams();
	test_violations();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	if (unit_failed != failed)
	{
		rewind(errs);
		while (fgets(line, sizeof(line), errs))
			fputs(line, stderr);
	}
	out_close(out, false);
	fclose(tmp);
	return unit_done("walstream");
}
