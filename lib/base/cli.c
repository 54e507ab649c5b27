#include "cli.h"
#include "common.h"
#include "log.h"
#include "publication.h"

#include <stdarg.h>
#include <stdio.h>
#include <getopt.h>
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
