#include "conn.h"
#include "buf.h"
#include "common.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Server notices go through our log, one line each, never raw to stderr.
 * Without their text where the program says so (log_set_server_text()): the
 * severity and SQLSTATE only, since a notice on a target may come from a
 * trigger's RAISE, whose text may hold a row value.
 */
static void
notice_to_log(void *arg, const PGresult *res)
{
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	bool warning = sev && strcmp(sev, "WARNING") == 0;
	char line[1024];

	if (!log_server_text())
	{
		if (!log_enabled(warning ? LOG_WARN : LOG_DEBUG))
			return;
		snprintf(line, sizeof(line), "%s, SQLSTATE %s (its text is not logged: it may hold a row value)",
				 sev ? sev : "NOTICE", state ? state : "?");
	}
	else
		pgerr_one_line(line, sizeof(line), PQresultErrorMessage(res));
	if (warning)
		log_warn("server says: %s", line);
	else
		log_debug("server says: %s", line);
}

PGconn *
conn_connect(const char *conninfo, const char *const *extra_keys,
			 const char *const *extra_vals, struct pgerr *err)
{
	const char *keys[16], *vals[16];
	int n = 0;
	PGconn *conn;

	if (conninfo != NULL && conninfo[0] != '\0')
	{
		char *perr = NULL;
		PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);

		if (opts == NULL)
		{
			pgerr_printf(err, false, "invalid connection string: %s", "");
			if (perr)
			{
				pgerr_one_line(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg), perr);
				PQfreemem(perr);
			}
			return NULL;
		}
		PQconninfoFree(opts);
		keys[n] = "dbname";
		vals[n++] = conninfo;
	}
	keys[n] = "fallback_application_name";
	vals[n++] = log_progname();
	/* After dbname: a conninfo string cannot override them. */
	for (int i = 0; extra_keys && extra_keys[i] && n < 15; i++)
	{
		keys[n] = extra_keys[i];
		vals[n++] = extra_vals[i];
	}
	keys[n] = NULL;
	vals[n] = NULL;

	conn = PQconnectdbParams(keys, vals, 1);
	if (conn == NULL)
	{
		pgerr_printf(err, true, "out of memory connecting");
		return NULL;
	}
	if (PQstatus(conn) != CONNECTION_OK)
	{
		pgerr_set(err, conn, NULL);
		/* A refused or dropped connection may come back; bad auth will not. */
		err->retryable = strstr(err->msg, "authentication") == NULL &&
			strstr(err->msg, "does not exist") == NULL &&
			strstr(err->msg, "no pg_hba.conf entry") == NULL &&
			strstr(err->msg, "permission denied") == NULL &&
			strstr(err->msg, "must have") == NULL &&
			strstr(err->msg, "must be") == NULL;
		PQfinish(conn);
		return NULL;
	}
	PQsetNoticeReceiver(conn, notice_to_log, NULL);
	return conn;
}

/*
 * One value of service NAME in the service file PATH (libpq's format:
 * "[name]" sections of key=value lines), or false.
 */
static bool
service_value(const char *path, const char *name, const char *key, char *out, size_t outlen)
{
	FILE *f = path ? fopen(path, "r") : NULL;
	char line[1024];
	bool in = false, found = false;
	size_t klen = strlen(key);

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f))
	{
		char *p = line, *e;

		while (*p == ' ' || *p == '\t')
			p++;
		e = p + strlen(p);
		while (e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		if (*p == '[')
		{
			in = e > p + 1 && e[-1] == ']' && (size_t) (e - p - 2) == strlen(name) &&
				strncmp(p + 1, name, strlen(name)) == 0;
			continue;
		}
		if (in && strncmp(p, key, klen) == 0 && p[klen] == '=')
		{
			snprintf(out, outlen, "%s", p + klen + 1);
			found = true;
		}
	}
	memset(line, 0, sizeof(line));	/* a password line may have been read */
	fclose(f);
	return found;
}

