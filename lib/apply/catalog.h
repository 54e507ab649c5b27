/*
 * catalog.h - the pgsync schema in the target: job (state and the applied
 * position with the identity of its source), table_sync (per-table snapshot
 * progress) and job_runtime (heartbeat). Created on first use by whichever
 * program touches the target first; never dropped by any program.
 */
#ifndef PGSYNC_CATALOG_H
#define PGSYNC_CATALOG_H

#include <stdbool.h>
#include <libpq-fe.h>

#include "conn.h"

/* The DDL, idempotent; serialised with an advisory lock so concurrent first
 * runs do not race. */
extern const char catalog_ddl[];

/* Create the pgsync schema and tables if missing. */
bool catalog_ensure(PGconn *conn, struct pgerr *err);

#endif
