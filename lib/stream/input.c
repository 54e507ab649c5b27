#include "input.h"
#include "common.h"
#include "log.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define READ_CHUNK (256 * 1024)
/* Plain input may be read this far ahead while the caller waits elsewhere. */
#define READAHEAD_BYTES (4 * 1024 * 1024)

struct input {
	int fd;
	char *name;
	size_t max_line;
	/* Decoded bytes: data[start..end) not yet returned. */
	char *data;
	size_t cap, start, end;
	size_t scan;				/* data[start..scan) known to hold no LF */
	bool eof;					/* fd reached EOF */
	bool detected;
	ZSTD_DCtx *zd;				/* non-NULL once zstd input was detected */
	char *raw;					/* compressed bytes waiting for decoding */
	size_t rawcap, rawstart, rawend;
	bool zframe_open;			/* inside a zstd frame: EOF now is truncation */
	bool zheader_checked;		/* the open frame's header was looked at */
	unsigned char zhead[5];		/* ... its first bytes */
	uint64_t decoded;			/* bytes decoded into data, in all */
	uint64_t verified;			/* ... of them in frames whose checksum matched */
	bool failed;				/* a read or decoding error: sticky */
	char err[256];
	uint64_t lineno, bytes;
};

struct input *
input_open(int fd, const char *name, size_t max_line)
{
	struct input *in = xcalloc(1, sizeof(*in));

	in->fd = fd;
	in->name = xstrdup(name);
	in->max_line = max_line;
	in->cap = READ_CHUNK * 2;
	in->data = xmalloc(in->cap);
	return in;
}

/* Make room for at least 'need' more bytes after end, compacting first. */
static bool
make_room(struct input *in, size_t need)
{
	if (in->start > 0 && in->cap - in->end < need)
	{
		memmove(in->data, in->data + in->start, in->end - in->start);
		in->end -= in->start;
		in->scan -= in->start;
		in->start = 0;
	}
	if (in->cap - in->end < need)
	{
		size_t cap = in->cap;

		while (cap - in->end < need)
			cap *= 2;
		/* The buffer holds at most one line plus one chunk. */
		if (cap > in->max_line + 2 * READ_CHUNK + ZSTD_DStreamOutSize())
			cap = in->max_line + 2 * READ_CHUNK + ZSTD_DStreamOutSize();
		if (cap - in->end < need)
			return false;
		in->data = xrealloc(in->data, cap);
		in->cap = cap;
	}
	return true;
}

static ssize_t
read_some(int fd, char *p, size_t n)
{
	for (;;)
	{
		ssize_t r = read(fd, p, n);

		if (r >= 0 || errno != EINTR)
			return r;
	}
}

static bool
failure(struct input *in, const char *what, const char *why)
{
	snprintf(in->err, sizeof(in->err), "%s %s: %s", what, in->name, why);
	in->failed = true;
	return false;
}

/*
 * A frame that carries no content checksum cannot be verified before its
 * transactions are applied: refuse it. RFC 8878: a 4-byte magic, then the
 * frame header descriptor, whose bit 2 says a checksum follows the last
 * block. Looked at once the decoder accepted the header, so that garbage
 * gets the decoder's own message.
 */
static bool
zcheck_header(struct input *in)
{
	in->zheader_checked = true;
	if (memcmp(in->zhead, "\x28\xB5\x2F\xFD", 4) == 0 && !(in->zhead[4] & 0x04))
		return failure(in, "cannot verify", "a zstd frame has no content checksum (compress with --check)");
	return true;				/* or a skippable frame */
}

