/*
 * applier_int.h - what lib/apply/applier.c and lib/apply/applyheld.c share, and nothing
 * else may use: the applier's state and the statement helpers the held
 * updates are sent with.
 */
#ifndef PGSYNC_APPLIER_INT_H
#define PGSYNC_APPLIER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "applier.h"
#include "applyerr.h"
#include "buf.h"
#include "coalesce.h"
#include "record.h"
#include "relcache.h"
#include "streamread.h"

/*
 * Results in flight. Each costs the server about 25 bytes of output, so the
 * ring stays far below socket buffer sizes and the server never blocks
 * writing results while we block writing statements.
 */
#define RING_SIZE 4096
/* Look at arrived results every this many statements. */
#define CONSUME_EVERY 64
/* Buffered insert run bytes that switch to COPY even below the row count. */
#define RUN_BYTES_MAX (256 * 1024)
#define COPY_CHUNK (64 * 1024)

#define PROGRESS_STMT "pgsync_progress"

/*
 * A row changed many times in one target transaction piles up versions that
 * cannot be pruned before commit, and every later change walks them all:
 * the batch turns quadratic (pgbench's branches row). A fixed table of key
 * hashes counts changes per row; past HOT_ROW_LIMIT the batch asks to be
 * committed at the next source transaction boundary.
 */
#define HOT_SLOTS 1024
#define HOT_ROW_LIMIT 64

/*
 * Updates held back for merging (lib/apply/coalesce.h): opts->held_bytes bounds
 * their bytes, the row limit the index. Full means sent, not refused.
 */
#define HELD_ROWS 32768

struct applier {
	PGconn *conn, *meta;
	struct relcache *rc;
	const char *job;
	int copy_threshold;

	struct pending ring[RING_SIZE];
	size_t head, npend;
	bool got_current;			/* the head's result arrived; its NULL is next */
	bool synced;				/* nothing sent since the last Sync */
	unsigned since_consume;

	bool txn_open;
	bool in_copy;
	bool replica_role;			/* session_replication_role = replica is set */
	bool merge;					/* hold mergeable updates (opts->merge_updates) */
	int (*side_fd)(void);		/* see applier_opts */
	void (*side_read)(void);
	bool cancelled;				/* a stop request cancelled the running statement */

	/* The current run of inserts into one table. */
	struct rc_rel *run_rel;
	uint64_t run_gen;
	uint64_t run_xid;
	lsn_t run_commit;
	size_t run_rows;
	struct buf run_buf;			/* rows not yet sent, COPY text, LF-terminated */

	/* Reused for every row: nothing is allocated per row once warm. */
	struct buf sig, vals, sql;
	struct buf run_sig, row_sig;	/* lib/apply/applyheld.c: a run's and a row's signature */
	size_t *offs;
	const char **params;

	uint64_t rows;

	struct coalesce *held;		/* updates waiting for the end of the batch */

	struct { uint64_t hash; uint32_t count; } hot[HOT_SLOTS];
	bool hot_row;				/* some row reached HOT_ROW_LIMIT in this batch */
};

/* lib/apply/applier.c */
bool ap_end_run(struct applier *a, struct apply_err *err);
bool ap_ensure_txn(struct applier *a, struct apply_err *err);
bool ap_add_param(struct applier *a, size_t i, const struct field *f);
bool ap_bad_value(struct applier *a, struct rc_rel *rel, const char *op, struct apply_err *err);
bool ap_send_stmt_at(struct applier *a, struct rc_rel *rel, struct pending *p, size_t base,
					 int nparams, struct apply_err *err);
bool ap_update_delete(struct applier *a, struct rc_rel *rel, const struct sr_record *rec,
					  uint64_t xid, lsn_t commit_lsn, struct apply_err *err);

/* lib/apply/applyheld.c: updates held for merging until the batch commits */
bool held_mergeable(const struct applier *a, const struct rc_rel *rel, const struct sr_record *rec);
/* False when there is no room: send the held rows, then try again. */
bool held_put(struct applier *a, struct rc_rel *rel, const struct sr_record *rec, uint64_t xid,
			  lsn_t commit_lsn);
void held_drop(struct applier *a);
bool held_send(struct applier *a, struct apply_err *err);

#endif
