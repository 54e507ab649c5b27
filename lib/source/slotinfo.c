#include "slotinfo.h"
#include "common.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Columns a server version does not have are selected as typed NULLs so the
 * result has one shape everywhere; the has_* flags keep them out of output.
 * The current position is the flushed one: it is what walsenders send up to
 * and what pg_replication_slot_advance() clamps to. On a standby (16+ can
 * have logical slots) it is the replay position.
 */
static void
build_query(struct buf *q, int v, bool replication)
{
	buf_puts(q, "SELECT s.slot_name, coalesce(s.plugin, ''), s.slot_type, coalesce(s.database, ''), "
			 "s.temporary, s.active, coalesce(s.active_pid, 0), s.restart_lsn, s.confirmed_flush_lsn, ");
	buf_puts(q, v >= 130000 ? "s.wal_status, s.safe_wal_size, " : "NULL::text, NULL::bigint, ");
	buf_puts(q, v >= 140000 ? "s.two_phase, " : "NULL::bool, ");
	buf_puts(q, v >= 160000 ? "s.conflicting, " : "NULL::bool, ");
	buf_puts(q, v >= 170000 ? "s.invalidation_reason, s.failover, s.synced, " : "NULL::text, NULL::bool, NULL::bool, ");
	buf_puts(q, "CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() "
			 "ELSE pg_catalog.pg_current_wal_flush_lsn() END "
			 "FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = ");
	if (!replication)
		buf_puts(q, "$1");
}

#define SLOT_NCOLS 17

/* True when conn was opened with replication=database (a walsender). */
static bool
is_replication_conn(PGconn *conn)
{
	PQconninfoOption *opts = PQconninfo(conn);
	bool repl = false;

	if (opts == NULL)
		return false;
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, "replication") == 0 && o->val && o->val[0] &&
			strcmp(o->val, "0") != 0 && strcmp(o->val, "false") != 0 &&
			strcmp(o->val, "off") != 0 && strcmp(o->val, "no") != 0)
			repl = true;
	PQconninfoFree(opts);
	return repl;
}

static bool
get_bool(const PGresult *r, int col)
{
	return !PQgetisnull(r, 0, col) && strcmp(PQgetvalue(r, 0, col), "t") == 0;
}

static bool
get_lsn(const PGresult *r, int col, lsn_t *out, struct pgerr *err)
{
	*out = LSN_INVALID;
	if (PQgetisnull(r, 0, col))
		return true;
	if (lsn_parse(PQgetvalue(r, 0, col), out))
		return true;
	pgerr_printf(err, false, "unexpected LSN \"%s\" in column %s of pg_replication_slots",
				 PQgetvalue(r, 0, col), PQfname(r, col));
	return false;
}

enum slot_lookup
slotinfo_read(PGconn *conn, const char *slot, struct slotinfo *out,
			  struct pgerr *err)
{
	struct buf q = BUF_INIT;
	PGresult *r;
	int v = PQserverVersion(conn);
	bool repl = is_replication_conn(conn);
	long pid;

	memset(out, 0, sizeof(*out));
	out->server_version = v;
	build_query(&q, v, repl);
	if (repl)
	{
		char *lit = PQescapeLiteral(conn, slot, strlen(slot));

		if (lit == NULL)
		{
			pgerr_set(err, conn, NULL);
			buf_free(&q);
			return SLOT_ERROR;
		}
		buf_puts(&q, lit);
		PQfreemem(lit);
		r = conn_query(conn, buf_cstr(&q), 0, NULL, SLOT_NCOLS, err);
	}
	else
	{
		const char *params[1] = {slot};

		r = conn_query(conn, buf_cstr(&q), 1, params, SLOT_NCOLS, err);
	}
	buf_free(&q);
	if (r == NULL)
		return SLOT_ERROR;
	if (PQntuples(r) == 0)
	{
		PQclear(r);
		return SLOT_MISSING;
	}
	if (PQntuples(r) != 1)
	{
		pgerr_printf(err, false, "unexpected result reading replication slot \"%s\": got %d rows, expected 1",
					 slot, PQntuples(r));
		PQclear(r);
		return SLOT_ERROR;
	}
	snprintf(out->name, sizeof(out->name), "%s", PQgetvalue(r, 0, 0));
	snprintf(out->plugin, sizeof(out->plugin), "%s", PQgetvalue(r, 0, 1));
	snprintf(out->slot_type, sizeof(out->slot_type), "%s", PQgetvalue(r, 0, 2));
	snprintf(out->database, sizeof(out->database), "%s", PQgetvalue(r, 0, 3));
	out->temporary = get_bool(r, 4);
	out->active = get_bool(r, 5);
	if (!parse_int(PQgetvalue(r, 0, 6), 0, 0x7fffffff, &pid))
		pid = 0;
	out->active_pid = (int) pid;
	if (!get_lsn(r, 7, &out->restart_lsn, err) ||
		!get_lsn(r, 8, &out->confirmed_flush_lsn, err) ||
		!get_lsn(r, 16, &out->current_lsn, err))
	{
		PQclear(r);
		return SLOT_ERROR;
	}
	if (out->restart_lsn != LSN_INVALID)
		out->retained_bytes = lsn_diff(out->current_lsn, out->restart_lsn);

