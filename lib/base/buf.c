#include "buf.h"
#include "json.h"
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_reserve(struct buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;	/* room for a terminating NUL */

	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void
buf_append(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void
buf_puts(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

void
buf_putc(struct buf *b, char c)
{
	buf_reserve(b, 1);
	b->data[b->len++] = c;
}

void
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	buf_reserve(b, (size_t) n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t) n;
}

char *
buf_cstr(struct buf *b)
{
	buf_reserve(b, 0);
	b->data[b->len] = '\0';
	return b->data;
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void
buf_json_string(struct buf *b, const char *s)
{
	/* An escape is at most 6 bytes per input byte, plus quotes and NUL. */
	size_t room = strlen(s) * 6 + 1;

	buf_putc(b, '"');
	buf_reserve(b, room);
	b->len += json_escape(b->data + b->len, room, s);
	buf_putc(b, '"');
}

void
buf_quote_ident(struct buf *b, const char *s)
{
	buf_putc(b, '"');
	for (; *s; s++)
	{
		if (*s == '"')
			buf_putc(b, '"');
		buf_putc(b, *s);
	}
	buf_putc(b, '"');
}
