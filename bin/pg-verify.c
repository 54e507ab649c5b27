/*
 * pg-verify: the tables of a source and a target compared exactly, each
 * side at an exported snapshot (pgsync verify takes them at one consistent
 * point), by ranges of the hash of each row's key that both servers hash
 * themselves (lib/verify/compare.h): row values never leave the servers.
 * The hash is chosen once, before any table, and logged with its reason.
 * Prints one line per table, in the order of the --tables file; the keys
 * of the rows that differ go to --keys-dir.
 */
#include "cli.h"
#include "common.h"
#include "compare.h"
#include "log.h"
#include "session.h"
#include "sig.h"
#include "tablelist.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
	"usage: pg-verify --source CONNINFO --target CONNINFO --source-snapshot NAME\n"
	"                 --target-snapshot NAME --tables FILE [--keys-dir DIR] [--jobs N]\n"
	"                 [--hash auto|md5] [--json] [-q] [--log-level LEVEL]\n";

static const char options_help[] =
	"\n"
	"Compare tables of a source and a target, each at an exported snapshot.\n"
	"\n"
	"Options:\n"
	"      --source=CONNINFO       source connection string or URL (SELECT on the tables)\n"
	"      --target=CONNINFO       target connection string or URL (SELECT on the tables)\n"
	"      --source-snapshot=NAME  the source's exported snapshot (pg-slot create --export-snapshot)\n"
	"      --target-snapshot=NAME  the target's exported snapshot (pg_export_snapshot())\n"
	"      --tables=FILE           the tables, one a line: schema<TAB>table, or a whole line of\n"
	"                              pg-snapshot-dump --list-tables (its row filter and columns\n"
	"                              then apply to the source), in the stream's escaping\n"
	"      --keys-dir=DIR          write the keys of the rows that differ to DIR/N.keys, N the\n"
	"                              table's line in FILE from 0: missing|only|differing<TAB>key as JSON\n"
	"  -j, --jobs=N                tables compared at a time, one session a side each (1-256,\n"
	"                              default 4)\n"
	"      --hash=auto|md5         auto (default): hash rows with the servers' hashtextextended()\n"
	"                              when both databases have the same encoding and both servers\n"
	"                              hash a probe alike, else with md5 (logged, with the reason);\n"
	"                              md5: always md5, which any two servers compute alike\n"
	"      --json                  JSON log lines on stderr\n"
	"  -q, --quiet                 log warnings and errors only\n"
	"      --log-level=LEVEL       debug, info, warn or error (default info)\n"
	"  -h, --help                  show this help and exit\n"
	"  -V, --version               show the version and exit\n"
	"\n"
	"Output: one line per table, TAB-separated: table, rows on the source, rows on the\n"
	"target, rows missing on the target, rows only on the target, rows differing, 1 when\n"
	"every differing key was written (0: counted from the ranges); or error<TAB>message.\n"
	"\n"
	"Exit status: 0 every table identical, 1 a table could not be compared (its line says\n"
	"why), a signal, or a runtime error, 2 usage, 5 a table differs.\n";

#define usage_error(...) cli_usage_error(synopsis, __VA_ARGS__)

struct opts {
	const char *src, *tgt;
	const char *src_snap, *tgt_snap;
	const char *tables;
	const char *keys_dir;
	int jobs;
	bool md5_only;				/* --hash md5 */
};

/* What the workers share; mu guards everything below it. */
struct run {
	const struct opts *o;
	struct vtable_list list;
	enum verify_hash hash;		/* the same for every table */
	pthread_mutex_t mu;
	PGconn *spare_src, *spare_tgt;	/* the hash's probe sessions, for a worker */
	int next;					/* the next table to compare */
	int printed;				/* tables printed, in order */
	int finished;				/* tables compared (or failed) */
	int workers_left;
	struct verify_result *res;
	bool *done;
	bool any_failed, any_differ, stdout_failed;
};

static bool
snapshot_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	return strspn(s, "0123456789ABCDEFabcdef-") == n;
}

