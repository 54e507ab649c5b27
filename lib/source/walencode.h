/*
 * walencode.h - turn decoded pgoutput messages into change-stream records
 * (formats/stream-v1.md), keeping the relation and type descriptions the
 * server sent so that each RELATION (and the TYPEs it uses) is written before
 * its first change after every header, and again when it changes.
 * Appends to a caller's buffer; never writes to a file, never allocates per row.
 */
#ifndef PGSYNC_WALENCODE_H
#define PGSYNC_WALENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "lsn.h"
#include "pgoutput.h"

struct walenc;

struct walenc *walenc_new(void);
void walenc_free(struct walenc *e);

/* Write a PGCS header: relations and types are described again after it.
 * history: the timeline's ancestors for the header's history= feature. */
void walenc_header(struct walenc *e, struct buf *b, const char *sysid,
				   uint32_t timeline, const char *slot, lsn_t start,
				   int server_version_num, const char *history);

/* Remember a RELATION or TYPE message; writes nothing by itself. */
void walenc_relation(struct walenc *e, const struct pgo_msg *m);
void walenc_type(struct walenc *e, const struct pgo_msg *m);

void walenc_begin(struct buf *b, uint32_t xid, lsn_t commit_lsn, int64_t commit_time);
void walenc_commit(struct buf *b, uint32_t xid, lsn_t commit_lsn, lsn_t end_lsn,
				   int64_t commit_time);
void walenc_origin(struct buf *b, const struct pgo_msg *m);

/*
 * INSERT, UPDATE, DELETE or TRUNCATE, preceded by the RELATION (and TYPE)
 * records it needs. False with a reason in err (an unknown relation, a
 * column count that does not match it, a binary value): the caller stops.
 */
bool walenc_change(struct walenc *e, struct buf *b, const struct pgo_msg *m,
				   char *err, size_t errlen);

/* MESSAGE record; t for a transactional one. */
void walenc_message(struct buf *b, const struct pgo_msg *m);

void walenc_position(struct buf *b, lsn_t pos);
void walenc_end(struct buf *b, lsn_t pos);

/* True for the tools' own messages (prefix starting with "pgsync"). */
bool walenc_own_message(const struct pgo_msg *m);

#endif
