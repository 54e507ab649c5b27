/*
 * chunkfilter.h - exactly once across a chunked initial copy and the change
 * stream (doc/snapshot.md, "Chunks and the change stream"). The stream
 * starts at the job's slot, below every chunk's position Li; a change of a
 * transaction committed at C to a key in a chunk copied at Li is applied
 * iff C >= Li (below, the chunk's copy has it already). An UPDATE that moves
 * a row between chunks is judged for the old and the new key separately,
 * TRUNCATE becomes range DELETEs of the chunks copied before it, and a table
 * copied in one piece is judged at table level. What passes goes to the
 * applier as usual, before its insert runs and held updates see it.
 */
#ifndef PGSYNC_CHUNKFILTER_H
#define PGSYNC_CHUNKFILTER_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "applier.h"
#include "keyorder.h"
#include "lsn.h"
#include "relcache.h"
#include "streamread.h"

struct chunkfilter;

/*
 * (Re)read the job's chunks: *cf is replaced, and NULL when no chunk lies
 * above applied (nothing to filter). Keys C cannot order are placed by the
 * target over meta, text ones under kc's collations (chunkmap.h). False
 * with err set.
 */
bool chunkfilter_load(struct chunkfilter **cf, PGconn *meta, const char *job, lsn_t applied,
					  const struct key_colls *kc, struct apply_err *err);
void chunkfilter_free(struct chunkfilter *cf);

/* The largest chunk position: transactions committed at or after it pass unfiltered. */
lsn_t chunkfilter_until(const struct chunkfilter *cf);

/* Changes left out so far because the copy holds them already. */
uint64_t chunkfilter_skipped(const struct chunkfilter *cf);

/* Keys placed by the target so far, and the microseconds they took. */
void chunkfilter_lookups(const struct chunkfilter *cf, uint64_t *n, uint64_t *us);

/*
 * Apply the INSERT, UPDATE, DELETE or TRUNCATE rec of the applier's current
 * transaction (applier_set_txn()), or what of it the copy, by that
 * transaction's commit position, does not hold already.
 * False with err set (the applier's errors, or exit 5 when the change cannot
 * be judged or rewritten: a key value missing, a moved row whose unchanged
 * TOASTed value the stream does not carry).
 */
bool chunkfilter_change(struct chunkfilter *cf, struct applier *ap, const struct sr_record *rec,
						struct apply_err *err);

#endif
