/*
 * conn.h - libpq connections for every program: connect from a conninfo
 * string or URL (NULL: libpq's environment), a display form with the password
 * removed for log lines, and results checked for status and shape (a failed
 * one fills a struct pgerr, pgerror.h).
 * Never log a conninfo string itself: always conn_display().
 */
#ifndef PGSYNC_CONN_H
#define PGSYNC_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "lsn.h"
#include "pgerror.h"

/*
 * Open a connection with extra libpq keywords (NULL-terminated, placed
 * after the conninfo so that it cannot override them). Programs connect
 * through session_open(), which adds the session settings. On failure
 * returns NULL and fills err.
 */
PGconn *conn_connect(const char *conninfo, const char *const *extra_keys,
					 const char *const *extra_vals, struct pgerr *err);

/* "host=/tmp port=5432 user=app dbname=shop": never contains a password. */
void conn_display(const char *conninfo, char *out, size_t outlen);

/*
 * Run a statement that returns no rows (parameters as text, may be NULL).
 * Returns true on success; false with err filled.
 */
bool conn_command(PGconn *conn, const char *sql, int nparams,
				  const char *const *params, struct pgerr *err);

/*
 * Run a query that must return rows with exactly ncols columns (ncols < 0:
 * any). Returns the result (caller PQclear()s) or NULL with err filled;
 * a wrong shape is an error "got R rows and F fields, expected M fields".
 */
PGresult *conn_query(PGconn *conn, const char *sql, int nparams,
					 const char *const *params, int ncols, struct pgerr *err);

/*
 * As conn_query, and the result must also have exactly one row, so that the
 * caller may read row 0: a statement whose single row is its answer.
 */
PGresult *conn_query_one(PGconn *conn, const char *sql, int nparams,
						 const char *const *params, int ncols, struct pgerr *err);

/* IDENTIFY_SYSTEM on a replication connection. */
struct sysident {
	char sysid[24];
	uint32_t timeline;
	lsn_t xlogpos;
	char dbname[128];
};
bool conn_identify_system(PGconn *conn, struct sysident *out, struct pgerr *err);

/* Quote an identifier (PQescapeIdentifier) into a malloc'd string. */
char *conn_quote_ident(PGconn *conn, const char *ident);

#endif