/* Decode buffered compressed bytes into data; returns false on error. */
static bool
zdecode(struct input *in)
{
	while (in->rawstart < in->rawend)
	{
		size_t outsz = ZSTD_DStreamOutSize();
		ZSTD_inBuffer zi = {in->raw, in->rawend, in->rawstart};
		ZSTD_outBuffer zo;
		size_t rc;

		/* A frame starts here: keep its header for zcheck_header(). */
		if (!in->zframe_open && !in->zheader_checked)
		{
			size_t k = in->rawend - in->rawstart < 5 ? in->rawend - in->rawstart : 5;

			if (k < 5 && !in->eof)
				return true;	/* wait for the whole descriptor */
			memset(in->zhead, 0, sizeof(in->zhead));
			memcpy(in->zhead, in->raw + in->rawstart, k);
		}
		if (!make_room(in, outsz))
			return true;		/* caller sees the line is too long */
		zo.dst = in->data + in->end;
		zo.size = outsz;
		zo.pos = 0;
		rc = ZSTD_decompressStream(in->zd, &zo, &zi);
		if (ZSTD_isError(rc))
			return failure(in, "cannot decompress", ZSTD_getErrorName(rc));
		if (!in->zheader_checked && !zcheck_header(in))
			return false;
		in->zframe_open = rc != 0;
		in->rawstart = zi.pos;
		in->end += zo.pos;
		in->decoded += zo.pos;
		/* The whole frame is decoded and its checksum matched. */
		if (rc == 0)
		{
			in->verified = in->decoded;
			in->zheader_checked = false;
		}
		if (zo.pos == 0 && zi.pos == zi.size)
			break;
		if (zo.pos > 0)
			break;				/* let the caller look for a line first */
	}
	return true;
}

/* Read once from fd (and decode). -1 error, 0 EOF, 1 progress. */
static int
fill(struct input *in)
{
	if (in->zd && in->rawstart < in->rawend)
	{
		size_t before = in->end;

		if (!zdecode(in))
			return -1;
		if (in->end > before)
			return 1;
	}
	if (in->eof)
		return 0;

	if (!in->detected || in->zd)
	{
		if (in->rawcap == 0)
		{
			in->rawcap = READ_CHUNK;
			in->raw = xmalloc(in->rawcap);
		}
		if (in->rawstart == in->rawend)
			in->rawstart = in->rawend = 0;
		else if (in->rawend == in->rawcap)
		{
			memmove(in->raw, in->raw + in->rawstart, in->rawend - in->rawstart);
			in->rawend -= in->rawstart;
			in->rawstart = 0;
		}
		ssize_t r = read_some(in->fd, in->raw + in->rawend, in->rawcap - in->rawend);

		if (r < 0)
		{
			failure(in, "cannot read", strerror(errno));
			return -1;
		}
		if (r == 0)
			in->eof = true;
		in->rawend += (size_t) r;
		if (!in->detected && (in->rawend >= 4 || in->eof))
		{
			static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};

			in->detected = true;
			if (in->rawend >= 4 && memcmp(in->raw, magic, 4) == 0)
			{
				in->zd = ZSTD_createDCtx();
				if (in->zd == NULL)
					log_fatal(EXIT_RUNTIME, "cannot create zstd context");
			}
			else
			{
				/* Plain: move the peeked bytes into the line buffer. */
				make_room(in, in->rawend);
				memcpy(in->data + in->end, in->raw, in->rawend);
				in->end += in->rawend;
				in->rawstart = in->rawend = 0;
			}
		}
		if (in->zd && !zdecode(in))
			return -1;
		return r == 0 && in->rawstart == in->rawend ? 0 : 1;
	}

	if (!make_room(in, READ_CHUNK))
		return 1;				/* buffer full of one long line */
	ssize_t r = read_some(in->fd, in->data + in->end, READ_CHUNK);

	if (r < 0)
	{
		failure(in, "cannot read", strerror(errno));
		return -1;
	}
	if (r == 0)
	{
		in->eof = true;
		return 0;
	}
	in->end += (size_t) r;
	return 1;
}

static bool
readable(int fd, int timeout_ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	int rc;

	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR && timeout_ms < 0);
	return rc > 0;
}

/*
 * The previous line is released: the one moment bytes may move. Keep free
 * room at the end of a plain input's buffer for input_readahead().
 */