/* The service files libpq reads, the user's first. */
static bool
service_lookup(const char *name, const char *key, char *out, size_t outlen)
{
	char path[4096];
	const char *v;

	if ((v = getenv("PGSERVICEFILE")) != NULL)
		return service_value(v, name, key, out, outlen);
	if ((v = getenv("HOME")) != NULL)
	{
		snprintf(path, sizeof(path), "%s/.pg_service.conf", v);
		if (service_value(path, name, key, out, outlen))
			return true;
	}
	if ((v = getenv("PGSYSCONFDIR")) != NULL)
	{
		snprintf(path, sizeof(path), "%s/pg_service.conf", v);
		return service_value(path, name, key, out, outlen);
	}
	return false;
}

/*
 * Where a connection goes, as libpq resolves it: the conninfo's own values,
 * then its service's (a pgsync program's connection is a service), then the
 * environment and libpq's defaults, so that every message that names a
 * connection names its host, port, user and database.
 */
void
conn_display(const char *conninfo, char *out, size_t outlen)
{
	static const char *const shown[] = {"host", "hostaddr", "port", "user", "dbname", NULL};
	PQconninfoOption *opts, *defs;
	const char *service = NULL;
	char val[4][512] = {{0}}, hostaddr[512] = "";
	struct buf b = BUF_INIT;

	opts = conninfo && conninfo[0] ? PQconninfoParse(conninfo, NULL) : PQconndefaults();
	if (opts == NULL)
	{
		snprintf(out, outlen, "(invalid connection string)");
		return;
	}
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, "service") == 0 && o->val && o->val[0])
			service = o->val;
	if (service == NULL)
		service = getenv("PGSERVICE");
	defs = PQconndefaults();
	for (int i = 0; shown[i]; i++)
	{
		char *v = i == 1 ? hostaddr : val[i < 1 ? 0 : i - 1];
		size_t vlen = i == 1 ? sizeof(hostaddr) : sizeof(val[0]);

		for (PQconninfoOption *o = opts; o->keyword && !v[0]; o++)
			if (strcmp(o->keyword, shown[i]) == 0 && o->val && o->val[0])
				snprintf(v, vlen, "%s", o->val);
		if (!v[0] && service)
			service_lookup(service, shown[i], v, vlen);
		/* libpq's environment and defaults (PGHOST, PGUSER, the OS user...) */
		for (PQconninfoOption *o = defs; defs && o->keyword && !v[0]; o++)
			if (strcmp(o->keyword, shown[i]) == 0 && o->val && o->val[0])
				snprintf(v, vlen, "%s", o->val);
	}
	PQconninfoFree(defs);
	PQconninfoFree(opts);
	/* val: host, port, user, dbname. The database defaults to the user. */
	if (!val[3][0])
		snprintf(val[3], sizeof(val[3]), "%s", val[2]);
	/* A dbname may itself be a conninfo string: never echo one. */
	if (strchr(val[3], '=') || strstr(val[3], "://"))
		val[3][0] = '\0';
	if (val[0][0] || !hostaddr[0])
		buf_printf(&b, "host=%s", val[0][0] ? val[0] : "(local socket)");
	if (hostaddr[0])
		buf_printf(&b, "%shostaddr=%s", b.len ? " " : "", hostaddr);
	buf_printf(&b, " port=%s", val[1][0] ? val[1] : "5432");
	if (val[2][0])
		buf_printf(&b, " user=%s", val[2]);
	if (val[3][0])
		buf_printf(&b, " dbname=%s", val[3]);
	snprintf(out, outlen, "%s", buf_cstr(&b));
	buf_free(&b);
}

bool
conn_command(PGconn *conn, const char *sql, int nparams,
			 const char *const *params, struct pgerr *err)
{
	PGresult *res = nparams > 0
		? PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0)
		: PQexec(conn, sql);
	bool ok = res != NULL && (PQresultStatus(res) == PGRES_COMMAND_OK ||
							  PQresultStatus(res) == PGRES_TUPLES_OK);

	if (!ok)
		pgerr_set(err, conn, res);
	PQclear(res);
	return ok;
}

