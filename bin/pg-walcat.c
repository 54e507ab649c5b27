/*
 * pg-walcat: stream a logical replication slot (pgoutput) as the pgsync
 * change stream on stdout. Transactions come out whole and in commit order;
 * the source is told only what the downstream's --ack-file says is durable.
 * Reconnects with backoff, resuming from the last acknowledged position.
 */
#include "common.h"
#include "checkpoint.h"
#include "conn.h"
#include "cli.h"
#include "identity.h"
#include "lineage.h"
#include "ownserver.h"
#include "log.h"
#include "lsn.h"
#include "out.h"
#include "pace.h"
#include "publication.h"
#include "replication.h"
#include "session.h"
#include "sig.h"
#include "slotinfo.h"
#include "srcstatus.h"
#include "walsource.h"
#include "walstream.h"

#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How often an idle stream looks for a newly acknowledged position. */
#define ACK_CHECK_MS 1000
/* How long the reader naps when the socket runs dry while data flows. */
#define NAP_US 200

static const char synopsis[] =
	"usage: pg-walcat -d SOURCE --slot NAME --publication NAME[,NAME...] [--start LSN]\n"
	"                 [--endpos LSN|now] [--ack-file FILE] [--status-interval DURATION]\n"
	"                 [--heartbeat-interval DURATION] [--spool-dir DIR] [--connection-file FILE]\n"
	"                 [--max-message-bytes SIZE] [-z|--zstd[=LEVEL]] [--no-loop]\n"
	"                 [-q] [--log-level LEVEL] [--json]\n";

static const char options_help[] =
	"\n"
	"Stream a logical replication slot (pgoutput) as the pgsync change stream on\n"
	"stdout, transactions whole and in commit order.\n"
	"\n"
	"Options:\n"
	"  -d, --dbname=SOURCE         source connection string or URL (default: libpq environment)\n"
	"  -S, --slot=NAME             the logical replication slot (plugin pgoutput)\n"
	"  -P, --publication=NAMES     publication(s), comma-separated\n"
	"      --start=LSN             start at LSN instead of the slot's confirmed position\n"
	"  -E, --endpos=LSN|now        write the transactions committing below LSN (now: the\n"
	"                              source's current WAL position), then END, and exit\n"
	"  -a, --ack-file=FILE         checkpoint file the downstream writes once data is\n"
	"                              durable: its position is all that is confirmed to the\n"
	"                              source (without it nothing is)\n"
	"  -s, --status-interval=DUR   status update interval (default 10s)\n"
	"      --heartbeat-interval=DUR  after this long without data, write a heartbeat\n"
	"                              message on the source so the slot keeps moving\n"
	"                              (default 60s, 0 disables; PostgreSQL 14+)\n"
	"      --spool-dir=DIR         where streamed in-progress transactions wait for their\n"
	"                              commit (default $TMPDIR, else /tmp)\n"
	"      --max-message-bytes=SIZE  largest single change accepted (1kB-1GB, default 32MB)\n"
	"      --connection-file=FILE  keep the source connection's state (connected,\n"
	"                              reconnecting, disconnected) and the number of\n"
	"                              reconnections in FILE, for pg-apply's heartbeat\n"
	"  -z, --zstd[=LEVEL]          compress the output with zstd (default level 3; 1-19)\n"
	"      --no-loop               exit 1 when the connection is lost instead of reconnecting\n"
	"  -q, --quiet                 log warnings and errors only\n"
	"      --log-level=LEVEL       debug, info, warn or error (default info)\n"
	"      --json                  log as JSON lines\n"
	"  -h, --help                  show this help and exit\n"
	"  -V, --version               show the version and exit\n"
	"\n"
	"Exit status: 0 done (--endpos reached, or stopped by a signal), 1 runtime error,\n"
	"2 usage, 3 source prerequisite missing, 4 continuity lost (slot missing or\n"
	"invalidated, acknowledgement from another source or slot), 5 acknowledged\n"
	"position past the source's WAL or past what the stream has written.\n";

#define MAX_PUBS PUB_MAX

struct opts {
	const char *conninfo;
	const char *slot;
	char *pubs_arg;
	const char *pubs[MAX_PUBS];
	int npubs;
	lsn_t start;
	lsn_t endpos;
	bool endpos_now;
	const char *ack_file;
	const char *conn_file;
	uint64_t status_ms;
	uint64_t heartbeat_ms;
	const char *spool_dir;
	uint64_t max_message;
	int zstd;
	bool no_loop;
};

