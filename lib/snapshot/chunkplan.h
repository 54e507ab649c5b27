/*
 * chunkplan.h - the chunked copy's key ranges (doc/snapshot.md, "The
 * chunked copy"): which tables are cut by their key, the chunks already
 * done (--done), the gaps they leave and the parts each gap is read in.
 * Key values are the source's text of the key types keyorder.h lists:
 * int2, int4, int8 and uuid, whose order pg-apply reproduces in C, and
 * the others, which the target orders (collatable ones only under a
 * collation the key collations file names); their bounds are key values
 * the source read in its own order.
 */
#ifndef PGSYNC_CHUNKPLAN_H
#define PGSYNC_CHUNKPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "buf.h"
#include "chunkdone.h"
#include "keyorder.h"

/* The chunk key of a table cut by key: its replica identity index. */
struct snap_key {
	int nkey;
	char **cols;				/* column names */
	char **qcols;				/* quoted */
	unsigned *types;			/* type oids */
	char **typenames;			/* for casts in the range conditions */
	int *pos;					/* index of each among the copied columns */
	char **colls;				/* the source column's collation, quoted; NULL: none */
	bool server;				/* some column is not int or uuid: the server orders */
};

/* One key range (lo, hi] to read: a part of a gap. */
struct key_range {
	char **lo, **hi;			/* NULL: unbounded */
};

/*
 * The chunk key of relation oid (a plain table, or a partitioned one, whose
 * key holds the partition key of every level), schema.name, given its
 * copied columns: NULL when it has none that pg-apply can order (no
 * replica identity index, a key column of a type keyorder.h does not list
 * or not copied, or a collatable one kc names no target collation for:
 * that is logged, with why).
 */
struct snap_key *chunkplan_key(PGconn *conn, unsigned oid, const char *schema, const char *name,
							   char *const *copied, int ncopied, const struct key_colls *kc);
void chunkplan_key_free(struct snap_key *k);

/*
 * The ranges to read of table rel->qname ("ONLY s.t" for a plain table, "s.t"
 * for a partitioned one: all its partitions), its done chunks in ds: the
 * gaps the done chunks leave, each cut into about jobs parts. Returns an exit code
 * after logging (5 for done chunks that do not fit the table's key).
 */
struct plan_rel {
	const char *schema, *name;	/* as the done chunks name it */
	const char *qname;			/* what to read, with or without ONLY */
	double est;					/* its estimated rows */
};
int chunkplan_ranges(PGconn *conn, const struct plan_rel *rel, const struct snap_key *k,
					 const struct done_set *ds, int jobs, struct key_range **out, int *nout);
void chunkplan_ranges_free(struct key_range *r, int n, int nkey);

/* Values of column s->col (quoted) that cut the rows of s->qname (as for
 * chunkplan_ranges, with or without ONLY) matching s->cond
 * (NULL: all) into about s->n parts, ascending, each the first value of a
 * part: min/max arithmetic when integer, a block sample's percentiles
 * otherwise. Server text; none when there are no rows. An exit code. */
struct cut_spec {
	const char *qname, *col, *cond;
	bool integer;
	int n;						/* parts wanted */
	double est;					/* the table's estimated rows */
};
int chunkplan_cuts(PGconn *conn, const struct cut_spec *s, char ***cuts, int *ncuts);

/* "(k1, k2) > (...) AND (k1, k2) <= (...)", or NULL for the whole key space. */
char *chunkplan_cond(PGconn *conn, const struct snap_key *k, char *const *lo, char *const *hi);
/* "k1, k2" for ORDER BY. */
char *chunkplan_order(const struct snap_key *k);
/* "k1 >= v AND k1 <= w" of a composite key's leading column, which the
 * row comparison implies, for partition pruning; NULL when none. */
char *chunkplan_lead_cond(PGconn *conn, const struct snap_key *k, char *const *lo, char *const *hi);
/* Compare two key tuples of k (both bounded, k not server-ordered): <0, 0, >0. */
int chunkplan_cmp(const struct snap_key *k, char *const *a, char *const *b);

/* The CHUNK record of chunk (lo, hi] of schema.name, appended to b. */
void chunkplan_record(struct buf *b, const char *schema, const char *name, const struct snap_key *k,
					  char *const *lo, char *const *hi);
/* The key values of a COPY text row of the table's copied columns. */
char **chunkplan_row_key(const struct snap_key *k, const char *row, size_t len);

#endif
