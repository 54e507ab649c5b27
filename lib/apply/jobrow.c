#include "jobrow.h"
#include "applyerr.h"
#include "checkpoint.h"
#include "common.h"
#include "conn.h"
#include "identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool
query_failed(struct apply_err *err, const char *what, const struct pgerr *pe)
{
	apply_err_pg(err, pgerr_exit_code_setup(pe->sqlstate), pe, "cannot %s", what);
	return false;
}

bool
jobrow_lock(PGconn *conn, const char *job, uint64_t wait_ms, struct apply_err *err)
{
	const char *params[1] = {job};
	uint64_t start = now_ms();

	for (;;)
	{
		struct pgerr pe;
		PGresult *res = conn_query_one(conn, "SELECT pg_catalog.pg_try_advisory_lock(7442718, pg_catalog.hashtext($1))",
									   1, params, 1, &pe);
		bool got;

		if (res == NULL)
			return query_failed(err, "lock the job", &pe);
		got = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
		if (got)
			return true;
		/* A killed predecessor's session may take a moment to go away. */
		if (now_ms() - start > wait_ms)
		{
			apply_err_set(err, EXIT_RUNTIME, "job \"%s\" is being applied by another process", job);
			/* ... or by the session we lost, not gone yet on the server. */
			err->retry = true;
			return false;
		}
		usleep(100 * 1000);
	}
}

bool
jobrow_open(PGconn *meta, const char *job, const struct job_identity *id, lsn_t *applied,
			uint32_t *recorded, char *commit_time, size_t commit_time_len, struct apply_err *err)
{
	char tl[16], why[256];
	const char *params[4] = {job, id->slot, id->sysid, tl};
	struct pgerr pe;
	PGresult *res;
	long tli;

	snprintf(tl, sizeof(tl), "%u", id->timeline);
	res = conn_query(meta, "INSERT INTO pgsync.job (job, state, slot, source_sysid, source_timeline)"
					 " VALUES ($1, 'STREAMING', $2, $3, $4) ON CONFLICT (job) DO NOTHING RETURNING job",
					 4, params, 1, &pe);
	if (res == NULL)
		return query_failed(err, "create the job row", &pe);
	PQclear(res);
	/* A row made by the orchestrator may not know its source yet. */
	res = conn_query(meta, "UPDATE pgsync.job SET source_sysid = $3, source_timeline = $4,"
					 " slot = coalesce(slot, $2), updated_at = pg_catalog.now()"
					 " WHERE job = $1 AND source_sysid IS NULL RETURNING job",
					 4, params, 1, &pe);
	if (res == NULL)
		return query_failed(err, "record the source of the job", &pe);
	PQclear(res);
	res = conn_query(meta, "SELECT coalesce(slot, ''), source_sysid, source_timeline,"
					 " coalesce(applied_lsn::text, '0/0'), coalesce(applied_commit_time::text, '')"
					 " FROM pgsync.job WHERE job = $1",
					 1, params, 5, &pe);
	if (res == NULL)
		return query_failed(err, "read the job row", &pe);
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		apply_err_set(err, EXIT_RUNTIME, "the row of job \"%s\" vanished from pgsync.job", job);
		return false;
	}
	/* The timeline is pg-apply's to judge by the stream's history. */
	if (!identity_same(PQgetvalue(res, 0, 1), id->sysid, why, sizeof(why)))
	{
		apply_err_set(err, EXIT_CONTINUITY, "%s, job \"%s\"; nothing of the stream is applied: resync required, "
					  "unless the job's own server answers again", why, job);
		PQclear(res);
		return false;
	}
	if (strcmp(PQgetvalue(res, 0, 0), id->slot) != 0)
	{
		apply_err_set(err, EXIT_CONTINUITY,
					  "stream from source %s timeline %s slot \"%s\" does not match job \"%s\", which applies source %s timeline %s slot \"%s\": resync required",
					  id->sysid, tl, id->slot, job, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
					  PQgetvalue(res, 0, 0));
		PQclear(res);
		return false;
	}
	if (!lsn_parse(PQgetvalue(res, 0, 3), applied) || !parse_int(PQgetvalue(res, 0, 2), 1, UINT32_MAX, &tli))
	{
		PQclear(res);
		apply_err_set(err, EXIT_RUNTIME, "unexpected applied_lsn or source_timeline in pgsync.job");
		return false;
	}
	*recorded = (uint32_t) tli;
	snprintf(commit_time, commit_time_len, "%s", PQgetvalue(res, 0, 4));
	PQclear(res);
	return true;
}