/* Everything one run keeps across connections. */
struct walcat {
	struct opts o;
	struct walstream *ws;
	/* The job's source, as the ack file records it, else as the first
	 * server this run streamed from: every connection must find it again
	 * (lineage.h). */
	char sysid[24];
	uint32_t timeline;
	lsn_t restart_floor;		/* the highest restart_lsn seen on the slot */
	PGconn *sql;				/* normal connection: checks, heartbeats */
	lsn_t acked;				/* last position the ack file gave */
	lsn_t acked_sent;			/* ... and the last one told to the server */
	uint32_t acked_tli;			/* the timeline the ack file says it was applied on */
	bool streamed;				/* a session reached START_REPLICATION */
	uint32_t reconnects;		/* sessions that streamed again after a loss */
	enum src_state reported;	/* last state written to --connection-file */
};

/* How a session ended. */
struct ending {
	int code;					/* exit code when not retrying */
	bool retry;
	uint64_t streamed_ms;		/* how long it streamed */
};

#define usage_error(...) cli_usage_error(synopsis, __VA_ARGS__)

static void
parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_START = 256, OPT_HEARTBEAT, OPT_SPOOL, OPT_MAXMSG, OPT_NOLOOP, OPT_CONNFILE };
	static const struct option longopts[] = {
		CLI_DBNAME_LONGOPT,
		{"slot", required_argument, NULL, 'S'},
		{"publication", required_argument, NULL, 'P'},
		{"start", required_argument, NULL, OPT_START},
		{"endpos", required_argument, NULL, 'E'},
		{"ack-file", required_argument, NULL, 'a'},
		{"status-interval", required_argument, NULL, 's'},
		{"heartbeat-interval", required_argument, NULL, OPT_HEARTBEAT},
		{"spool-dir", required_argument, NULL, OPT_SPOOL},
		{"max-message-bytes", required_argument, NULL, OPT_MAXMSG},
		{"connection-file", required_argument, NULL, OPT_CONNFILE},
		{"zstd", optional_argument, NULL, 'z'},
		{"no-loop", no_argument, NULL, OPT_NOLOOP},
		CLI_COMMON_LONGOPTS,
		/* The old spelling of --log-level, in scripts written for it. */
		{"log", required_argument, NULL, CLI_OPT_LOG_OLD},
		{NULL, 0, NULL, 0},
	};
	struct cli cli = {.prog = "pg-walcat", .synopsis = synopsis, .help = options_help};
	int c;

	o->status_ms = 10000;
	o->heartbeat_ms = 60000;
	o->max_message = CLI_MAX_MESSAGE_DEFAULT;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:S:P:E:a:s:z" CLI_COMMON_SHORT, longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'S': o->slot = cli_slot(&cli, optarg); break;
			case 'P': o->pubs_arg = optarg; break;
			case OPT_START:
				if (!lsn_parse(optarg, &o->start))
					usage_error("invalid --start \"%s\": expected an LSN like 0/16B3748", optarg);
				break;
			case 'E':
				o->endpos_now = strcmp(optarg, "now") == 0;
				if (!o->endpos_now && (!lsn_parse(optarg, &o->endpos) || o->endpos == LSN_INVALID))
					usage_error("invalid --endpos \"%s\": expected an LSN like 0/16B3748 or now", optarg);
				break;
			case 'a': o->ack_file = optarg; break;
			case 's': o->status_ms = cli_duration(&cli, "--status-interval", optarg, 1); break;
			case OPT_HEARTBEAT: o->heartbeat_ms = cli_duration(&cli, "--heartbeat-interval", optarg, 0); break;
			case OPT_SPOOL: o->spool_dir = optarg; break;
			case OPT_CONNFILE: o->conn_file = optarg; break;
			case OPT_MAXMSG: o->max_message = cli_max_message(&cli, optarg); break;
			case 'z': o->zstd = cli_zstd_level(&cli, optarg); break;
			case OPT_NOLOOP: o->no_loop = true; break;
			default: cli_common(&cli, c, argv); break;
		}
	}
	o->conninfo = cli.conninfo;
	if (optind < argc)
		usage_error("unexpected argument \"%s\"", argv[optind]);
	if (o->slot == NULL)
		usage_error("--slot is required");
	if (o->pubs_arg == NULL)
		usage_error("--publication is required");
	o->npubs = cli_publications(synopsis, o->pubs_arg, o->pubs, MAX_PUBS);
	if (o->endpos != LSN_INVALID && o->start != LSN_INVALID && o->start > o->endpos)
		usage_error("--start is after --endpos");
}

/* --- the connection file ------------------------------------------------ */

/*
 * Tell --connection-file the source connection's state. The first write
 * (disconnected, at startup) replaces whatever an earlier run left there, so
 * a file that cannot be written is a configuration error then; later a
 * failure is only warned about, once per state: monitoring must not stop the
 * stream.
 */
