/*
 * applyheld.h - updates held back until the batch commits (coalesce.h
 * stores and merges them): which may wait, and sending them through the
 * pipeline several rows to a statement. The applier decides when they go
 * (before anything that could touch a held row, and at commit); this
 * module never sends anything else.
 */
#ifndef PGSYNC_APPLYHELD_H
#define PGSYNC_APPLYHELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "pipeline.h"
#include "relcache.h"
#include "streamread.h"

struct held;

/*
 * At most bytes of held values; replica_role tells which triggers fire in
 * the session (session_replication_role = replica is set).
 */
struct held *held_new(struct pipeline *pl, size_t bytes, bool replica_role);
void held_free(struct held *h);

/* Rows held (each key once). */
size_t held_rows(const struct held *h);

/* May this update wait for the end of the batch, merged with the row's others? */
bool held_mergeable(const struct held *h, const struct rc_rel *rel, const struct sr_record *rec);

/* Is the row of rel with these values' key held? */
bool held_has(const struct held *h, const struct rc_rel *rel, const struct field *vals);

/* Hold the update, under the pipeline's current error context. False when there is no room: send the held rows, then try again. */
bool held_put(struct held *h, struct rc_rel *rel, const struct sr_record *rec);

/* Forget the held rows (abandoned with the batch). */
void held_drop(struct held *h);

/*
 * Send every held update, each row once with its newest values, in the
 * target transaction (opened if need be). Whatever must reach the target
 * before them the caller has sent.
 */
bool held_send(struct held *h, struct apply_err *err);

#endif
