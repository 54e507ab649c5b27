/*
 * walsource.h - what pg-walcat asks of the source on a normal (non
 * replication) connection before and while it streams: the slot and
 * publication preflight, the current WAL position, and the idle heartbeat
 * message; plus reading the downstream's acknowledgement file.
 * Never changes anything on the source but the heartbeat's WAL record.
 */
#ifndef PGSYNC_WALSOURCE_H
#define PGSYNC_WALSOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "checkpoint.h"
#include "conn.h"
#include "lsn.h"
#include "slotinfo.h"

/* The message prefix of heartbeats; pg-walcat never writes it as MESSAGE. */
#define WALSRC_HEARTBEAT_PREFIX "pgsync.heartbeat"

/*
 * Role and wal_level, the slot (exists, pgoutput, this database, not
 * invalidated) and every publication. Returns EXIT_DONE with the slot in
 * *slot, or the exit code with a one-line reason in err->msg.
 */
int walsrc_preflight(PGconn *conn, const char *slotname,
					 const char *const *pubs, int npubs,
					 struct slotinfo *slot, struct pgerr *err);

/* pg_current_wal_lsn(). */
bool walsrc_current_lsn(PGconn *conn, lsn_t *out, struct pgerr *err);

/*
 * Write a non-transactional heartbeat message (a WAL record the slot's
 * decoder will pass). With only_past set, only when the WAL insert
 * position is at or past it. *sent says whether one was written.
 */
bool walsrc_heartbeat(PGconn *conn, lsn_t only_past, bool *sent, struct pgerr *err);

/*
 * The acknowledgement file: *cp is what it says (its position LSN_INVALID and
 * *present false when it does not exist yet). A file naming another source
 * system than sysid (when known) or another slot is EXIT_CONTINUITY; an
 * unreadable or invalid one EXIT_RUNTIME; the reason goes to msg.
 */
int walsrc_read_ack(const char *path, const char *sysid, const char *slot,
					struct checkpoint *cp, bool *present, char *msg, size_t msglen);

#endif
