/*
 * chunkmap.h - the chunks of a chunked initial copy (pgsync.table_chunk on
 * the target), per table, and which chunk holds a key: the position Li the
 * chunk was copied at, which decides whether a change to that key is in the
 * copy already (doc/snapshot.md, "Chunks and the change stream").
 *
 * Keys compare exactly as the source orders them: int2, int4 and int8 as
 * 64-bit integers, uuid as its lowercase text (the canonical form is hex
 * digits at fixed places, so text order is uuid order), composite keys
 * lexicographically (row comparison). A chunk is the range (lo, hi]; a table
 * copied in one piece has no key columns and one position. No other key type
 * is ever cut into chunks, so any other is an error, never a guess.
 */
#ifndef PGSYNC_CHUNKMAP_H
#define PGSYNC_CHUNKMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "lsn.h"
#include "record.h"
#include "relcache.h"
#include "streamread.h"

/* Key columns of one chunk at most: an index has at most 32 (INDEX_MAX_KEYS). */
#define CM_MAX_KEY CHUNK_MAX_KEY

/* "No chunk holds this key yet": the chunk's later copy will have it. */
#define CM_NOT_COPIED UINT64_MAX

/* A key or bound value: its text and, for an integer column, its value. */
struct cm_val {
	const char *p;
	size_t n;
	int64_t i;
};

struct cm_chunk {
	struct cm_val *lo, *hi;		/* nkey values each; NULL: unbounded */
	lsn_t lsn;
};

enum cm_kind { CM_INT, CM_UUID };

struct cm_table {
	char *schema, *table;
	int nkey;					/* 0: copied in one piece */
	char **key_columns;			/* nkey names */
	struct cm_chunk *chunks;	/* by hi once resolved; unbounded hi last */
	size_t nchunks, cap;
	lsn_t min_lsn, max_lsn;

	/* Resolved against the stream's description of the table. */
	const struct sr_rel *srel;
	uint64_t gen;
	int *colidx;				/* nkey: the stream's column of each key column */
	enum cm_kind *kind;			/* nkey */
	uint32_t *typoid;			/* nkey: the stream's type OIDs */
	bool sorted;
};

struct chunkmap;

struct chunkmap *chunkmap_new(void);
void chunkmap_free(struct chunkmap *m);

/*
 * Add one chunk: nkey 0 (key_columns, lo and hi NULL) for a table copied in
 * one piece, else nkey key column names and lo / hi values (each array NULL
 * for an unbounded side). Values are the key's text as PostgreSQL prints it.
 * False with err set (exit 5) when the table's chunks disagree on their key.
 */
bool chunkmap_add(struct chunkmap *m, const char *schema, const char *table, int nkey,
				  const char *const *key_columns, const char *const *lo, const char *const *hi,
				  lsn_t lsn, struct apply_err *err);

/* The largest position of any chunk (0 when there are none). */
lsn_t chunkmap_max_lsn(const struct chunkmap *m);
size_t chunkmap_nchunks(const struct chunkmap *m);
size_t chunkmap_ntables(const struct chunkmap *m);
/* Bytes the map holds (its arrays and strings, without allocator overhead). */
size_t chunkmap_bytes(const struct chunkmap *m);

/*
 * The chunks of the stream's table, resolved for its current description
 * (key columns found by name, their types checked, the chunks sorted and
 * checked to be disjoint): NULL with err->code 0 when no chunk of the table
 * is recorded (it is not filtered), NULL with err set (exit 5) when its key
 * cannot be placed in its chunks.
 */
struct cm_table *chunkmap_table(struct chunkmap *m, const struct sr_rel *srel, struct apply_err *err);

/*
 * The key of a row: the stream's values (vals, one per column of the
 * relation) at the table's key columns, into key (nkey values). False with
 * err set (exit 5) when a key value is missing (\N, \U) or not of its type.
 */
bool chunkmap_key(const struct cm_table *t, const struct field *vals, struct cm_val *key,
				  struct apply_err *err);

/* The position of the chunk that holds key, or CM_NOT_COPIED. */
lsn_t chunkmap_find(const struct cm_table *t, const struct cm_val *key);

/* Compare two keys (or bounds) of table t: <0, 0, >0. */
int chunkmap_cmp(const struct cm_table *t, const struct cm_val *a, const struct cm_val *b);

/*
 * Read the job's chunks from the target when some chunk's position lies
 * above applied (the changes below it are filtered); *out NULL when none
 * does (no filter). Rows are read one at a time: besides the map, reading
 * holds one row. False with err set.
 */
bool chunkmap_load(PGconn *meta, const char *job, lsn_t applied, struct chunkmap **out,
				   struct apply_err *err);

#endif
