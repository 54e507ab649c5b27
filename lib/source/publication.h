/*
 * publication.h - what a set of publications publishes, resolved the way a
 * built-in subscription to the same publications resolves it on the source's
 * version: the tables (each once, partitions under their topmost published
 * ancestor when any publication publishes via the root), the OR of their row
 * filters and the published columns. The one place these rules live: the
 * copy (pg-snapshot-dump), pgsync check and bootstrap all use it.
 */
#ifndef PGSYNC_PUBLICATION_H
#define PGSYNC_PUBLICATION_H

#include <stdbool.h>
#include <libpq-fe.h>

#include "names.h"

struct pub_table {
	unsigned oid;
	char *schema;
	char *name;
	char relkind;				/* 'r' or 'p' */
	char *pubs;					/* "a,b": the publications that publish it or a partition of it */
	char *rowfilter;			/* the publications' filters OR-ed; NULL: every row */
	char **cols;				/* published columns, in attnum order */
	bool *colgen;				/* ... and which of them are generated (18+) */
	int ncols;
};

struct pub_set {
	struct pub_table *t;
	int n;
};

/*
 * Resolve the publications over conn (inside the snapshot's transaction when
 * copying). Returns EXIT_DONE, or an exit code after logging the reason:
 * EXIT_PREFLIGHT for a publication that does not exist or a combination the
 * server's rules refuse (different column lists for one table).
 */
int pub_resolve(PGconn *conn, const char *const *pubs, int npubs, struct pub_set *out);
void pub_set_free(struct pub_set *set);

/* Log "cannot WHAT: message (SQLSTATE x)"; returns EXIT_RUNTIME. The
 * planners' (this module's and snapplan.c's) one form of a failed query. */
struct pgerr;
int pub_query_failed(const char *what, const struct pgerr *err);

#endif
