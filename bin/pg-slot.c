/*
 * pg-slot: create, drop and show a logical replication slot (pgoutput) on
 * the source. `create --export-snapshot` prints the consistent point and the
 * snapshot name, then keeps the exporting connection idle until its stdin
 * closes or it is told to stop: the calling shell holds the snapshot exactly
 * as long as it keeps that pipe open. `lineage` tells whether the source is a
 * job's own server, by the rule pg-walcat follows (lineage.h), for pgsync.
 */
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
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
	"usage: pg-slot create --slot NAME [-d CONNINFO] [--if-not-exists] [--failover|--no-failover]\n"
	"                      [--export-snapshot [--hold-timeout DURATION] [--temporary]] [--json]\n"
	"       pg-slot alter --slot NAME --failover|--no-failover [-d CONNINFO] [--wait DURATION]\n"
	"       pg-slot drop --slot NAME [-d CONNINFO] [--if-exists] [--wait DURATION] [--json]\n"
	"       pg-slot show --slot NAME [-d CONNINFO] [--json]\n"
	"       pg-slot lineage --slot NAME [-d CONNINFO] [--sysid ID] [--timeline N]\n"
	"                       [--created LSN] [--taken LSN] [--restart-floor LSN]\n";

static const char options_help[] =
	"\n"
	"Create, alter, drop or show a logical replication slot (plugin pgoutput) on the source;\n"
	"lineage: is the source a job's own server, with the job's history?\n"
	"\n"
	"Options:\n"
	"  -d, --dbname=CONNINFO     source connection string or URL (default: libpq environment)\n"
	"  -s, --slot=NAME           slot name: 1-63 of a-z, 0-9 and _\n"
	"      --if-not-exists       create: an existing pgoutput slot is reported, not an error\n"
	"      --export-snapshot     create: export the slot's snapshot and hold it until stdin\n"
	"                            reaches EOF or SIGTERM/SIGINT arrives\n"
	"      --hold-timeout=DURATION  create: give the snapshot up after DURATION (exit 1)\n"
	"      --temporary           create: a temporary slot, gone when the hold ends (a\n"
	"                            consistent point and snapshot, no WAL kept after)\n"
	"      --failover            create, alter: a failover slot, synchronized to standbys\n"
	"                            that have sync_replication_slots on (PostgreSQL 17+, on\n"
	"                            a primary); with --if-not-exists an existing slot is\n"
	"                            altered to match\n"
	"      --no-failover         create, alter: a slot that is not synchronized\n"
	"      --if-exists           drop: a missing slot is not an error\n"
	"      --wait=DURATION       drop, alter: wait up to DURATION for an active slot to be\n"
	"                            released\n"
	"      --sysid=ID            lineage: the system identifier the job recorded\n"
	"      --timeline=N          lineage: the timeline the job recorded\n"
	"      --created=LSN         lineage: where the job's slot was created\n"
	"      --taken=LSN           lineage: the most the job took from the source\n"
	"      --restart-floor=LSN   lineage: the highest restart_lsn the job saw on its slot\n"
	"      --json                JSON on stdout (create, show) and JSON log lines on stderr\n"
	"  -q, --quiet               log warnings and errors only\n"
	"      --log-level=LEVEL     debug, info, warn or error (default info)\n"
	"  -h, --help                show this help and exit\n"
	"  -V, --version             show the version and exit\n"
	"\n"
	"create prints SLOT<TAB>CONSISTENT_LSN<TAB>SNAPSHOT_NAME (\"-\" without a snapshot).\n"
	"lineage prints the source's sysid and timeline and, when the slot exists, show's\n"
	"lines, and exits 4 when the source is not the job's server with the job's history.\n"
	"Exit status: 0 done, 1 runtime error, 2 usage, 3 source prerequisite missing,\n"
	"4 slot missing or invalidated, or (lineage) another server than the job's.\n";

enum cmd { CMD_NONE, CMD_CREATE, CMD_ALTER, CMD_DROP, CMD_SHOW, CMD_LINEAGE };

/* --failover and --no-failover; without either the server's default (off). */
enum failover { FO_DEFAULT, FO_ON, FO_OFF };