static void
parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_SOURCE = 256, OPT_TARGET, OPT_SSNAP, OPT_TSNAP, OPT_TABLES, OPT_KEYS, OPT_HASH };
	static const struct option longopts[] = {
		{"source", required_argument, NULL, OPT_SOURCE},
		{"target", required_argument, NULL, OPT_TARGET},
		{"source-snapshot", required_argument, NULL, OPT_SSNAP},
		{"target-snapshot", required_argument, NULL, OPT_TSNAP},
		{"tables", required_argument, NULL, OPT_TABLES},
		{"keys-dir", required_argument, NULL, OPT_KEYS},
		{"jobs", required_argument, NULL, 'j'},
		{"hash", required_argument, NULL, OPT_HASH},
		CLI_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct cli cli = {"pg-verify", synopsis, options_help, NULL, false};
	int c;

	o->jobs = 4;
	while ((c = getopt_long(argc, argv, ":j:" CLI_COMMON_SHORT, longopts, NULL)) != -1)
	{
		switch (c)
		{
			case OPT_SOURCE: o->src = cli_conninfo(&cli, "--source", optarg); break;
			case OPT_TARGET: o->tgt = cli_conninfo(&cli, "--target", optarg); break;
			case OPT_SSNAP:
			case OPT_TSNAP:
				if (!snapshot_name_ok(optarg))
					usage_error("invalid %s \"%s\": expected an exported snapshot name like 00000003-0000001B-1",
								c == OPT_SSNAP ? "--source-snapshot" : "--target-snapshot", optarg);
				*(c == OPT_SSNAP ? &o->src_snap : &o->tgt_snap) = optarg;
				break;
			case OPT_TABLES: o->tables = optarg; break;
			case OPT_KEYS: o->keys_dir = optarg; break;
			case 'j': o->jobs = cli_jobs(&cli, optarg); break;
			case OPT_HASH:
				if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "md5") != 0)
					usage_error("invalid --hash \"%s\": expected auto or md5", optarg);
				o->md5_only = strcmp(optarg, "md5") == 0;
				break;
			default: cli_common(&cli, c, argv);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument \"%s\"", argv[optind]);
	if (!o->src || !o->tgt)
		usage_error("--source and --target are required");
	if (!o->src_snap || !o->tgt_snap)
		usage_error("--source-snapshot and --target-snapshot are required");
	if (!o->tables)
		usage_error("--tables is required");
}

/* A session for a side, at most once per table: a side that cannot connect
 * fails the table, the next one tries again. */
static bool
side_open(struct verify_side *s, const char *conninfo, const char *who, struct verify_result *r)
{
	struct pgerr err;
	char text[PGERR_TEXT_MAX];

	if (s->conn)
		return true;
	if ((s->conn = session_open(conninfo, SESSION_SQL, &err)) != NULL)
		return true;
	memset(r, 0, sizeof(*r));
	r->failed = true;
	snprintf(r->msg, sizeof(r->msg), "%s: cannot connect: %s", who, pgerr_text(&err, NULL, text, sizeof(text)));
	return false;
}

static FILE *
keys_open(const struct run *run, int i, struct verify_result *r)
{
	char path[4096];
	FILE *f;

	if (run->o->keys_dir == NULL)
		return NULL;
	snprintf(path, sizeof(path), "%s/%d.keys", run->o->keys_dir, i);
	if ((f = fopen(path, "w")) == NULL)
	{
		memset(r, 0, sizeof(*r));
		r->failed = true;
		snprintf(r->msg, sizeof(r->msg), "cannot create \"%.1000s\": %s", path, strerror(errno));
	}
	return f;
}

