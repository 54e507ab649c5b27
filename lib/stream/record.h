/*
 * record.h - building and splitting change-stream lines (formats/stream-v1.md).
 * Writers append to a struct buf that the caller reuses, so emitting a row
 * allocates nothing once the buffer has grown. Splitting works in place and
 * never copies values; unescaping is left to the consumer that needs it.
 */
#ifndef PGSYNC_RECORD_H
#define PGSYNC_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "lsn.h"

#define STREAM_VERSION 1
#define STREAM_MAGIC "PGCS"

/* Record names, as they appear in the first field. */
#define REC_HEADER "PGCS"
#define REC_RELATION "RELATION"
#define REC_TYPE "TYPE"
#define REC_BEGIN "BEGIN"
#define REC_ORIGIN "ORIGIN"
#define REC_COMMIT "COMMIT"
#define REC_INSERT "INSERT"
#define REC_UPDATE "UPDATE"
#define REC_DELETE "DELETE"
#define REC_TRUNCATE "TRUNCATE"
#define REC_MESSAGE "MESSAGE"
#define REC_POSITION "POSITION"
#define REC_END "END"
#define REC_SNAPSHOT "SNAPSHOT"
#define REC_COPY "COPY"
#define REC_ROW "ROW"
#define REC_ENDCOPY "ENDCOPY"
#define REC_TABLEDONE "TABLEDONE"
#define REC_SNAPSHOTDONE "SNAPSHOTDONE"
#define REC_CHUNKS "CHUNKS"
#define REC_CHUNK "CHUNK"
/* The most key columns a CHUNK names: what an index may have. */
#define CHUNK_MAX_KEY 32
#define REC_CHUNKSDONE "CHUNKSDONE"

/* --- writing ----------------------------------------------------------- */

/* Start a record: appends the name (no TAB). */
static inline void rec_start(struct buf *b, const char *name) { buf_puts(b, name); }
/* TAB + the bytes as they are (numbers, tokens, already-escaped text). */
void rec_raw(struct buf *b, const char *s, size_t n);
static inline void rec_rawz(struct buf *b, const char *s) { rec_raw(b, s, __builtin_strlen(s)); }
/* TAB + COPY-escaped value. */
void rec_value(struct buf *b, const char *s, size_t n);
static inline void rec_valuez(struct buf *b, const char *s) { rec_value(b, s, __builtin_strlen(s)); }
void rec_null(struct buf *b);		/* TAB \N */
void rec_unchanged(struct buf *b);	/* TAB \U */
void rec_u64(struct buf *b, uint64_t v);
void rec_i64(struct buf *b, int64_t v);
void rec_lsn(struct buf *b, lsn_t lsn);
/* PostgreSQL timestamp (microseconds since 2000-01-01 UTC) as stream time. */
void rec_pgtime(struct buf *b, int64_t pg_usec);
/* Current wall-clock time as stream time. */
void rec_now(struct buf *b);
static inline void rec_finish(struct buf *b) { buf_putc(b, '\n'); }

/* The whole header line, LF included. producer like "pg-walcat/0.1.0";
 * server_version_num 0 leaves the server feature out; history (the
 * timeline's ancestors, lineage_format()) NULL or "" the history one. */
void rec_header(struct buf *b, const char *sysid, uint32_t timeline,
				const char *slot, lsn_t start, const char *producer,
				int server_version_num, const char *history);

/* Microseconds between the Unix and PostgreSQL epochs. */
#define PG_EPOCH_OFFSET_USEC INT64_C(946684800000000)

/* --- reading ----------------------------------------------------------- */

struct field {
	const char *p;
	size_t n;
};

/*
 * Split a line (without its LF) on TAB into at most max fields. Returns the
 * number of fields, or max + 1 when there are more (the rest is not split).
 */
size_t rec_split(const char *line, size_t len, struct field *f, size_t max);
bool field_eq(const struct field *f, const char *s);
bool field_lsn(const struct field *f, lsn_t *out);
bool field_u64(const struct field *f, uint64_t *out);
/* A record name: one or more of A-Z. */
bool field_is_name(const struct field *f);

/*
 * A file of records in the stream's line syntax (the --done and
 * --key-collations files): rec_file_read opens PATH, splits each non-empty
 * line into at most MAX fields (as rec_split) and calls LINE for it, with
 * its 1-based number. LINE returns false, with err set, to stop. WHAT
 * names the file in the errors of opening and reading it ("--done").
 */
typedef bool (*rec_line_fn)(void *ctx, struct field *f, size_t nf, unsigned long lineno, char *err,
							size_t errlen);
bool rec_file_read(const char *path, const char *what, struct field *f, size_t max, rec_line_fn line,
				   void *ctx, char *err, size_t errlen);

#endif
