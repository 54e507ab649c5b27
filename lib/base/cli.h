/*
 * cli.h - what every program does with its command line: the options they
 * share, spelled, ranged and parsed the same way everywhere (one place for
 * each: a new program takes them from here), and the shape of bad usage: one
 * error line (when there is something to say) and the synopsis on stderr,
 * exit 2; --help and --version go to stdout and exit 0.
 *
 * A program lists CLI_COMMON_LONGOPTS (and CLI_DBNAME_LONGOPT when it
 * connects) in its getopt_long table and CLI_COMMON_SHORT in its short
 * options, handles its own options, and hands every other code to
 * cli_common(). The options only some programs take (--zstd,
 * --max-message-bytes, --jobs, --slot) are parsed by the functions below.
 */
#ifndef PGSYNC_CLI_H
#define PGSYNC_CLI_H

#include <stdbool.h>
#include <stdint.h>

struct cli {
	const char *prog;			/* for --version */
	const char *synopsis;		/* "usage: ..." lines */
	const char *help;			/* what --help prints after the synopsis */
	/* set by cli_common() */
	const char *conninfo;		/* -d/--dbname (argsecret_conninfo()), or NULL */
	bool json;					/* --json: JSON log lines (and output, where a program has some) */
};

/* Codes for the long-only common options; a program's own start at 256. */
enum { CLI_OPT_LOG_LEVEL = 0x1000, CLI_OPT_JSON, CLI_OPT_LOG_OLD };

/* -h/--help, -V/--version, -q/--quiet, --log-level LEVEL, --json. */
#define CLI_COMMON_LONGOPTS \
	{"help", no_argument, NULL, 'h'}, \
	{"version", no_argument, NULL, 'V'}, \
	{"quiet", no_argument, NULL, 'q'}, \
	{"log-level", required_argument, NULL, CLI_OPT_LOG_LEVEL}, \
	{"json", no_argument, NULL, CLI_OPT_JSON}
#define CLI_COMMON_SHORT "hVq"
/* -d/--dbname CONNINFO, for the programs that connect ("d:"). */
#define CLI_DBNAME_LONGOPT {"dbname", required_argument, NULL, 'd'}

/* A common option (returns), or a missing value or unknown option (exit 2). */
void cli_common(struct cli *cli, int c, char **argv);

void cli_usage_error(const char *synopsis, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
void cli_help(const char *synopsis, const char *options) __attribute__((noreturn));
void cli_version(const char *prog) __attribute__((noreturn));
/* getopt_long returned ':' (missing value) or '?' (unknown option). */
void cli_bad_option(const char *synopsis, int c, char **argv) __attribute__((noreturn));

/*
 * Values, each with its one range; anything else is a usage error naming
 * the option. Sizes are common.h's (a number with kB, MB, GB or TB),
 * durations too (ms, s, min, h, d).
 */
#define CLI_MAX_MESSAGE_DEFAULT (UINT64_C(32) * 1024 * 1024)
#define CLI_ZSTD_DEFAULT 3
/* -z/--zstd[=LEVEL]: 1 to 19 (zstd's levels without --ultra, whose
 * windows cost every reader much more memory); no LEVEL is 3. */
int cli_zstd_level(const struct cli *cli, const char *arg);
/* --max-message-bytes SIZE: 1kB to 1GB (the largest value PostgreSQL can
 * send in one message or COPY row). */
uint64_t cli_max_message(const struct cli *cli, const char *arg);
/* A connection string given to OPT (-d, --source, --target): its private
 * copy, the password in argv blanked (argsecret.h). */
const char *cli_conninfo(const struct cli *cli, const char *opt, char *arg);
/* -j/--jobs N: 1 to 256 connections. */
int cli_jobs(const struct cli *cli, const char *arg);
/* --slot NAME: a replication slot name. */
const char *cli_slot(const struct cli *cli, const char *arg);
/* OPT's SIZE from MIN to MAX bytes. */
uint64_t cli_size(const struct cli *cli, const char *opt, const char *arg, uint64_t min, uint64_t max);
/* OPT's DURATION in ms, at least MIN_MS. */
uint64_t cli_duration(const struct cli *cli, const char *opt, const char *arg, uint64_t min_ms);
/* OPT's integer from MIN to MAX. */
long cli_int(const struct cli *cli, const char *opt, const char *arg, long min, long max);

/* --publication NAME[,NAME...]: the names (pub_split_list), at most max;
 * anything else is a usage error. */
int cli_publications(const char *synopsis, char *arg, const char **names, int max);

#endif
