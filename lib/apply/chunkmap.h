/*
 * chunkmap.h - the chunks of a chunked initial copy (pgsync.table_chunk on
 * the target), per table, and which chunk holds a key: the position Li the
 * chunk was copied at, which decides whether a change to that key is in the
 * copy already (doc/snapshot.md, "Chunks and the change stream").
 *
 * A chunk is the range (lo, hi]; a table copied in one piece has no key
 * columns and one position. Keys compare exactly as the source orders
 * them, in one of two ways (the key types are keyorder.h's):
 *  - int2, int4, int8 and uuid keys (also composite ones of only those) in
 *    C: integers as 64-bit integers, uuids as their lowercase text (hex
 *    digits at fixed places, so text order is uuid order), composite keys
 *    lexicographically (row comparison);
 *  - any other key by the target server (chunkserver.c): the table's chunk
 *    bounds go into a temporary table on the metadata session, each column
 *    of its type and, when collatable, of the target collation the key
 *    collations file names as ordering it like the source column (pg-apply
 *    --key-collations), with a btree index on hi; a key is placed by one
 *    indexed lookup (the chunk with the least hi at or above it, and
 *    whether it lies above that chunk's lo), remembered in a small cache.
 * A key type not listed, or a collatable column with no collation in the
 * file, is an error, never a guess.
 */
#ifndef PGSYNC_CHUNKMAP_H
#define PGSYNC_CHUNKMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "buf.h"
#include "cmtable.h"
#include "keyorder.h"
#include "lsn.h"
#include "record.h"
#include "relcache.h"
#include "streamread.h"

/* kc: the key collations file's lines (NULL: none), kept by the caller. */
struct chunkmap *chunkmap_new(void);
void chunkmap_set_server(struct chunkmap *m, PGconn *meta, const struct key_colls *kc);
void chunkmap_free(struct chunkmap *m);

/*
 * Add one chunk: nkey 0 (key_columns, lo and hi NULL) for a table copied in
 * one piece, else nkey key column names and lo / hi values (each array NULL
 * for an unbounded side). Values are the key's text as PostgreSQL prints it.
 * False with err set (exit 5) when the table's chunks disagree on their key.
 */
struct cm_chunk_spec {
	const char *schema, *table;
	int nkey;
	const char *const *key_columns, *const *lo, *const *hi;
	lsn_t lsn;
};
bool chunkmap_add(struct chunkmap *m, const struct cm_chunk_spec *c, struct apply_err *err);

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
 * relation) at the table's key columns, into key (nkey values); a
 * server-ordered key's values are decoded into tmp, which the key points
 * into. False with err set (exit 5) when a key value is missing (\N, \U)
 * or not of its type.
 */
bool chunkmap_key(const struct cm_table *t, const struct field *vals, struct cm_val *key,
				  struct buf *tmp, struct apply_err *err);

/* The position of the chunk that holds key, or CM_NOT_COPIED (t not server-ordered). */
lsn_t chunkmap_find(const struct cm_table *t, const struct cm_val *key);

/* The same for any table, into *lsn: false with err set when the target
 * cannot be asked. */
bool chunkmap_place(struct cm_table *t, const struct cm_val *key, lsn_t *lsn, struct apply_err *err);

/* Keys placed by the target so far, and the microseconds they took. */
void chunkmap_lookups(const struct chunkmap *m, uint64_t *n, uint64_t *us);

/* Compare two keys (or bounds) of table t: <0, 0, >0; of a server-ordered
 * table only whether their text differs (0 or not). */
int chunkmap_cmp(const struct cm_table *t, const struct cm_val *a, const struct cm_val *b);

/*
 * Read the job's chunks from the target when some chunk's position lies
 * above applied (the changes below it are filtered); *out NULL when none
 * does (no filter). Rows are read one at a time: besides the map, reading
 * holds one row. False with err set.
 */
bool chunkmap_load(PGconn *meta, const char *job, lsn_t applied, const struct key_colls *kc,
				   struct chunkmap **out, struct apply_err *err);

#endif