struct opts {
	enum cmd cmd;
	const char *conninfo;
	const char *slot;
	bool if_not_exists;
	bool if_exists;
	bool export_snapshot;
	bool temporary;
	bool json;
	enum failover failover;
	uint64_t hold_timeout_ms;	/* 0: hold until EOF or a signal */
	uint64_t wait_ms;
	bool have_lineage;			/* a lineage option was given */
	const char *sysid;			/* lineage: what the job recorded */
	uint32_t timeline;
	lsn_t created, taken, restart_floor;
};

#define usage_error(...) cli_usage_error(synopsis, __VA_ARGS__)

static void
parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_IF_NOT_EXISTS = 256, OPT_IF_EXISTS, OPT_EXPORT, OPT_HOLD, OPT_WAIT, OPT_TEMPORARY,
		OPT_FAILOVER, OPT_NO_FAILOVER, OPT_SYSID, OPT_TIMELINE, OPT_CREATED, OPT_TAKEN, OPT_RESTART_FLOOR };
	static const struct option longopts[] = {
		CLI_DBNAME_LONGOPT,
		{"slot", required_argument, NULL, 's'},
		{"if-not-exists", no_argument, NULL, OPT_IF_NOT_EXISTS},
		{"if-exists", no_argument, NULL, OPT_IF_EXISTS},
		{"export-snapshot", no_argument, NULL, OPT_EXPORT},
		{"temporary", no_argument, NULL, OPT_TEMPORARY},
		{"hold-timeout", required_argument, NULL, OPT_HOLD},
		{"wait", required_argument, NULL, OPT_WAIT},
		{"failover", no_argument, NULL, OPT_FAILOVER},
		{"no-failover", no_argument, NULL, OPT_NO_FAILOVER},
		{"sysid", required_argument, NULL, OPT_SYSID},
		{"timeline", required_argument, NULL, OPT_TIMELINE},
		{"created", required_argument, NULL, OPT_CREATED},
		{"taken", required_argument, NULL, OPT_TAKEN},
		{"restart-floor", required_argument, NULL, OPT_RESTART_FLOOR},
		CLI_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	bool have_hold = false, have_wait = false;
	struct cli cli = {.prog = "pg-slot", .synopsis = synopsis, .help = options_help};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:s:" CLI_COMMON_SHORT, longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 's': o->slot = cli_slot(&cli, optarg); break;
			case OPT_IF_NOT_EXISTS: o->if_not_exists = true; break;
			case OPT_IF_EXISTS: o->if_exists = true; break;
			case OPT_EXPORT: o->export_snapshot = true; break;
			case OPT_TEMPORARY: o->temporary = true; break;
			case OPT_FAILOVER:
			case OPT_NO_FAILOVER:
				if (o->failover != FO_DEFAULT)
					usage_error("give at most one of --failover and --no-failover");
				o->failover = c == OPT_FAILOVER ? FO_ON : FO_OFF;
				break;
			case OPT_HOLD:
				o->hold_timeout_ms = cli_duration(&cli, "--hold-timeout", optarg, 1);
				have_hold = true;
				break;
			case OPT_WAIT:
				o->wait_ms = cli_duration(&cli, "--wait", optarg, 0);
				have_wait = true;
				break;
			case OPT_SYSID:
				if (optarg[0] == '\0' || strlen(optarg) >= 24 || strspn(optarg, "0123456789") != strlen(optarg))
					usage_error("invalid --sysid \"%s\": expected a system identifier (digits)", optarg);
				o->sysid = optarg;
				o->have_lineage = true;
				break;
			case OPT_TIMELINE:
				o->timeline = (uint32_t) cli_int(&cli, "--timeline", optarg, 1, UINT32_MAX);
				o->have_lineage = true;
				break;
			case OPT_CREATED:
			case OPT_TAKEN:
			case OPT_RESTART_FLOOR:
				{
					lsn_t *to = c == OPT_CREATED ? &o->created : c == OPT_TAKEN ? &o->taken : &o->restart_floor;

					if (!lsn_parse(optarg, to))
						usage_error("invalid --%s \"%s\": expected an LSN like 0/1A2B3C4",
									c == OPT_CREATED ? "created" : c == OPT_TAKEN ? "taken" : "restart-floor", optarg);
					o->have_lineage = true;
				}
				break;
			default: cli_common(&cli, c, argv); break;
		}
	}
	o->conninfo = cli.conninfo;
	o->json = cli.json;
	if (optind >= argc)
		usage_error("missing command: create, alter, drop, show or lineage");
	if (strcmp(argv[optind], "create") == 0)
		o->cmd = CMD_CREATE;
	else if (strcmp(argv[optind], "alter") == 0)
		o->cmd = CMD_ALTER;
	else if (strcmp(argv[optind], "drop") == 0)
		o->cmd = CMD_DROP;
	else if (strcmp(argv[optind], "show") == 0)
		o->cmd = CMD_SHOW;
	else if (strcmp(argv[optind], "lineage") == 0)
		o->cmd = CMD_LINEAGE;
	else
		usage_error("unknown command \"%s\": expected create, alter, drop, show or lineage", argv[optind]);
	if (optind + 1 < argc)
		usage_error("unexpected argument \"%s\"", argv[optind + 1]);
	if (o->slot == NULL)
		usage_error("%s needs --slot NAME", argv[optind]);
	if (o->cmd != CMD_CREATE && (o->if_not_exists || o->export_snapshot || have_hold))
		usage_error("--if-not-exists, --export-snapshot and --hold-timeout apply to create only");
	if (have_hold && !o->export_snapshot)
		usage_error("--hold-timeout needs --export-snapshot");
	/* Without the hold a temporary slot would be gone before anyone used it. */
	if (o->temporary && (!o->export_snapshot || o->if_not_exists))
		usage_error("--temporary needs --export-snapshot and cannot take --if-not-exists");
	if (o->cmd != CMD_DROP && o->if_exists)
		usage_error("--if-exists applies to drop only");
	if (o->cmd != CMD_DROP && o->cmd != CMD_ALTER && have_wait)
		usage_error("--wait applies to drop and alter only");
	if (o->failover != FO_DEFAULT && o->cmd != CMD_CREATE && o->cmd != CMD_ALTER)
		usage_error("--failover and --no-failover apply to create and alter only");
	if (o->cmd == CMD_ALTER && o->failover == FO_DEFAULT)
		usage_error("alter needs --failover or --no-failover");
	/* The server keeps a temporary slot nowhere but here. */
	if (o->temporary && o->failover == FO_ON)
		usage_error("--temporary cannot take --failover: a temporary slot is never synchronized");
	if (o->cmd != CMD_LINEAGE && o->have_lineage)
		usage_error("--sysid, --timeline, --created, --taken and --restart-floor apply to lineage only");
	if (o->cmd == CMD_LINEAGE && o->json)
		usage_error("lineage prints text only");
}



