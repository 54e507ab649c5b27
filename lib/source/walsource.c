#include "walsource.h"
#include "checkpoint.h"
#include "common.h"

#include <stdio.h>
#include <string.h>

static int
check_publications(PGconn *conn, const char *const *pubs, int npubs, struct pgerr *err)
{
	for (int i = 0; i < npubs; i++)
	{
		const char *params[1] = {pubs[i]};
		PGresult *r = conn_query(conn, "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1",
								 1, params, 1, err);

		if (r == NULL)
			return EXIT_RUNTIME;
		if (PQntuples(r) == 0)
		{
			PQclear(r);
			pgerr_printf(err, false, "publication \"%s\" does not exist in database \"%s\": "
						 "create it (CREATE PUBLICATION %s FOR TABLE ...) or fix --publication",
						 pubs[i], PQdb(conn), pubs[i]);
			return EXIT_PREFLIGHT;
		}
		PQclear(r);
	}
	return EXIT_DONE;
}

int
walsrc_preflight(PGconn *conn, const char *slotname,
				 const char *const *pubs, int npubs,
				 struct slotinfo *slot, struct pgerr *err)
{
	char why[256];
	int rc = slot_preflight(conn, true, err);

	if (rc != EXIT_DONE)
		return rc;
	switch (slotinfo_read(conn, slotname, slot, err))
	{
		case SLOT_ERROR:
			return EXIT_RUNTIME;
		case SLOT_MISSING:
			pgerr_printf(err, false, "replication slot \"%s\" does not exist: continuity is lost, resync required",
						 slotname);
			return EXIT_CONTINUITY;
		case SLOT_FOUND:
			break;
	}
	if (strcmp(slot->slot_type, "logical") != 0 || strcmp(slot->plugin, "pgoutput") != 0)
	{
		pgerr_printf(err, false, "replication slot \"%s\" is a %s slot with plugin \"%s\", not a logical pgoutput slot",
					 slotname, slot->slot_type, slot->plugin);
		return EXIT_PREFLIGHT;
	}
	if (strcmp(slot->database, PQdb(conn)) != 0)
	{
		pgerr_printf(err, false, "replication slot \"%s\" belongs to database \"%s\", not \"%s\"",
					 slotname, slot->database, PQdb(conn));
		return EXIT_PREFLIGHT;
	}
	if (slotinfo_invalidated(slot, why, sizeof(why)))
	{
		pgerr_printf(err, false, "replication slot \"%s\" is invalidated (%s): continuity is lost, resync required",
					 slotname, why);
		return EXIT_CONTINUITY;
	}
	return check_publications(conn, pubs, npubs, err);
}

bool
walsrc_current_lsn(PGconn *conn, lsn_t *out, struct pgerr *err)
{
	PGresult *r = conn_query_one(conn, "SELECT pg_catalog.pg_current_wal_lsn()", 0, NULL, 1, err);
	bool ok;

	if (r == NULL)
		return false;
	ok = lsn_parse(PQgetvalue(r, 0, 0), out);
	if (!ok)
		pgerr_printf(err, false, "unexpected result from pg_current_wal_lsn(): not a WAL position");
	PQclear(r);
	return ok;
}

bool
walsrc_heartbeat(PGconn *conn, lsn_t only_past, bool *sent, struct pgerr *err)
{
	char l[LSN_BUFSZ];
	const char *params[1] = {lsn_format(only_past, l)};
	PGresult *r = conn_query(conn,
							 "SELECT pg_catalog.pg_logical_emit_message(false, '" WALSRC_HEARTBEAT_PREFIX "', ''::text) "
							 "WHERE pg_catalog.pg_current_wal_lsn() >= $1::pg_lsn",
							 1, params, 1, err);

	if (r == NULL)
		return false;
	*sent = PQntuples(r) == 1;
	PQclear(r);
	return true;
}

int
walsrc_read_ack(const char *path, const char *sysid, const char *slot,
				struct checkpoint *cp, bool *present, char *msg, size_t msglen)
{
	char err[512];

	memset(cp, 0, sizeof(*cp));
	*present = false;
	switch (checkpoint_read(path, cp, err, sizeof(err)))
	{
		case CP_MISSING:
			memset(cp, 0, sizeof(*cp));
			return EXIT_DONE;
		case CP_INVALID:
			snprintf(msg, msglen, "%s", err);
			return EXIT_RUNTIME;
		case CP_OK:
			break;
	}
	if (cp->sysid[0] && sysid[0] && strcmp(cp->sysid, sysid) != 0)
	{
		snprintf(msg, msglen, "acknowledgement file \"%s\" is for source system %s, not %s: continuity is lost, resync required",
				 path, cp->sysid, sysid);
		return EXIT_CONTINUITY;
	}
	if (cp->slot[0] && strcmp(cp->slot, slot) != 0)
	{
		snprintf(msg, msglen, "acknowledgement file \"%s\" is for slot \"%s\", not \"%s\": continuity is lost, resync required",
				 path, cp->slot, slot);
		return EXIT_CONTINUITY;
	}
	*present = true;
	return EXIT_DONE;
}
