/*
 * rowstmt.h - one change of one row as one statement through the pipeline:
 * its signature (stmtsig.h) from the record, its parameters from the
 * record's values. An INSERT takes every column; an UPDATE or DELETE finds
 * the row by the values the stream names (the key, or every column with
 * replica identity full). The applier sends single changes with it, the
 * held updates the rows it cannot merge into a multi-row statement.
 */
#ifndef PGSYNC_ROWSTMT_H
#define PGSYNC_ROWSTMT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "lsn.h"
#include "pipeline.h"
#include "relcache.h"
#include "streamread.h"

/* INSERT of the fields of one COPY row (rel->ncols of them). sig is scratch. */
bool rowstmt_insert(struct pipeline *pl, struct buf *sig, struct rc_rel *rel, const struct field *v,
					struct apply_err *err);

/*
 * UPDATE or DELETE of rec. sig is scratch and holds the statement's
 * signature afterwards (whose WHERE marks say which of
 * rowstmt_where_values() identify the row).
 */
bool rowstmt_update_delete(struct pipeline *pl, struct buf *sig, struct rc_rel *rel,
						   const struct sr_record *rec, struct apply_err *err);

/* The values an UPDATE or DELETE of rec finds its row by. */
static inline const struct field *
rowstmt_where_values(const struct sr_record *rec)
{
	return rec->kind == 'N' ? rec->newv : rec->oldv;
}

#endif