static void
preflight(PGconn *conn, bool need_logical)
{
	struct pgerr err;
	int rc = slot_preflight(conn, need_logical, &err);

	if (rc == EXIT_PREFLIGHT)
		log_fatal(rc, "%s", err.msg);
	if (rc != EXIT_DONE)
		pgerr_fatal(rc, "cannot check the source", &err);
}

static enum slot_lookup
read_slot(PGconn *conn, const char *slot, struct slotinfo *s)
{
	struct pgerr err;
	enum slot_lookup st = slotinfo_read(conn, slot, s, &err);
	char what[128];

	if (st == SLOT_ERROR)
	{
		snprintf(what, sizeof(what), "cannot read replication slot \"%s\"", slot);
		pgerr_fatal(EXIT_RUNTIME, what, &err);
	}
	return st;
}

/* Write all of b to stdout; false when the reader has gone (EPIPE). */
static bool
emit_stdout(struct buf *b)
{
	if (write_all(STDOUT_FILENO, b->data, b->len) == 0)
		return true;
	if (errno == EPIPE)
		return false;
	log_fatal(EXIT_RUNTIME, "cannot write to stdout: %s", strerror(errno));
}

static bool
print_created(const struct opts *o, const char *slot, lsn_t lsn, const char *snapshot)
{
	struct buf b = BUF_INIT;
	char l[LSN_BUFSZ];
	bool ok;

	lsn_format(lsn, l);
	if (o->json)
	{
		buf_puts(&b, "{\"slot\":");
		buf_json_string(&b, slot);
		buf_puts(&b, ",\"consistent_lsn\":");
		buf_json_string(&b, l);
		buf_puts(&b, ",\"snapshot\":");
		if (snapshot)
			buf_json_string(&b, snapshot);
		else
			buf_puts(&b, "null");
		buf_puts(&b, "}\n");
	}
	else
		buf_printf(&b, "%s\t%s\t%s\n", slot, l, snapshot ? snapshot : "-");
	ok = emit_stdout(&b);
	buf_free(&b);
	return ok;
}

