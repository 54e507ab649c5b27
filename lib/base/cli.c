/*
 * cli.c - the options every program shares (cli.h).
 */
#include "cli.h"

#include "argsecret.h"
#include "common.h"
#include "log.h"
#include "names.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void
cli_usage_error(const char *synopsis, const char *fmt, ...)
{
	if (fmt)
	{
		char msg[512];
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		log_error("%s", msg);
	}
	fputs(synopsis, stderr);
	exit(EXIT_USAGE);
}

void
cli_help(const char *synopsis, const char *options)
{
	fputs(synopsis, stdout);
	fputs(options, stdout);
	exit(EXIT_DONE);
}

void
cli_version(const char *prog)
{
	printf("%s (pgsync) %s\n", prog, PGSYNC_VERSION);
	exit(EXIT_DONE);
}

void
cli_bad_option(const char *synopsis, int c, char **argv)
{
	if (c == ':')
		cli_usage_error(synopsis, "option %s needs a value", argv[optind - 1]);
	if (optopt)
		cli_usage_error(synopsis, "unknown option -%c", optopt);
	cli_usage_error(synopsis, "unknown option %s", argv[optind - 1]);
}

void
cli_common(struct cli *cli, int c, char **argv)
{
	enum log_level level;

	switch (c)
	{
		case 'd':
			cli->conninfo = cli_conninfo(cli, "-d", optarg);
			return;
		case 'q':
			log_set_level(LOG_WARN);
			return;
		case CLI_OPT_LOG_LEVEL:
		case CLI_OPT_LOG_OLD:
			if (!log_parse_level(optarg, &level))
				cli_usage_error(cli->synopsis, "invalid --log-level \"%s\": expected debug, info, warn or error", optarg);
			log_set_level(level);
			return;
		case CLI_OPT_JSON:
			cli->json = true;
			log_set_json(true);
			return;
		case 'h':
			cli_help(cli->synopsis, cli->help);
		case 'V':
			cli_version(cli->prog);
		default:
			cli_bad_option(cli->synopsis, c, argv);
	}
}

/* A size as the options spell it: 1kB, 1GB; bytes when no unit divides it. */
static const char *
size_text(uint64_t v, char *buf, size_t len)
{
	static const char *units[] = {"TB", "GB", "MB", "kB"};

	for (int i = 0; i < 4; i++)
	{
		uint64_t u = UINT64_C(1) << (10 * (4 - i));

		if (v >= u && v % u == 0)
		{
			snprintf(buf, len, "%" PRIu64 "%s", v / u, units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

uint64_t
cli_size(const struct cli *cli, const char *opt, const char *arg, uint64_t min, uint64_t max)
{
	char lo[32], hi[32];
	uint64_t v;

	if (!parse_size(arg, &v) || v < min || v > max)
		cli_usage_error(cli->synopsis, "invalid %s \"%s\": expected a size from %s to %s", opt, arg,
						size_text(min, lo, sizeof(lo)), size_text(max, hi, sizeof(hi)));
	return v;
}

uint64_t
cli_duration(const struct cli *cli, const char *opt, const char *arg, uint64_t min_ms)
{
	uint64_t v;

	if (!parse_duration_ms(arg, &v) || v < min_ms)
		cli_usage_error(cli->synopsis, "invalid %s \"%s\": expected a duration %s", opt, arg,
						min_ms > 0 ? "above 0 (500ms, 10s, 1min)" : "(0, 500ms, 10s, 1min)");
	return v;
}

long
cli_int(const struct cli *cli, const char *opt, const char *arg, long min, long max)
{
	long v;

	if (!parse_int(arg, min, max, &v))
		cli_usage_error(cli->synopsis, "invalid %s \"%s\": expected a number from %ld to %ld", opt, arg, min, max);
	return v;
}

int
cli_zstd_level(const struct cli *cli, const char *arg)
{
	long v;

	if (arg == NULL)
		return CLI_ZSTD_DEFAULT;
	if (!parse_int(arg, 1, 19, &v))
		cli_usage_error(cli->synopsis, "invalid --zstd level \"%s\": expected 1 to 19", arg);
	return (int) v;
}

uint64_t
cli_max_message(const struct cli *cli, const char *arg)
{
	return cli_size(cli, "--max-message-bytes", arg, 1024, UINT64_C(1) << 30);
}

const char *
cli_conninfo(const struct cli *cli, const char *opt, char *arg)
{
	const char *conninfo = argsecret_conninfo(arg);

	if (conninfo == NULL)
		cli_usage_error(cli->synopsis, "invalid connection string given to %s: expected KEY=VALUE pairs or a postgresql:// URL", opt);
	return conninfo;
}

int
cli_jobs(const struct cli *cli, const char *arg)
{
	return (int) cli_int(cli, "--jobs", arg, 1, 256);
}

const char *
cli_slot(const struct cli *cli, const char *arg)
{
	if (!slot_name_valid(arg))
		cli_usage_error(cli->synopsis, "invalid slot name \"%s\": use 1 to %d lower-case letters, digits and underscores",
						arg, SLOT_NAME_MAX);
	return arg;
}

int
cli_publications(const char *synopsis, char *arg, const char **names, int max)
{
	char why[128];
	int n;

	if (arg[0] == '\0')
		cli_usage_error(synopsis, "--publication needs at least one name");
	n = pub_split_list(arg, names, max, why, sizeof(why));
	if (n < 0)
		cli_usage_error(synopsis, "invalid --publication: %s", why);
	return n;
}
