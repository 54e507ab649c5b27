#include "session.h"
#include "buf.h"
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* The stream's encoding: values are UTF-8 on the wire, whatever the source
 * and target databases store; each server converts to and from its own. */
#define CLIENT_ENCODING "UTF8"

/*
 * since: the first server version (PG_VERSION_NUM) that knows the setting.
 * 0 means every server pgsync talks to: it goes into the startup packet.
 * Others are SET after connecting, as an unknown name in the startup
 * packet would refuse the connection. Values must not contain spaces
 * (PGOPTIONS would need them escaped).
 */
static const struct setting {
	const char *name;
	const char *value;
	int since;
} settings[] = {
	/* The text form of values: unambiguous, and what the other side parses. */
	{"datestyle", "ISO", 0},
	{"intervalstyle", "postgres", 0},
	{"extra_float_digits", "3", 0},
	{"bytea_output", "hex", 0},
	{"timezone", "UTC", 0},
	/* Long copies, long transactions and idle waits for input are normal
	 * here: a default meant for interactive sessions must not cancel them. */
	{"statement_timeout", "0", 0},
	{"lock_timeout", "0", 0},
	{"idle_in_transaction_session_timeout", "0", 0},
	{"idle_session_timeout", "0", 140000},
	{"transaction_timeout", "0", 170000},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

void
session_startup_options(struct buf *out)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (settings[i].since == 0)
			buf_printf(out, "%s-c %s=%s", out->len ? " " : "", settings[i].name, settings[i].value);
}

const char *
session_client_encoding(void)
{
	return CLIENT_ENCODING;
}

/* The options the connection itself asks for: its conninfo's, else PGOPTIONS
 * (which libpq would no longer read once options is given explicitly). */
static void
own_options(const char *conninfo, struct buf *out)
{
	PQconninfoOption *opts = conninfo && conninfo[0] ? PQconninfoParse(conninfo, NULL) : NULL;
	const char *env = getenv("PGOPTIONS");
	bool found = false;

	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (strcmp(o->keyword, "options") == 0 && o->val && o->val[0])
		{
			buf_puts(out, o->val);
			found = true;
		}
	PQconninfoFree(opts);
	if (!found && env && env[0])
		buf_puts(out, env);
}

static bool
set_late(PGconn *conn, struct pgerr *err)
{
	int v = PQserverVersion(conn);
	struct buf sql = BUF_INIT;
	bool ok = true;

	for (size_t i = 0; i < NSETTINGS; i++)
		if (settings[i].since != 0 && v >= settings[i].since)
			buf_printf(&sql, "%sSET %s = %s", sql.len ? "; " : "", settings[i].name, settings[i].value);
	if (sql.len)
		ok = conn_command(conn, buf_cstr(&sql), 0, NULL, err);
	buf_free(&sql);
	return ok;
}

PGconn *
session_open(const char *conninfo, enum session_kind kind, struct pgerr *err)
{
	struct buf options = BUF_INIT;
	const char *keys[4], *vals[4];
	int n = 0;
	PGconn *conn;

	own_options(conninfo, &options);
	if (options.len)
		buf_putc(&options, ' ');
	session_startup_options(&options);
	if (kind == SESSION_REPLICATION)
	{
		keys[n] = "replication";
		vals[n++] = "database";
	}
	keys[n] = "options";
	vals[n++] = buf_cstr(&options);
	keys[n] = "client_encoding";
	vals[n++] = CLIENT_ENCODING;
	keys[n] = NULL;
	vals[n] = NULL;
	conn = conn_connect(conninfo, keys, vals, err);
	buf_free(&options);
	if (conn != NULL && !set_late(conn, err))
	{
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

bool
session_replica_role(PGconn *conn, struct pgerr *err)
{
	return conn_command(conn, "SET session_replication_role = replica", 0, NULL, err);
}