/*
 * A failover slot needs PostgreSQL 17 (the FAILOVER option) and a primary:
 * a standby's slots are the synchronized copies, never failover slots.
 * --no-failover asks for what every slot before 17 is.
 */
static void
failover_possible(PGconn *conn, const struct opts *o)
{
	struct pgerr err;
	PGresult *r;
	bool standby;

	if (o->failover != FO_ON)
		return;
	if (PQserverVersion(conn) < 170000)
		log_fatal(EXIT_PREFLIGHT, "a failover slot needs PostgreSQL 17 or later, and the source runs %d: "
				  "leave out --failover", PQserverVersion(conn) / 10000);
	if ((r = conn_query_one(conn, "SELECT pg_catalog.pg_is_in_recovery()", 0, NULL, 1, &err)) == NULL)
		pgerr_fatal(EXIT_RUNTIME, "cannot ask the source whether it is in recovery", &err);
	standby = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	if (standby)
		log_fatal(EXIT_PREFLIGHT, "the source is a standby (in recovery): a failover slot is created on the "
				  "primary and synchronized to the standbys; connect to the primary");
}

/* ALTER_REPLICATION_SLOT ... (FAILOVER): the slot must be idle. */
static void
set_failover(const struct opts *o, const char *slot, bool on)
{
	PGconn *repl = source_connect(o->conninfo, SESSION_REPLICATION);
	char sql[128], what[128];
	struct pgerr err;
	PGresult *res;

	snprintf(sql, sizeof(sql), "ALTER_REPLICATION_SLOT %s ( FAILOVER %s )", slot, on ? "true" : "false");
	res = PQexec(repl, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pgerr_set(&err, repl, res);
		PQclear(res);
		if (strcmp(err.sqlstate, "55006") == 0)
			log_fatal(EXIT_RUNTIME, "cannot alter replication slot \"%s\": %s: stop its consumer (pgsync run, "
					  "pg-walcat) first, or give --wait", slot, err.msg);
		snprintf(what, sizeof(what), "cannot alter replication slot \"%s\"", slot);
		pgerr_fatal(EXIT_RUNTIME, what, &err);
	}
	PQclear(res);
	PQfinish(repl);
	log_info("replication slot \"%s\" is %s", slot, on ? "a failover slot now" : "no failover slot any more");
}

/* --if-not-exists found the slot: report it if it is a usable pgoutput slot. */
static int
report_existing(const struct opts *o, PGconn *conn, const struct slotinfo *s)
{
	char why[128];

	if (o->export_snapshot)
		log_fatal(EXIT_RUNTIME, "replication slot \"%s\" already exists: a snapshot can be exported only "
				  "when the slot is created (drop it, or leave out --export-snapshot)", s->name);
	if (strcmp(s->slot_type, "logical") != 0)
		log_fatal(EXIT_PREFLIGHT, "replication slot \"%s\" already exists and is a %s slot, not a logical one",
				  s->name, s->slot_type);
	if (strcmp(s->plugin, "pgoutput") != 0)
		log_fatal(EXIT_PREFLIGHT, "replication slot \"%s\" already exists and uses plugin \"%s\", not pgoutput",
				  s->name, s->plugin);
	if (strcmp(s->database, PQdb(conn)) != 0)
		log_fatal(EXIT_PREFLIGHT, "replication slot \"%s\" already exists in database \"%s\", not \"%s\"",
				  s->name, s->database, PQdb(conn));
	if (slotinfo_invalidated(s, why, sizeof(why)))
		log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" already exists but is invalidated (%s): "
				  "drop it and resync", s->name, why);
	if (o->failover != FO_DEFAULT && s->has_failover && s->failover != (o->failover == FO_ON))
	{
		if (s->active)
			log_fatal(EXIT_RUNTIME, "replication slot \"%s\" is active for PID %d: its failover setting "
					  "can change only while no consumer holds it", s->name, s->active_pid);
		set_failover(o, s->name, o->failover == FO_ON);
	}
	PQfinish(conn);
	log_info("replication slot \"%s\" already exists", s->name);
	print_created(o, s->name, s->confirmed_flush_lsn, NULL);
	return EXIT_DONE;
}

