#include "applysession.h"
#include "common.h"
#include "log.h"
#include "conn.h"
#include "session.h"
#include "sig.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The first wait is short: a fast restart of the target takes about a
 * second. Doubling to 30 s, ten attempts span about two minutes. */
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 30000

PGconn *
applysession_connect(const char *conninfo, struct apply_err *err)
{
	char shown[512];
	struct pgerr pe;
	PGconn *c = session_open(conninfo, SESSION_SQL, &pe);

	if (c != NULL)
		return c;
	conn_display(conninfo, shown, sizeof(shown));
	apply_err_set(err, pe.retryable ? EXIT_RUNTIME : EXIT_PREFLIGHT, "cannot connect to the target (%s): %s",
				  shown, pe.msg);
	err->retry = pe.retryable;
	return NULL;
}

bool
applysession_meta(PGconn *meta, struct apply_err *err)
{
	struct pgerr pe;

	if (conn_command(meta, "SET search_path = ''", 0, NULL, &pe) &&
		conn_command(meta, "SET synchronous_commit = on", 0, NULL, &pe))
		return true;
	apply_err_pg(err, EXIT_RUNTIME, &pe, "cannot set up the metadata session");
	return false;
}

/* How long to wait before reconnect attempt n (1, 2, ...). */
static uint64_t
applysession_backoff_ms(int attempt)
{
	static bool seeded;
	uint64_t base = BACKOFF_FIRST_MS;

	if (!seeded)
	{
		srandom((unsigned) (time(NULL) ^ getpid()));
		seeded = true;
	}
	for (int i = 1; i < attempt && base < BACKOFF_MAX_MS; i++)
		base *= 2;
	if (base > BACKOFF_MAX_MS)
		base = BACKOFF_MAX_MS;
	return base / 2 + (uint64_t) random() % (base / 2 + 1);
}

/* Sleep ms; false (at once) when a stop was requested. */
static bool
applysession_pause(uint64_t ms)
{
	uint64_t until = now_ms() + ms;

	for (uint64_t now; !sig_stop_requested() && (now = now_ms()) < until;)
	{
		struct pollfd pfd = {sig_fd(), POLLIN, 0};

		if (poll(&pfd, 1, (int) (until - now)) > 0)
			sig_drain();
	}
	return !sig_stop_requested();
}

void
applysession_close(struct applysession *s)
{
	applier_free(s->ap);
	s->ap = NULL;
	PQfinish(s->conn);
	PQfinish(s->meta);
	s->conn = s->meta = NULL;
}

/* One attempt: both sessions, the job's lock, and where the target stands. */
static bool
reopen(const struct applysession_cfg *cfg, struct applysession *s, lsn_t known, lsn_t *applied,
	   char *commit_time, size_t commit_time_len, struct apply_err *err)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ];
	uint32_t recorded;

	if ((s->conn = applysession_connect(cfg->conninfo, err)) == NULL ||
		(s->meta = applysession_connect(cfg->conninfo, err)) == NULL || !applysession_meta(s->meta, err) ||
		!jobrow_lock(s->conn, cfg->job, cfg->lock_wait_ms, err) ||
		!jobrow_open(s->meta, cfg->job, &cfg->id, applied, &recorded, commit_time, commit_time_len, err))
		return false;
	if (recorded != cfg->id.timeline)
	{
		apply_err_set(err, EXIT_CONTINUITY,
					  "the target records timeline %u for job \"%s\", not %u this session applies on: another applier changed it, resync required",
					  recorded, cfg->job, cfg->id.timeline);
		return false;
	}
	if (*applied < known)
	{
		apply_err_set(err, EXIT_CONTINUITY,
					  "the target's applied position %s is behind %s, which it had flushed (the checkpoint may have confirmed it to the source): the target lost committed transactions, resync required",
					  lsn_format(*applied, a), lsn_format(known, b));
		return false;
	}
	s->ap = applier_new(s->conn, s->meta, cfg->rc, &cfg->ao, &s->replica_role, err);
	return s->ap != NULL;
}

bool
applysession_recover(const struct applysession_cfg *cfg, struct applysession *s, lsn_t known,
					 lsn_t *applied, char *commit_time, size_t commit_time_len,
					 struct apply_err *err)
{
	applysession_close(s);
	for (;;)
	{
		struct apply_err last = *err;
		uint64_t ms;

		if (s->retries >= cfg->max_retries)
		{
			apply_err_set(err, EXIT_RUNTIME, "cannot reconnect to the target in %d attempts (--max-retries): %s",
						  s->retries, last.msg);
			return false;
		}
		ms = applysession_backoff_ms(++s->retries);
		log_info("reconnecting to the target in %.1fs (attempt %d of %d)", (double) ms / 1000.0,
				 s->retries, cfg->max_retries);
		if (!applysession_pause(ms))
		{
			apply_err_set(err, EXIT_DONE, "stopped by signal while reconnecting to the target");
			return false;
		}
		if (reopen(cfg, s, known, applied, commit_time, commit_time_len, err))
		{
			/* Statements prepared in the old session are gone with it. */
			relcache_new_session(cfg->rc);
			return true;
		}
		applysession_close(s);
		if (!err->retry)
			return false;
		log_warn("%s", err->msg);
	}
}
