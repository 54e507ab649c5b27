/*
 * coalesce.h - updates held back within one target transaction, merged per
 * row.
 *
 * A batch of many small source transactions often changes the same rows
 * again and again (counters, balances, status columns): pgbench changes its
 * one branches row in every transaction. Only the row's last version is
 * visible once the batch commits, so pg-apply keeps key-preserving updates
 * here, one entry per (table, key) with the newest value of every column
 * (a later "unchanged TOAST" value keeps the earlier one), and sends each row
 * once when the batch ends. The caller decides which updates may wait (see
 * applier.c: only tables whose sole unique index is the key, without rules
 * or triggers that fire); this module only stores and merges.
 *
 * Memory is one fixed arena and one fixed index, allocated on first use:
 * when either is full, put() says so and the caller sends what is held.
 */
#ifndef PGSYNC_COALESCE_H
#define PGSYNC_COALESCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "applyerr.h"
#include "lsn.h"
#include "record.h"

struct coalesce;

/* One held row, as coalesce_next() hands it out. */
struct co_row {
	void *rel;					/* the caller's table handle */
	struct apply_txn txn;		/* source transaction of the last merged update */
	int ncols;
	const struct field *vals;	/* raw stream fields (COPY-escaped, \N, \U) */
};

struct coalesce *coalesce_new(size_t arena_bytes, size_t max_rows);
void coalesce_free(struct coalesce *c);

/* Rows held (each key once). */
size_t coalesce_rows(const struct coalesce *c);

/*
 * Is a row of rel with these key values held? key[i] marks the key columns;
 * vals has ncols fields (only the key ones are read).
 */
bool coalesce_has(const struct coalesce *c, const void *rel, int ncols, const bool *key,
				  const struct field *vals);

/*
 * Hold the update's new values, merged into the row already held for the
 * same key. False when the arena or the index is full: nothing changed, the
 * caller sends what is held (coalesce_reset) and tries again; a row that does
 * not fit an empty arena must be sent on its own.
 */
bool coalesce_put(struct coalesce *c, void *rel, int ncols, const bool *key,
				  const struct field *vals, struct apply_txn txn);

/*
 * Each held row once (in the order of its last update; rows of a table
 * with no other unique index commute, so the order does not matter).
 * *cursor starts at 0; the row's fields stay valid until the next call or
 * coalesce_reset().
 */
bool coalesce_next(struct coalesce *c, size_t *cursor, struct co_row *row);

/* Forget everything held (after it was sent, or with the batch). */
void coalesce_reset(struct coalesce *c);

#endif