static void
report_connection(struct walcat *w, enum src_state state, bool first)
{
	struct src_status st = {state, w->reconnects};
	char err[512];

	if (w->o.conn_file == NULL)
		return;
	if (srcstatus_write(w->o.conn_file, &st, err, sizeof(err)) == 0)
		w->reported = state;
	else if (first)
		usage_error("--connection-file: %s", err);
	else if (w->reported != state)
	{
		log_warn("%s", err);
		w->reported = state;
	}
}

/* --- the acknowledgement file and status updates ------------------------- */

/* Re-read the ack file. A position going backwards means the downstream
 * lost what it had confirmed: the slot may already be past it. */
static int
read_ack(struct walcat *w)
{
	char msg[1024];
	struct checkpoint cp;
	lsn_t lsn;
	bool present;
	int rc;

	if (w->o.ack_file == NULL)
		return EXIT_DONE;
	rc = walsrc_read_ack(w->o.ack_file, w->sysid, w->o.slot, &cp, &present, msg, sizeof(msg));
	if (rc != EXIT_DONE)
	{
		log_error("%s", msg);
		return rc;
	}
	lsn = cp.lsn;
	if (present && !w->sysid[0] && cp.sysid[0])
		snprintf(w->sysid, sizeof(w->sysid), "%s", cp.sysid);
	if (present && w->timeline == 0)
		w->timeline = cp.timeline;
	/* The downstream cannot hold what this stream never wrote. */
	if (present && w->streamed && lsn > ws_written_ever(w->ws))
	{
		char a[LSN_BUFSZ], b[LSN_BUFSZ];

		log_error("acknowledged position %s in \"%s\" is past %s, the most this run has written: "
				  "it cannot come from this run", lsn_format(lsn, a), w->o.ack_file,
				  lsn_format(ws_written_ever(w->ws), b));
		return EXIT_UNSUPPORTED;
	}
	if (present && lsn < w->acked)
	{
		char a[LSN_BUFSZ], b[LSN_BUFSZ];

		log_error("acknowledged position in \"%s\" went back from %s to %s: continuity is lost, resync required",
				  w->o.ack_file, lsn_format(w->acked, a), lsn_format(lsn, b));
		return EXIT_CONTINUITY;
	}
	if (present)
		w->acked = lsn, w->acked_tli = cp.timeline;
	return EXIT_DONE;
}

/*
 * Confirm (flush, apply) exactly what the ack file says: 0/0, which moves
 * nothing, without one. The write position is what went to the output; the
 * server does not confirm it, but waits for it when it shuts down (a
 * walsender stops once the client has caught up), so it must be real.
 */
static int
send_status(struct walcat *w, PGconn *repl, bool reply, struct ending *end)
{
	struct pgerr err;
	int rc = read_ack(w);

	if (rc != EXIT_DONE)
	{
		end->code = rc;
		end->retry = false;
		return rc;
	}
	if (!repl_send_status(repl, ws_written(w->ws), w->acked, w->acked, reply, &err))
	{
		log_warn("cannot send status update: %s", err.msg);
		end->retry = true;
		end->code = EXIT_RUNTIME;
		return EXIT_RUNTIME;
	}
	w->acked_sent = w->acked;
	if (log_enabled(LOG_DEBUG))
	{
		char a[LSN_BUFSZ], b[LSN_BUFSZ];

		log_debug("status update: written %s, confirmed %s", lsn_format(ws_written(w->ws), b),
				  lsn_format(w->acked, a));
	}
	return EXIT_DONE;
}

/* --- one connection ------------------------------------------------------ */

static int
fail_err(const char *what, const struct pgerr *err, int code)
{
	char text[PGERR_TEXT_MAX];

	log_error("%s: %s", what, pgerr_text(err, NULL, text, sizeof(text)));
	return code;
}

/* A failure that a later attempt may not have is a warning, not an error. */
static int
fail_retry(const struct ending *end, const char *what, const struct pgerr *err, int code)
{
	char text[PGERR_TEXT_MAX];

	if (!end->retry)
		return fail_err(what, err, code);
	log_warn("%s: %s", what, pgerr_text(err, NULL, text, sizeof(text)));
	return code;
}

/* The normal connection, (re)opened when needed. */
static PGconn *
sql_conn(struct walcat *w, struct pgerr *err)
{
	if (w->sql && PQstatus(w->sql) != CONNECTION_OK)
	{
		PQfinish(w->sql);
		w->sql = NULL;
	}
	if (w->sql == NULL)
		w->sql = session_open(w->o.conninfo, SESSION_SQL, err);
	return w->sql;
}

