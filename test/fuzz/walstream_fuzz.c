/*
 * walstream_fuzz.c - libFuzzer target for pg-walcat's message path:
 * pgoutput messages in (walstream.c, pgoutput.c, walencode.c, spool.c),
 * change stream out. The oracle is pg-apply's parser: every line pg-walcat
 * writes must be accepted by streamread.c, so that nothing the source can
 * legitimately send makes the pipeline stop with a stream error.
 *
 * Input: byte 0 = flags (bit 0: small --max-message-bytes; bit 1: an
 * --endpos); then records, each a 2-byte big-endian length and that many
 * bytes: a pgoutput message; length 0 = the connection was lost and a new
 * one starts (a new header); a 9-byte record starting with 'k' = a keepalive
 * with the 8-byte WAL end that follows.
 *
 * The server's commit LSNs grow, its commit times are sane and its type
 * modifiers are -1 or positive; the harness rewrites the LSNs and times of
 * BEGIN, COMMIT, STREAM COMMIT, logical messages and keepalives, clamps typmods and drops
 * an ORIGIN that does not follow BEGIN or STREAM START, so that mutations
 * explore message structure, not what no server sends.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "out.h"
#include "streamread.h"
#include "walstream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_init("walstream_fuzz");
	return 0;
}

static void
check(int cond, const char *what)
{
	if (!cond)
	{
		fprintf(stderr, "walstream_fuzz: invariant violated: %s\n", what);
		abort();
	}
}

static void
put64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char) v;
}

static uint64_t
get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* About 30 years of microseconds after 2000: what a server sends. */
static uint64_t
sane_time(const unsigned char *p)
{
	return get64(p) % UINT64_C(946080000000000);
}

/* Skip a NUL-terminated string; false when it does not end in the message. */
static bool
skip_str(const unsigned char *m, size_t n, size_t *i)
{
	const unsigned char *nul = *i < n ? memchr(m + *i, '\0', n - *i) : NULL;

	if (nul == NULL)
		return false;
	*i = (size_t) (nul - m) + 1;
	return true;
}

/* Type modifiers are -1 or not negative (typmodin functions), whatever the
 * 32 bits could hold. */
static void
normalize_relation(unsigned char *m, size_t n, bool in_stream)
{
	size_t i = 1 + (in_stream ? 4 : 0) + 4;
	unsigned natts;

	if (!skip_str(m, n, &i) || !skip_str(m, n, &i) || i + 3 > n)
		return;
	natts = (unsigned) m[i + 1] << 8 | m[i + 2];
	i += 3;
	for (unsigned a = 0; a < natts; a++)
	{
		i++;
		if (!skip_str(m, n, &i) || i + 8 > n)
			return;
		if ((m[i + 4] & 0x80) && !(m[i + 4] == 0xff && m[i + 5] == 0xff && m[i + 6] == 0xff && m[i + 7] == 0xff))
			m[i + 4] &= 0x7f;
		i += 8;
	}
}

/*
 * Rewrite positions and times as a real server would send them. False for a
 * message the server never sends where it stands: ORIGIN other than right
 * after BEGIN or STREAM START.
 */
