/*
 * cli.h - what every program does with bad usage: one error line (when there
 * is something to say) and the synopsis on stderr, exit 2. Never prints to
 * stdout: that carries only data.
 */
#ifndef PGSYNC_CLI_H
#define PGSYNC_CLI_H

void cli_usage_error(const char *synopsis, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

#endif
