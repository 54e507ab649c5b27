/*
 * pg-ack: confirm a position on a logical slot that nothing streams from
 * (archive and cron flows), with pg_replication_slot_advance(). It never
 * moves a slot backwards and never past what the source has flushed, and it
 * refuses a position whose checkpoint file names another source or slot.
 */
#include "checkpoint.h"
#include "common.h"
#include "conn.h"
#include "cli.h"
#include "identity.h"
#include "lineage.h"
#include "ownserver.h"
#include "log.h"
#include "lsn.h"
#include "out.h"
#include "pgwait.h"
#include "session.h"
#include "sig.h"
#include "slotinfo.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
	"usage: pg-ack --slot NAME (--lsn LSN | --from CHECKPOINT_FILE) [-d CONNINFO]\n"
	"              [--dry-run] [--wait DURATION] [--json]\n";

static const char options_help[] =
	"\n"
	"Confirm a position on a logical replication slot that nothing streams from:\n"
	"the source may then recycle the WAL before it.\n"
	"\n"
	"Options:\n"
	"  -d, --dbname=CONNINFO     source connection string or URL (default: libpq environment)\n"
	"  -s, --slot=NAME           the slot to confirm on\n"
	"  -l, --lsn=LSN             the position to confirm (X/Y): every transaction that\n"
	"                            commits below it is durable downstream\n"
	"  -f, --from=FILE           take the position from a checkpoint file; its sysid and\n"
	"                            slot, when recorded, must match the source and --slot\n"
	"  -n, --dry-run             check everything and say what would be done, change nothing\n"
	"      --wait=DURATION       wait up to DURATION for an active slot to be released\n"
	"      --json                JSON on stdout and JSON log lines on stderr\n"
	"  -q, --quiet               log warnings and errors only\n"
	"      --log-level=LEVEL     debug, info, warn or error (default info)\n"
	"  -h, --help                show this help and exit\n"
	"  -V, --version             show the version and exit\n"
	"\n"
	"Prints the confirmed position on stdout (nothing with --dry-run).\n"
	"Exit status: 0 confirmed or already there, 1 runtime error or slot active,\n"
	"2 usage or invalid checkpoint file, 3 source prerequisite missing, 4 slot missing\n"
	"or invalidated, identity mismatch, or the slot already past the position,\n"
	"5 position past the source's flushed WAL.\n";

struct opts {
	const char *conninfo;
	const char *slot;
	const char *lsn_arg;
	const char *from;
	bool dry_run;
	bool json;
	uint64_t wait_ms;
};

#define usage_error(...) cli_usage_error(synopsis, __VA_ARGS__)

static void
parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_WAIT = 256 };
	static const struct option longopts[] = {
		CLI_DBNAME_LONGOPT,
		{"slot", required_argument, NULL, 's'},
		{"lsn", required_argument, NULL, 'l'},
		{"from", required_argument, NULL, 'f'},
		{"dry-run", no_argument, NULL, 'n'},
		{"wait", required_argument, NULL, OPT_WAIT},
		CLI_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct cli cli = {.prog = "pg-ack", .synopsis = synopsis, .help = options_help};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:s:l:f:n" CLI_COMMON_SHORT, longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 's': o->slot = cli_slot(&cli, optarg); break;
			case 'l': o->lsn_arg = optarg; break;
			case 'f': o->from = optarg; break;
			case 'n': o->dry_run = true; break;
			case OPT_WAIT:
				o->wait_ms = cli_duration(&cli, "--wait", optarg, 0);
				break;
			default: cli_common(&cli, c, argv); break;
		}
	}
	o->conninfo = cli.conninfo;
	o->json = cli.json;
	if (optind < argc)
		usage_error("unexpected argument \"%s\"", argv[optind]);
	if (o->slot == NULL)
		usage_error("missing --slot NAME");
	if ((o->lsn_arg == NULL) == (o->from == NULL))
		usage_error("give exactly one of --lsn LSN and --from CHECKPOINT_FILE");
}


/* The position to confirm, and what the checkpoint file says it belongs to. */
static lsn_t
target_position(const struct opts *o, struct checkpoint *cp)
{
	char err[1024];

	memset(cp, 0, sizeof(*cp));
	if (o->lsn_arg)
	{
		if (!lsn_parse(o->lsn_arg, &cp->lsn))
			usage_error("invalid --lsn \"%s\": expected an LSN like 0/1A2B3C4", o->lsn_arg);
		return cp->lsn;
	}
	switch (checkpoint_read(o->from, cp, err, sizeof(err)))
	{
		case CP_OK:
			break;
		case CP_MISSING:
			log_fatal(EXIT_USAGE, "checkpoint file \"%s\" does not exist", o->from);
		default:
			log_fatal(EXIT_USAGE, "%s", err);
	}
	if (cp->slot[0] && strcmp(cp->slot, o->slot) != 0)
		log_fatal(EXIT_CONTINUITY, "checkpoint file \"%s\" records slot \"%s\", not \"%s\": "
				  "it belongs to another replication", o->from, cp->slot, o->slot);
	return cp->lsn;
}