static bool
same_server(PGconn *a, PGconn *b)
{
	const char *ha = PQhost(a), *hb = PQhost(b), *pa = PQport(a), *pb = PQport(b);

	return ha && hb && pa && pb && strcmp(ha, hb) == 0 && strcmp(pa, pb) == 0;
}

/*
 * A failover: never stream from a node in recovery, nor from a server whose
 * history the target does not share (lineage_judge(), the one rule). On a
 * later timeline that shares it, the slot must be the job's failover slot
 * synced to this server before its promotion: a slot of the same name made
 * here since knows nothing of the job. Before anything is confirmed.
 */
static int
follow_lineage(struct walcat *w, PGconn *sql, PGconn *repl, const struct sysident *id,
			   const struct slotinfo *slot, struct ending *end)
{
	struct pgerr err;
	struct lineage hist;
	struct buf feature = BUF_INIT;
	char msg[512];
	PGresult *r;
	bool standby;

	/* Several hosts: both sessions must have found the same server, or the
	 * slot read on one would be judged by the other's history. */
	if (!same_server(sql, repl))
	{
		end->retry = true;
		log_warn("the replication and the normal connection reached different servers (%s:%s and %s:%s): trying again",
				 PQhost(repl), PQport(repl), PQhost(sql), PQport(sql));
		PQfinish(w->sql);
		w->sql = NULL;
		return EXIT_RUNTIME;
	}
	r = conn_query_one(sql, "SELECT pg_catalog.pg_is_in_recovery()", 0, NULL, 1, &err);
	if (r == NULL)
	{
		end->retry = err.retryable;
		return fail_retry(end, "cannot ask the source whether it is in recovery", &err, EXIT_RUNTIME);
	}
	standby = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	if (standby)
	{
		/* Ridden out like an outage: the standby may be promoted, or a
		 * multi-host connection find the primary on the next attempt. */
		end->retry = true;
		log_warn("the source is in recovery (a standby): not streaming from it; "
				 "waiting for a primary (target_session_attrs=primary finds it among several hosts)");
		return EXIT_RUNTIME;
	}
	if (!lineage_read(repl, id->timeline, &hist, &err))
	{
		end->retry = err.retryable;
		return fail_retry(end, "cannot read the source's timeline history", &err, EXIT_RUNTIME);
	}
	lineage_format(&hist, &feature);
	ws_set_history(w->ws, buf_cstr(&feature));
	buf_free(&feature);
	if (w->acked == LSN_INVALID)
		return EXIT_DONE;
	switch (lineage_judge(w->acked_tli, w->acked, &hist, msg, sizeof(msg)))
	{
		case LINEAGE_SAME:
			return EXIT_DONE;
		case LINEAGE_BEHIND:
			end->retry = true;
			log_warn("%s: not streaming from it", msg);
			return EXIT_RUNTIME;
		case LINEAGE_DIVERGED:
			log_error("%s: resync required", msg);
			return EXIT_CONTINUITY;
		case LINEAGE_FOLLOWS:
			break;
	}
	if (!slot->synced || slot->temporary)
	{
		log_error("%s, but replication slot \"%s\" on it is not the job's failover slot synced before the promotion "
				  "(%s): continuity is lost, resync required", msg, w->o.slot,
				  slot->temporary ? "temporary" : "synced is false");
		return EXIT_CONTINUITY;
	}
	log_info("%s: following the new primary", msg);
	return EXIT_DONE;
}

/* Not the job's server (ownserver.h): nothing is streamed from it or
 * confirmed to it. pgsync continues the job once its own server answers. */
static int
other_server(const char *why)
{
	log_error("%s; nothing was confirmed to it: resync required, unless the job's own server answers again", why);
	return EXIT_CONTINUITY;
}

/*
 * Checks before streaming, on the normal connection. Returns EXIT_DONE with
 * the position to start from, or an exit code (end->retry when it may pass
 * on a later attempt).
 */
static int
prepare(struct walcat *w, PGconn *repl, lsn_t *start, uint32_t *timeline,
		struct ending *end)
{
	struct pgerr err;
	struct slotinfo slot;
	struct sysident id;
	struct own_server job = {0};
	PGconn *sql = NULL;
	char a[LSN_BUFSZ], b[LSN_BUFSZ], why[512];
	int rc = EXIT_RUNTIME;

	/* Which server is this: asked first, because another server may lack
	 * the slot and the publications, and must be named as what it is. */
	if (!conn_identify_system(repl, &id, &err))
	{
		end->retry = err.retryable;
		return fail_retry(end, "cannot identify the source system", &err, EXIT_RUNTIME);
	}
	if ((rc = read_ack(w)) != EXIT_DONE)
		return rc;
	/* Another timeline is follow_lineage()'s to judge, below. */
	if (!identity_same(w->sysid, id.sysid, why, sizeof(why)))
		return other_server(why);

