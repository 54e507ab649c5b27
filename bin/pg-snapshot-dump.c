/*
 * pg-snapshot-dump: the initial copy. Writes the tables of a publication (or
 * the --table arguments) as a snapshot section of the change stream, read
 * at one exported snapshot by several workers, large tables split into key
 * or block ranges. The snapshot is all-or-nothing: on any error, timeout or
 * signal the stream ends without SNAPSHOTDONE and the exit status is 1.
 */
#include "common.h"
#include "conn.h"
#include "cli.h"
#include "escape.h"
#include "log.h"
#include "lsn.h"
#include "out.h"
#include "publication.h"
#include "record.h"
#include "session.h"
#include "sig.h"
#include "slotinfo.h"
#include "snapplan.h"
#include "snapworker.h"
#include "srcstatus.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
	"usage: pg-snapshot-dump -d SOURCE (--snapshot NAME --position LSN [--slot NAME] | --own-snapshot)\n"
	"                        (--publication NAME[,NAME...] | --table SCHEMA.TABLE...) [--jobs N]\n"
	"                        [--split-rows N] [--split-by auto|key|ctid] [--frame-size SIZE]\n"
	"                        [--max-message-bytes SIZE] [--timeout DURATION]\n"
	"                        [--chunked [--done FILE] [--key-collations FILE] [--chunk-rows N]\n"
	"                        [--group-seconds N]]\n"
	"                        [--progress-file FILE] [--connection-file FILE]\n"
	"                        [-z|--zstd[=LEVEL]] [--json] [-q] [--log-level LEVEL]\n"
	"       pg-snapshot-dump -d SOURCE --publication NAME[,NAME...] --list-tables\n";

static const char options_help[] =
	"\n"
	"Copy tables at an exported snapshot as a pgsync change stream on stdout.\n"
	"\n"
	"Options:\n"
	"  -d, --dbname=CONNINFO       source connection string or URL (the role needs REPLICATION)\n"
	"      --snapshot=NAME         import this exported snapshot (pg-slot create --export-snapshot)\n"
	"      --position=LSN          the snapshot's consistent point (required with --snapshot)\n"
	"      --slot=NAME             the slot the snapshot belongs to, for the header (default -)\n"
	"      --own-snapshot          export a snapshot and hold it while copying; its position is\n"
	"                              approximate (read right after the export), the slot is -\n"
	"  -P, --publication=NAMES     copy what these publications publish (comma-separated),\n"
	"                              as a subscription to them copies it: each table once,\n"
	"                              row filters OR-ed, the published columns\n"
	"      --list-tables           print what --publication resolves to, one table a line\n"
	"                              (schema, table, publications, row filter, columns, the\n"
	"                              generated ones among them; TAB-separated, columns\n"
	"                              comma-separated, in the stream's escaping) and copy nothing\n"
	"  -t, --table=SCHEMA.TABLE    copy this table (repeatable); partitions under the root's name\n"
	"  -j, --jobs=N                parallel source connections (1-256, default 4)\n"
	"      --split-rows=N          split tables estimated above N rows into ranges (default 1000000)\n"
	"      --split-by=HOW          auto (default: ctid on 14+, key before), key (key ranges,\n"
	"                              ctid only for keyless tables) or ctid (block ranges, 14+)\n"
	"      --frame-size=SIZE       largest frame (default 8MB); memory is about (jobs + 1) x SIZE\n"
	"      --max-message-bytes=SIZE  longest row (1kB-1GB, default 32MB): a frame grows for one row\n"
	"                              larger than --frame-size, one such frame at a time\n"
	"      --timeout=DURATION      abort the copy after DURATION (default: no limit)\n"
	"      --chunked               write a chunk section (CHUNKS): tables with a replica\n"
	"                              identity key of int, uuid, numeric, date, time, timestamp,\n"
	"                              bool, oid or bytea columns (and text, varchar or bpchar\n"
	"                              ones --key-collations allows) above --chunk-rows rows in\n"
	"                              key chunks,\n"
	"                              each recorded on the target with its rows; the others whole\n"
	"      --done=FILE             chunks already copied, one a line as CHUNK records without\n"
	"                              the record name: only the key ranges between them are copied\n"
	"      --key-collations=FILE   the target's collations that order text key columns as the\n"
	"                              source does (pgsync writes it): only those are cut by key\n"
	"      --chunk-rows=N          rows of a chunk at most, and the tables cut by key: those\n"
	"                              estimated above N rows (default 100000)\n"
	"      --group-seconds=N       start no chunk after N seconds, end the section there\n"
	"                              (default 300; 0: no limit)\n"
	"      --progress-file=FILE    rewrite FILE with JSON progress every second\n"
	"      --connection-file=FILE  keep the source connection's state in FILE, as\n"
	"                              pg-walcat does, for pg-apply's heartbeat\n"
	"  -z, --zstd[=LEVEL]          compress the output with zstd (default level 3; 1-19)\n"
	"      --json                  JSON log lines on stderr\n"
	"  -q, --quiet                 log warnings and errors only\n"
	"      --log-level=LEVEL       debug, info, warn or error (default info)\n"
	"  -h, --help                  show this help and exit\n"
	"  -V, --version               show the version and exit\n"
	"\n"
	"Exit status: 0 copied, 1 runtime error, timeout or signal (the copy is incomplete),\n"
	"2 usage, 3 publication or table missing on the source, publications PostgreSQL\n"
	"cannot combine (different column lists for one table), or role not allowed,\n"
	"5 --split-by ctid on a server older than 14, or a row longer than --max-message-bytes.\n";

