#include "record.h"
#include "escape.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>

void
rec_raw(struct buf *b, const char *s, size_t n)
{
	buf_reserve(b, n + 1);
	b->data[b->len++] = '\t';
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

void
rec_value(struct buf *b, const char *s, size_t n)
{
	buf_putc(b, '\t');
	copy_escape(b, s, n);
}

void
rec_null(struct buf *b)
{
	buf_append(b, "\t\\N", 3);
}

void
rec_unchanged(struct buf *b)
{
	buf_append(b, "\t\\U", 3);
}

void
rec_u64(struct buf *b, uint64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);

	do
	{
		tmp[--i] = (char) ('0' + v % 10);
		v /= 10;
	} while (v);
	rec_raw(b, tmp + i, sizeof(tmp) - i);
}

void
rec_i64(struct buf *b, int64_t v)
{
	if (v < 0)
	{
		char tmp[24];
		uint64_t u = (uint64_t) (-(v + 1)) + 1;
		size_t i = sizeof(tmp);

		do
		{
			tmp[--i] = (char) ('0' + u % 10);
			u /= 10;
		} while (u);
		tmp[--i] = '-';
		rec_raw(b, tmp + i, sizeof(tmp) - i);
	}
	else
		rec_u64(b, (uint64_t) v);
}

void
rec_lsn(struct buf *b, lsn_t lsn)
{
	char l[LSN_BUFSZ];

	rec_rawz(b, lsn_format(lsn, l));
}

static void
unix_usec_time(struct buf *b, int64_t usec)
{
	time_t secs = (time_t) (usec / 1000000);
	long frac = (long) (usec % 1000000);
	struct tm tm;
	char tmp[64];

	if (frac < 0)
	{
		frac += 1000000;
		secs -= 1;
	}
	gmtime_r(&secs, &tm);
	size_t n = strftime(tmp, sizeof(tmp), "%Y-%m-%d %H:%M:%S", &tm);

	n += (size_t) snprintf(tmp + n, sizeof(tmp) - n, ".%06ld+00", frac);
	rec_raw(b, tmp, n);
}

void
rec_pgtime(struct buf *b, int64_t pg_usec)
{
	unix_usec_time(b, pg_usec + PG_EPOCH_OFFSET_USEC);
}

void
rec_now(struct buf *b)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	unix_usec_time(b, (int64_t) tv.tv_sec * 1000000 + tv.tv_usec);
}

void
rec_header(struct buf *b, const char *sysid, uint32_t timeline,
		   const char *slot, lsn_t start, const char *producer,
		   int server_version_num, const char *history)
{
	rec_start(b, REC_HEADER);
	rec_u64(b, STREAM_VERSION);
	rec_rawz(b, sysid);
	rec_u64(b, timeline);
	if (slot && slot[0])
		rec_valuez(b, slot);
	else
		rec_rawz(b, "-");
	rec_lsn(b, start);
	buf_puts(b, "\tproducer=");
	copy_escape(b, producer, strlen(producer));
	if (server_version_num > 0)
		buf_printf(b, "\tserver=%d", server_version_num);
	if (history && history[0])
	{
		buf_puts(b, "\thistory=");
		buf_puts(b, history);
	}
	rec_finish(b);
}

size_t
rec_split(const char *line, size_t len, struct field *f, size_t max)
{
	size_t nf = 0;
	const char *p = line, *end = line + len;

	for (;;)
	{
		const char *tab = memchr(p, '\t', (size_t) (end - p));

		if (nf == max)
			return max + 1;
		f[nf].p = p;
		f[nf].n = tab ? (size_t) (tab - p) : (size_t) (end - p);
		nf++;
		if (tab == NULL)
			return nf;
		p = tab + 1;
	}
}

bool
field_eq(const struct field *f, const char *s)
{
	size_t n = strlen(s);

	return f->n == n && memcmp(f->p, s, n) == 0;
}

bool
field_lsn(const struct field *f, lsn_t *out)
{
	return lsn_parse_n(f->p, f->n, out);
}

bool
field_u64(const struct field *f, uint64_t *out)
{
	uint64_t v = 0;

	if (f->n == 0 || f->n > 20 || (f->n > 1 && f->p[0] == '0'))
		return false;
	for (size_t i = 0; i < f->n; i++)
	{
		unsigned d = (unsigned) (f->p[i] - '0');

		if (d > 9)
			return false;
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

bool
field_is_name(const struct field *f)
{
	if (f->n == 0)
		return false;
	for (size_t i = 0; i < f->n; i++)
		if (f->p[i] < 'A' || f->p[i] > 'Z')
			return false;
	return true;
}

bool
rec_file_read(const char *path, const char *what, struct field *f, size_t max, rec_line_fn line,
			  void *ctx, char *err, size_t errlen)
{
	FILE *file = fopen(path, "r");
	char *text = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long lineno = 0;
	bool ok = true;

	if (file == NULL)
	{
		snprintf(err, errlen, "cannot open %s file \"%s\": %s", what, path, strerror(errno));
		return false;
	}
	while (ok && (len = getline(&text, &cap, file)) >= 0)
	{
		lineno++;
		if (len > 0 && text[len - 1] == '\n')
			text[--len] = '\0';
		if (len > 0)
			ok = line(ctx, f, rec_split(text, (size_t) len, f, max), lineno, err, errlen);
	}
	if (ok && ferror(file))
	{
		snprintf(err, errlen, "cannot read %s file \"%s\": %s", what, path, strerror(errno));
		ok = false;
	}
	fclose(file);
	free(text);
	return ok;
}
