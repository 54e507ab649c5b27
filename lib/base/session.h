/*
 * session.h - the session settings of every connection pgsync opens, on a
 * source or a target, in one table, and the one way to connect with them.
 * The stream is UTF-8 text in ISO and postgres styles: every session that
 * writes it (walsender, snapshot COPY) or parses it back (apply, load) must
 * see the same settings, whatever the role's, database's or server's
 * defaults say. Programs never call conn_connect() themselves, and never
 * SET a setting of this table anywhere else.
 */
#ifndef PGSYNC_SESSION_H
#define PGSYNC_SESSION_H

#include <stdbool.h>
#include <libpq-fe.h>

#include "buf.h"
#include "conn.h"

enum session_kind {
	SESSION_SQL,				/* an ordinary session, source or target */
	SESSION_REPLICATION,		/* replication=database on the source */
};

/*
 * Connect and state the settings: client_encoding as a connection
 * parameter (it overrides the conninfo's, a service's and PGCLIENTENCODING),
 * the others with SET right after connecting, in one round trip, so that
 * neither a role's or database's defaults nor the connection's own options
 * can change them, while the connection's other options stay. Every
 * reconnect goes through here too, so none can forget them. Works on
 * replication=database connections (walsenders accept SET) on every
 * server version. Returns NULL with err filled on failure.
 */
PGconn *session_open(const char *conninfo, enum session_kind kind, struct pgerr *err);

/*
 * For a target session that writes rows: session_replication_role = replica,
 * so the target's triggers and foreign keys do not fire again for what
 * the source already checked (as PostgreSQL's apply worker). Needs
 * superuser or SET privilege on it: false with err (SQLSTATE 42501) when
 * the role may not.
 */
bool session_replica_role(PGconn *conn, struct pgerr *err);

/*
 * The settings every server version accepts at connect time, as a libpq
 * options value ("-c datestyle=ISO -c ..."), and the client encoding, for
 * the sessions other libpq programs open for pgsync (psql, pg_dump and
 * pg_restore in the orchestrator get them through its service file).
 */
void session_startup_options(struct buf *out);
const char *session_client_encoding(void);

#endif
