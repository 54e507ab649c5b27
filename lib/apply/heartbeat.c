#include "heartbeat.h"
#include "common.h"
#include "conn.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct heartbeat {
	char *job;
	uint64_t interval_ms;
	uint64_t last_ms;			/* monotonic time of the last write, 0: none */
	uint64_t last_tx, last_rows;
	double started_at;
	bool warned;
};

static double
wall_seconds(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double) tv.tv_sec + tv.tv_usec / 1e6;
}

struct heartbeat *
heartbeat_new(const char *job, uint64_t interval_ms)
{
	struct heartbeat *hb = xcalloc(1, sizeof(*hb));

	hb->job = xstrdup(job);
	hb->interval_ms = interval_ms;
	hb->started_at = wall_seconds();
	return hb;
}

void
heartbeat_free(struct heartbeat *hb)
{
	if (hb == NULL)
		return;
	free(hb->job);
	free(hb);
}

uint64_t
heartbeat_wait_ms(const struct heartbeat *hb)
{
	uint64_t now = now_ms();

	if (hb->interval_ms == 0)
		return UINT64_MAX;
	if (hb->last_ms == 0 || now - hb->last_ms >= hb->interval_ms)
		return 0;
	return hb->interval_ms - (now - hb->last_ms);
}

static const char upsert_sql[] =
	"INSERT INTO pgsync.job_runtime AS r (job, pid, host, version, state, connection_state,"
	" source_version, received_lsn, applied_lsn, lag_bytes, transactions, changes,"
	" transactions_per_sec, rows_per_sec, rss_bytes, last_apply_at, last_commit_time,"
	" heartbeat_interval_s, heartbeat_at, started_at, stopped_at, reconnects)"
	" VALUES ($1, $2, $3, $4, $5, $19, $6, $7::pg_catalog.pg_lsn, $8::pg_catalog.pg_lsn,"
	" GREATEST($7::pg_catalog.pg_lsn - $8::pg_catalog.pg_lsn, 0), $9, $10, $11, $12, $13,"
	" pg_catalog.to_timestamp($14::float8), $15::pg_catalog.timestamptz, $16, pg_catalog.now(),"
	" pg_catalog.to_timestamp($17::float8), CASE WHEN $18 THEN pg_catalog.now() END, $20)"
	" ON CONFLICT (job) DO UPDATE SET pid = excluded.pid, host = excluded.host,"
	" version = excluded.version, state = excluded.state,"
	" connection_state = excluded.connection_state,"
	" source_version = coalesce(excluded.source_version, r.source_version),"
	" received_lsn = excluded.received_lsn, applied_lsn = excluded.applied_lsn,"
	" lag_bytes = excluded.lag_bytes, transactions = excluded.transactions,"
	" changes = excluded.changes, transactions_per_sec = excluded.transactions_per_sec,"
	" rows_per_sec = excluded.rows_per_sec, rss_bytes = excluded.rss_bytes,"
	" last_apply_at = excluded.last_apply_at,"
	" last_commit_time = coalesce(excluded.last_commit_time, r.last_commit_time),"
	" heartbeat_interval_s = excluded.heartbeat_interval_s,"
	" heartbeat_at = excluded.heartbeat_at, started_at = excluded.started_at,"
	" stopped_at = excluded.stopped_at, reconnects = excluded.reconnects";

void
heartbeat_tick(struct heartbeat *hb, PGconn *meta, const struct hb_stats *st,
			   bool force, bool stopped)
{
	char pid[24], host[256], recv[LSN_BUFSZ], appl[LSN_BUFSZ], tx[24], rows[24];
	char tps[32], rps[32], rss[24], applyat[40], interval[24], started[40], reconn[16];
	const char *params[20];
	uint64_t now = now_ms();
	double secs;
	struct pgerr pe;
	char text[PGERR_TEXT_MAX];

	if (!force && heartbeat_wait_ms(hb) != 0)
		return;
	/* A lost session is opened again by its owner, with its settings:
	 * PQreset() would come back without them. */
	if (meta == NULL || PQstatus(meta) == CONNECTION_BAD)
	{
		hb->last_ms = now;
		return;
	}
	secs = hb->last_ms ? (double) (now - hb->last_ms) / 1000.0 : 0;
	snprintf(pid, sizeof(pid), "%ld", (long) getpid());
	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	snprintf(tx, sizeof(tx), "%llu", (unsigned long long) st->transactions);
	snprintf(rows, sizeof(rows), "%llu", (unsigned long long) st->changes);
	snprintf(tps, sizeof(tps), "%.3f", secs > 0 ? (double) (st->transactions - hb->last_tx) / secs : 0.0);
	snprintf(rps, sizeof(rps), "%.3f", secs > 0 ? (double) (st->changes - hb->last_rows) / secs : 0.0);
	snprintf(rss, sizeof(rss), "%llu", (unsigned long long) current_rss_bytes());
	snprintf(applyat, sizeof(applyat), "%.6f", st->last_apply_at);
	snprintf(interval, sizeof(interval), "%llu", (unsigned long long) (hb->interval_ms / 1000));
	snprintf(started, sizeof(started), "%.6f", hb->started_at);
	params[0] = hb->job;
	params[1] = pid;
	params[2] = host;
	params[3] = PGSYNC_VERSION;
	params[4] = stopped ? "STOPPED" : st->state;
	params[5] = st->source_version;
	params[6] = lsn_format(st->received > st->applied ? st->received : st->applied, recv);
	params[7] = lsn_format(st->applied, appl);
	params[8] = tx;
	params[9] = rows;
	params[10] = tps;
	params[11] = rps;
	params[12] = rss;
	params[13] = st->last_apply_at > 0 ? applyat : NULL;
	params[14] = st->last_commit_time;
	params[15] = interval;
	params[16] = started;
	params[17] = stopped ? "true" : "false";
	params[18] = st->connection_state;
	snprintf(reconn, sizeof(reconn), "%u", (unsigned) (st->reconnects > INT32_MAX ? INT32_MAX : st->reconnects));
	params[19] = reconn;
	if (!conn_command(meta, upsert_sql, 20, params, &pe))
	{
		/* Once per outage: a monitoring hiccup must not flood the log. */
		if (!hb->warned)
			log_warn("cannot write the heartbeat to pgsync.job_runtime: %s",
					 pgerr_text(&pe, NULL, text, sizeof(text)));
		hb->warned = true;
	}
	else
		hb->warned = false;
	hb->last_ms = now;
	hb->last_tx = st->transactions;
	hb->last_rows = st->changes;
}