	out->has_wal_status = v >= 130000;
	snprintf(out->wal_status, sizeof(out->wal_status), "%s",
			 PQgetisnull(r, 0, 9) ? "" : PQgetvalue(r, 0, 9));
	out->safe_wal_size_null = PQgetisnull(r, 0, 10);
	if (!out->safe_wal_size_null)
	{
		errno = 0;
		out->safe_wal_size = strtoll(PQgetvalue(r, 0, 10), NULL, 10);
	}
	out->has_two_phase = v >= 140000;
	out->two_phase = get_bool(r, 11);
	out->has_conflicting = v >= 160000;
	out->conflicting = PQgetisnull(r, 0, 12) ? -1 : get_bool(r, 12);
	out->has_invalidation_reason = v >= 170000;
	snprintf(out->invalidation_reason, sizeof(out->invalidation_reason), "%s",
			 PQgetisnull(r, 0, 13) ? "" : PQgetvalue(r, 0, 13));
	out->has_failover = v >= 170000;
	out->failover = get_bool(r, 14);
	out->synced = get_bool(r, 15);
	PQclear(r);
	return SLOT_FOUND;
}

bool
slotinfo_position_possible(const struct slotinfo *s, lsn_t pos, char *msg, size_t msglen)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ];

	if (pos <= s->current_lsn)
		return true;
	snprintf(msg, msglen, "position %s is past the source's flushed WAL position %s: "
			 "it cannot come from this source", lsn_format(pos, a), lsn_format(s->current_lsn, b));
	return false;
}

bool
slotinfo_invalidated(const struct slotinfo *s, char *why, size_t whylen)
{
	if (s->invalidation_reason[0])
		snprintf(why, whylen, "invalidation_reason is %s", s->invalidation_reason);
	else if (strcmp(s->wal_status, "lost") == 0)
		snprintf(why, whylen, "wal_status is lost");
	/* 16 only: conflicting is how a recovery conflict shows before 17's reason column. */
	else if (s->conflicting == 1)
		snprintf(why, whylen, "it conflicted with recovery");
	else if (strcmp(s->slot_type, "logical") == 0 && s->restart_lsn == LSN_INVALID)
		snprintf(why, whylen, "its restart_lsn is gone");
	else
		return false;
	return true;
}

/*
 * One field in either form. A NULL-able text value is passed as NULL when
 * absent; raw says the value is a JSON literal (number, boolean), not text.
 */
struct emit {
	struct buf *b;
	bool json;
	bool first;
};

static void
field(struct emit *e, const char *key, const char *val, bool raw)
{
	if (!e->json)
	{
		buf_printf(e->b, "%s\t%s\n", key, val ? val : "-");
		return;
	}
	buf_puts(e->b, e->first ? "{" : ",");
	e->first = false;
	buf_json_string(e->b, key);
	buf_putc(e->b, ':');
	if (val == NULL)
		buf_puts(e->b, "null");
	else if (raw)
		buf_puts(e->b, val);
	else
		buf_json_string(e->b, val);
}

static void
field_lsn(struct emit *e, const char *key, lsn_t lsn)
{
	char l[LSN_BUFSZ];

	field(e, key, lsn == LSN_INVALID ? NULL : lsn_format(lsn, l), false);
}

static void
field_bool(struct emit *e, const char *key, bool v)
{
	field(e, key, v ? "true" : "false", true);
}

static void
format(const struct slotinfo *s, struct buf *b, bool json)
{
	struct emit e = {b, json, true};
	char num[32];

	field(&e, "slot", s->name, false);
	field(&e, "slot_type", s->slot_type, false);
	field(&e, "plugin", s->plugin[0] ? s->plugin : NULL, false);
	field(&e, "database", s->database[0] ? s->database : NULL, false);
	field_bool(&e, "temporary", s->temporary);
	field_bool(&e, "active", s->active);
	snprintf(num, sizeof(num), "%d", s->active_pid);
	field(&e, "active_pid", s->active_pid ? num : NULL, true);
	field_lsn(&e, "restart_lsn", s->restart_lsn);
	field_lsn(&e, "confirmed_flush_lsn", s->confirmed_flush_lsn);
	if (s->has_wal_status)
	{
		field(&e, "wal_status", s->wal_status[0] ? s->wal_status : NULL, false);
		snprintf(num, sizeof(num), "%lld", (long long) s->safe_wal_size);
		field(&e, "safe_wal_size", s->safe_wal_size_null ? NULL : num, true);
	}
	if (s->has_two_phase)
		field_bool(&e, "two_phase", s->two_phase);
	if (s->has_conflicting)
		field(&e, "conflicting", s->conflicting < 0 ? NULL : s->conflicting ? "true" : "false", true);
	if (s->has_invalidation_reason)
		field(&e, "invalidation_reason", s->invalidation_reason[0] ? s->invalidation_reason : NULL, false);
	if (s->has_failover)
	{
		field_bool(&e, "failover", s->failover);
		field_bool(&e, "synced", s->synced);
	}
	field_lsn(&e, "current_lsn", s->current_lsn);
	snprintf(num, sizeof(num), "%llu", (unsigned long long) s->retained_bytes);
	field(&e, "retained_bytes", s->restart_lsn == LSN_INVALID ? NULL : num, true);
	if (json)
		buf_puts(b, "}\n");
}

