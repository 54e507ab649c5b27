/* spool_test - streamed transactions on disk: interleaved segments, replay
 * in order, subtransaction aborts cut the file where PostgreSQL's apply
 * worker would, and messages bigger than the I/O buffer. */
#include "unit.h"
/* The module itself: the test looks at what it holds. */
#include "spool.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Transactions held. */
static size_t
spool_count(const struct spool *s)
{
	return s->ntxns;
}

/* Bytes on disk. */
static uint64_t
spool_bytes(const struct spool *s)
{
	uint64_t total = 0;

	for (size_t i = 0; i < s->ntxns; i++)
		total += s->txns[i].size;
	return total;
}

static char err[256];

/* Message i of a transaction: "x<xid>-<i>" padded to len bytes. */
static size_t
mkmsg(char *p, size_t len, uint32_t xid, int i)
{
	int n = snprintf(p, len, "x%u-%d", xid, i);

	for (size_t j = (size_t) n; j < len; j++)
		p[j] = (char) ('a' + (j % 26));
	return len > (size_t) n ? len : (size_t) n;
}

/* Replay xid and compare with the expected message numbers. */
static void
expect(struct spool *s, uint32_t xid, const int *want, int nwant, size_t len)
{
	const unsigned char *p;
	size_t n;
	int got = 0, rc;
	char *exp = malloc(len + 32);

	CHECK(spool_replay_open(s, xid, err, sizeof(err)));
	while ((rc = spool_replay_next(s, &p, &n, err, sizeof(err))) == 1)
	{
		size_t en;

		if (got >= nwant)
		{
			got++;
			continue;
		}
		en = mkmsg(exp, len, xid, want[got]);
		CHECK(n == en && memcmp(p, exp, n) == 0);
		got++;
	}
	CHECK(rc == 0);
	CHECK(got == nwant);
	spool_replay_close(s);
	free(exp);
}

static void
app(struct spool *s, char *m, size_t len, uint32_t xid, int i, uint32_t sub)
{
	size_t n = mkmsg(m, len, xid, i);

	CHECK(spool_append(s, sub, m, n, err, sizeof(err)));
}

int
main(void)
{
	struct spool *s = spool_new(NULL, 4 << 20);
	static char m[2 << 20];

	/* Two transactions in interleaved segments. */
	CHECK(spool_start(s, 100, true, err, sizeof(err)));
	for (int i = 0; i < 3; i++)
		app(s, m, 20, 100, i, 100);
	CHECK(spool_stop(s, err, sizeof(err)));
	CHECK(spool_start(s, 200, true, err, sizeof(err)));
	app(s, m, 20, 200, 0, 200);
	CHECK(spool_stop(s, err, sizeof(err)));
	CHECK(spool_count(s) == 2);
	/* 100 continues: subtransaction 101 (msgs 3,4), 102 (5), back to 101 (6). */
	CHECK(spool_start(s, 100, false, err, sizeof(err)));
	app(s, m, 20, 100, 3, 101);
	app(s, m, 20, 100, 4, 101);
	app(s, m, 20, 100, 5, 102);
	app(s, m, 20, 100, 6, 101);
	app(s, m, 20, 100, 7, 100);
	CHECK(spool_stop(s, err, sizeof(err)));
	/* Aborting 102 cuts from its first change (5) on, as the apply worker does. */
	CHECK(spool_abort(s, 100, 102, err, sizeof(err)));
	/* An empty subtransaction and an unknown transaction: nothing happens. */
	CHECK(spool_abort(s, 100, 999, err, sizeof(err)));
	CHECK(spool_abort(s, 777, 777, err, sizeof(err)));
	CHECK(spool_start(s, 100, false, err, sizeof(err)));
	app(s, m, 20, 100, 8, 100);
	CHECK(spool_stop(s, err, sizeof(err)));
	{
		int want[] = {0, 1, 2, 3, 4, 8};

		expect(s, 100, want, 6, 20);
	}
	CHECK(spool_count(s) == 1);
	/* Top-level abort discards 200 entirely. */
	CHECK(spool_abort(s, 200, 200, err, sizeof(err)));
	CHECK(spool_count(s) == 0);
	CHECK(!spool_replay_open(s, 200, err, sizeof(err)));
	CHECK(strstr(err, "never streamed") != NULL);

	/* A later segment of an unknown transaction is a protocol error. */
	CHECK(!spool_start(s, 300, false, err, sizeof(err)));
	CHECK(strstr(err, "never began") != NULL);
	/* Appending outside a segment too. */
	CHECK(!spool_append(s, 0, "x", 1, err, sizeof(err)));

	/* Many messages and some larger than the I/O buffer. */
	CHECK(spool_start(s, 400, true, err, sizeof(err)));
	for (int i = 0; i < 5000; i++)
		app(s, m, 300, 400, i, 400);
	app(s, m, sizeof(m), 400, 5000, 400);
	CHECK(spool_stop(s, err, sizeof(err)));
	CHECK(spool_bytes(s) == 5000 * 304 + 4 + sizeof(m));
	{
		const unsigned char *p;
		size_t len;
		int count = 0, rc;

		CHECK(spool_replay_open(s, 400, err, sizeof(err)));
		while ((rc = spool_replay_next(s, &p, &len, err, sizeof(err))) == 1)
		{
			char exp[64];

			snprintf(exp, sizeof(exp), "x400-%d", count);
			CHECK(memcmp(p, exp, strlen(exp)) == 0);
			CHECK(len == (count < 5000 ? 300 : sizeof(m)));
			count++;
		}
		CHECK(rc == 0 && count == 5001);
		spool_replay_close(s);
	}
	/* Over the limit. */
	CHECK(spool_start(s, 500, true, err, sizeof(err)));
	CHECK(!spool_append(s, 500, m, (4 << 20) + 1, err, sizeof(err)));
	CHECK(strstr(err, "exceeds the limit") != NULL);
	spool_reset(s);
	CHECK(spool_count(s) == 0);

	/* An unusable directory is an error naming it. */
	{
		struct spool *bad = spool_new("/nonexistent/dir", 1024);

		CHECK(!spool_start(bad, 1, true, err, sizeof(err)));
		CHECK(strstr(err, "/nonexistent/dir") != NULL);
		spool_free(bad);
	}
	spool_free(s);
	return unit_done("spool");
}
