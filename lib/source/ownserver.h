/*
 * ownserver.h - "which server is this": is the server answering at the
 * source's address the job's own server, with the history the job took its
 * changes from? One rule, used by pg-walcat at every connection, by pg-ack
 * before it confirms a checkpoint file's position, and by pgsync (through
 * pg-slot lineage) before and while it runs a job. A server on another
 * timeline is judged by source/lineage (the timeline history against the
 * applied position) before this; here only what holds on any timeline.
 *
 * What it compares, in this order (each first mismatch is the reason):
 *
 *  1. identity (base/identity): the system identifier the job recorded
 *     against IDENTIFY_SYSTEM's;
 *  2. the server's flushed WAL against the most the job took from it (the
 *     applied or acknowledged position): the job's own server never loses
 *     WAL it sent, so a server whose WAL ends before it was restored from an
 *     older backup (or is another server of the same identifier);
 *  3. the slot's confirmed position against the job's consistent point
 *     (where the job's slot was created): a slot that confirmed less is a
 *     younger slot of the same name;
 *  4. on the job's recorded timeline only, the slot's restart_lsn against
 *     the highest one the job saw on its slot (a promoted standby's synced
 *     slot may restart earlier than the old primary's did; its timeline
 *     already proved its history): the server writes a new restart_lsn to disk before it uses it,
 *     so on the job's server it never goes back, even across a crash,
 *     while an older copy of the server has the older one. (Its confirmed
 *     position is no proof: before PostgreSQL 17 a restart, and on every
 *     version a crash, can set it back to what was last written to disk.)
 *
 * Check 2 alone fails only while the copy's WAL is behind; check 4 keeps
 * failing after its WAL grew past the job's position, which is what makes
 * the verdict the same on every run. A mismatch says IDENTITY_OTHER_SERVER.
 * What the job does not know (LSN_INVALID, "" or 0) is not compared.
 * It only decides: it reads nothing itself (callers bring the facts) and
 * never streams, confirms or drops anything.
 */
#ifndef PGSYNC_OWNSERVER_H
#define PGSYNC_OWNSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "lsn.h"
#include "slotinfo.h"

/* What the job knows of its source. */
struct own_server {
	const char *sysid;			/* system identifier */
	uint32_t timeline;
	lsn_t created;				/* the consistent point where its slot was created */
	lsn_t taken;				/* the most it took from the source (applied, acknowledged) */
	lsn_t restart_floor;		/* the highest restart_lsn it saw on its slot */
};

/*
 * True when the server (id, and slot when the slot exists; NULL when it
 * does not, which is for the caller to report) can be the job's. Otherwise
 * false with the one-line reason in msg.
 */
bool own_server_holds(const struct own_server *job, const struct sysident *id,
				   const struct slotinfo *slot, char *msg, size_t msglen);

#endif