/* The lines of the tables compared so far, in the file's order (mu held). */
static void
print_ready(struct run *run)
{
	while (run->printed < run->list.n && run->done[run->printed])
	{
		const struct verify_result *r = &run->res[run->printed];

		if (r->failed)
			printf("error\t%s\n", r->msg);
		else
			printf("%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%d\n", run->list.t[run->printed].display, r->rows_src,
				   r->rows_tgt, r->missing, r->only, r->differing, r->itemized ? 1 : 0);
		run->printed++;
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		run->stdout_failed = true;
}

/* A probe session that broke (or a half-read query) is not handed on. */
static void
spare_keep(PGconn **c)
{
	if (*c && (PQstatus(*c) != CONNECTION_OK || PQtransactionStatus(*c) != PQTRANS_IDLE))
	{
		PQfinish(*c);
		*c = NULL;
	}
}

/*
 * The hash of every table, chosen before any (compare.h), logged with why.
 * A side that cannot be reached leaves md5: its tables fail on their own.
 * The sessions are kept for a worker.
 */
static void
choose_hash(struct run *run)
{
	const struct opts *o = run->o;
	struct pgerr err;
	char text[PGERR_TEXT_MAX], why[PGERR_TEXT_MAX + 200];
	bool intr = false;

	run->hash = VERIFY_HASH_MD5;
	if (o->md5_only)
		snprintf(why, sizeof(why), "--hash md5");
	else if ((run->spare_src = session_open(o->src, SESSION_SQL, &err)) == NULL)
		snprintf(why, sizeof(why), "source: cannot connect: %s", pgerr_text(&err, NULL, text, sizeof(text)));
	else if ((run->spare_tgt = session_open(o->tgt, SESSION_SQL, &err)) == NULL)
		snprintf(why, sizeof(why), "target: cannot connect: %s", pgerr_text(&err, NULL, text, sizeof(text)));
	else
		run->hash = verify_hash_choose(run->spare_src, run->spare_tgt, why, sizeof(why), &intr);
	if (!intr)
		log_info("%s: rows hashed with %s", why, verify_hash_name(run->hash));
	spare_keep(&run->spare_src);
	spare_keep(&run->spare_tgt);
}

static void *
worker(void *arg)
{
	struct run *run = arg;
	struct verify_side src = {NULL, run->o->src_snap}, tgt = {NULL, run->o->tgt_snap};

	pthread_mutex_lock(&run->mu);
	src.conn = run->spare_src;
	tgt.conn = run->spare_tgt;
	run->spare_src = run->spare_tgt = NULL;
	pthread_mutex_unlock(&run->mu);
	for (;;)
	{
		struct verify_result r;
		FILE *keys = NULL;
		int i;
		bool keys_failed = false;

		pthread_mutex_lock(&run->mu);
		i = sig_stop_requested() ? run->list.n : run->next++;
		pthread_mutex_unlock(&run->mu);
		if (i >= run->list.n)
			break;
		memset(&r, 0, sizeof(r));
		if (run->o->keys_dir && (keys = keys_open(run, i, &r)) == NULL)
			keys_failed = true;
		if (!keys_failed && side_open(&src, run->o->src, "source", &r) && side_open(&tgt, run->o->tgt, "target", &r))
			verify_compare(&src, &tgt, &run->list.t[i], run->hash, keys, &r);
		if (keys && fclose(keys) != 0 && !r.failed)
		{
			r.failed = true;
			snprintf(r.msg, sizeof(r.msg), "cannot write the keys of %s: %s", run->list.t[i].display, strerror(errno));
		}
		pthread_mutex_lock(&run->mu);
		run->res[i] = r;
		run->done[i] = true;
		run->finished++;
		if (r.failed)
			run->any_failed = true;
		else if (r.missing + r.only + r.differing > 0)
			run->any_differ = true;
		if (!r.interrupted)
			log_info("%d of %d tables compared", run->finished, run->list.n);
		print_ready(run);
		pthread_mutex_unlock(&run->mu);
	}
	if (src.conn)
		PQfinish(src.conn);
	if (tgt.conn)
		PQfinish(tgt.conn);
	pthread_mutex_lock(&run->mu);
	run->workers_left--;
	pthread_mutex_unlock(&run->mu);
	return NULL;
}

int
main(int argc, char **argv)
{
	struct opts o = {0};
	struct run run;
	char err[1200];
	pthread_t *th;
	int n;

	log_init(argv[0]);
	parse_args(argc, argv, &o);
	memset(&run, 0, sizeof(run));
	run.o = &o;
	if (!vtable_list_read(o.tables, &run.list, err, sizeof(err)))
		log_fatal(EXIT_USAGE, "%s", err);
	sig_setup();
	pthread_mutex_init(&run.mu, NULL);
	choose_hash(&run);
	run.res = xcalloc((size_t) run.list.n + 1, sizeof(*run.res));
	run.done = xcalloc((size_t) run.list.n + 1, sizeof(*run.done));
	n = o.jobs < run.list.n ? o.jobs : run.list.n;
	th = xcalloc((size_t) n + 1, sizeof(*th));
	run.workers_left = n;
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, &run) != 0)
			log_fatal(EXIT_RUNTIME, "cannot start a worker thread");
	/* The workers notice a stop signal themselves (a query in flight is
	 * cancelled, lib/base/pgwait). */
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(th);
	/* No worker took them (no table). */
	if (run.spare_src)
		PQfinish(run.spare_src);
	if (run.spare_tgt)
		PQfinish(run.spare_tgt);
	if (sig_stop_requested())
		log_fatal(EXIT_RUNTIME, "interrupted by %s: not every table was compared", signal_name(sig_which()));
	if (run.stdout_failed)
		log_fatal(EXIT_RUNTIME, "cannot write the results");
	log_info("%d tables compared: %s", run.list.n,
			 run.any_failed ? "some could not be compared" : run.any_differ ? "different" : "identical");
	vtable_list_free(&run.list);
	free(run.res);
	free(run.done);
	return run.any_failed ? EXIT_RUNTIME : run.any_differ ? EXIT_UNSUPPORTED : EXIT_DONE;
}