	/* A server restart leaves the old normal connection looking fine until
	 * it is used: on a lost connection, open a new one once. */
	for (int attempt = 0; attempt < 2; attempt++)
	{
		if ((sql = sql_conn(w, &err)) == NULL)
		{
			int code = slot_connect_failure(&err, w->o.conninfo);

			end->retry = code == EXIT_RUNTIME && err.retryable;
			return fail_retry(end, "cannot connect to the source", &err, code);
		}
		rc = walsrc_preflight(sql, w->o.slot, w->o.pubs, w->o.npubs, &slot, &err);
		if (rc == EXIT_DONE || !err.retryable)
			break;
		/* libpq may still call a connection the server closed "OK". */
		PQfinish(w->sql);
		w->sql = NULL;
	}
	if (rc != EXIT_DONE)
	{
		end->retry = rc == EXIT_RUNTIME && err.retryable;
		if (end->retry)
			log_warn("%s", err.msg);
		else
			log_error("%s", err.msg);
		return rc;
	}
	/* A consumer that just died leaves its walsender behind for a moment:
	 * give it two seconds to notice before calling the slot busy. */
	for (int i = 0; i < 20 && slot.active_pid != 0 && !sig_stop_requested(); i++)
	{
		usleep(100 * 1000);
		if (slotinfo_read(sql, w->o.slot, &slot, &err) != SLOT_FOUND)
			break;
	}
	if (slot.active_pid != 0)
	{
		/* After a lost connection our own old walsender may linger. */
		end->retry = w->streamed;
		log_msg(end->retry ? LOG_WARN : LOG_ERROR, "replication slot \"%s\" is active for PID %d",
				w->o.slot, slot.active_pid);
		return EXIT_RUNTIME;
	}
	/* Which server is this, now that the slot is known: its WAL and slot
	 * must still be the job's history. Checked before anything is sent:
	 * the server would confirm it. */
	job.sysid = w->sysid;
	job.timeline = w->timeline;
	/* The most it took: what it confirmed, and what this run streamed. */
	job.taken = w->acked;
	if (w->streamed && ws_written_ever(w->ws) > job.taken)
		job.taken = ws_written_ever(w->ws);
	job.restart_floor = w->restart_floor;
	/* The timeline first: an old primary come back is waited out, not
	 * taken for another server. */
	if ((rc = follow_lineage(w, sql, repl, &id, &slot, end)) != EXIT_DONE)
		return rc;
	if (!own_server_holds(&job, &id, &slot, why, sizeof(why)))
		return other_server(why);
	snprintf(w->sysid, sizeof(w->sysid), "%s", id.sysid);
	/* On a new timeline the slot's restart_lsn starts its own floor (a
	 * synced slot may restart earlier than the old primary's did). */
	if (id.timeline != w->timeline)
		w->restart_floor = LSN_INVALID;
	w->timeline = id.timeline;
	if (slot.restart_lsn > w->restart_floor)
		w->restart_floor = slot.restart_lsn;
	if (w->o.ack_file && w->acked != LSN_INVALID && w->acked < slot.confirmed_flush_lsn)
	{
		log_error("replication slot \"%s\" has confirmed %s, beyond %s acknowledged in \"%s\": "
				  "the changes in between are lost, resync required", w->o.slot,
				  lsn_format(slot.confirmed_flush_lsn, a), lsn_format(w->acked, b), w->o.ack_file);
		return EXIT_CONTINUITY;
	}
	if (w->o.start != LSN_INVALID && !w->streamed && w->o.start < slot.confirmed_flush_lsn)
	{
		log_error("replication slot \"%s\" has confirmed %s, beyond --start %s: the server cannot send "
				  "what commits in between, resync required", w->o.slot,
				  lsn_format(slot.confirmed_flush_lsn, a), lsn_format(w->o.start, b));
		return EXIT_CONTINUITY;
	}
	if (w->o.endpos_now && w->o.endpos == LSN_INVALID &&
		!walsrc_current_lsn(sql, &w->o.endpos, &err))
	{
		end->retry = err.retryable;
		return fail_retry(end, "cannot read the current WAL position", &err, EXIT_RUNTIME);
	}
	*start = slot.confirmed_flush_lsn;
	if (w->o.start > *start)
		*start = w->o.start;
	if (w->acked > *start)
		*start = w->acked;
	*timeline = id.timeline;
	return EXIT_DONE;
}

