/*
 * chunkserver.h - placing a key among a table's chunks by asking the target
 * server (chunkmap.h): for keys C cannot order as the source does.
 */
#ifndef PGSYNC_CHUNKSERVER_H
#define PGSYNC_CHUNKSERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "applyerr.h"
#include "cmtable.h"

/*
 * The table's chunks into temporary table pg_temp.pgsync_chunk_ID on meta
 * (replacing one of that name; id is new in the process, as is the
 * statement pgsync_chunk_place_ID prepared for lookups), indexed by hi, and
 * checked to be disjoint in the target's order. False with err set.
 */
bool chunkserver_build(PGconn *meta, struct cm_table *t, int id, struct apply_err *err);

/* The position of the chunk that holds key, or CM_NOT_COPIED, into *lsn;
 * *asked: the target was asked (not the cache). */
bool chunkserver_place(struct cm_table *t, const struct cm_val *key, lsn_t *lsn, bool *asked,
					   struct apply_err *err);

void chunkserver_free(struct cm_srv *s);

#endif
