/*
 * escape.h - PostgreSQL COPY text escaping for stream values, and the hex
 * form used for message contents. The writer emits only \\ \t \n \r plus the
 * tokens \N (NULL) and \U (unchanged TOASTed value), so those two tokens can
 * never be the escaped form of data.
 */
#ifndef PGSYNC_ESCAPE_H
#define PGSYNC_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define ESC_NULL "\\N"
#define ESC_UNCHANGED "\\U"

/* Append the COPY-escaped form of s[0..n) to b. */
void copy_escape(struct buf *b, const char *s, size_t n);

static inline bool field_is_null(const char *f, size_t n)
{ return n == 2 && f[0] == '\\' && f[1] == 'N'; }
static inline bool field_is_unchanged(const char *f, size_t n)
{ return n == 2 && f[0] == '\\' && f[1] == 'U'; }

/*
 * Decode a COPY-escaped field into b (appending). Accepts every sequence
 * COPY accepts (\b \f \v, octal, \xHH); rejects a trailing lone backslash
 * and \N or \U inside a longer field. Sets *is_null for \N. Returns false on
 * a malformed field.
 */
bool copy_unescape(const char *f, size_t n, struct buf *b, bool *is_null);

/* Check a field is well-formed COPY text without decoding it. */
bool copy_field_valid(const char *f, size_t n);

void hex_encode(struct buf *b, const unsigned char *p, size_t n);
/* Decode lower- or upper-case hex; false on odd length or a non-hex digit. */
bool hex_decode(const char *s, size_t n, struct buf *b);

#endif
