/*
 * applysession.h - pg-apply's connections to the target: opened with the
 * settings each needs, at start and again after a session was lost, and the
 * wait between two attempts (doubling, with jitter so that the appliers of
 * several jobs do not all knock at a restarted server at once).
 */
#ifndef PGSYNC_APPLYSESSION_H
#define PGSYNC_APPLYSESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "applier.h"
#include "jobrow.h"
#include "lsn.h"
#include "relcache.h"

/*
 * Connect to the target. NULL with err set: exit 1 and err->retry when the
 * server may accept a later attempt (refused, starting up, shutting down),
 * exit 3 otherwise (authentication, a database that does not exist).
 */
PGconn *applysession_connect(const char *conninfo, struct apply_err *err);

/*
 * The metadata session (catalog look-ups, progress of snapshot sections,
 * the heartbeat): names qualified by format_type() as the apply session
 * needs them, and commits durable before the checkpoint file names them.
 */
bool applysession_meta(PGconn *meta, struct apply_err *err);

/* What the sessions are for: the same at every reconnect. */
struct applysession_cfg {
	const char *conninfo;
	const char *job;
	struct job_identity id;
	struct relcache *rc;
	struct applier_opts ao;
	uint64_t lock_wait_ms;		/* for the job's lock a lost session may still hold */
	int max_retries;
};

/* The apply and metadata sessions and the applier over them. */
struct applysession {
	PGconn *conn, *meta;
	struct applier *ap;
	bool replica_role;
	int retries;				/* attempts since the last commit (the caller resets) */
};

/* Close both sessions (a transaction still open is rolled back). */
void applysession_close(struct applysession *s);

/*
 * The sessions failed: close them and open new ones, waiting before each
 * attempt (doubling, with jitter), until one works or s->retries reaches
 * cfg->max_retries. Then *applied is the position the target committed,
 * commit_time its commit time: the target decides what the lost batch left.
 * It may not be behind known, which the checkpoint file may already have
 * told the producer. False with err set when that cannot be done (its code
 * EXIT_DONE when a stop was requested meanwhile).
 */
bool applysession_recover(const struct applysession_cfg *cfg, struct applysession *s, lsn_t known,
						 lsn_t *applied, char *commit_time, size_t commit_time_len,
						 struct apply_err *err);

#endif