static bool
normalize(unsigned char *m, size_t n, lsn_t *next, lsn_t *begin_lsn, bool *in_stream,
		  char *prev)
{
	char before = *prev;

	*prev = (char) m[0];
	switch (m[0])
	{
		case 'O':
			return before == 'B' || before == 'S';
		case 'S':
			*in_stream = true;
			break;
		case 'E':
			*in_stream = false;
			break;
		case 'R':
			normalize_relation(m, n, *in_stream);
			break;
		case 'B':				/* final_lsn 1..8, time 9..16, xid */
			if (n == 21)
			{
				*next += 0x100;
				*begin_lsn = *next;
				put64(m + 1, *next);
				put64(m + 9, sane_time(m + 9));
			}
			break;
		case 'C':				/* flags, commit_lsn 2..9, end 10..17, time 18..25 */
			if (n == 26)
			{
				put64(m + 2, *begin_lsn);
				put64(m + 10, *begin_lsn + 0x10);
				put64(m + 18, sane_time(m + 18));
			}
			break;
		case 'M':				/* [xid in a stream], flags, lsn, prefix, content */
			{
				size_t at = 1 + (*in_stream ? 4 : 0);

				/* A transactional message lies below its commit; any other
				 * is decoded in WAL order, above what came before. */
				if (at + 9 > n)
					break;
				if (m[at] & 1)
					put64(m + at + 1, *begin_lsn > 0x10 ? *begin_lsn - 0x10 : *begin_lsn);
				else
				{
					*next += 0x100;
					put64(m + at + 1, *next);
				}
			}
			break;
		case 'c':				/* xid 1..4, flags, commit 6..13, end 14..21, time 22..29 */
			if (n == 30)
			{
				*next += 0x100;
				put64(m + 6, *next);
				put64(m + 14, *next + 0x10);
				put64(m + 22, sane_time(m + 22));
			}
			break;
	}
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct walstream_config cfg = {0};
	struct walstream *ws;
	struct out *out;
	struct streamread *sr;
	struct sr_record rec;
	enum ws_status st = WS_OK;
	lsn_t next = 0x1000000, begin_lsn = 0;
	size_t off = 1, outlen;
	bool in_stream = false;
	char prev = 0;
	char *text, *p, *end, *nl;
	int fd;

	if (size < 1)
		return 0;
	cfg.max_message = (data[0] & 1) ? 256 : 1 << 20;
	cfg.spool_dir = NULL;
	cfg.endpos = (data[0] & 2) ? 0x1000000 + 0x100 * (lsn_t) (data[0] >> 2) : LSN_INVALID;
	fd = memfd_create("walstream_fuzz", 0);
	check(fd >= 0, "memfd_create");
	out = out_open(fd, 0);
	ws = ws_new(&cfg, out);
	st = ws_begin_stream(ws, "7442718406132410263", 1, "fuzz_slot", next, 150000);

	while (st == WS_OK && off + 2 <= size)
	{
		size_t n = (size_t) data[off] << 8 | data[off + 1];

		off += 2;
		if (n > size - off)
			break;
		if (n == 0)
		{
			in_stream = false;
			st = ws_begin_stream(ws, "7442718406132410263", 1, "fuzz_slot", next, 150000);
		}
		else if (n == 9 && data[off] == 'k')
		{
			/* A keepalive's WAL end is what the server has decoded: every
			 * later commit is above it. Captured seeds carry real WAL ends
			 * far above the rewritten commits, so it is rewritten too. */
			next += get64(data + off + 1) & 0xff;
			st = ws_keepalive(ws, next, (uint64_t) off * 1000);
		}
		else
		{
			/* An exact-size copy, so ASan sees reads past the message. */
			unsigned char *m = malloc(n);

			memcpy(m, data + off, n);
			if (normalize(m, n, &next, &begin_lsn, &in_stream, &prev))
				st = ws_message(ws, m, n);
			free(m);
		}
		off += n;
	}
	if (st == WS_ENDPOS)
		st = ws_end(ws);
	else if (st == WS_OK)
		st = ws_flush(ws);
	else
		(void) ws_flush(ws);	/* what was written before the failure */
	ws_free(ws);
	out_close(out, false);

	/* Every line written must be a record pg-apply accepts. */
	outlen = (size_t) lseek(fd, 0, SEEK_END);
	text = malloc(outlen + 1);
	check(pread(fd, text, outlen, 0) == (ssize_t) outlen, "read back the output");
	close(fd);
	sr = sr_new();
	p = text;
	end = text + outlen;
	while (p < end)
	{
		nl = memchr(p, '\n', (size_t) (end - p));
		check(nl != NULL, "output ends with a complete line");
		if (!sr_parse(sr, p, (size_t) (nl - p), &rec))
		{
			fprintf(stderr, "walstream_fuzz: pg-apply would reject line %.*s: %s\n",
					(int) (nl - p > 200 ? 200 : nl - p), p, sr_error(sr));
			check(0, "every line pg-walcat writes is accepted by the stream parser");
		}
		p = nl + 1;
	}
	sr_free(sr);
	free(text);
	return 0;
}
