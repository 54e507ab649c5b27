#include "out.h"
#include "common.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define OUT_BUFSZ (256 * 1024)

struct out {
	int fd;
	bool closed;				/* EPIPE seen: discard the rest quietly */
	char *buf;
	size_t len;
	unsigned long long total;
	ZSTD_CCtx *zc;				/* NULL for plain output */
	char *zbuf;
	size_t zcap;
};

int
write_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0)
	{
		ssize_t w = write(fd, s, n);

		if (w < 0)
		{
			if (errno == EINTR)
				continue;
			return -1;
		}
		s += w;
		n -= (size_t) w;
	}
	return 0;
}

bool
out_tty_ok(int fd, int zstd_level)
{
	return zstd_level == 0 || !isatty(fd);
}

struct out *
out_open(int fd, int zstd_level)
{
	struct out *o = xcalloc(1, sizeof(*o));

	o->fd = fd;
	o->buf = xmalloc(OUT_BUFSZ);
	if (zstd_level > 0)
	{
		o->zc = ZSTD_createCCtx();
		if (o->zc == NULL)
			log_fatal(EXIT_RUNTIME, "cannot create zstd compression context");
		ZSTD_CCtx_setParameter(o->zc, ZSTD_c_compressionLevel, zstd_level);
		ZSTD_CCtx_setParameter(o->zc, ZSTD_c_checksumFlag, 1);
		o->zcap = ZSTD_CStreamOutSize();
		o->zbuf = xmalloc(o->zcap);
	}
	return o;
}

static enum out_status
raw_write(struct out *o, const void *p, size_t n)
{
	if (o->closed)
		return OUT_CLOSED;
	if (write_all(o->fd, p, n) == 0)
		return OUT_OK;
	if (errno == EPIPE)
	{
		o->closed = true;
		return OUT_CLOSED;
	}
	log_error("cannot write output: %s", strerror(errno));
	return OUT_ERROR;
}

/* Compress p[0..n) with the given end directive and write what comes out. */
static enum out_status
zwrite(struct out *o, const void *p, size_t n, ZSTD_EndDirective mode)
{
	ZSTD_inBuffer in = {p, n, 0};

	for (;;)
	{
		ZSTD_outBuffer zout = {o->zbuf, o->zcap, 0};
		size_t left = ZSTD_compressStream2(o->zc, &zout, &in, mode);
		enum out_status st;

		if (ZSTD_isError(left))
		{
			log_error("zstd compression failed: %s", ZSTD_getErrorName(left));
			return OUT_ERROR;
		}
		if (zout.pos > 0 && (st = raw_write(o, o->zbuf, zout.pos)) != OUT_OK)
			return st;
		if (mode == ZSTD_e_continue ? in.pos == in.size : left == 0)
			return OUT_OK;
	}
}

static enum out_status
drain(struct out *o, ZSTD_EndDirective mode)
{
	enum out_status st;

	if (o->zc)
		st = zwrite(o, o->buf, o->len, mode);
	else
		st = o->len ? raw_write(o, o->buf, o->len) : OUT_OK;
	o->len = 0;
	return st;
}

enum out_status
out_write(struct out *o, const void *p, size_t n)
{
	if (o->closed)
		return OUT_CLOSED;
	o->total += n;
	if (o->len + n <= OUT_BUFSZ)
	{
		memcpy(o->buf + o->len, p, n);
		o->len += n;
		return OUT_OK;
	}
	enum out_status st = drain(o, ZSTD_e_continue);

	if (st != OUT_OK)
		return st;
	if (n <= OUT_BUFSZ)
	{
		memcpy(o->buf, p, n);
		o->len = n;
		return OUT_OK;
	}
	/* Large record: pass it through without copying. */
	return o->zc ? zwrite(o, p, n, ZSTD_e_continue) : raw_write(o, p, n);
}

enum out_status
out_flush(struct out *o)
{
	if (o->closed)
		return OUT_CLOSED;
	return drain(o, ZSTD_e_flush);
}

unsigned long long
out_bytes(const struct out *o)
{
	return o->total;
}

size_t
out_pending(const struct out *o)
{
	return o->len;
}

enum out_status
out_close(struct out *o, bool do_fsync)
{
	enum out_status st = o->closed ? OUT_CLOSED : drain(o, ZSTD_e_end);

	if (st == OUT_OK && do_fsync && fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS)
	{
		log_error("cannot fsync output: %s", strerror(errno));
		st = OUT_ERROR;
	}
	ZSTD_freeCCtx(o->zc);
	free(o->zbuf);
	free(o->buf);
	free(o);
	return st;
}