/* Which server is this (lineage.h): a checkpoint file that names a source
 * system must name this one, and its position must lie in this server's
 * history. Nothing is confirmed to another server. */
static void
other_server(const struct opts *o, const char *why)
{
	log_fatal(EXIT_CONTINUITY, "checkpoint file \"%s\": %s; nothing was confirmed to it: resync required, "
			  "unless the job's own server answers again", o->from, why);
}

static void
source_identity(PGconn *conn, const struct opts *o, const struct checkpoint *cp, struct sysident *id)
{
	struct pgerr err;
	PGresult *r;
	char why[512];

	memset(id, 0, sizeof(*id));
	if (cp->sysid[0] == '\0')
		return;
	r = conn_query_one(conn, "SELECT system_identifier::text FROM pg_catalog.pg_control_system()",
					   0, NULL, 1, &err);
	if (r == NULL)
		pgerr_fatal(EXIT_RUNTIME, "cannot read the source's system identifier", &err);
	snprintf(id->sysid, sizeof(id->sysid), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	/* The timeline is not read on this connection: not compared. */
	if (!identity_same(cp->sysid, id->sysid, why, sizeof(why)))
		other_server(o, why);
}

/*
 * A checkpoint file that names its timeline is confirmed only on a source
 * whose history holds it (lineage_judge(), the rule pg-walcat streams by):
 * a position of another branch would make the slot skip what it never sent.
 */
static void
check_lineage(const struct opts *o, const struct checkpoint *cp)
{
	struct sysident id;
	struct lineage hist;
	struct pgerr err;
	char msg[512];
	PGconn *repl;

	if (cp->timeline == 0)
		return;
	repl = source_connect(o->conninfo, SESSION_REPLICATION);
	if (!conn_identify_system(repl, &id, &err))
		pgerr_fatal(EXIT_RUNTIME, "cannot identify the source system", &err);
	if (!lineage_read(repl, id.timeline, &hist, &err))
		pgerr_fatal(EXIT_RUNTIME, "cannot read the source's timeline history", &err);
	PQfinish(repl);
	switch (lineage_judge(cp->timeline, cp->lsn, &hist, msg, sizeof(msg)))
	{
		case LINEAGE_SAME:
		case LINEAGE_FOLLOWS:
			return;
		default:
			log_fatal(EXIT_CONTINUITY, "checkpoint file \"%s\": %s: nothing confirmed, resync required", o->from, msg);
	}
}

/* Read the slot, waiting up to --wait for its consumer to let it go. */
static void
read_slot(PGconn *conn, const struct opts *o, struct slotinfo *s)
{
	uint64_t deadline = now_ms() + o->wait_ms;
	struct pgerr err;
	char what[128];

	for (;;)
	{
		enum slot_lookup st = slotinfo_read(conn, o->slot, s, &err);

		if (st == SLOT_ERROR)
		{
			snprintf(what, sizeof(what), "cannot read replication slot \"%s\"", o->slot);
			pgerr_fatal(EXIT_RUNTIME, what, &err);
		}
		if (st == SLOT_MISSING)
			log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" does not exist", o->slot);
		if (!s->active || now_ms() >= deadline || sig_stop_requested())
			return;
		struct pollfd p = {sig_fd(), POLLIN, 0};

		poll(&p, 1, 100);
	}
}

static void
print_result(const struct opts *o, lsn_t before, lsn_t after)
{
	struct buf b = BUF_INIT;
	char l1[LSN_BUFSZ], l2[LSN_BUFSZ];

	if (o->json)
	{
		buf_puts(&b, "{\"slot\":");
		buf_json_string(&b, o->slot);
		buf_printf(&b, ",\"previous_lsn\":\"%s\",\"confirmed_lsn\":\"%s\"}\n",
				   lsn_format(before, l1), lsn_format(after, l2));
	}
	else
		buf_printf(&b, "%s\n", lsn_format(after, l2));
	if (write_all(STDOUT_FILENO, b.data, b.len) != 0 && errno != EPIPE)
		log_fatal(EXIT_RUNTIME, "cannot write to stdout: %s", strerror(errno));
	buf_free(&b);
}

static void
say_decoding(void *arg)
{
	log_info("still advancing replication slot \"%s\": the source decodes the WAL up to the position",
			 (const char *) arg);
}