bool
jobrow_set_timeline(PGconn *meta, const char *job, uint32_t timeline, struct apply_err *err)
{
	char tl[16];
	const char *params[2] = {job, tl};
	struct pgerr pe;
	PGresult *res;

	snprintf(tl, sizeof(tl), "%u", timeline);
	/* The restart_lsn floor (ownserver.h) was the old timeline's slot's: a
	 * synced copy on the new primary may restart earlier. A catalog from
	 * before that column (42703) records the timeline alone. */
	res = conn_query_one(meta, "UPDATE pgsync.job SET source_timeline = $2, slot_restart_lsn = NULL,"
						 " updated_at = pg_catalog.now() WHERE job = $1 RETURNING job", 2, params, 1, &pe);
	if (res == NULL && strcmp(pe.sqlstate, "42703") == 0)
		res = conn_query_one(meta, "UPDATE pgsync.job SET source_timeline = $2, updated_at = pg_catalog.now()"
							 " WHERE job = $1 RETURNING job", 2, params, 1, &pe);
	if (res == NULL)
		return query_failed(err, "record the source's new timeline", &pe);
	PQclear(res);
	return true;
}

bool
jobrow_check_checkpoint(const char *path, const char *job, const struct job_identity *id,
						lsn_t applied, lsn_t *in_file, struct apply_err *err)
{
	struct checkpoint cp;
	char msg[512], a[LSN_BUFSZ], b[LSN_BUFSZ];

	*in_file = 0;
	switch (checkpoint_read(path, &cp, msg, sizeof(msg)))
	{
		case CP_MISSING:
			return true;
		case CP_INVALID:
			apply_err_set(err, EXIT_USAGE, "%s", msg);
			return false;
		case CP_OK:
			break;
	}
	if ((cp.sysid[0] && strcmp(cp.sysid, id->sysid) != 0) ||
		(cp.timeline && cp.timeline != id->timeline) ||
		(cp.slot[0] && strcmp(id->slot, "-") != 0 && strcmp(cp.slot, id->slot) != 0))
	{
		apply_err_set(err, EXIT_CONTINUITY,
					  "checkpoint file \"%s\" belongs to source %s timeline %u slot \"%s\", the stream to source %s timeline %u slot \"%s\": resync required",
					  path, cp.sysid, cp.timeline, cp.slot, id->sysid, id->timeline, id->slot);
		return false;
	}
	if (applied < cp.lsn)
	{
		apply_err_set(err, EXIT_CONTINUITY,
					  "checkpoint file \"%s\" says %s was applied, but the target records only %s for job \"%s\": the slot may have released changes the target never got; resync required",
					  path, lsn_format(cp.lsn, a), lsn_format(applied, b), job);
		return false;
	}
	*in_file = cp.lsn;
	return true;
}

bool
jobrow_snapshot_done(PGconn *meta, const char *job, lsn_t position, struct apply_err *err)
{
	char l[LSN_BUFSZ];
	const char *params[2] = {job, lsn_format(position, l)};
	struct pgerr pe;
	PGresult *res = conn_query_one(meta, "UPDATE pgsync.job SET applied_lsn = $2::pg_catalog.pg_lsn,"
								   " snapshot_done_at = pg_catalog.now(), updated_at = pg_catalog.now()"
								   " WHERE job = $1 RETURNING job",
								   2, params, 1, &pe);

	/* No row: the job row is gone and the position was recorded nowhere. */
	if (res == NULL)
		return query_failed(err, "record the snapshot position", &pe);
	PQclear(res);
	return true;
}