static void
say_waiting(void *slot)
{
	log_info("waiting for transactions running on the source to finish before "
			 "replication slot \"%s\" becomes consistent", (const char *) slot);
}

/*
 * The server makes the slot consistent only once the transactions running on
 * the source have ended, which takes as long as the longest of them: wait
 * for it without shutting out SIGINT/SIGTERM.
 */
static PGresult *
create_slot_query(PGconn *repl, const char *sql, const char *slot)
{
	bool interrupted;
	PGresult *res;

	if (!PQsendQuery(repl, sql))
	{
		struct pgerr err;

		pgerr_set(&err, repl, NULL);
		log_fatal(EXIT_RUNTIME, "cannot create replication slot \"%s\": %s", slot, err.msg);
	}
	res = pgwait_result(repl, 5000, say_waiting, (void *) slot, &interrupted);
	if (interrupted)
		log_fatal(EXIT_RUNTIME, "interrupted while creating replication slot \"%s\": no slot was created",
				  slot);
	return res;
}

/* Hold the exported snapshot until stdin ends, a signal, or the timeout. */
static int
hold_snapshot(const struct opts *o, PGconn *repl, const char *snapshot)
{
	uint64_t deadline = o->hold_timeout_ms ? now_ms() + o->hold_timeout_ms : 0;
	char junk[4096];

	log_info("holding snapshot %s until stdin is closed", snapshot);
	for (;;)
	{
		struct pollfd p[3] = {
			{STDIN_FILENO, POLLIN, 0}, {sig_fd(), POLLIN, 0}, {PQsocket(repl), POLLIN, 0},
		};
		int timeout = -1, n;

		if (deadline)
		{
			uint64_t now = now_ms();

			if (now >= deadline)
				log_fatal(EXIT_RUNTIME, "held snapshot %s for the whole --hold-timeout: releasing it", snapshot);
			timeout = (int) (deadline - now > 60000 ? 60000 : deadline - now);
		}
		n = poll(p, 3, timeout);
		if (n < 0 && errno != EINTR)
			log_fatal(EXIT_RUNTIME, "poll failed: %s", strerror(errno));
		if (sig_stop_requested())
		{
			log_info("stop signal received: releasing snapshot %s", snapshot);
			return EXIT_DONE;
		}
		if (n <= 0)
			continue;
		if (p[2].revents)
		{
			if (!PQconsumeInput(repl) || PQstatus(repl) != CONNECTION_OK)
			{
				struct pgerr err;

				pgerr_set(&err, repl, NULL);
				log_fatal(EXIT_RUNTIME, "lost the connection to the source while holding snapshot %s: %s",
						  snapshot, err.msg);
			}
		}
		if (p[0].revents & POLLNVAL)
			return EXIT_DONE;
		if (p[0].revents)
		{
			ssize_t r = read(STDIN_FILENO, junk, sizeof(junk));

			if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			{
				log_info("stdin closed: releasing snapshot %s", snapshot);
				return EXIT_DONE;
			}
		}
	}
}

