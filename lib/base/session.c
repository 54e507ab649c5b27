#include "session.h"
#include "buf.h"
#include "common.h"


/* The stream's encoding: values are UTF-8 on the wire, whatever the source
 * and target databases store; each server converts to and from its own. */
#define CLIENT_ENCODING "UTF8"

/*
 * since: the first server version (PG_VERSION_NUM) that knows the setting;
 * 0: every server. Values must not contain spaces or quotes: they are
 * written into SET commands and libpq options as they are.
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

/* SET every setting this server knows: one round trip. */
static bool
set_all(PGconn *conn, struct pgerr *err)
{
	int v = PQserverVersion(conn);
	struct buf sql = BUF_INIT;
	bool ok;

	for (size_t i = 0; i < NSETTINGS; i++)
		if (v >= settings[i].since)
			buf_printf(&sql, "%sSET %s = %s", sql.len ? "; " : "", settings[i].name, settings[i].value);
	ok = conn_command(conn, buf_cstr(&sql), 0, NULL, err);
	buf_free(&sql);
	return ok;
}

PGconn *
session_open(const char *conninfo, enum session_kind kind, struct pgerr *err)
{
	const char *keys[3], *vals[3];
	int n = 0;
	PGconn *conn;

	if (kind == SESSION_REPLICATION)
	{
		keys[n] = "replication";
		vals[n++] = "database";
	}
	keys[n] = "client_encoding";
	vals[n++] = CLIENT_ENCODING;
	keys[n] = NULL;
	vals[n] = NULL;
	conn = conn_connect(conninfo, keys, vals, err);
	if (conn != NULL && !set_all(conn, err))
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
