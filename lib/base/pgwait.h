/*
 * pgwait.h - waiting for a query result without shutting out signals: a
 * statement that can run for long (slot creation waiting for old
 * transactions, a slot advance decoding much WAL) is sent asynchronously and
 * cancelled on SIGINT/SIGTERM. Never leaves a query running on the server
 * after it reported an interruption.
 */
#ifndef PGSYNC_PGWAIT_H
#define PGSYNC_PGWAIT_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

/*
 * Wait for the result of a query sent with PQsendQuery/PQsendQueryParams.
 * Calls on_slow(arg) once when the query has run for slow_ms (0: never).
 * Returns the first result, the rest drained (caller PQclear()s; NULL when
 * the connection failed: see PQerrorMessage). On a stop signal (lib/sig) it
 * cancels the query, waits for the server to end it, sets *interrupted and
 * returns NULL, unless the statement completed before the cancel arrived
 * (then its result is returned as usual).
 */
PGresult *pgwait_result(PGconn *conn, uint64_t slow_ms,
						void (*on_slow)(void *arg), void *arg, bool *interrupted);

#endif
