/*
 * heartbeat.h - the job_runtime row in the target (pgsync.job_runtime): one
 * upsert every heartbeat interval from the metadata connection, with
 * positions, counters, rates over the last interval and RSS, and stopped_at
 * on a clean stop. Monitoring must never stop the apply: a failed write is a
 * warning, retried at the next interval.
 */
#ifndef PGSYNC_HEARTBEAT_H
#define PGSYNC_HEARTBEAT_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "lsn.h"

struct hb_stats {
	const char *state;			/* e.g. STREAMING */
	const char *source_version;	/* server_version_num from the header, or NULL */
	const char *connection_state;	/* pg-walcat's source connection, NULL: unknown */
	uint32_t reconnects;		/* ... and how often it was lost and regained */
	lsn_t received;				/* highest position read from the stream */
	lsn_t applied;				/* durable on the target */
	uint64_t transactions;		/* source transactions applied */
	uint64_t changes;			/* rows applied */
	double last_apply_at;		/* Unix time of the last target commit, 0: none */
	const char *last_commit_time;	/* source commit time of the last applied one */
};

struct heartbeat;

/* interval_ms 0 disables the periodic row (the stop is still recorded). */
struct heartbeat *heartbeat_new(const char *job, uint64_t interval_ms);
void heartbeat_free(struct heartbeat *hb);

/* Milliseconds until the next row is due (UINT64_MAX when disabled). */
uint64_t heartbeat_wait_ms(const struct heartbeat *hb);

/* Write the row when due (or always with force); stopped records the stop. */
void heartbeat_tick(struct heartbeat *hb, PGconn *meta, const struct hb_stats *st,
					bool force, bool stopped);

#endif
