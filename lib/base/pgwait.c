#include "pgwait.h"
#include "common.h"
#include "sig.h"

#include <errno.h>
#include <poll.h>

/* Collect every pending result; keep the first. */
static PGresult *
drain(PGconn *conn)
{
	PGresult *first = NULL, *r;

	while ((r = PQgetResult(conn)) != NULL)
	{
		if (first == NULL)
			first = r;
		else
			PQclear(r);
	}
	return first;
}

PGresult *
pgwait_result(PGconn *conn, uint64_t slow_ms, void (*on_slow)(void *arg),
			  void *arg, bool *interrupted)
{
	uint64_t started = now_ms();
	bool told = slow_ms == 0 || on_slow == NULL;
	bool cancelled = false;
	PGresult *res;

	*interrupted = false;
	for (;;)
	{
		struct pollfd p[2] = {{PQsocket(conn), POLLIN, 0}, {sig_fd(), POLLIN, 0}};
		int nfds = cancelled || sig_fd() < 0 ? 1 : 2;

		if (!PQconsumeInput(conn) || !PQisBusy(conn))
			break;
		if (poll(p, (nfds_t) nfds, 1000) < 0 && errno != EINTR)
			break;
		if (!cancelled && sig_stop_requested())
		{
			char errbuf[256];
			PGcancel *cancel = PQgetCancel(conn);

			/* Then keep reading: the server answers the cancel with an error. */
			if (cancel)
			{
				PQcancel(cancel, errbuf, sizeof(errbuf));
				PQfreeCancel(cancel);
			}
			cancelled = true;
		}
		if (!told && now_ms() - started >= slow_ms)
		{
			on_slow(arg);
			told = true;
		}
	}
	res = drain(conn);
	/* A cancel that came too late leaves a completed statement: report it. */
	if (cancelled && (res == NULL || (PQresultStatus(res) != PGRES_TUPLES_OK &&
									  PQresultStatus(res) != PGRES_COMMAND_OK)))
	{
		PQclear(res);
		*interrupted = true;
		return NULL;
	}
	return res;
}
