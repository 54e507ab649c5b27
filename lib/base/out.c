#include "out.h"
#include "common.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define OUT_BUFSZ (256 * 1024)
/*
 * A zstd frame ends at the first boundary after this much input (and at
 * every flush at a boundary), so a reader verifies each frame's checksum
 * before it applies anything in it, and never has more than about this much
 * (plus one transaction or snapshot frame) not yet verified.
 */
#define OUT_FRAME_TARGET (1024 * 1024)

struct out {
	int fd;
	bool closed;				/* EPIPE seen: discard the rest quietly */
	char *buf;
	size_t len;
	unsigned long long total;
	ZSTD_CCtx *zc;				/* NULL for plain output */
	char *zbuf;
	size_t zcap;
	size_t frame_bytes;			/* input in the open zstd frame */
	size_t frame_target;		/* end a frame at a boundary past this */
	bool at_boundary;			/* nothing written since out_boundary() */
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

#define OUT_PIPE_BYTES (1024 * 1024)

void
out_widen_pipe(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && fcntl(fd, F_GETPIPE_SZ) < OUT_PIPE_BYTES)
		(void) fcntl(fd, F_SETPIPE_SZ, OUT_PIPE_BYTES);
}

struct out *
out_open(int fd, int zstd_level)
{
	struct out *o = xcalloc(1, sizeof(*o));

	o->fd = fd;
	o->buf = xmalloc(OUT_BUFSZ);
	o->frame_target = OUT_FRAME_TARGET;
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
	{
		st = zwrite(o, o->buf, o->len, mode);
		if (mode == ZSTD_e_end)
			o->frame_bytes = 0;
	}
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
	o->frame_bytes += n;
	o->at_boundary = false;
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

void
out_set_frame_target(struct out *o, size_t bytes)
{
	o->frame_target = bytes;
}

enum out_status
out_boundary(struct out *o)
{
	o->at_boundary = true;
	if (o->closed)
		return OUT_CLOSED;
	if (o->zc && o->frame_bytes > 0 && o->frame_bytes >= o->frame_target)
		return drain(o, ZSTD_e_end);
	return OUT_OK;
}

enum out_status
out_flush(struct out *o)
{
	if (o->closed)
		return OUT_CLOSED;
	/* At a boundary the frame ends: the reader can verify and use it all. */
	return drain(o, o->at_boundary && o->frame_bytes > 0 ? ZSTD_e_end : ZSTD_e_flush);
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
	/* No empty frame after the last one (an empty output still gets one). */
	bool ended = o->zc && o->frame_bytes == 0 && o->len == 0 && o->total > 0;
	enum out_status st = o->closed ? OUT_CLOSED : ended ? OUT_OK : drain(o, ZSTD_e_end);

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