static int
cmd_create(const struct opts *o)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL), *repl;
	struct slotinfo s;
	struct pgerr err;
	char sql[256], l[LSN_BUFSZ];
	PGresult *res;
	lsn_t lsn;
	const char *snapshot = NULL;
	int rc = EXIT_DONE;

	preflight(conn, true);
	failover_possible(conn, o);
	if (o->if_not_exists && read_slot(conn, o->slot, &s) == SLOT_FOUND)
		return report_existing(o, conn, &s);

	repl = source_connect(o->conninfo, SESSION_REPLICATION);
	/*
	 * 15+ take the option list; 14 knows only the keywords, which 15-18
	 * still accept but document as the old syntax.
	 */
	if (PQserverVersion(repl) >= 150000)
		snprintf(sql, sizeof(sql), "CREATE_REPLICATION_SLOT %s%s LOGICAL pgoutput (SNAPSHOT '%s'%s)",
				 o->slot, o->temporary ? " TEMPORARY" : "", o->export_snapshot ? "export" : "nothing",
				 o->failover == FO_ON ? ", FAILOVER true" : "");
	else
		snprintf(sql, sizeof(sql), "CREATE_REPLICATION_SLOT %s%s LOGICAL pgoutput %s",
				 o->slot, o->temporary ? " TEMPORARY" : "", o->export_snapshot ? "EXPORT_SNAPSHOT" : "NOEXPORT_SNAPSHOT");
	res = create_slot_query(repl, sql, o->slot);
	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgerr_set(&err, repl, res);
		PQclear(res);
		if (strcmp(err.sqlstate, "42710") == 0 && o->if_not_exists &&
			read_slot(conn, o->slot, &s) == SLOT_FOUND)
			return report_existing(o, conn, &s);
		snprintf(sql, sizeof(sql), "cannot create replication slot \"%s\"", o->slot);
		pgerr_fatal(EXIT_RUNTIME, sql, &err);
	}
	if (PQntuples(res) != 1 || PQnfields(res) < 4 || !lsn_parse(PQgetvalue(res, 0, 1), &lsn))
		log_fatal(EXIT_RUNTIME, "unexpected reply creating replication slot \"%s\": got %d rows and %d fields, "
				  "expected 1 row with an LSN and 4 fields", o->slot, PQntuples(res), PQnfields(res));
	if (o->export_snapshot)
	{
		if (PQgetisnull(res, 0, 2) || PQgetvalue(res, 0, 2)[0] == '\0')
			log_fatal(EXIT_RUNTIME, "the source created replication slot \"%s\" but exported no snapshot", o->slot);
		snapshot = PQgetvalue(res, 0, 2);
	}
	PQfinish(conn);
	log_info("created %sreplication slot \"%s\" at %s%s%s", o->failover == FO_ON ? "failover " : "",
			 o->slot, lsn_format(lsn, l), snapshot ? " with snapshot " : "", snapshot ? snapshot : "");
	if (print_created(o, o->slot, lsn, snapshot) && snapshot)
	{
		/* Readers of our stdout see EOF now, while the snapshot stays held. */
		int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (devnull >= 0)
		{
			dup2(devnull, STDOUT_FILENO);
			close(devnull);
		}
		rc = hold_snapshot(o, repl, snapshot);
	}
	PQclear(res);
	PQfinish(repl);
	return rc;
}

/* Wait up to wait_ms for the slot to be released; returns the last reading. */
static enum slot_lookup
wait_inactive(PGconn *conn, const char *slot, uint64_t wait_ms, struct slotinfo *s)
{
	uint64_t deadline = now_ms() + wait_ms;
	enum slot_lookup st = read_slot(conn, slot, s);

	while (st == SLOT_FOUND && s->active && now_ms() < deadline && !sig_stop_requested())
	{
		struct pollfd p = {sig_fd(), POLLIN, 0};

		poll(&p, 1, 100);
		st = read_slot(conn, slot, s);
	}
	return st;
}

static int
cmd_alter(const struct opts *o)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL);
	struct slotinfo s;
	bool on = o->failover == FO_ON;
	enum slot_lookup st;

	preflight(conn, true);
	failover_possible(conn, o);
	st = wait_inactive(conn, o->slot, o->wait_ms, &s);
	if (st == SLOT_MISSING)
		log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" does not exist", o->slot);
	PQfinish(conn);
	/* Before 17 no slot is a failover slot: --no-failover holds already. */
	if (!s.has_failover || s.failover == on)
	{
		log_info("replication slot \"%s\" is %s already: nothing to do", o->slot,
				 on ? "a failover slot" : "no failover slot");
		return EXIT_DONE;
	}
	if (s.active)
		log_fatal(EXIT_RUNTIME, "replication slot \"%s\" is active for PID %d: its failover setting can "
				  "change only while no consumer holds it; stop the consumer first, or give --wait",
				  o->slot, s.active_pid);
	set_failover(o, o->slot, on);
	return EXIT_DONE;
}

static int
cmd_drop(const struct opts *o)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL);
	struct slotinfo s;
	struct pgerr err;
	const char *params[1] = {o->slot};
	enum slot_lookup st;

	preflight(conn, false);
	st = wait_inactive(conn, o->slot, o->wait_ms, &s);
	if (st == SLOT_FOUND && s.active)
		log_fatal(EXIT_RUNTIME, "replication slot \"%s\" is active for PID %d: stop its consumer first",
				  o->slot, s.active_pid);
	if (st == SLOT_FOUND &&
		!conn_command(conn, "SELECT pg_catalog.pg_drop_replication_slot($1)", 1, params, &err))
	{
		char what[128];

		if (strcmp(err.sqlstate, "42704") != 0)
		{
			snprintf(what, sizeof(what), "cannot drop replication slot \"%s\"", o->slot);
			pgerr_fatal(EXIT_RUNTIME, what, &err);
		}
		st = SLOT_MISSING;		/* dropped by someone else meanwhile */
	}
	PQfinish(conn);
	if (st == SLOT_MISSING)
	{
		if (!o->if_exists)
			log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" does not exist", o->slot);
		log_info("replication slot \"%s\" does not exist: nothing to drop", o->slot);
		return EXIT_DONE;
	}
	log_info("dropped replication slot \"%s\"", o->slot);
	return EXIT_DONE;
}