/* The connection ended or failed while streaming: retry or stop? */
static void
connection_ended(PGconn *repl, int n, struct ending *end)
{
	struct pgerr err;
	char text[PGERR_TEXT_MAX];
	PGresult *res = n == -1 ? PQgetResult(repl) : NULL;

	if (res && PQresultStatus(res) == PGRES_COMMAND_OK)
		pgerr_printf(&err, true, "the server ended streaming");
	else
		pgerr_set(&err, repl, res);
	PQclear(res);
	end->code = repl_error_exit(&err);
	end->retry = end->code == EXIT_RUNTIME && (err.retryable || PQstatus(repl) == CONNECTION_BAD);
	if (end->retry)
		log_warn("connection to the source lost: %s", pgerr_text(&err, NULL, text, sizeof(text)));
	else
		fail_err("streaming from the source failed", &err, end->code);
}

/* Idle work: heartbeats keep the slot moving; with --endpos, ask the server
 * to prove (by a keepalive or our own message) that nothing older is left. */
static void
idle_work(struct walcat *w, PGconn *repl, uint64_t now, uint64_t last_data,
		  uint64_t *next_heartbeat, uint64_t *next_probe, bool *heartbeats,
		  struct ending *end)
{
	struct pgerr err;
	bool sent = false;
	PGconn *sql;

	if (w->o.endpos != LSN_INVALID && now - last_data >= 300 && now >= *next_probe)
	{
		*next_probe = now + 2000;
		if (send_status(w, repl, true, end) != EXIT_DONE)
			return;
		/* A message written now lies at or past any endpos already reached
		 * by the WAL: decoding it proves nothing below endpos remains. */
		if ((sql = sql_conn(w, &err)) == NULL || !walsrc_heartbeat(sql, w->o.endpos, &sent, &err))
			log_debug("cannot write an end-position probe: %s", err.msg);
	}
	if (*heartbeats && now - last_data >= w->o.heartbeat_ms && now >= *next_heartbeat)
	{
		*next_heartbeat = now + w->o.heartbeat_ms;
		if ((sql = sql_conn(w, &err)) != NULL && walsrc_heartbeat(sql, LSN_INVALID, &sent, &err))
			log_debug("idle for %llus: heartbeat written", (unsigned long long) ((now - last_data) / 1000));
		else if (strcmp(err.sqlstate, "42501") == 0)
		{
			char text[PGERR_TEXT_MAX];

			log_warn("cannot write heartbeats: %s: an idle slot will not advance",
					 pgerr_text(&err, NULL, text, sizeof(text)));
			*heartbeats = false;
		}
		else
			log_warn("cannot write a heartbeat: %s", err.msg);
	}
}

