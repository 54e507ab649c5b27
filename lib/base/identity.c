#include "identity.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
identity_other(char *msg, size_t msglen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(msg, msglen, "the source is " IDENTITY_OTHER_SERVER ": ");

	if (n < 0 || (size_t) n >= msglen)
		return;
	va_start(ap, fmt);
	vsnprintf(msg + n, msglen - (size_t) n, fmt, ap);
	va_end(ap);
}

bool
identity_same(const char *job_sysid, const char *sysid, char *msg, size_t msglen)
{
	if (job_sysid && job_sysid[0] && strcmp(job_sysid, sysid) != 0)
	{
		identity_other(msg, msglen, "system identifier %s, the job's is %s", sysid, job_sysid);
		return false;
	}
	return true;
}
