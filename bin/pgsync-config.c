/*
 * pgsync-config - strict reader of pgsync job configuration files, and the
 * small libpq-backed helpers the pgsync script needs: the display form of a
 * connection string (never its password), a libpq service-file section so
 * that child programs get their connection without a password on any command
 * line, and the target catalog DDL.
 *
 * Every problem is reported as FILE:LINE: message and exits 2, so the script
 * never starts with a configuration it half understood. The keys and their
 * rules are lib/config/confkeys.c, reading a file conffile.c, the memory
 * budget confbudget.c, the service section confservice.c.
 */
#include "buf.h"
#include "catalog.h"
#include "checkpoint.h"
#include "cli.h"
#include "common.h"
#include "confbudget.h"
#include "conffile.h"
#include "confkeys.h"
#include "confservice.h"
#include "conn.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * pgsync hands pg-walcat the target's applied position in the checkpoint
 * file: written here by the C programs' one writer (temp file, fsync,
 * rename, fsync of the directory), after the readers' own checks.
 */
static int
write_checkpoint(const char *path)
{
	struct buf b = conf_read_stdin();
	struct checkpoint cp;
	char err[512];

	if (checkpoint_parse("on standard input", b.data, b.len, &cp, err, sizeof(err)) != CP_OK)
		log_fatal(EXIT_USAGE, "%s", err);
	buf_free(&b);
	if (checkpoint_write(path, &cp, err, sizeof(err)) != 0)
		log_fatal(EXIT_RUNTIME, "%s", err);
	return EXIT_DONE;
}

static const char synopsis[] =
	"usage: pgsync-config [-c FILE] [--state-dir DIR] [--set KEY=VALUE]... [-0|--null | --list KEY] [--json]\n"
	"       pgsync-config --display-url < CONNINFO\n"
	"       pgsync-config --service NAME [--label TEXT] < CONNINFO\n"
	"       pgsync-config --catalog-sql\n"
	"       pgsync-config --write-checkpoint FILE < CHECKPOINT\n";

static const char options_help[] =
	"\nValidate a pgsync configuration file and print every setting with its\n"
	"default or derived value resolved.\n\n"
	"  -c, --config FILE    configuration file (default ./pgsync.conf)\n"
	"      --state-dir DIR  override job.state_dir\n"
	"      --set KEY=VALUE  use VALUE for KEY instead of the file's setting\n"
	"  -0, --null           print key=value pairs separated by NUL bytes\n"
	"      --list KEY       print the tables of KEY (replication.tables or replication.sequences)\n"
	"                       instead, one a line: schema TAB name, in the stream's escaping\n"
	"      --display-url    print the connection string read from stdin without its password\n"
	"      --service NAME   print a libpq service-file section NAME for the connection read from stdin\n"
	"      --label TEXT     name the connection in messages (default: the connection)\n"
	"      --catalog-sql    print the DDL of the pgsync target catalog\n"
	"      --write-checkpoint FILE\n"
	"                       write the checkpoint file read from stdin to FILE durably\n"
	"      --json           log errors as JSON lines\n"
	"  -q, --quiet          log warnings and errors only\n"
	"      --log-level LEVEL  debug, info, warn or error (default info)\n"
	"  -h, --help           show this help\n"
	"  -V, --version        show the version\n\n"
	"Exit status: 0 valid, 2 invalid configuration or usage.\n";

