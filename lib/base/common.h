/*
 * common.h - exit codes, version and the small helpers every program uses.
 * Exit codes are a documented interface (doc/operations.md): never reuse one
 * for a different meaning.
 */
#ifndef PGSYNC_COMMON_H
#define PGSYNC_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PGSYNC_VERSION "0.1.0"

/* PostgreSQL's MaxTupleAttributeNumber: no table has more columns. */
#define PG_MAX_COLS 1664

enum pgs_exit {
	EXIT_DONE = 0,          /* done, or stopped by a signal at a clean boundary */
	EXIT_RUNTIME = 1,       /* runtime error (transient errors retried first) */
	EXIT_USAGE = 2,         /* configuration or usage */
	EXIT_PREFLIGHT = 3,     /* a prerequisite on source or target is missing */
	EXIT_CONTINUITY = 4,    /* continuity lost: resync required */
	EXIT_UNSUPPORTED = 5,   /* unsupported change or consistency violation */
};

/* Allocation that cannot fail: out of memory is fatal (exit 1). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/*
 * Strict number parsing for options: the whole string must be a number in
 * range, no sign for unsigned, no trailing junk. Return false otherwise.
 */
bool parse_int(const char *s, long min, long max, long *out);
bool parse_u64(const char *s, uint64_t *out);
/* A size with optional unit: 123, 64kB, 32MB, 1GB (powers of 1024). */
bool parse_size(const char *s, uint64_t *out);
/* A duration with optional unit: 10 (seconds), 500ms, 10s, 5min, 6h. */
bool parse_duration_ms(const char *s, uint64_t *out_ms);

/* Monotonic clock in milliseconds, for timeouts and rates. */
uint64_t now_ms(void);

/* Resident set size of this process in bytes (0 when unknown). */
uint64_t current_rss_bytes(void);
uint64_t peak_rss_bytes(void);

/* The value of one hex digit (either case), or -1: LSN text and COPY escapes. */
static inline int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
