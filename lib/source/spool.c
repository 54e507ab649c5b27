#include "spool.h"
#include "buf.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPOOL_IOBUF (256 * 1024)

struct subxact {
	uint32_t xid;
	uint64_t offset;			/* where its first message starts */
};

struct stxn {
	uint32_t xid;
	int fd;
	uint64_t size;				/* bytes in the file plus the write buffer */
	struct subxact *subs;
	size_t nsubs, capsubs;
	uint32_t last_sub;
};

struct spool {
	char *dir;
	size_t max_message;
	struct stxn *txns;
	size_t ntxns, captxns;
	struct stxn *cur;			/* the open segment's transaction */
	struct buf wbuf;			/* cur's unwritten tail */
	struct stxn *replay;
	struct buf rbuf;			/* read-ahead while replaying */
	size_t rpos;
	uint64_t roff;				/* file offset of rbuf's end */
};

static bool
ioerr(char *err, size_t errlen, const char *what, const struct spool *s)
{
	snprintf(err, errlen, "cannot %s spool file in \"%s\": %s", what, s->dir, strerror(errno));
	return false;
}

struct spool *
spool_new(const char *dir, size_t max_message)
{
	struct spool *s = xcalloc(1, sizeof(*s));
	const char *tmp = getenv("TMPDIR");

	if (dir == NULL || dir[0] == '\0')
		dir = tmp && tmp[0] ? tmp : "/tmp";
	s->dir = xstrdup(dir);
	s->max_message = max_message;
	return s;
}

static void
drop_txn(struct spool *s, struct stxn *t)
{
	size_t i = (size_t) (t - s->txns);

	if (t->fd >= 0)
		close(t->fd);
	free(t->subs);
	if (s->cur == t)
	{
		s->cur = NULL;
		buf_reset(&s->wbuf);
	}
	if (s->replay == t)
		s->replay = NULL;
	/* Keep the array dense; fix the pointers into it that move. */
	if (i + 1 < s->ntxns)
	{
		struct stxn *last = &s->txns[s->ntxns - 1];

		if (s->cur == last)
			s->cur = t;
		if (s->replay == last)
			s->replay = t;
		*t = *last;
	}
	s->ntxns--;
}

void
spool_reset(struct spool *s)
{
	while (s->ntxns > 0)
		drop_txn(s, &s->txns[s->ntxns - 1]);
	buf_reset(&s->rbuf);
}

void
spool_free(struct spool *s)
{
	if (s == NULL)
		return;
	spool_reset(s);
	free(s->txns);
	buf_free(&s->wbuf);
	buf_free(&s->rbuf);
	free(s->dir);
	free(s);
}

static struct stxn *
find(struct spool *s, uint32_t xid)
{
	for (size_t i = 0; i < s->ntxns; i++)
		if (s->txns[i].xid == xid)
			return &s->txns[i];
	return NULL;
}

/* An anonymous file: never visible by name when O_TMPFILE works, unlinked
 * at once otherwise. */
static int
anon_file(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	{
		struct buf path = BUF_INIT;

		buf_printf(&path, "%s/pg-walcat-spool.XXXXXX", dir);
		fd = mkostemp(buf_cstr(&path), O_CLOEXEC);
		if (fd >= 0)
			unlink(path.data);
		buf_free(&path);
	}
	return fd;
}