/*
 * The shape rule of conn_query and conn_query_one: true when rows and
 * fields match (want_* < 0: any); otherwise false with err set to
 * "unexpected result: got R rows and F fields, expected ...", the wording of
 * PostgreSQL's own tools.
 */
static bool
conn_check_shape(int rows, int fields, int want_rows, int want_fields, struct pgerr *err)
{
	if ((want_rows < 0 || rows == want_rows) && (want_fields < 0 || fields == want_fields))
		return true;
	/* The wording of PostgreSQL's streamutil.c, so that both read alike. */
	if (want_rows < 0)
		pgerr_printf(err, false, "unexpected result: got %d rows and %d fields, expected %d fields",
					 rows, fields, want_fields);
	else if (want_fields < 0)
		pgerr_printf(err, false, "unexpected result: got %d rows and %d fields, expected %d rows",
					 rows, fields, want_rows);
	else
		pgerr_printf(err, false, "unexpected result: got %d rows and %d fields, expected %d rows and %d fields",
					 rows, fields, want_rows, want_fields);
	return false;
}

static PGresult *
query_shaped(PGconn *conn, const char *sql, int nparams, const char *const *params,
			 int nrows, int ncols, struct pgerr *err)
{
	PGresult *res = nparams > 0
		? PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0)
		: PQexec(conn, sql);

	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgerr_set(err, conn, res);
		PQclear(res);
		return NULL;
	}
	if (!conn_check_shape(PQntuples(res), PQnfields(res), nrows, ncols, err))
	{
		PQclear(res);
		return NULL;
	}
	return res;
}

PGresult *
conn_query(PGconn *conn, const char *sql, int nparams,
		   const char *const *params, int ncols, struct pgerr *err)
{
	return query_shaped(conn, sql, nparams, params, -1, ncols, err);
}

PGresult *
conn_query_one(PGconn *conn, const char *sql, int nparams,
			   const char *const *params, int ncols, struct pgerr *err)
{
	return query_shaped(conn, sql, nparams, params, 1, ncols, err);
}

bool
conn_identify_system(PGconn *conn, struct sysident *out, struct pgerr *err)
{
	PGresult *res = conn_query(conn, "IDENTIFY_SYSTEM", 0, NULL, -1, err);
	unsigned long tli;
	char *end;

	if (res == NULL)
		return false;
	if (PQntuples(res) != 1 || PQnfields(res) < 4)
	{
		pgerr_printf(err, false, "could not identify system: got %d rows and %d fields, expected 1 row and 4 or more fields",
					 PQntuples(res), PQnfields(res));
		PQclear(res);
		return false;
	}
	snprintf(out->sysid, sizeof(out->sysid), "%s", PQgetvalue(res, 0, 0));
	tli = strtoul(PQgetvalue(res, 0, 1), &end, 10);
	out->timeline = (uint32_t) tli;
	if (*end != '\0' || !lsn_parse(PQgetvalue(res, 0, 2), &out->xlogpos))
	{
		pgerr_printf(err, false, "could not identify system: unexpected timeline or position");
		PQclear(res);
		return false;
	}
	snprintf(out->dbname, sizeof(out->dbname), "%s", PQgetisnull(res, 0, 3) ? "" : PQgetvalue(res, 0, 3));
	PQclear(res);
	return true;
}

char *
conn_quote_ident(PGconn *conn, const char *ident)
{
	char *q = PQescapeIdentifier(conn, ident, strlen(ident));
	char *copy;

	if (q == NULL)
		log_fatal(EXIT_RUNTIME, "cannot quote identifier: %s", PQerrorMessage(conn));
	copy = xstrdup(q);
	PQfreemem(q);
	return copy;
}