void
slotinfo_format_text(const struct slotinfo *s, struct buf *b)
{
	format(s, b, false);
}

void
slotinfo_format_json(const struct slotinfo *s, struct buf *b)
{
	format(s, b, true);
}

int
slot_preflight(PGconn *conn, bool need_logical, struct pgerr *err)
{
	PGresult *r = conn_query(conn,
							 "SELECT pg_catalog.current_setting('wal_level'), pg_catalog.quote_ident(r.rolname), "
							 "r.rolsuper OR r.rolreplication, r.rolcanlogin "
							 "FROM pg_catalog.pg_roles r WHERE r.rolname = current_user",
							 0, NULL, 4, err);
	int rc = EXIT_DONE;

	if (r == NULL)
		return EXIT_RUNTIME;
	if (PQntuples(r) != 1)
	{
		pgerr_printf(err, false, "cannot find the connected role in pg_roles: got %d rows, expected 1",
					 PQntuples(r));
		PQclear(r);
		return EXIT_RUNTIME;
	}
	if (need_logical && strcmp(PQgetvalue(r, 0, 0), "logical") != 0)
	{
		pgerr_printf(err, false, "the source has wal_level = %s, logical decoding needs logical: "
					 "set wal_level = logical in postgresql.conf and restart the server",
					 PQgetvalue(r, 0, 0));
		rc = EXIT_PREFLIGHT;
	}
	else if (strcmp(PQgetvalue(r, 0, 2), "t") != 0)
	{
		pgerr_printf(err, false, "role %s has neither REPLICATION nor SUPERUSER: "
					 "run ALTER ROLE %s REPLICATION as a superuser",
					 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 1));
		rc = EXIT_PREFLIGHT;
	}
	else if (strcmp(PQgetvalue(r, 0, 3), "t") != 0)
	{
		/* Reachable through SET ROLE; the tools must connect as this role. */
		pgerr_printf(err, false, "role %s cannot log in: run ALTER ROLE %s LOGIN as a superuser",
					 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 1));
		rc = EXIT_PREFLIGHT;
	}
	PQclear(r);
	return rc;
}

/* The role a conninfo connects as: its user=, else libpq's default. */
static void
conninfo_user(const char *conninfo, char *out, size_t outlen)
{
	PQconninfoOption *opts = conninfo && conninfo[0] ? PQconninfoParse(conninfo, NULL) : NULL;
	PQconninfoOption *defs = PQconndefaults();

	out[0] = '\0';
	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (strcmp(o->keyword, "user") == 0 && o->val && o->val[0])
			snprintf(out, outlen, "%s", o->val);
	for (PQconninfoOption *o = defs; !out[0] && o && o->keyword; o++)
		if (strcmp(o->keyword, "user") == 0 && o->val && o->val[0])
			snprintf(out, outlen, "%s", o->val);
	if (!out[0])
		snprintf(out, outlen, "<role>");
	PQconninfoFree(opts);
	PQconninfoFree(defs);
}

int
slot_connect_failure(struct pgerr *err, const char *conninfo)
{
	char user[128], msg[768];

	/* Room for the fix after the server's message, which is cut if need be. */
	snprintf(msg, sizeof(msg), "%.700s", err->msg);
	conninfo_user(conninfo, user, sizeof(user));
	if (strstr(msg, "is not permitted to log in"))
	{
		snprintf(err->msg, sizeof(err->msg), "%s: run ALTER ROLE %s LOGIN as a superuser", msg, user);
		return EXIT_PREFLIGHT;
	}
	/* 15: "must be superuser or replication role to start walsender";
	 * 16+: "permission denied to start WAL sender". */
	if (strstr(msg, "replication role") || strstr(msg, "WAL sender"))
	{
		snprintf(err->msg, sizeof(err->msg), "%s: run ALTER ROLE %s REPLICATION as a superuser", msg, user);
		return EXIT_PREFLIGHT;
	}
	return EXIT_RUNTIME;
}

PGconn *
source_connect(const char *conninfo, enum session_kind kind)
{
	struct pgerr err;
	char shown[512];
	PGconn *conn = session_open(conninfo, kind, &err);

	if (conn == NULL)
	{
		int rc = slot_connect_failure(&err, conninfo);

		conn_display(conninfo, shown, sizeof(shown));
		log_fatal(rc, "cannot connect to the source (%s): %s", shown, err.msg);
	}
	return conn;
}
