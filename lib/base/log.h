/*
 * log.h - diagnostics on stderr: one line per event, human text
 * ("pg-apply: error: ...") or one JSON object per line with --json.
 * Callers must never pass a password or a row value into a message.
 */
#ifndef PGSYNC_LOG_H
#define PGSYNC_LOG_H

#include <stdbool.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_init(const char *progname);
const char *log_progname(void);
void log_set_level(enum log_level level);
/* Parse "debug", "info", "warn"/"warning", "error"; false when unknown. */
bool log_parse_level(const char *s, enum log_level *out);
void log_set_json(bool json);
bool log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/*
 * Whether server notices are logged with their text (the default), or only
 * their severity and SQLSTATE (lib/base/conn.c): pg-apply's sessions run
 * the target's triggers, whose RAISE may print a row value.
 */
void log_set_server_text(bool shown);
bool log_server_text(void);

/* Log an error and exit with the given code. */
void log_fatal(int exit_code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/*
 * A function log_fatal() calls with its message before it exits, once: a
 * log_fatal() inside the hook exits at once. pg-apply ends its open target
 * transaction there, so that no exit path leaves it to the server's end of
 * session (a COPY in flight must fail with a message, never succeed).
 */
void log_set_fatal_hook(void (*hook)(const char *msg));

#endif