static void
keep_room(struct input *in)
{
	size_t bound = in->max_line + 2 * READ_CHUNK + ZSTD_DStreamOutSize();
	size_t want = READAHEAD_BYTES < bound ? READAHEAD_BYTES : bound;

	if (!in->detected || in->zd || in->cap - in->end >= READ_CHUNK)
		return;
	/* Move only when that frees a chunk: copying per line would be
	 * quadratic in a full buffer. */
	if (in->start >= READ_CHUNK)
	{
		memmove(in->data, in->data + in->start, in->end - in->start);
		in->end -= in->start;
		in->scan -= in->start;
		in->start = 0;
	}
	if (in->cap < want)
	{
		in->data = xrealloc(in->data, want);
		in->cap = want;
	}
}

int
input_readahead_fd(const struct input *in)
{
	if (in->eof || !in->detected || in->zd || in->end >= in->cap)
		return -1;
	return in->fd;
}

void
input_readahead(struct input *in)
{
	ssize_t r;

	if (input_readahead_fd(in) < 0)
		return;
	/* Only into the free end: the caller's current line must not move. */
	r = read_some(in->fd, in->data + in->end, in->cap - in->end);
	if (r > 0)
		in->end += (size_t) r;
	else if (r == 0)
		in->eof = true;
	/* An error shows again at the next regular read, which reports it. */
}

bool
input_ready(const struct input *in)
{
	return in->failed || in->eof ||
		(in->end > in->scan && memchr(in->data + in->scan, '\n', in->end - in->scan) != NULL);
}

enum input_status
input_next(struct input *in, const char **line, size_t *len, int timeout_ms)
{
	if (in->failed)
		return IN_ERROR;
	keep_room(in);
	for (;;)
	{
		char *nl = memchr(in->data + in->scan, '\n', in->end - in->scan);

		if (nl != NULL)
		{
			size_t n = (size_t) (nl - (in->data + in->start));

			if (n > in->max_line)
				return IN_TOOLONG;
			*line = in->data + in->start;
			*len = n;
			*nl = '\0';
			in->start = in->scan = (size_t) (nl - in->data) + 1;
			in->lineno++;
			in->bytes += n + 1;
			return IN_LINE;
		}
		in->scan = in->end;
		if (in->end - in->start > in->max_line)
			return IN_TOOLONG;
		if (in->eof && (!in->zd || in->rawstart == in->rawend))
		{
			if (in->zd && in->zframe_open)
				return IN_TRUNCATED;
			return in->end > in->start ? IN_TRUNCATED : IN_EOF;
		}
		if (timeout_ms >= 0 && !(in->zd && in->rawstart < in->rawend) &&
			!readable(in->fd, timeout_ms))
			return IN_AGAIN;
		int rc = fill(in);

		if (rc < 0)
			return IN_ERROR;
	}
}

size_t
input_max_line(const struct input *in)
{
	return in->max_line;
}

bool
input_settled(const struct input *in)
{
	return in->zd == NULL || in->bytes <= in->verified;
}

bool
input_settle(struct input *in)
{
	while (!input_settled(in))
	{
		/* Lines not yet returned: the frame goes on past what was read. */
		if (in->failed || in->end > in->start)
			return false;
		if (in->rawstart == in->rawend && (in->eof || !readable(in->fd, 0)))
			return false;
		if (fill(in) <= 0)
			return false;
	}
	return true;
}

const char *
input_error(const struct input *in)
{
	return in->failed ? in->err : "";
}

uint64_t
input_lineno(const struct input *in)
{
	return in->lineno;
}

const char *
input_name(const struct input *in)
{
	return in->name;
}

uint64_t
input_bytes(const struct input *in)
{
	return in->bytes;
}

int
input_fd(const struct input *in)
{
	return in->fd;
}

void
input_close(struct input *in)
{
	if (in == NULL)
		return;
	ZSTD_freeDCtx(in->zd);
	free(in->raw);
	free(in->data);
	free(in->name);
	free(in);
}