/* pg_replication_slot_advance(); returns the position the server reports. */
static lsn_t
advance(PGconn *conn, const char *slot, lsn_t target)
{
	char l[LSN_BUFSZ], what[160];
	const char *params[2] = {slot, lsn_format(target, l)};
	struct pgerr err;
	bool interrupted = false;
	PGresult *res;
	lsn_t got;

	if (!PQsendQueryParams(conn, "SELECT end_lsn FROM pg_catalog.pg_replication_slot_advance($1, $2::pg_lsn)",
						   2, NULL, params, NULL, NULL, 0))
		res = NULL;
	else
		res = pgwait_result(conn, 5000, say_decoding, (void *) slot, &interrupted);
	if (res == NULL && interrupted)
		log_fatal(EXIT_RUNTIME, "interrupted: replication slot \"%s\" was not moved", slot);
	snprintf(what, sizeof(what), "cannot confirm %s on replication slot \"%s\"", l, slot);
	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgerr_set(&err, conn, res);
		PQclear(res);
		/* 55006: a consumer took the slot since we looked; the message names its PID. */
		pgerr_fatal(EXIT_RUNTIME, what, &err);
	}
	if (PQntuples(res) != 1 || PQnfields(res) != 1 || !lsn_parse(PQgetvalue(res, 0, 0), &got))
		log_fatal(EXIT_RUNTIME, "%s: unexpected reply: got %d rows and %d fields, expected one LSN",
				  what, PQntuples(res), PQnfields(res));
	PQclear(res);
	return got;
}

int
main(int argc, char **argv)
{
	struct opts o = {0};
	struct checkpoint cp;
	struct slotinfo s;
	struct sysident id;
	struct pgerr err;
	char why[128], msg[512], l1[LSN_BUFSZ], l2[LSN_BUFSZ], l3[LSN_BUFSZ];
	PGconn *conn;
	lsn_t target, got;
	int rc;

	log_init(argv[0]);
	parse_args(argc, argv, &o);
	sig_setup();
	target = target_position(&o, &cp);

	conn = source_connect(o.conninfo, SESSION_SQL);
	rc = slot_preflight(conn, false, &err);
	if (rc == EXIT_PREFLIGHT)
		log_fatal(rc, "%s", err.msg);
	if (rc != EXIT_DONE)
		pgerr_fatal(rc, "cannot check the source", &err);
	source_identity(conn, &o, &cp, &id);
	check_lineage(&o, &cp);

	read_slot(conn, &o, &s);
	if (o.from)
	{
		struct own_server job = {.sysid = cp.sysid, .taken = target};

		if (!own_server_holds(&job, &id, &s, msg, sizeof(msg)))
			other_server(&o, msg);
	}
	if (strcmp(s.slot_type, "logical") != 0)
		log_fatal(EXIT_USAGE, "replication slot \"%s\" is a %s slot: pg-ack confirms on logical slots only",
				  o.slot, s.slot_type);
	if (strcmp(s.database, PQdb(conn)) != 0)
		log_fatal(EXIT_USAGE, "replication slot \"%s\" belongs to database \"%s\": connect to it, not to \"%s\"",
				  o.slot, s.database, PQdb(conn));
	if (slotinfo_invalidated(&s, why, sizeof(why)))
		log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" is invalidated (%s): resync required", o.slot, why);
	if (s.active)
		log_fatal(EXIT_RUNTIME, "replication slot \"%s\" is active for PID %d: a consumer streams from it and "
				  "confirms on its own", o.slot, s.active_pid);

	lsn_format(target, l1);
	lsn_format(s.confirmed_flush_lsn, l2);
	/*
	 * The slot will never send again what commits below its confirmed
	 * position: if that is past ours, what lies between is lost downstream.
	 */
	if (target < s.confirmed_flush_lsn)
		log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" has already confirmed %s, past %s: the transactions "
				  "between them will not be sent again (resync required)", o.slot, l2, l1);
	if (target == s.confirmed_flush_lsn)
	{
		PQfinish(conn);
		log_info("replication slot \"%s\" has already confirmed %s: nothing to do", o.slot, l1);
		if (!o.dry_run)
			print_result(&o, target, target);
		return EXIT_DONE;
	}
	if (!slotinfo_position_possible(&s, target, msg, sizeof(msg)))
		log_fatal(EXIT_UNSUPPORTED, "%s", msg);
	if (o.dry_run)
	{
		PQfinish(conn);
		log_info("would confirm %s -> %s on replication slot \"%s\" (dry run: nothing changed)", l2, l1, o.slot);
		return EXIT_DONE;
	}
	got = advance(conn, o.slot, target);
	if (got != target)
		log_fatal(EXIT_RUNTIME, "the source moved replication slot \"%s\" to %s instead of %s",
				  o.slot, lsn_format(got, l3), l1);
	PQfinish(conn);
	log_info("confirmed %s -> %s on replication slot \"%s\"", l2, l1, o.slot);
	print_result(&o, s.confirmed_flush_lsn, target);
	return EXIT_DONE;
}
