/*
 * relcache.h - the target side of each table a change stream names: the
 * target's columns matched by name to the stream's, their types, whether the
 * table belongs to the job's snapshot, and one prepared statement per
 * (operation, column set) with its SQL. Metadata queries go to a separate
 * connection; this module never runs a statement on the apply connection.
 */
#ifndef PGSYNC_RELCACHE_H
#define PGSYNC_RELCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "buf.h"
#include "pgerror.h"
#include "streamread.h"

struct rc_col {
	char *name;					/* as in the stream (and on the target) */
	char *qname;				/* quoted identifier */
	char *type;					/* qualified type name without modifier, for casts */
	char *fulltype;				/* with modifier, as error messages name it */
	bool key;					/* replica identity key per the stream */
	bool text_cmp;				/* no default btree equality: compare as text */
	/* GENERATED ALWAYS AS IDENTITY on the target: an UPDATE can only set it
	 * to DEFAULT, so it is never set, only compared (rowstmt.c). */
	bool always;
};

/* A prepared statement, by its signature (stmtsig.h). */
struct rc_stmt {
	struct rc_rel *rel;
	struct rc_stmt *newer, *older;	/* every table's, by last use */
	uint64_t hash;
	char *sig;
	size_t siglen;
	char name[24];
	int nparams;
	unsigned session;			/* the target session it was prepared in */
	struct rc_stmt *next;
};

struct rc_rel {
	struct sr_rel *srel;
	uint64_t gen;				/* srel->gen this was resolved for; 0: never */
	char *display;				/* schema.table for messages */
	char *qname;				/* "schema"."table" */
	int ncols;
	struct rc_col *cols;
	struct rc_stmt *stmts;
	int nstmts;
	uint64_t layout_hash;		/* names, keys and text_cmp of the columns */

	/*
	 * Updates of one row may be merged within a target transaction (see
	 * lib/apply/coalesce.h): a plain table without rules or child tables whose
	 * only unique index (if any) is on exactly the key columns. Triggers
	 * decide per session: none may fire that would see the merged changes.
	 */
	bool merge_ok;
	bool trig_replica;			/* has triggers that fire in replica mode (A, R) */
	bool trig_origin;			/* has triggers that fire otherwise (A, O: FK checks too) */
	bool *keymask;				/* ncols: cols[i].key */
	bool always_nonkey;			/* a column not in the key is cols[i].always */
	uint32_t held;				/* rows of this table the applier holds back */
};

struct relcache;

struct relcache *relcache_new(const char *job);
void relcache_free(struct relcache *rc);

/* (Re)load the tables of the job's snapshot from pgsync.table_sync. */
bool relcache_load_tables(struct relcache *rc, PGconn *meta, struct apply_err *err);

/*
 * The target side of a stream relation, resolved on first use and again
 * after the stream redefines it. *stmts_dropped is set when the statements
 * prepared for the old description no longer apply (the caller must not have
 * results for them pending). Returns NULL with err set (exit code inside).
 */
struct rc_rel *relcache_get(struct relcache *rc, PGconn *meta, struct sr_rel *srel,
							bool *stmts_dropped, struct apply_err *err);

/*
 * The statement for a signature; created (name, SQL in sql) when new, in
 * which case *created is true and the caller must prepare it. Returns NULL
 * when the relation already has too many statements: the caller then runs
 * sql unnamed. Creating one past the limit of all tables together retires
 * the least recently used (relcache_retired()).
 */
struct rc_stmt *relcache_stmt(struct relcache *rc, struct rc_rel *rel,
							  const char *sig, size_t siglen,
							  struct buf *sql, bool *created);

/*
 * The apply session was replaced (pg-apply reconnected): every statement is
 * prepared again on first use in the new one.
 */
void relcache_new_session(struct relcache *rc);

/*
 * The name of a statement that left the cache (its table was redefined, or
 * it was the least recently used of too many) but is still prepared in the
 * current session, forgotten here as it is handed out: the caller
 * deallocates it. False when there is none.
 */
bool relcache_retired(struct relcache *rc, char *name, size_t len);

/* SQL text for a signature (for unnamed execution). */
void relcache_sql(const struct rc_rel *rel, const char *sig, struct buf *sql);

/*
 * A key range (lo, hi] of a table to empty: nkey key columns (cols, the
 * stream's column numbers), compared as a row as the source ordered the
 * chunks, under collation colls[j] (quoted) where colls and it are not
 * NULL; bounds holds the lo values when has_lo (else lo is unbounded), then
 * the hi values when has_hi, as text.
 */
struct range_delete {
	int nkey;
	const int *cols;
	const char *const *colls;
	bool has_lo, has_hi;
	const char *const *bounds;
};

/* DELETE of the rows whose key lies in r ($1.. the bounds). */
void relcache_range_delete_sql(const struct rc_rel *rel, const struct range_delete *r, struct buf *sql);

#endif
