/*
 * stream_fuzz.c - libFuzzer target for the stream reading layer: input.c
 * (line splitting, zstd detection, length limit), record.c (field splitting,
 * number and LSN fields) and escape.c (COPY unescaping, hex).
 *
 * Beyond "does not crash" it checks what the modules promise: the lines
 * input_next returns, each followed by LF, are exactly the decoded input;
 * a too-long line, a truncated tail and a clean end are reported as such;
 * every value that unescapes re-escapes to something that unescapes to the
 * same bytes; validation and decoding agree; numbers and LSNs round-trip.
 *
 * Input layout: byte 0 picks the transport (bits 0-1: plain, two zstd frames,
 * one truncated zstd frame, raw bytes as given) and the line limit (bits
 * 2-4); byte 1 the split point or truncation; the rest is the stream.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "buf.h"
#include "escape.h"
#include "input.h"
#include "log.h"
#include "lsn.h"
#include "record.h"

#define MAX_FIELDS 70

static const size_t line_limits[8] = {1, 8, 16, 64, 256, 4096, 65536, 1 << 20};

static struct buf val, esc, again, num;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_init("stream_fuzz");
	return 0;
}

static void
check(int cond, const char *what)
{
	if (!cond)
	{
		fprintf(stderr, "stream_fuzz: invariant violated: %s\n", what);
		abort();
	}
}

static void
check_field(const struct field *f)
{
	bool is_null = false, ok;
	lsn_t lsn;
	uint64_t u;

	buf_reset(&val);
	ok = copy_unescape(f->p, f->n, &val, &is_null);
	check(copy_field_valid(f->p, f->n) == (ok || field_is_unchanged(f->p, f->n)),
		  "copy_field_valid agrees with copy_unescape");
	if (ok && !is_null)
	{
		/* What a writer would emit for these bytes must read back the same. */
		buf_reset(&esc);
		copy_escape(&esc, val.data ? val.data : "", val.len);
		check(memchr(esc.data ? esc.data : "", '\t', esc.len) == NULL, "escaped value has no TAB");
		check(memchr(esc.data ? esc.data : "", '\n', esc.len) == NULL, "escaped value has no LF");
		check(!field_is_null(esc.data, esc.len) && !field_is_unchanged(esc.data, esc.len),
			  "escaped data never looks like a token");
		buf_reset(&again);
		check(copy_unescape(esc.data ? esc.data : "", esc.len, &again, &is_null),
			  "escaped value unescapes");
		check(!is_null && again.len == val.len &&
			  (val.len == 0 || memcmp(again.data, val.data, val.len) == 0),
			  "escape/unescape round trip");
	}
	if (field_lsn(f, &lsn))
	{
		char l[LSN_BUFSZ];
		lsn_t back;

		check(lsn_parse(lsn_format(lsn, l), &back) && back == lsn, "lsn round trip");
	}
	if (field_u64(f, &u))
	{
		/* field_u64 takes only the canonical form, so formatting gives it back. */
		buf_reset(&num);
		rec_u64(&num, u);
		check(num.len == f->n + 1 && memcmp(num.data + 1, f->p, f->n) == 0, "u64 round trip");
	}
	buf_reset(&val);
	if (hex_decode(f->p, f->n, &val))
	{
		buf_reset(&esc);
		hex_encode(&esc, (const unsigned char *) (val.data ? val.data : ""), val.len);
		check(esc.len == f->n && strncasecmp(esc.data ? esc.data : "", f->p, f->n) == 0,
			  "hex round trip");
	}
}

static void
check_line(const char *line, size_t len)
{
	struct field f[MAX_FIELDS];
	size_t nf = rec_split(line, len, f, MAX_FIELDS), i, total = 0;

	check(nf >= 1 && nf <= MAX_FIELDS + 1, "field count in range");
	if (nf == MAX_FIELDS + 1)
		nf = MAX_FIELDS;
	for (i = 0; i < nf; i++)
	{
		check(f[i].p >= line && f[i].p + f[i].n <= line + len, "field inside line");
		check(memchr(f[i].p, '\t', f[i].n) == NULL || i == nf - 1, "field holds no TAB");
		total += f[i].n + 1;
		check_field(&f[i]);
	}
	check(total - 1 <= len, "fields cover at most the line");
	(void) field_is_name(&f[0]);
}

