/*
 * applier.h - applying change records to the target over one connection in
 * libpq pipeline mode: prepared statements per (table, operation, column
 * set), runs of inserts into one table sent as COPY, updates of one row
 * merged within a batch where nothing could tell, results consumed as
 * they arrive, and a commit that carries the job's progress row. Memory is
 * bounded (a fixed ring of pending results, bounded run and COPY buffers),
 * never by transaction size. Never commits a batch whose results it has not
 * all checked.
 */
#ifndef PGSYNC_APPLIER_H
#define PGSYNC_APPLIER_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "lsn.h"
#include "relcache.h"
#include "streamread.h"

struct applier_opts {
	const char *job;
	int copy_threshold;			/* insert run length that switches to COPY; 0: never */
	bool merge_updates;			/* hold updates to send each row once per batch */
	const char *synchronous_commit;	/* the session's level (a valid one; NULL: on) */
	size_t held_bytes;			/* at most this much of them (within the batch's bytes) */
	/*
	 * While blocked on the target's results: a descriptor to watch (or -1)
	 * and what to do when it is readable, so the input keeps flowing.
	 */
	int (*side_fd)(void);
	void (*side_read)(void);
};

struct applier;

/*
 * Take over conn (the apply session): search_path, synchronous_commit,
 * timeouts, session_replication_role = replica when allowed (*replica_role
 * tells), the progress statement, pipeline mode. meta is the connection for
 * catalog look-ups. NULL with err set on failure.
 */
struct applier *applier_new(PGconn *conn, PGconn *meta, struct relcache *rc,
							const struct applier_opts *opts, bool *replica_role,
							struct apply_err *err);
void applier_free(struct applier *a);

/* The metadata connection was replaced (it was lost on its own). */
void applier_set_meta(struct applier *a, PGconn *meta);

/*
 * The source transaction whose changes follow (at its BEGIN): every
 * statement and error names it (struct apply_txn, applyerr.h), and the
 * chunk filter judges its changes by its commit position.
 */
void applier_set_txn(struct applier *a, uint64_t xid, lsn_t commit_lsn);
lsn_t applier_commit_lsn(const struct applier *a);

/* Apply one INSERT, UPDATE, DELETE or TRUNCATE of the current transaction. */
bool applier_change(struct applier *a, const struct sr_record *rec, struct apply_err *err);

/*
 * Empty the key range r of srel, after everything sent before it: what a
 * TRUNCATE leaves of a table copied in chunks (lib/apply/chunkfilter.h);
 * any row count is right.
 */
bool applier_range_delete(struct applier *a, struct sr_rel *srel, const struct range_delete *r,
						  struct apply_err *err);

/*
 * Make everything sent so far durable together with the progress row
 * (applied position, and commit_time unless NULL). Opens a transaction just
 * for the progress row when nothing else was sent.
 */
bool applier_commit(struct applier *a, lsn_t applied, const char *commit_time,
					struct apply_err *err);

/* Discard everything sent since the last commit. */
bool applier_rollback(struct applier *a, struct apply_err *err);

/* The same on the way out after an error, waiting for nothing
 * (pipeline_abandon()): 'why' is what a COPY in flight fails with. */
void applier_abandon(struct applier *a, const char *why);

/* The batch should be committed at the next source transaction boundary
 * although no limit is reached: a row has been changed too often in it. */
bool applier_wants_commit(const struct applier *a);

/* A target transaction is open (something was sent since the last commit). */
bool applier_txn_open(const struct applier *a);

/* Rows sent since start (inserts, updates, deletes; truncates count 1). */
uint64_t applier_rows(const struct applier *a);

#endif