struct opts {
	const char *conninfo;
	const char *snapshot;
	const char *slot;
	bool have_position;
	lsn_t position;
	bool own_snapshot;
	char *pubs_arg;
	const char *pubs[PUB_MAX];
	int npubs;
	bool list_tables;
	char **tables;
	int ntables;
	long jobs;
	uint64_t split_rows;
	enum snap_split split_by;
	uint64_t frame_size;
	uint64_t max_message;
	uint64_t timeout_ms;
	const char *timeout_arg;
	const char *progress_file;
	const char *conn_file;
	long zstd_level;
	bool json;
	bool chunked;
	const char *done_file;
	const char *keycoll_file;
	uint64_t chunk_rows;
	long group_seconds;
	bool chunk_opt;				/* --done, --chunk-rows or --group-seconds given */
};

#define usage_error(...) cli_usage_error(synopsis, __VA_ARGS__)

static void
parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_SNAPSHOT = 256, OPT_POSITION, OPT_SLOT, OPT_OWN, OPT_SPLIT, OPT_SPLIT_BY, OPT_FRAME,
		   OPT_MSG_BYTES, OPT_TIMEOUT, OPT_PROGRESS, OPT_CONNFILE, OPT_LIST,
		   OPT_CHUNKED, OPT_DONE, OPT_KEY_COLLATIONS, OPT_CHUNK_ROWS, OPT_GROUP_SECONDS };
	static const struct option longopts[] = {
		CLI_DBNAME_LONGOPT,
		{"snapshot", required_argument, NULL, OPT_SNAPSHOT},
		{"position", required_argument, NULL, OPT_POSITION},
		{"slot", required_argument, NULL, OPT_SLOT},
		{"own-snapshot", no_argument, NULL, OPT_OWN},
		{"publication", required_argument, NULL, 'P'},
		{"table", required_argument, NULL, 't'},
		{"list-tables", no_argument, NULL, OPT_LIST},
		{"jobs", required_argument, NULL, 'j'},
		{"split-rows", required_argument, NULL, OPT_SPLIT},
		{"split-by", required_argument, NULL, OPT_SPLIT_BY},
		{"frame-size", required_argument, NULL, OPT_FRAME},
		{"max-message-bytes", required_argument, NULL, OPT_MSG_BYTES},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"chunked", no_argument, NULL, OPT_CHUNKED},
		{"done", required_argument, NULL, OPT_DONE},
		{"key-collations", required_argument, NULL, OPT_KEY_COLLATIONS},
		{"chunk-rows", required_argument, NULL, OPT_CHUNK_ROWS},
		{"group-seconds", required_argument, NULL, OPT_GROUP_SECONDS},
		{"progress-file", required_argument, NULL, OPT_PROGRESS},
		{"connection-file", required_argument, NULL, OPT_CONNFILE},
		{"zstd", optional_argument, NULL, 'z'},
		CLI_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct cli cli = {.prog = "pg-snapshot-dump", .synopsis = synopsis, .help = options_help};
	int c;

	o->jobs = 4;
	o->split_rows = 1000000;
	o->frame_size = 8 * 1024 * 1024;
	o->max_message = CLI_MAX_MESSAGE_DEFAULT;
	o->chunk_rows = 100000;
	o->group_seconds = 300;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:P:t:j:z::" CLI_COMMON_SHORT, longopts, NULL)) != -1)
	{
		switch (c)
		{
			case OPT_SNAPSHOT:
				if (optarg[0] == '\0')
					usage_error("--snapshot needs a snapshot name");
				o->snapshot = optarg;
				break;
			case OPT_POSITION:
				if (!lsn_parse(optarg, &o->position))
					usage_error("invalid --position \"%s\": expected an LSN like 0/16B3748", optarg);
				o->have_position = true;
				break;
			case OPT_SLOT: o->slot = cli_slot(&cli, optarg); break;
			case OPT_OWN: o->own_snapshot = true; break;
			case 'P': o->pubs_arg = optarg; break;
			case OPT_LIST: o->list_tables = true; break;
			case 't':
				/* A first sanity check; the server parses the identifiers. */
				if (strchr(optarg, '.') == NULL)
					usage_error("invalid --table \"%s\": expected SCHEMA.TABLE", optarg);
				o->tables = xrealloc(o->tables, sizeof(char *) * (size_t) (o->ntables + 1));
				o->tables[o->ntables++] = optarg;
				break;
			case 'j': o->jobs = cli_jobs(&cli, optarg); break;
			case OPT_SPLIT:
				if (!parse_u64(optarg, &o->split_rows) || o->split_rows == 0)
					usage_error("invalid --split-rows \"%s\": expected a positive number of rows", optarg);
				break;
			case OPT_SPLIT_BY:
				if (strcmp(optarg, "auto") == 0)
					o->split_by = SPLIT_AUTO;
				else if (strcmp(optarg, "key") == 0)
					o->split_by = SPLIT_KEY;
				else if (strcmp(optarg, "ctid") == 0)
					o->split_by = SPLIT_CTID;
				else
					usage_error("invalid --split-by \"%s\": expected auto, key or ctid", optarg);
				break;
			case OPT_FRAME: o->frame_size = cli_size(&cli, "--frame-size", optarg, 4096, UINT64_C(1) << 30); break;
			case OPT_MSG_BYTES: o->max_message = cli_max_message(&cli, optarg); break;
			case OPT_TIMEOUT:
				o->timeout_ms = cli_duration(&cli, "--timeout", optarg, 0);
				o->timeout_arg = optarg;
				break;
			case OPT_CHUNKED: o->chunked = true; break;
			case OPT_DONE:
				o->done_file = optarg;
				o->chunk_opt = true;
				break;
			case OPT_KEY_COLLATIONS:
				o->keycoll_file = optarg;
				o->chunk_opt = true;
				break;
			case OPT_CHUNK_ROWS:
				if (!parse_u64(optarg, &o->chunk_rows) || o->chunk_rows == 0)
					usage_error("invalid --chunk-rows \"%s\": expected a positive number of rows", optarg);
				o->chunk_opt = true;
				break;
			case OPT_GROUP_SECONDS:
				o->group_seconds = cli_int(&cli, "--group-seconds", optarg, 0, 1000000000);
				o->chunk_opt = true;
				break;
			case OPT_PROGRESS: o->progress_file = optarg; break;
			case OPT_CONNFILE: o->conn_file = optarg; break;
			case 'z': o->zstd_level = cli_zstd_level(&cli, optarg); break;
			default: cli_common(&cli, c, argv); break;
		}
	}
	o->conninfo = cli.conninfo;
	o->json = cli.json;
	if (optind < argc)
		usage_error("unexpected argument \"%s\"", argv[optind]);
	if (o->pubs_arg)
		o->npubs = cli_publications(synopsis, o->pubs_arg, o->pubs, PUB_MAX);
	if (o->list_tables)
	{
		if (o->npubs == 0 || o->ntables || o->snapshot || o->own_snapshot)
			usage_error("--list-tables takes --publication and no --table, --snapshot or --own-snapshot");
		return;
	}
	if ((o->snapshot != NULL) == o->own_snapshot)
		usage_error("give exactly one of --snapshot NAME and --own-snapshot");
	if (o->snapshot && !o->have_position)
		usage_error("--snapshot needs --position LSN: the consistent point printed with the snapshot");
	if (o->own_snapshot && (o->have_position || o->slot))
		usage_error("--position and --slot describe an imported snapshot: not with --own-snapshot");
	if (o->chunk_opt && !o->chunked)
		usage_error("--done, --key-collations, --chunk-rows and --group-seconds are for --chunked");
	/* Chunks are filtered against the stream by their position: it must
	 * be exact, a slot's. */
	if (o->chunked && o->own_snapshot)
		usage_error("--chunked needs --snapshot and --position from a slot (pg-slot create --temporary --export-snapshot), not --own-snapshot");
	if ((o->npubs > 0) == (o->ntables > 0))
		usage_error("give exactly one of --publication NAME[,NAME...] and --table SCHEMA.TABLE");
}


