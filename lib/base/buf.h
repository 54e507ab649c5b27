/*
 * buf.h - a growable byte buffer. Grows geometrically and is reused across
 * rows (buf_reset keeps the allocation), so hot paths allocate nothing per
 * row once warmed up. Never shrinks behind the caller's back.
 */
#ifndef PGSYNC_BUF_H
#define PGSYNC_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

#define BUF_INIT {NULL, 0, 0}

void buf_reserve(struct buf *b, size_t extra);
void buf_append(struct buf *b, const void *p, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_putc(struct buf *b, char c);
void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* NUL-terminate without counting the NUL in len; returns data. */
char *buf_cstr(struct buf *b);
static inline void buf_reset(struct buf *b) { b->len = 0; }
void buf_free(struct buf *b);
/* Append s as a JSON string, quotes included (json.h escapes it). */
void buf_json_string(struct buf *b, const char *s);
/* Append s as a quoted SQL identifier: in double quotes, any inside doubled. */
void buf_quote_ident(struct buf *b, const char *s);

#endif