static bool
write_out(struct spool *s, char *err, size_t errlen)
{
	const char *p = s->wbuf.data;
	size_t n = s->wbuf.len;

	while (n > 0)
	{
		ssize_t w = write(s->cur->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return ioerr(err, errlen, "write", s);
		p += w;
		n -= (size_t) w;
	}
	buf_reset(&s->wbuf);
	return true;
}

bool
spool_start(struct spool *s, uint32_t xid, bool first_segment,
			char *err, size_t errlen)
{
	struct stxn *t = find(s, xid);

	if (s->cur && !spool_stop(s, err, errlen))
		return false;
	if (t && first_segment)
		drop_txn(s, t), t = NULL;
	if (t == NULL)
	{
		int fd;

		if (!first_segment)
		{
			snprintf(err, errlen, "stream start for transaction %u continues a stream that never began", xid);
			return false;
		}
		fd = anon_file(s->dir);
		if (fd < 0)
			return ioerr(err, errlen, "create", s);
		if (s->ntxns == s->captxns)
		{
			s->captxns = s->captxns ? s->captxns * 2 : 8;
			s->txns = xrealloc(s->txns, s->captxns * sizeof(*s->txns));
		}
		t = &s->txns[s->ntxns++];
		memset(t, 0, sizeof(*t));
		t->xid = xid;
		t->fd = fd;
	}
	t->last_sub = 0;
	s->cur = t;
	buf_reset(&s->wbuf);
	return true;
}

static void
note_subxact(struct stxn *t, uint32_t sub)
{
	if (sub == 0 || sub == t->xid || sub == t->last_sub)
		return;
	t->last_sub = sub;
	/* Newest first: a subtransaction is usually among the recent ones. */
	for (size_t i = t->nsubs; i > 0; i--)
		if (t->subs[i - 1].xid == sub)
			return;
	if (t->nsubs == t->capsubs)
	{
		t->capsubs = t->capsubs ? t->capsubs * 2 : 16;
		t->subs = xrealloc(t->subs, t->capsubs * sizeof(*t->subs));
	}
	t->subs[t->nsubs].xid = sub;
	t->subs[t->nsubs].offset = t->size;
	t->nsubs++;
}

bool
spool_append(struct spool *s, uint32_t subxid, const void *p, size_t n,
			 char *err, size_t errlen)
{
	unsigned char hdr[4];

	if (s->cur == NULL)
	{
		snprintf(err, errlen, "streamed change outside a stream block");
		return false;
	}
	if (n > s->max_message || n > UINT32_MAX)
	{
		snprintf(err, errlen, "streamed message of %zu bytes exceeds the limit of %zu bytes", n, s->max_message);
		return false;
	}
	note_subxact(s->cur, subxid);
	hdr[0] = (unsigned char) (n >> 24);
	hdr[1] = (unsigned char) (n >> 16);
	hdr[2] = (unsigned char) (n >> 8);
	hdr[3] = (unsigned char) n;
	if (s->wbuf.len + 4 + n > SPOOL_IOBUF && s->wbuf.len > 0 && !write_out(s, err, errlen))
		return false;
	buf_append(&s->wbuf, hdr, 4);
	buf_append(&s->wbuf, p, n);
	s->cur->size += 4 + n;
	if (s->wbuf.len >= SPOOL_IOBUF)
		return write_out(s, err, errlen);
	return true;
}

bool
spool_stop(struct spool *s, char *err, size_t errlen)
{
	bool ok = true;

	if (s->cur)
		ok = write_out(s, err, errlen);
	s->cur = NULL;
	return ok;
}

bool
spool_abort(struct spool *s, uint32_t xid, uint32_t subxid,
			char *err, size_t errlen)
{
	struct stxn *t = find(s, xid);
	size_t i;

	/* Aborts come outside stream blocks, but be safe about the buffer. */
	if (s->cur && !spool_stop(s, err, errlen))
		return false;
	if (t == NULL)
		return true;			/* nothing of it was spooled */
	if (subxid == xid)
	{
		drop_txn(s, t);
		return true;
	}
	for (i = t->nsubs; i > 0; i--)
		if (t->subs[i - 1].xid == subxid)
			break;
	if (i == 0)
		return true;			/* an empty subtransaction */
	t->size = t->subs[i - 1].offset;
	t->nsubs = i - 1;			/* later ones were nested in it */
	t->last_sub = 0;
	if (ftruncate(t->fd, (off_t) t->size) != 0 || lseek(t->fd, 0, SEEK_END) < 0)
		return ioerr(err, errlen, "truncate", s);
	return true;
}

bool
spool_replay_open(struct spool *s, uint32_t xid, char *err, size_t errlen)
{
	struct stxn *t;

	if (s->cur && !spool_stop(s, err, errlen))
		return false;
	t = find(s, xid);
	if (t == NULL)
	{
		snprintf(err, errlen, "stream commit for transaction %u that was never streamed", xid);
		return false;
	}
	if (lseek(t->fd, 0, SEEK_SET) < 0)
		return ioerr(err, errlen, "rewind", s);
	s->replay = t;
	buf_reset(&s->rbuf);
	s->rpos = 0;
	s->roff = 0;
	return true;
}

/* Make at least want bytes available at rpos; false at end of file. */
static int
fill(struct spool *s, size_t want, char *err, size_t errlen)
{
	struct stxn *t = s->replay;

	if (s->rbuf.len - s->rpos >= want)
		return 1;
	/* Slide what is unread to the front, then read more behind it. */
	if (s->rpos > 0)
		memmove(s->rbuf.data, s->rbuf.data + s->rpos, s->rbuf.len - s->rpos);
	s->rbuf.len -= s->rpos;
	s->rpos = 0;
	buf_reserve(&s->rbuf, (want > SPOOL_IOBUF ? want : SPOOL_IOBUF));
	while (s->rbuf.len < want && s->roff < t->size)
	{
		size_t room = s->rbuf.cap - 1 - s->rbuf.len;
		uint64_t left = t->size - s->roff;
		ssize_t r = read(t->fd, s->rbuf.data + s->rbuf.len, room < left ? room : (size_t) left);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
		{
			ioerr(err, errlen, "read", s);
			return -1;
		}
		if (r == 0)
			break;
		s->rbuf.len += (size_t) r;
		s->roff += (uint64_t) r;
	}
	return s->rbuf.len >= want ? 1 : 0;
}

int
spool_replay_next(struct spool *s, const unsigned char **p, size_t *n,
				  char *err, size_t errlen)
{
	const unsigned char *h;
	size_t len;
	int rc;

	if (s->replay == NULL)
		return 0;
	rc = fill(s, 4, err, errlen);
	if (rc <= 0)
	{
		if (rc == 0 && s->rbuf.len - s->rpos != 0)
		{
			snprintf(err, errlen, "spool file of transaction %u ends inside a message", s->replay->xid);
			return -1;
		}
		return rc;
	}
	h = (const unsigned char *) s->rbuf.data + s->rpos;
	len = ((size_t) h[0] << 24) | ((size_t) h[1] << 16) | ((size_t) h[2] << 8) | h[3];
	if (len > s->max_message)
	{
		snprintf(err, errlen, "spool file of transaction %u is damaged", s->replay->xid);
		return -1;
	}
	rc = fill(s, 4 + len, err, errlen);
	if (rc <= 0)
	{
		if (rc == 0)
			snprintf(err, errlen, "spool file of transaction %u ends inside a message", s->replay->xid);
		return -1;
	}
	*p = (const unsigned char *) s->rbuf.data + s->rpos + 4;
	*n = len;
	s->rpos += 4 + len;
	return 1;
}

void
spool_replay_close(struct spool *s)
{
	if (s->replay)
		drop_txn(s, s->replay);
	s->replay = NULL;
	buf_reset(&s->rbuf);
	/* A huge message may have grown the read-ahead: give it back. */
	if (s->rbuf.cap > 4 * SPOOL_IOBUF)
		buf_free(&s->rbuf);
	s->rpos = 0;
}