/*
 * The source connection's state for --connection-file (see srcstatus.h).
 * The copy never reconnects: connected while the snapshot is being read,
 * disconnected before and after. Only the first write, which checks the
 * path, may fail the run.
 */
static void
report_connection(const struct opts *o, enum src_state state, bool first)
{
	struct src_status st = {state, 0};
	char err[512];

	if (o->conn_file && srcstatus_write(o->conn_file, &st, err, sizeof(err)) != 0)
	{
		if (first)
			usage_error("--connection-file: %s", err);
		log_warn("%s", err);
	}
}


/*
 * Open the session the plan is made in, inside the snapshot: either export
 * one (held until the end) or import the given one.
 */
static PGconn *
open_snapshot(struct opts *o, char **snapshot_name)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL);
	struct pgerr err;
	PGresult *res;

	/* The workers' settings (session_open): key boundaries are printed
	 * here, parsed there. */
	if (!conn_command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0, NULL, &err))
		pgerr_fatal(EXIT_RUNTIME, "cannot start the snapshot transaction", &err);
	if (o->own_snapshot)
	{
		res = conn_query_one(conn, "SELECT pg_catalog.pg_export_snapshot()", 0, NULL, 1, &err);
		if (res == NULL)
			pgerr_fatal(EXIT_RUNTIME, "cannot export a snapshot", &err);
		*snapshot_name = xstrdup(PQgetvalue(res, 0, 0));
		PQclear(res);
		/* Read after the export: approximate, see doc/snapshot.md. */
		res = conn_query_one(conn, "SELECT pg_catalog.pg_current_wal_lsn()", 0, NULL, 1, &err);
		if (res == NULL)
			pgerr_fatal(EXIT_RUNTIME, "cannot read the current WAL position", &err);
		if (!lsn_parse(PQgetvalue(res, 0, 0), &o->position))
			log_fatal(EXIT_RUNTIME, "cannot read the current WAL position: unexpected value");
		PQclear(res);
	}
	else
	{
		char *lit = PQescapeLiteral(conn, o->snapshot, strlen(o->snapshot));
		struct buf sql = BUF_INIT;

		buf_printf(&sql, "SET TRANSACTION SNAPSHOT %s", lit ? lit : "''");
		PQfreemem(lit);
		if (!conn_command(conn, buf_cstr(&sql), 0, NULL, &err))
		{
			char text[PGERR_TEXT_MAX];

			log_fatal(EXIT_RUNTIME, "cannot import snapshot \"%s\": %s: the session that exported it (pg-slot create --export-snapshot) must stay open until the copy has started",
					  o->snapshot, pgerr_text(&err, NULL, text, sizeof(text)));
		}
		buf_free(&sql);
		*snapshot_name = xstrdup(o->snapshot);
	}
	return conn;
}