/* Stream until endpos, a signal, an error or a lost connection. */
static struct ending
stream(struct walcat *w, PGconn *repl, int server_version)
{
	struct ending end = {EXIT_DONE, false, 0};
	uint64_t t0 = now_ms(), now = t0, last_data = t0;
	uint64_t next_status = t0 + w->o.status_ms, next_heartbeat = 0, next_probe = 0;
	uint64_t next_ack_check = t0 + ACK_CHECK_MS;
	bool heartbeats = server_version >= 140000 && w->o.heartbeat_ms > 0;
	enum ws_status st = WS_OK;
	bool drained = false, napped = false;
	struct pace pace = {t0, 0, 0};
	char err[256];

	for (;;)
	{
		char *buf = NULL;
		int n;

		if (sig_stop_requested() && !ws_in_transaction(w->ws))
			break;
		n = PQgetCopyData(repl, &buf, 1);
		/* Read what the socket already holds before deciding we are idle:
		 * under load that keeps flushes (syscalls) to the quiet moments. */
		if (n == 0 && !drained)
		{
			drained = true;
			if (!PQconsumeInput(repl))
			{
				connection_ended(repl, -2, &end);
				break;
			}
			continue;
		}
		drained = false;
		now = now_ms();
		if (n > 0)
		{
			struct repl_msg m;

			napped = false;
			pace_add(&pace, (size_t) n);
			if (!repl_parse(buf, (size_t) n, &m, err, sizeof(err)))
			{
				PQfreemem(buf);
				log_error("protocol violation: %s", err);
				end.code = EXIT_RUNTIME;
				break;
			}
			if (m.kind == 'w')
			{
				last_data = now;
				st = ws_message(w->ws, m.data, m.len);
			}
			else
			{
				/* Position first, so that the reply reports it written. */
				st = ws_keepalive(w->ws, m.wal_end, now);
				if (st == WS_OK && m.reply_requested && send_status(w, repl, false, &end) != EXIT_DONE)
				{
					PQfreemem(buf);
					break;
				}
			}
			PQfreemem(buf);
			if (st != WS_OK)
				break;
		}
		else if (n == 0 && !napped && !pace_live(&pace))
		{
			/*
			 * A backlog is flowing: nap briefly before waiting on the
			 * socket. The walsender writes one small message at a time, and
			 * waking a reader blocked in poll() on each costs both processes
			 * more than the data does; napping lets a batch of messages
			 * gather and the sender write without waking anyone. A live
			 * stream is not napped on: each transaction goes on the moment
			 * it is whole, since the nap (and the timer's slack) would be
			 * most of its way to the target.
			 */
			struct timespec ts = {0, NAP_US * 1000};

			napped = true;
			nanosleep(&ts, NULL);
			drained = false;
			continue;
		}
		else if (n == 0)
		{
			struct pollfd pfd[2] = {{PQsocket(repl), POLLIN, 0}, {sig_fd(), POLLIN, 0}};
			int64_t timeout = (int64_t) (next_status - now);

			/* About to block: make every complete transaction visible
			 * (the rest of one still arriving follows with its COMMIT). */
			if ((st = ws_flush_whole(w->ws)) != WS_OK)
				break;
			idle_work(w, repl, now, last_data, &next_heartbeat, &next_probe, &heartbeats, &end);
			if (end.code != EXIT_DONE)
				break;
			if (w->o.endpos != LSN_INVALID && timeout > 300)
				timeout = 300;
			if (w->o.ack_file && timeout > ACK_CHECK_MS)
				timeout = ACK_CHECK_MS;
			if (heartbeats && timeout > (int64_t) (last_data + w->o.heartbeat_ms - now))
				timeout = (int64_t) (last_data + w->o.heartbeat_ms - now);
			if (timeout < 0)
				timeout = 0;
			if (poll(pfd, 2, (int) (timeout > 10000 ? 10000 : timeout)) > 0 && pfd[1].revents)
				sig_drain();
			if (!PQconsumeInput(repl))
			{
				connection_ended(repl, -2, &end);
				break;
			}
			now = now_ms();
		}
		else
		{
			connection_ended(repl, n, &end);
			break;
		}
		if (now >= next_status)
		{
			next_status = now + w->o.status_ms;
			if (send_status(w, repl, false, &end) != EXIT_DONE)
				break;
		}
		else if (w->o.ack_file && now >= next_ack_check)
		{
			/* Pass a newly acknowledged position on within a second, so the
			 * slot releases WAL promptly rather than at the next interval. */
			next_ack_check = now + ACK_CHECK_MS;
			if ((end.code = read_ack(w)) != EXIT_DONE)
				break;
			if (w->acked > w->acked_sent && send_status(w, repl, false, &end) != EXIT_DONE)
				break;
		}
	}
	end.streamed_ms = now_ms() - t0;
	ws_log_stats(w->ws);

	if (st == WS_ENDPOS)
		st = ws_end(w->ws);
	else if (st == WS_OK)
		st = ws_flush(w->ws);
	if (st == WS_FAILED)
	{
		/* What came before the failure is whole: let the reader have it. */
		ws_flush(w->ws);
		end.code = ws_exit_code(w->ws);
		end.retry = false;
	}
	else if (st == WS_CLOSED)
	{
		log_info("the reader closed the output: stopping");
		end.code = EXIT_DONE;
		end.retry = false;
	}
	/* A clean stop tells the server what is confirmed now, then says goodbye. */
	if (end.code == EXIT_DONE && !end.retry && PQstatus(repl) == CONNECTION_OK)
	{
		struct ending ignored = end;

		if (send_status(w, repl, false, &ignored) == EXIT_DONE)
			repl_finish(repl, 5000);
		if (ignored.code != EXIT_DONE && !ignored.retry)
			end.code = ignored.code;
	}
	return end;
}