static int
cmd_show(const struct opts *o)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL);
	struct slotinfo s;
	struct buf b = BUF_INIT;
	char why[128];

	if (read_slot(conn, o->slot, &s) == SLOT_MISSING)
		log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" does not exist", o->slot);
	PQfinish(conn);
	if (o->json)
		slotinfo_format_json(&s, &b);
	else
		slotinfo_format_text(&s, &b);
	emit_stdout(&b);
	buf_free(&b);
	if (slotinfo_invalidated(&s, why, sizeof(why)))
		log_fatal(EXIT_CONTINUITY, "replication slot \"%s\" is invalidated (%s): resync required",
				  o->slot, why);
	return EXIT_DONE;
}

/*
 * Which server is this (lineage.h), for pgsync, which cannot link the rule:
 * the source's identity and the slot, then the verdict. A missing slot is
 * not this command's verdict: the slot lines are left out.
 */
static int
cmd_lineage(const struct opts *o)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL);
	PGconn *repl = source_connect(o->conninfo, SESSION_REPLICATION);
	struct own_server job = {o->sysid, o->timeline, o->created, o->taken, o->restart_floor};
	struct sysident id;
	struct slotinfo s;
	struct pgerr err;
	struct buf b = BUF_INIT;
	char why[512];
	bool found;

	if (!conn_identify_system(repl, &id, &err))
		pgerr_fatal(EXIT_RUNTIME, "cannot identify the source system", &err);
	/* Another timeline first, by pg-walcat's rule (lineage.h): a later one
	 * that holds what the job took is its history; an earlier one is not
	 * the job's primary (an old primary come back); another branch is
	 * continuity lost. */
	if (o->timeline != 0 && id.timeline != o->timeline && identity_same(o->sysid, id.sysid, why, sizeof(why)))
	{
		struct lineage hist;
		char judged[512];

		if (!lineage_read(repl, id.timeline, &hist, &err))
			pgerr_fatal(EXIT_RUNTIME, "cannot read the source's timeline history", &err);
		switch (lineage_judge(o->timeline, o->taken, &hist, judged, sizeof(judged)))
		{
			case LINEAGE_SAME:
			case LINEAGE_FOLLOWS:
				break;
			case LINEAGE_BEHIND:
				identity_other(why, sizeof(why), "system identifier %s on timeline %u, the job's is on timeline %u",
							   id.sysid, id.timeline, o->timeline);
				log_fatal(EXIT_CONTINUITY, "%s", why);
			case LINEAGE_DIVERGED:
				log_fatal(EXIT_CONTINUITY, "%s: resync required", judged);
		}
	}
	PQfinish(repl);
	found = read_slot(conn, o->slot, &s) == SLOT_FOUND;
	PQfinish(conn);
	buf_printf(&b, "sysid\t%s\ntimeline\t%u\n", id.sysid, id.timeline);
	if (found)
		slotinfo_format_text(&s, &b);
	emit_stdout(&b);
	buf_free(&b);
	if (!own_server_holds(&job, &id, found ? &s : NULL, why, sizeof(why)))
		log_fatal(EXIT_CONTINUITY, "%s", why);
	return EXIT_DONE;
}

int
main(int argc, char **argv)
{
	struct opts o = {0};

	log_init(argv[0]);
	parse_args(argc, argv, &o);
	sig_setup();
	switch (o.cmd)
	{
		case CMD_CREATE: return cmd_create(&o);
		case CMD_ALTER: return cmd_alter(&o);
		case CMD_DROP: return cmd_drop(&o);
		case CMD_SHOW: return cmd_show(&o);
		case CMD_LINEAGE: return cmd_lineage(&o);
		default: return EXIT_USAGE;
	}
}
