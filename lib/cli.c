#include "cli.h"
#include "common.h"
#include "log.h"

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
