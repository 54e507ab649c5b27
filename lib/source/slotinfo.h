/*
 * slotinfo.h - what the source says about one replication slot
 * (pg_replication_slots, whose columns vary by server version) and the
 * source-side preflight for slot work (wal_level, the role's attributes).
 * Only reads: never creates, moves or drops a slot.
 */
#ifndef PGSYNC_SLOTINFO_H
#define PGSYNC_SLOTINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "buf.h"
#include "conn.h"
#include "json.h"
#include "lsn.h"
#include "names.h"
#include "session.h"

/*
 * One row of pg_replication_slots. The has_* flags say whether the server
 * version has the column at all; a column it has may still be NULL, shown by
 * an empty string, LSN_INVALID, -1 or the *_null flag.
 */
struct slotinfo {
	char name[SLOT_NAME_MAX + 1];
	char plugin[128];			/* "" for a physical slot */
	char slot_type[16];			/* "logical" or "physical" */
	char database[128];			/* "" for a physical slot */
	bool temporary;
	bool active;
	int active_pid;				/* 0 when not active */
	lsn_t restart_lsn;			/* LSN_INVALID when NULL (invalidated) */
	lsn_t confirmed_flush_lsn;	/* LSN_INVALID when NULL */
	lsn_t current_lsn;			/* the server's flushed WAL position now */
	uint64_t retained_bytes;	/* current_lsn - restart_lsn, 0 when unknown */

	bool has_wal_status;		/* 13+ */
	char wal_status[16];		/* reserved, extended, unreserved, lost */
	bool safe_wal_size_null;
	int64_t safe_wal_size;		/* bytes; NULL when max_slot_wal_keep_size = -1 */

	bool has_two_phase;			/* 14+ */
	bool two_phase;

	bool has_conflicting;		/* 16+ */
	int conflicting;			/* 1, 0, or -1 for NULL */

	bool has_invalidation_reason;	/* 17+ */
	char invalidation_reason[64];	/* "" when valid */

	bool has_failover;			/* 17+ */
	bool failover;
	bool synced;				/* 17+: synced from a primary (kept after a promotion) */

	int server_version;			/* PQserverVersion */
};

enum slot_lookup { SLOT_FOUND = 0, SLOT_MISSING = 1, SLOT_ERROR = 2 };

/*
 * Read the slot named slot. Works on a normal connection and on a
 * replication=database one (walsenders take only the simple query protocol,
 * so there the name goes in as an escaped literal). SLOT_ERROR fills err.
 */
enum slot_lookup slotinfo_read(PGconn *conn, const char *slot,
							   struct slotinfo *out, struct pgerr *err);

/*
 * True when the slot can no longer stream: wal_status lost, an
 * invalidation_reason, conflicting (16), or a logical slot whose restart_lsn
 * is gone. why gets a short reason ("wal_status is lost").
 */
bool slotinfo_invalidated(const struct slotinfo *s, char *why, size_t whylen);

/*
 * Could pos have been delivered from this source? Nothing at or past the
 * server's flushed WAL position was decoded yet, so a position beyond it
 * comes from elsewhere (another server, a damaged file) and confirming it
 * would make the slot skip what commits up to there: false, with a one-line
 * reason in msg. Every program that confirms a position asks this first.
 */
bool slotinfo_position_possible(const struct slotinfo *s, lsn_t pos, char *msg, size_t msglen);

/* "key<TAB>value" lines, only the fields the server version has. */
void slotinfo_format_text(const struct slotinfo *s, struct buf *b);
/* One JSON object and a newline; absent columns are left out, NULL is null. */
void slotinfo_format_json(const struct slotinfo *s, struct buf *b);

/*
 * Source preflight for slot work, on a normal connection: the connected role
 * can log in and has REPLICATION (or is superuser), and, when need_logical,
 * wal_level is logical. Returns EXIT_DONE, EXIT_PREFLIGHT with the fix in
 * err->msg, or EXIT_RUNTIME when the checks could not run.
 */
int slot_preflight(PGconn *conn, bool need_logical, struct pgerr *err);

/*
 * The exit code for a failed session_open(): EXIT_PREFLIGHT when the role may
 * not log in or start a walsender (err->msg then carries the fix), otherwise
 * EXIT_RUNTIME.
 */
int slot_connect_failure(struct pgerr *err, const char *conninfo);
/* A session on the source, or exit with slot_connect_failure()'s code and
 * fix: "cannot connect to the source (URL without password): ...". */
PGconn *source_connect(const char *conninfo, enum session_kind kind);

#endif