static struct ending
session(struct walcat *w)
{
	struct ending end = {EXIT_RUNTIME, false, 0};
	struct repl_options ro;
	struct buf cmd = BUF_INIT;
	struct pgerr err;
	PGconn *repl = session_open(w->o.conninfo, SESSION_REPLICATION, &err);
	uint32_t timeline = 0;
	lsn_t start = LSN_INVALID;
	char a[LSN_BUFSZ];
	int rc, sv;

	if (repl == NULL)
	{
		end.code = slot_connect_failure(&err, w->o.conninfo);
		end.retry = end.code == EXIT_RUNTIME && err.retryable;
		if (end.retry)
			log_warn("cannot connect to the source: %s", err.msg);
		else
			fail_err("cannot connect to the source", &err, end.code);
		return end;
	}
	if ((rc = prepare(w, repl, &start, &timeline, &end)) != EXIT_DONE)
	{
		end.code = rc;
		PQfinish(repl);
		return end;
	}
	sv = PQserverVersion(repl);
	ws_set_endpos(w->ws, w->o.endpos);
	if (w->o.endpos != LSN_INVALID && start >= w->o.endpos)
	{
		/* Nothing below endpos is left to send. */
		end.code = ws_begin_stream(w->ws, w->sysid, timeline, w->o.slot, start, sv) == WS_OK &&
			ws_end(w->ws) == WS_OK ? EXIT_DONE : ws_exit_code(w->ws);
		PQfinish(repl);
		return end;
	}
	repl_options_for(sv, &ro);
	repl_start_command(&cmd, w->o.slot, start, &ro, w->o.pubs, w->o.npubs);
	log_debug("%s", buf_cstr(&cmd));
	if (!repl_start(repl, cmd.data, &err))
	{
		end.code = repl_error_exit(&err);
		/* Busy slot after a lost connection: the old walsender is leaving. */
		end.retry = end.code == EXIT_RUNTIME && (err.retryable || PQstatus(repl) == CONNECTION_BAD) &&
			(w->streamed || strcmp(err.sqlstate, "55006") != 0);
		if (end.retry)
		{
			char text[PGERR_TEXT_MAX];

			log_warn("cannot start streaming from slot \"%s\": %s", w->o.slot,
					 pgerr_text(&err, NULL, text, sizeof(text)));
		}
		else
			fail_err("cannot start streaming", &err, end.code);
		buf_free(&cmd);
		PQfinish(repl);
		return end;
	}
	buf_free(&cmd);
	log_info("streaming from slot \"%s\" at %s (server %d, protocol %d%s)", w->o.slot,
			 lsn_format(start, a), sv, ro.proto_version, ro.streaming ? ", streaming" : "");
	if (w->streamed)
		w->reconnects++;
	w->streamed = true;
	report_connection(w, SRC_CONNECTED, false);
	if (ws_begin_stream(w->ws, w->sysid, timeline, w->o.slot, start, sv) != WS_OK)
	{
		end.code = EXIT_DONE;	/* the reader went away */
		PQfinish(repl);
		return end;
	}
	end = stream(w, repl, sv);
	PQfinish(repl);
	return end;
}

/* Wait ms, or less when a stop signal comes. */
static void
pause_ms(uint64_t ms)
{
	uint64_t until = now_ms() + ms;

	while (!sig_stop_requested() && now_ms() < until)
	{
		struct pollfd pfd = {sig_fd(), POLLIN, 0};

		if (poll(&pfd, 1, (int) (until - now_ms())) > 0)
			sig_drain();
	}
}

static int
run(struct walcat *w)
{
	uint64_t backoff = 1000;
	int attempt = 0;

	srandom((unsigned) (time(NULL) ^ getpid()));
	for (;;)
	{
		struct ending e = session(w);
		uint64_t delay;

		if (!e.retry)
			return e.code;
		if (sig_stop_requested())
			return EXIT_DONE;
		if (w->o.no_loop)
		{
			log_error("not reconnecting (--no-loop)");
			return EXIT_RUNTIME;
		}
		/* A connection that streamed for a while starts the backoff over. */
		if (e.streamed_ms > 30000)
			backoff = 1000, attempt = 0;
		attempt++;
		delay = backoff / 2 + (uint64_t) random() % (backoff / 2 + 1);
		report_connection(w, SRC_RECONNECTING, false);
		log_warn("reconnecting in %.1fs (attempt %d)", (double) delay / 1000.0, attempt);
		pause_ms(delay);
		if (sig_stop_requested())
			return EXIT_DONE;
		if (backoff < 30000)
			backoff *= 2;
	}
}

int
main(int argc, char **argv)
{
	struct walcat w;
	struct walstream_config cfg;
	struct out *out;
	int rc;

	memset(&w, 0, sizeof(w));
	log_init(argv[0]);
	parse_args(argc, argv, &w.o);
	if (!out_tty_ok(STDOUT_FILENO, w.o.zstd))
		usage_error("refusing to write compressed output to a terminal");
	sig_setup();
	out_widen_pipe(STDOUT_FILENO);
	out = out_open(STDOUT_FILENO, w.o.zstd);
	cfg.max_message = (size_t) w.o.max_message;
	cfg.spool_dir = w.o.spool_dir;
	cfg.endpos = w.o.endpos;
	w.ws = ws_new(&cfg, out);
	report_connection(&w, SRC_DISCONNECTED, true);
	rc = run(&w);
	report_connection(&w, SRC_DISCONNECTED, false);
	if (out_close(out, false) == OUT_ERROR && rc == EXIT_DONE)
		rc = EXIT_RUNTIME;
	ws_free(w.ws);
	PQfinish(w.sql);
	return rc;
}