int
main(int argc, char **argv)
{
	enum { OPT_DISPLAY = 256, OPT_SERVICE, OPT_LABEL, OPT_CATALOG, OPT_STATEDIR, OPT_SET, OPT_CHECKPOINT, OPT_LIST };
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"null", no_argument, NULL, '0'},
		{"state-dir", required_argument, NULL, OPT_STATEDIR},
		{"display-url", no_argument, NULL, OPT_DISPLAY},
		{"service", required_argument, NULL, OPT_SERVICE},
		{"label", required_argument, NULL, OPT_LABEL},
		{"catalog-sql", no_argument, NULL, OPT_CATALOG},
		{"write-checkpoint", required_argument, NULL, OPT_CHECKPOINT},
		{"set", required_argument, NULL, OPT_SET},
		{"list", required_argument, NULL, OPT_LIST},
		CLI_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	const char *state_dir = NULL, *service = NULL, *label = "the connection", *checkpoint = NULL, *list = NULL;
	struct cli cli = {.prog = "pgsync-config", .synopsis = synopsis, .help = options_help};
	bool nul = false, display = false, catalog = false;
	FILE *f;
	int c, nsets = 0;
	/* Static: reachable until exit on every return path below. */
	static char **sets;

	sets = xcalloc((size_t) argc, sizeof(char *));

	log_init(argv[0]);
	/* pgsync runs it under its own name. */
	cli.prog = log_progname();
	conf_file = "pgsync.conf";
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:0" CLI_COMMON_SHORT, longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'c': conf_file = optarg; break;
			case '0': nul = true; break;
			case OPT_STATEDIR: state_dir = optarg; break;
			case OPT_DISPLAY: display = true; break;
			case OPT_SERVICE: service = optarg; break;
			case OPT_LABEL: label = optarg; break;
			case OPT_CATALOG: catalog = true; break;
			case OPT_CHECKPOINT: checkpoint = optarg; break;
			case OPT_SET: sets[nsets++] = optarg; break;
			case OPT_LIST: list = optarg; break;
			default: cli_common(&cli, c, argv); break;
		}
	}
	if (optind < argc)
		cli_usage_error(synopsis, "unexpected argument \"%s\"", argv[optind]);
	if (display + (service != NULL) + catalog + (checkpoint != NULL) > 1)
		cli_usage_error(synopsis, "give at most one of --display-url, --service, --catalog-sql and --write-checkpoint");
	if (catalog)
	{
		fputs(catalog_ddl, stdout);
		return EXIT_DONE;
	}
	if (checkpoint)
		return write_checkpoint(checkpoint);
	if (display)
	{
		char *conninfo = conf_read_conninfo(), out[1024];

		conn_display(conninfo, out, sizeof(out));
		memset(conninfo, 0, strlen(conninfo));
		free(conninfo);
		printf("%s\n", out);
		return EXIT_DONE;
	}
	if (service)
	{
		if (!conf_ident_ok(service, strlen(service)))
			log_fatal(EXIT_USAGE, "invalid service name \"%s\"", service);
		return conf_print_service(service, label);
	}
	if (list && (conf_key(list) == NULL || conf_key(list)->type != T_TABLES))
		cli_usage_error(synopsis, "--list takes replication.tables or replication.sequences, not \"%s\"", list);
	if (state_dir && state_dir[0] == '\0')
		log_fatal(EXIT_USAGE, "--state-dir must not be empty");

	f = fopen(conf_file, "r");
	if (f == NULL)
		log_fatal(EXIT_USAGE, "cannot open configuration file %s: %s", conf_file, strerror(errno));
	conf_read_file(f);
	fclose(f);
	conf_apply_sets(sets, nsets);
	free(sets);
	if (conf_nerrors == 0)
		conf_defaults();
	if (conf_nerrors == 0)
		conf_budget();
	if (conf_nerrors)
	{
		if (conf_nerrors > CONF_MAX_ERRORS)
			log_error("%s: %d more errors not shown", conf_file, conf_nerrors - CONF_MAX_ERRORS);
		return EXIT_USAGE;
	}
	conf_resolve_state_dir(state_dir);
	if (list)
	{
		struct buf b = BUF_INIT;

		if (!conf_table_lines(conf_key(list)->text, &b))
			log_fatal(EXIT_RUNTIME, "internal error: cannot list %s", list);
		fwrite(b.data ? b.data : "", 1, b.len, stdout);
		buf_free(&b);
	}
	else
		conf_print(nul);
	if (fflush(stdout) != 0)
		log_fatal(EXIT_RUNTIME, "cannot write: %s", strerror(errno));
	return EXIT_DONE;
}
