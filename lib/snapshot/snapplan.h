/*
 * snapplan.h - what pg-snapshot-dump copies: the tables of the publications
 * (lib/source/publication.c) or the --table arguments, their published columns, row
 * estimates, and the parts each table is cut into (partitions, primary-key
 * ranges, ctid block ranges). It runs inside the imported snapshot so that
 * the plan describes the data the workers will see; it never writes.
 */
#ifndef PGSYNC_SNAPPLAN_H
#define PGSYNC_SNAPPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "chunkplan.h"

struct snap_table {
	char *schema;
	char *name;
	int ncols;
	char *frame_header;			/* the whole "COPY ..." line, LF included */
	size_t frame_header_len;
	double rows_estimate;		/* < 0: unknown (never analyzed) */
	int nparts;
	struct snap_key *key;		/* chunked: cut into key chunks; NULL: one piece */
	bool whole_done;			/* chunked: copied in one piece before (--done) */
};

struct snap_part {
	int table;					/* index into snap_plan.tables */
	int index;					/* 1-based number of this part in its table */
	char *sql;					/* COPY ... TO STDOUT */
	double weight;				/* estimated rows, for largest-first order */
	char **lo, **hi;			/* key range (lo, hi] of a table with a key; NULL: unbounded */
	/* For the log, which never shows the bounds (values of rows): the
	 * relation read (a partition of a root) and the column the range is
	 * of ("ctid" for blocks), NULL for a whole table. */
	char *from, *by;
};

struct snap_plan {
	struct snap_table *tables;
	int ntables;
	struct snap_part *parts;	/* sorted largest first */
	int nparts;
};

/* How a table above split_rows is cut. AUTO: ctid block ranges on 14+
 * (a TID range scan reads exactly its blocks), key ranges on older servers. */
enum snap_split { SPLIT_AUTO, SPLIT_KEY, SPLIT_CTID };

struct snapplan_opts {
	const char *const *pubs;	/* publications; none: use tables */
	int npubs;
	char *const *tables;		/* SCHEMA.TABLE arguments */
	int ntables;
	uint64_t split_rows;		/* split tables estimated above this */
	int jobs;					/* parts of a split table: a multiple of this */
	enum snap_split split_by;
	bool chunked;				/* cut tables with a chunk key into key ranges */
	uint64_t chunk_rows;		/* chunked: tables estimated above this */
	const struct done_set *done;	/* chunked: the chunks copied before */
	const struct key_colls *keycolls;	/* chunked: text keys the target orders */
};

/*
 * Build the plan over conn, which must already be inside the snapshot's
 * REPEATABLE READ transaction. Returns an exit code (EXIT_DONE on success)
 * after logging the reason for any other.
 */
int snapplan_build(PGconn *conn, const struct snapplan_opts *o, struct snap_plan *plan);
void snapplan_free(struct snap_plan *plan);

#endif