/* "12.3 MB" */
static const char *
human_bytes(uint64_t b, char *out, size_t len)
{
	static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
	double v = (double) b;
	int u = 0;

	while (v >= 1024 && u < 4)
	{
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
	return out;
}

struct progress {
	const struct opts *o;
	const struct snap_plan *plan;
	struct snap_tstat *st;
	bool *logged;
	const char *snapshot;
	uint64_t start_ms;
	bool tty;
	bool tty_line;				/* a progress line is on the terminal now */
	uint64_t last_tty_ms;
	uint64_t last_file_ms;
	bool time_up;				/* the group's time is up */
};

static void
clear_tty(struct progress *p)
{
	if (p->tty_line)
	{
		fputs("\r\033[K", stderr);
		p->tty_line = false;
	}
}

static void
log_tables_done(struct progress *p)
{
	for (int i = 0; i < p->plan->ntables; i++)
	{
		const struct snap_table *t = &p->plan->tables[i];
		const struct snap_tstat *s = &p->st[i];
		char bytes[32], est[48] = "";

		if (!s->done || p->logged[i])
			continue;
		p->logged[i] = true;
		if (!log_enabled(LOG_INFO))
			continue;
		clear_tty(p);
		if (t->rows_estimate >= 0)
			snprintf(est, sizeof(est), " (estimated %.0f)", t->rows_estimate);
		log_info("copied %s.%s: %llu rows%s, %s in %.1f s", t->schema, t->name,
				 (unsigned long long) s->rows, est, human_bytes(s->bytes, bytes, sizeof(bytes)),
				 (double) (s->finished_ms - s->started_ms) / 1000.0);
	}
}

static void
totals(const struct progress *p, uint64_t *rows, uint64_t *bytes, double *estimate, int *done)
{
	*rows = *bytes = 0;
	*estimate = 0;
	*done = 0;
	for (int i = 0; i < p->plan->ntables; i++)
	{
		*rows += p->st[i].rows;
		*bytes += p->st[i].bytes;
		*done += p->st[i].done;
		if (*estimate >= 0 && p->plan->tables[i].rows_estimate >= 0)
			*estimate += p->plan->tables[i].rows_estimate;
		else
			*estimate = -1;
	}
}

static void
show_tty(struct progress *p)
{
	uint64_t rows, bytes, elapsed = now_ms() - p->start_ms;
	double estimate;
	int done;
	char b[32], rate[32], pct[16] = "";

	totals(p, &rows, &bytes, &estimate, &done);
	if (estimate > 0)
		snprintf(pct, sizeof(pct), " (%.0f%%)", rows >= estimate ? 100.0 : 100.0 * (double) rows / estimate);
	human_bytes(elapsed ? bytes * 1000 / elapsed : 0, rate, sizeof(rate));
	fprintf(stderr, "\r%s: %d/%d tables, %llu rows%s, %s, %s/s\033[K", log_progname(), done,
			p->plan->ntables, (unsigned long long) rows, pct,
			human_bytes(bytes, b, sizeof(b)), rate);
	fflush(stderr);
	p->tty_line = true;
}

static void
json_num_or_null(struct buf *b, double v)
{
	if (v >= 0)
		buf_printf(b, "%.0f", v);
	else
		buf_puts(b, "null");
}

/* The JSON progress file, replaced atomically (write, rename). */
static void
write_progress_file(struct progress *p, const char *state)
{
	struct buf b = BUF_INIT, tmp = BUF_INIT;
	uint64_t rows, bytes;
	double estimate;
	int done;
	char lsn[LSN_BUFSZ];
	FILE *f;

	totals(p, &rows, &bytes, &estimate, &done);
	buf_puts(&b, "{\"state\":");
	buf_json_string(&b, state);
	buf_puts(&b, ",\"snapshot\":");
	buf_json_string(&b, p->snapshot);
	buf_printf(&b, ",\"position\":\"%s\",\"elapsed_ms\":%llu,\"tables_total\":%d,\"tables_done\":%d,"
			   "\"rows_copied\":%llu,\"bytes_copied\":%llu,\"rows_estimate\":",
			   lsn_format(p->o->position, lsn), (unsigned long long) (now_ms() - p->start_ms),
			   p->plan->ntables, done, (unsigned long long) rows, (unsigned long long) bytes);
	json_num_or_null(&b, estimate);
	buf_puts(&b, ",\"tables\":[");
	for (int i = 0; i < p->plan->ntables; i++)
	{
		const struct snap_table *t = &p->plan->tables[i];
		const struct snap_tstat *s = &p->st[i];

		buf_puts(&b, i ? ",{\"schema\":" : "{\"schema\":");
		buf_json_string(&b, t->schema);
		buf_puts(&b, ",\"table\":");
		buf_json_string(&b, t->name);
		buf_printf(&b, ",\"state\":\"%s\",\"parts\":%d,\"parts_done\":%d,\"rows_copied\":%llu,"
				   "\"bytes_copied\":%llu,\"rows_estimate\":",
				   s->done ? "done" : s->started ? "copying" : "pending", t->nparts, s->parts_done,
				   (unsigned long long) s->rows, (unsigned long long) s->bytes);
		json_num_or_null(&b, t->rows_estimate);
		buf_putc(&b, '}');
	}
	buf_puts(&b, "]}\n");
	buf_printf(&tmp, "%s.tmp", p->o->progress_file);
	f = fopen(tmp.data, "w");
	if (f == NULL || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0 ||
		rename(tmp.data, p->o->progress_file) != 0)
		log_warn("cannot write progress file %s: %s", p->o->progress_file, strerror(errno));
	buf_free(&b);
	buf_free(&tmp);
}

/* Supervise the run: progress, timeout, signals. Returns the exit code. */
static int
supervise(struct snaprun *run, struct progress *p)
{
	for (;;)
	{
		enum snaprun_state state;
		uint64_t now = now_ms();

		/* Progress first: the display starts at 0, however short the copy. */
		if (p->tty && now - p->last_tty_ms >= 500)
		{
			show_tty(p);
			p->last_tty_ms = now;
		}
		if (p->o->progress_file && now - p->last_file_ms >= 1000)
		{
			write_progress_file(p, "copying");
			p->last_file_ms = now;
		}
		state = snaprun_wait(run, 200);
		snaprun_stats(run, p->st);
		log_tables_done(p);
		if (state == SNAPRUN_DONE)
			return EXIT_DONE;
		if (state == SNAPRUN_FAILED)
			return EXIT_RUNTIME;
		if (p->o->chunked && p->o->group_seconds > 0 && !p->time_up &&
			now_ms() - p->start_ms >= (uint64_t) p->o->group_seconds * 1000)
		{
			/* The snapshot is held no longer than this: what is not copied
			 * now is copied in the next group, at its own snapshot. */
			log_info("the group's %ld s are up: finishing the chunks in flight", p->o->group_seconds);
			snaprun_time_up(run);
			p->time_up = true;
		}
		if (sig_stop_requested())
			snaprun_fail(run, EXIT_RUNTIME, "interrupted by %s: the copy is incomplete",
						 signal_name(sig_which()));
		else if (p->o->timeout_ms && now_ms() - p->start_ms >= p->o->timeout_ms)
			snaprun_fail(run, EXIT_RUNTIME, "the copy did not finish within --timeout %s: stopped, because "
						 "its snapshot keeps vacuum on the source from removing old rows",
						 p->o->timeout_arg);
	}
}

/* A field of --list-tables in the stream's escaping, so that pg-verify
 * --tables reads back a name with a TAB, a newline or a backslash exactly. */
static void
put_field(const char *v, bool last)
{
	struct buf b = BUF_INIT;

	copy_escape(&b, v, strlen(v));
	if (b.len)
		fwrite(b.data, 1, b.len, stdout);
	putchar(last ? '\n' : '\t');
	buf_free(&b);
}

/*
 * --list-tables: the resolution pgsync check compares with its configured
 * tables, in one transaction so that it is one moment's catalog.
 */
static int
list_tables(const struct opts *o)
{
	PGconn *conn = source_connect(o->conninfo, SESSION_SQL);
	struct pub_set set;
	struct pgerr err;
	int rc;

	if (!conn_command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0, NULL, &err))
		pgerr_fatal(EXIT_RUNTIME, "cannot start a transaction", &err);
	if ((rc = pub_resolve(conn, o->pubs, o->npubs, &set)) != EXIT_DONE)
		exit(rc);
	for (int i = 0; i < set.n; i++)
	{
		const struct pub_table *t = &set.t[i];
		struct buf cols = BUF_INIT, gen = BUF_INIT;

		for (int c = 0; c < t->ncols; c++)
		{
			buf_printf(&cols, "%s%s", c ? "," : "", t->cols[c]);
			if (t->colgen[c])
				buf_printf(&gen, "%s%s", gen.len ? "," : "", t->cols[c]);
		}
		put_field(t->schema, false);
		put_field(t->name, false);
		put_field(t->pubs, false);
		put_field(t->rowfilter ? t->rowfilter : "", false);
		put_field(cols.len ? buf_cstr(&cols) : "", false);
		put_field(gen.len ? buf_cstr(&gen) : "", true);
		buf_free(&cols);
		buf_free(&gen);
	}
	pub_set_free(&set);
	PQfinish(conn);
	if (fflush(stdout) != 0 || ferror(stdout))
		log_fatal(EXIT_RUNTIME, "cannot write the table list");
	return EXIT_DONE;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct snapplan_opts po;
	struct snaprun_opts ro;
	struct snap_plan plan;
	struct sysident sys;
	struct pgerr err;
	struct progress prog;
	struct buf head = BUF_INIT;
	struct snaprun *run;
	struct out *out;
	PGconn *conn;
	char *snapshot_name = NULL;
	struct done_set done = {0};
	struct key_colls kc = {0};
	int rc, version, section_tables = 0;

	log_init(argv[0]);
	memset(&o, 0, sizeof(o));
	parse_args(argc, argv, &o);
	if (!out_tty_ok(STDOUT_FILENO, (int) o.zstd_level))
		usage_error("refusing to write compressed output to a terminal");
	if (o.list_tables)
		return list_tables(&o);
	if (o.done_file)
	{
		char derr[700];

		if (!chunkdone_read(o.done_file, &done, derr, sizeof(derr)))
			log_fatal(EXIT_USAGE, "%s", derr);
	}
	if (o.keycoll_file)
	{
		char kerr[700];

		if (!keycolls_read(o.keycoll_file, &kc, kerr, sizeof(kerr)))
			log_fatal(EXIT_USAGE, "%s", kerr);
	}
	sig_setup();
	report_connection(&o, SRC_DISCONNECTED, true);

	/* The header's identity comes from the replication protocol. */
	conn = source_connect(o.conninfo, SESSION_REPLICATION);
	if (!conn_identify_system(conn, &sys, &err))
		pgerr_fatal(EXIT_RUNTIME, "cannot identify the source system", &err);
	PQfinish(conn);

	conn = open_snapshot(&o, &snapshot_name);
	report_connection(&o, SRC_CONNECTED, false);
	version = PQserverVersion(conn);
	memset(&po, 0, sizeof(po));
	po.pubs = o.pubs;
	po.npubs = o.npubs;
	po.tables = o.tables;
	po.ntables = o.ntables;
	po.split_rows = o.split_rows;
	po.jobs = (int) o.jobs;
	po.split_by = o.split_by;
	po.chunked = o.chunked;
	po.chunk_rows = o.chunk_rows;
	po.done = o.done_file ? &done : NULL;
	po.keycolls = &kc;
	if ((rc = snapplan_build(conn, &po, &plan)) != EXIT_DONE)
		exit(rc);
	for (int i = 0; i < plan.ntables; i++)
		section_tables += !plan.tables[i].whole_done;
	/* An imported snapshot needs no planning session any more; an own one
	 * lives exactly as long as this session's transaction. */
	if (!o.own_snapshot)
	{
		PQfinish(conn);
		conn = NULL;
	}
	log_info("copying %d tables in %d parts with %ld workers at %s", plan.ntables, plan.nparts,
			 o.jobs < plan.nparts ? o.jobs : plan.nparts, snapshot_name);
	/* What each part is, never its query: the bounds of a key range are
	 * values of the table's rows, which no log line may hold. */
	for (int i = 0; i < plan.nparts && log_enabled(LOG_DEBUG); i++)
	{
		const struct snap_part *pt = &plan.parts[i];
		const struct snap_table *t = &plan.tables[pt->table];

		log_debug("part %d of %d of %s.%s: %s %s%s%s, about %.0f rows", pt->index, t->nparts, t->schema, t->name,
				  pt->by == NULL ? "all rows of" : strcmp(pt->by, "ctid") == 0 ? "a range of the blocks of" : "a range of",
				  pt->by && strcmp(pt->by, "ctid") != 0 ? pt->by : "", pt->by && strcmp(pt->by, "ctid") != 0 ? " in " : "",
				  pt->from, pt->weight);
	}

	out = out_open(STDOUT_FILENO, (int) o.zstd_level);
	/* A zstd frame per snapshot frame (at most --frame-size): the reader
	 * verifies each before any of it is committed. */
	out_set_frame_target(out, 0);
	/* A chunk stream delivers no transactions: its header promises none
	 * (0/0), and the job's stream goes on from the job's own position. */
	rec_header(&head, sys.sysid, sys.timeline, o.slot, o.chunked ? 0 : o.position,
			   "pg-snapshot-dump/" PGSYNC_VERSION, version, NULL);
	rec_start(&head, o.chunked ? REC_CHUNKS : REC_SNAPSHOT);
	rec_lsn(&head, o.position);
	rec_valuez(&head, snapshot_name);
	rec_u64(&head, (uint64_t) section_tables);
	rec_finish(&head);
	if (out_write(out, head.data, head.len) != OUT_OK)
		log_fatal(EXIT_RUNTIME, "cannot write the output stream");
	buf_free(&head);

	memset(&ro, 0, sizeof(ro));
	ro.conninfo = o.conninfo;
	ro.snapshot = snapshot_name;
	ro.position = o.position;
	ro.jobs = (int) o.jobs;
	ro.frame_size = (size_t) o.frame_size;
	ro.max_row = (size_t) o.max_message;
	ro.chunked = o.chunked;
	ro.chunk_rows = o.chunk_rows;

	memset(&prog, 0, sizeof(prog));
	prog.o = &o;
	prog.plan = &plan;
	prog.st = xcalloc((size_t) plan.ntables + 1, sizeof(*prog.st));
	prog.logged = xcalloc((size_t) plan.ntables + 1, sizeof(bool));
	prog.snapshot = snapshot_name;
	prog.start_ms = now_ms();
	prog.tty = isatty(STDERR_FILENO) && !o.json && log_enabled(LOG_INFO);

	run = snaprun_start(&plan, &ro, out);
	rc = supervise(run, &prog);
	clear_tty(&prog);
	if (rc != EXIT_DONE)
	{
		const char *msg;

		snaprun_cancel(run, 3000);
		rc = snaprun_error(run, &msg);
		if (o.progress_file)
			write_progress_file(&prog, "failed");
		report_connection(&o, SRC_DISCONNECTED, false);
		log_error("%s", msg);
		/* Threads may still be blocked on the output or the network: the
		 * process ends here, and the source sessions with it. */
		fflush(stderr);
		_exit(rc);
	}
	snaprun_finish(run);
	if (out_close(out, false) != OUT_OK)
		log_fatal(EXIT_RUNTIME, "cannot write the output stream");
	if (o.progress_file)
		write_progress_file(&prog, "done");
	report_connection(&o, SRC_DISCONNECTED, false);
	{
		uint64_t rows, bytes, ms = now_ms() - prog.start_ms;
		double estimate;
		int done;
		char b[32];

		totals(&prog, &rows, &bytes, &estimate, &done);
		log_info("%s: %d tables, %llu rows, %s in %.1f s", o.chunked ? "chunk section copied, tables done" : "snapshot copied",
				 done, (unsigned long long) rows, human_bytes(bytes, b, sizeof(b)), (double) ms / 1000.0);
	}
	if (conn)
		PQfinish(conn);
	snapplan_free(&plan);
	chunkdone_free(&done);
	keycolls_free(&kc);
	free(prog.st);
	free(prog.logged);
	free(snapshot_name);
	free(o.tables);
	return EXIT_DONE;
}
