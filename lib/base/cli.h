/*
 * cli.h - what every program does with its command line: bad usage is one
 * error line (when there is something to say) and the synopsis on stderr,
 * exit 2; --help and --version go to stdout and exit 0.
 */
#ifndef PGSYNC_CLI_H
#define PGSYNC_CLI_H

void cli_usage_error(const char *synopsis, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/* -h/--help: synopsis and options on stdout, exit 0. */
void cli_help(const char *synopsis, const char *options) __attribute__((noreturn));
/* --version: "<prog> (pgsync) <version>" on stdout, exit 0. */
void cli_version(const char *prog) __attribute__((noreturn));
/* getopt_long returned ':' (missing value) or '?' (unknown option). */
void cli_bad_option(const char *synopsis, int c, char **argv) __attribute__((noreturn));

/* --publication NAME[,NAME...]: the names (pub_split_list), at most max;
 * anything else is a usage error. */
int cli_publications(const char *synopsis, char *arg, const char **names, int max);

#endif
