/*
 * srtoken.h - what the parts of the stream parser share, below all of them:
 * the parser's state, the field checks every record uses, the name tables
 * and the position rule. The record handlers (srchange.h, srsection.h) and
 * the dispatch (streamread.c) sit above it; it calls none of them. Only
 * lib/stream/sr*.c and streamread.c include it; everyone else sees
 * streamread.h.
 */
#ifndef PGSYNC_SRTOKEN_H
#define PGSYNC_SRTOKEN_H

#include "buf.h"
#include "srrecord.h"

/* RELATION is the widest record: 6 fields plus 4 per column. */
#define SR_MAX_FIELDS (6 + 4 * SR_MAX_COLS)

/*
 * Where a record may stand. Every line is in exactly one of these places;
 * a record whose entry does not name the place is rejected with a message
 * that says where it stood (see sr_parse()).
 */
#define SR_AT_STREAM 1			/* outside a section (in a transaction or not) */
#define SR_AT_SECTION 2			/* inside a section, between frames */
#define SR_AT_FRAME 4			/* inside a frame (COPY .. ENDCOPY) */

/* The name tables (struct sr_key in streamread.h): the relations of
 * RELATION, the tables of a snapshot section. */
struct sr_names {
	struct sr_key **buckets;
	size_t nbuckets, n;
};

struct streamread {
	struct field *f;
	struct sr_names rels;		/* struct sr_rel */
	uint64_t gen;
	bool started;
	bool in_txn;
	bool after_begin;			/* ORIGIN may follow BEGIN only: the last line was one */
	bool origin_allowed;		/* ... and this is the line after it */
	uint64_t xid;
	lsn_t commit_lsn;
	lsn_t last_commit_lsn;		/* of the previous transaction in this stream */
	bool have_last;
	/*
	 * The highest position this stream has promised (header start, COMMIT
	 * end, POSITION, END, SNAPSHOT): everything committing below it was
	 * sent. Nothing later in the same stream may lie below it.
	 */
	lsn_t promised;
	const char *promised_by;
	struct sr_rel **trunc;
	size_t trunccap;
	/* Snapshot sections: the open one (its opening record's type, or -1)
	 * and its tables; the open frame, with what it holds so far. */
	int section;
	lsn_t section_lsn;
	struct sr_names tables;		/* struct sr_table, of the open section */
	struct sr_table *frame;		/* NULL outside a frame */
	struct sr_table *chunk;		/* a CHUNK's table, until its frame starts */
	uint64_t frame_rows, frame_bytes;
	struct buf tmp;
	char err[512];
};

/* A one-line reason in sr->err; always false. */
bool sr_fail(struct streamread *sr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool sr_nfields(struct streamread *sr, size_t nf, size_t want, const char *rec);
bool sr_get_lsn(struct streamread *sr, const struct field *f, const char *rec, lsn_t *out);
bool sr_get_u64(struct streamread *sr, const struct field *f, const char *rec,
				const char *what, uint64_t max, uint64_t *out);
/* Unescape a non-NULL value without NUL bytes (a name) into a malloc'd string. */
char *sr_name_dup(struct streamread *sr, const struct field *f);
/* Positions only grow within a stream: lsn is not below what was promised;
 * and lsn, promised by what, raises the promise. */
bool sr_not_below(struct streamread *sr, lsn_t lsn, const char *what);
void sr_promise(struct streamread *sr, lsn_t lsn, const char *by);

/* The name tables. find: the entry of the span schema .. table, or NULL
 * (*hash_out set for sr_names_add). add: insert e (its key filled here). */
struct sr_key *sr_names_find(const struct sr_names *t, const struct field *schema,
							 const struct field *table, uint64_t *hash_out);
void sr_names_add(struct sr_names *t, struct sr_key *e, const struct field *schema,
				  const struct field *table, uint64_t hash);
/* Call fn on every entry and empty the table (fn frees the entry). */
void sr_names_clear(struct sr_names *t, void (*fn)(struct sr_key *e));

#endif
