#include "log.h"
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *progname = "pgsync";
static enum log_level min_level = LOG_INFO;
static bool json_mode = false;
static bool journal = false;
static void (*fatal_hook)(const char *msg);
static bool server_text = true;

static const char *const level_names[] = {"debug", "info", "warning", "error"};
/* syslog priorities: debug, info, warning, err */
static const char *const journal_prio[] = {"<7>", "<6>", "<4>", "<3>"};

/*
 * Under systemd stderr is the journal, which reads a "<N>" syslog priority
 * at the start of a line as the line's level (SyslogLevelPrefix=, on by
 * default). JOURNAL_STREAM (device:inode) says which stream is the
 * journal's: a program that inherited the variable with stderr elsewhere (a
 * pipe to pgsync, which adds the prefix itself) writes plain lines. bin/pgsync
 * follows the same rule for its own lines.
 */
static bool
stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
		   dev == (unsigned long long) st.st_dev && ino == (unsigned long long) st.st_ino;
}

void
log_init(const char *name)
{
	const char *slash = strrchr(name, '/');

	progname = slash ? slash + 1 : name;
	journal = stderr_is_journal();
}

const char *
log_progname(void)
{
	return progname;
}

void
log_set_level(enum log_level level)
{
	min_level = level;
}

bool
log_parse_level(const char *s, enum log_level *out)
{
	if (strcmp(s, "warn") == 0)
	{
		*out = LOG_WARN;
		return true;
	}
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
		{
			*out = (enum log_level) i;
			return true;
		}
	return false;
}

void
log_set_json(bool json)
{
	json_mode = json;
}

bool
log_enabled(enum log_level level)
{
	return level >= min_level;
}

void
log_set_server_text(bool shown)
{
	server_text = shown;
}

bool
log_server_text(void)
{
	return server_text;
}

void
log_set_fatal_hook(void (*hook)(const char *msg))
{
	fatal_hook = hook;
}

static void
emit(enum log_level level, const char *fmt, va_list ap)
{
	char msg[4096];
	const char *prio = journal ? journal_prio[level] : "";
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One event, one line: a stray newline would break log parsers. */
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '.'))
		msg[--n] = '\0';
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';

	if (json_mode)
	{
		struct timespec ts;
		struct tm tm;
		char when[40], esc[sizeof(msg) * 6];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		json_escape(esc, sizeof(esc), msg);
		flockfile(stderr);
		fprintf(stderr, "%s{\"time\":\"%s.%06ldZ\",\"program\":\"%s\",\"pid\":%ld,\"level\":\"%s\",\"msg\":\"%s\"}\n",
				prio, when, ts.tv_nsec / 1000, progname, (long) getpid(), level_names[level], esc);
		funlockfile(stderr);
	}
	else if (level == LOG_ERROR || journal)
	{
		/* The documented one-line error, which scripts and pgsync match:
		 * "prog: error: ...", without a time; and under the journal,
		 * which stamps every line itself, every line so, after its level. */
		if (level == LOG_INFO)
			fprintf(stderr, "%s%s: %s\n", prio, progname, msg);
		else
			fprintf(stderr, "%s%s: %s: %s\n", prio, progname, level_names[level], msg);
	}
	else
	{
		/* Every other line begins with its UTC time, in milliseconds:
		 * "2026-03-01T12:00:00.123Z prog: [level: ]message", as pgsync's
		 * own lines (bin/pgsync, emit). */
		struct timespec ts;
		struct tm tm;
		char when[40];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		if (level == LOG_INFO)
			fprintf(stderr, "%s.%03ldZ %s: %s\n", when, ts.tv_nsec / 1000000, progname, msg);
		else
			fprintf(stderr, "%s.%03ldZ %s: %s: %s\n", when, ts.tv_nsec / 1000000, progname, level_names[level], msg);
	}
	fflush(stderr);
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level < min_level)
		return;
	va_start(ap, fmt);
	emit(level, fmt, ap);
	va_end(ap);
}

void
log_fatal(int exit_code, const char *fmt, ...)
{
	void (*hook)(const char *msg) = fatal_hook;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	emit(LOG_ERROR, fmt, ap);
	va_end(ap);
	/* Cleared before the call: a fatal error inside the hook exits. */
	fatal_hook = NULL;
	if (hook)
	{
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		hook(msg);
	}
	exit(exit_code);
}
