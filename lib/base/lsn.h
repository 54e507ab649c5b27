/*
 * lsn.h - PostgreSQL log sequence numbers: parse and format the X/Y text
 * form, compare and subtract. Never accepts a malformed LSN as 0/0: callers
 * rely on a parse failure to reject bad input.
 */
#ifndef PGSYNC_LSN_H
#define PGSYNC_LSN_H

#include <stdbool.h>
#include <stdint.h>

typedef uint64_t lsn_t;

#define LSN_INVALID ((lsn_t) 0)
#define LSN_BUFSZ 18			/* "FFFFFFFF/FFFFFFFF" + NUL */

/* Parse "X/Y", each part 1-8 hex digits, nothing else. */
bool lsn_parse(const char *s, lsn_t *out);
/* Parse the same from a counted string (not NUL-terminated). */
bool lsn_parse_n(const char *s, size_t len, lsn_t *out);
/* Format as PostgreSQL does (upper-case hex); returns buf. */
char *lsn_format(lsn_t lsn, char buf[LSN_BUFSZ]);
/* Bytes from a to b, 0 when b is not after a. */
uint64_t lsn_diff(lsn_t b, lsn_t a);

#endif