/* One zstd frame with a content checksum, as every writer makes them:
 * input.c refuses a frame without one. */
static size_t
compress_frame(void *dst, size_t cap, const void *src, size_t n)
{
	static ZSTD_CCtx *cctx;
	size_t r;

	if (cctx == NULL)
	{
		cctx = ZSTD_createCCtx();
		check(cctx != NULL, "zstd context");
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	}
	r = ZSTD_compress2(cctx, dst, cap, src, n);
	check(!ZSTD_isError(r), "zstd compress");
	return r;
}

/* Write the transport form of the stream into a memfd, rewound. */
static int
make_fd(uint8_t mode, uint8_t arg, const uint8_t *p, size_t n, int *exact)
{
	int fd = memfd_create("stream_fuzz", 0);
	void *z = NULL;
	size_t zn = 0;

	check(fd >= 0, "memfd_create");
	*exact = 1;
	switch (mode)
	{
		case 0:
		case 3:
			if (n && write(fd, p, n) != (ssize_t) n)
				abort();
			if (n >= 4 && memcmp(p, "\x28\xb5\x2f\xfd", 4) == 0)
				*exact = 0;		/* zstd magic: the bytes are not the stream */
			break;
		case 1:
		case 2:
		{
			/* mode 1: two frames, split at arg; mode 2: one frame cut short */
			size_t split = mode == 1 ? (n ? arg % (n + 1) : 0) : n;
			/* and 4 checksum bytes a frame */
			size_t cap = ZSTD_compressBound(split) + ZSTD_compressBound(n - split) + 8;
			size_t a, b = 0;

			z = malloc(cap + 1);
			a = compress_frame(z, cap, p, split);
			if (mode == 1)
				b = compress_frame((char *) z + a, cap - a, p + split, n - split);
			zn = a + b;
			if (mode == 2)
			{
				zn -= (size_t) (arg % 16) < zn ? (size_t) (arg % 16) : zn;
				*exact = arg % 16 == 0;
			}
			if (zn && write(fd, z, zn) != (ssize_t) zn)
				abort();
			free(z);
			break;
		}
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mode, arg;
	size_t max_line, off = 0;
	const uint8_t *p;
	size_t n;
	int exact, fd;
	struct input *in;
	enum input_status st;
	const char *line;
	size_t len;
	uint64_t lines = 0;

	if (size < 2)
		return 0;
	mode = data[0] & 3;
	max_line = line_limits[(data[0] >> 2) & 7];
	arg = data[1];
	p = data + 2;
	n = size - 2;

	fd = make_fd(mode, arg, p, n, &exact);
	in = input_open(fd, "fuzz", max_line);
	for (;;)
	{
		st = input_next(in, &line, &len, (arg & 0x80) ? 0 : -1);
		if (st == IN_AGAIN)
			continue;			/* a memfd is always readable: poll again */
		if (st != IN_LINE)
			break;
		lines++;
		check(input_lineno(in) == lines, "line numbers count lines");
		check(len <= max_line, "line within the limit");
		check(line[len] == '\0' && memchr(line, '\n', len) == NULL, "line is one line");
		/* The lines are a prefix of the stream, LF by LF (a cut zstd frame
		 * still decodes to a prefix; garbage that happens to be zstd does not). */
		if (exact || mode == 2)
			check(off + len < n && memcmp(p + off, line, len) == 0 && p[off + len] == '\n',
				  "line matches the input");
		off += len + 1;
		check(input_bytes(in) == off, "byte count");
		check_line(line, len);
	}
	if (exact)
	{
		const uint8_t *nl = off < n ? memchr(p + off, '\n', n - off) : NULL;
		size_t rest = nl ? (size_t) (nl - (p + off)) : n - off;

		switch (st)
		{
			case IN_EOF:
				check(off == n, "clean end only after the last LF");
				break;
			case IN_TRUNCATED:
				check(off < n && nl == NULL && rest <= max_line, "truncation is a short unterminated tail");
				break;
			case IN_TOOLONG:
				check(rest > max_line, "too long only when the line is");
				break;
			default:
				check(0, "read errors only for garbage zstd");
				break;
		}
	}
	input_close(in);
	close(fd);
	return 0;
}
