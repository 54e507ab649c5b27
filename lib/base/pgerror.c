#include "pgerror.h"
#include "common.h"
#include "log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
 * What a SQLSTATE means to pgsync: the one table. A row is a whole code
 * (five characters) or a class (two); the first row that matches wins, so
 * codes come before their class. Anything not listed is exit 1, not
 * retried.
 *
 * Exit 5 (unsupported change or consistency violation, DESIGN's exit codes)
 * claims that the change itself cannot be applied to this target as it is,
 * so that a restart would fail the same way and an operator must act (the
 * service manager does not restart after 5). It is given only to the
 * classes that say so: data (22), integrity (23), cardinality (21), syntax,
 * schema and access (42, 3F: a schema the target lacks), features the
 * target does not support for this change (0A: a truncate of a table
 * another references, COPY into a table with row security), limits of the
 * target (54: a row or index entry too big), a prerequisite state of the
 * table (55000: published on the target for updates without a replica
 * identity), check options (44) and the target's own triggers and routines
 * refusing the row (09, 20, 27, 2F, 38, 39, P0). Exit 3 is a missing
 * privilege (42501): a prerequisite. Everything else is exit 1 (runtime):
 * the server, its resources or another session stood in the way, and a
 * later attempt may succeed.
 *
 * Before this table, pg-apply's changes and its snapshot loader decided
 * differently: the loader gave exit 5 to every class it did not know
 * (55P03, 0A000, 25P02, ...), the changes exit 1 to every class but 22, 23
 * and 42. Decided here, for both alike: 55P03 (a lock not granted in time)
 * and 25P02 (a statement after an earlier error, which was the cause and
 * may not recur) are exit 1; 0A000, 3F, 54, 55000, 21, 44 and the target's
 * triggers and routines are exit 5.
 *
 * retry: a new session may succeed where this one failed (pg-apply
 * reconnects, pg-walcat resumes): a lost connection, a server shutting
 * down or not yet up, too many connections, a serialization failure or
 * deadlock, a replication slot still held by a walsender on its way out.
 */
static const struct sqlstate_row {
	const char *state;			/* 5 characters: a code; 2: a class */
	bool retry;
	int code;
} sqlstate_table[] = {
	{"42501", false, EXIT_PREFLIGHT},	/* insufficient_privilege */
	{"40001", true, EXIT_RUNTIME},		/* serialization_failure */
	{"40P01", true, EXIT_RUNTIME},		/* deadlock_detected */
	{"53300", true, EXIT_RUNTIME},		/* too_many_connections */
	{"55006", true, EXIT_RUNTIME},		/* object_in_use: a slot busy for a moment */
	{"55P03", false, EXIT_RUNTIME},		/* lock_not_available */
	{"55000", false, EXIT_UNSUPPORTED},	/* object_not_in_prerequisite_state */
	{"57P01", true, EXIT_RUNTIME},		/* admin_shutdown */
	{"57P02", true, EXIT_RUNTIME},		/* crash_shutdown */
	{"57P03", true, EXIT_RUNTIME},		/* cannot_connect_now */
	{"08", true, EXIT_RUNTIME},			/* connection exception */
	{"09", false, EXIT_UNSUPPORTED},	/* triggered action exception */
	{"0A", false, EXIT_UNSUPPORTED},	/* feature not supported */
	{"20", false, EXIT_UNSUPPORTED},	/* case not found (in a routine) */
	{"21", false, EXIT_UNSUPPORTED},	/* cardinality violation */
	{"22", false, EXIT_UNSUPPORTED},	/* data exception */
	{"23", false, EXIT_UNSUPPORTED},	/* integrity constraint violation */
	{"27", false, EXIT_UNSUPPORTED},	/* triggered data change violation */
	{"2F", false, EXIT_UNSUPPORTED},	/* SQL routine exception */
	{"38", false, EXIT_UNSUPPORTED},	/* external routine exception */
	{"39", false, EXIT_UNSUPPORTED},	/* external routine invocation exception */
	{"3F", false, EXIT_UNSUPPORTED},	/* invalid schema name */
	{"42", false, EXIT_UNSUPPORTED},	/* syntax error or access rule violation */
	{"44", false, EXIT_UNSUPPORTED},	/* WITH CHECK OPTION violation */
	{"54", false, EXIT_UNSUPPORTED},	/* program limit exceeded */
	{"P0", false, EXIT_UNSUPPORTED},	/* PL/pgSQL error (RAISE in a trigger) */
};

static const struct sqlstate_row *
classify(const char *s)
{
	if (s == NULL || strlen(s) != 5)
		return NULL;
	for (size_t i = 0; i < sizeof(sqlstate_table) / sizeof(sqlstate_table[0]); i++)
		if (strncmp(s, sqlstate_table[i].state, strlen(sqlstate_table[i].state)) == 0)
			return &sqlstate_table[i];
	return NULL;
}

bool
pgerr_retryable(const char *sqlstate)
{
	const struct sqlstate_row *r = classify(sqlstate);

	return r != NULL && r->retry;
}

int
pgerr_exit_code(const char *sqlstate)
{
	const struct sqlstate_row *r = classify(sqlstate);

	return r != NULL ? r->code : EXIT_RUNTIME;
}

int
pgerr_exit(const struct pgerr *err)
{
	return err->retryable ? EXIT_RUNTIME : pgerr_exit_code(err->sqlstate);
}

int
pgerr_exit_code_setup(const char *sqlstate)
{
	return pgerr_exit_code(sqlstate) == EXIT_PREFLIGHT ? EXIT_PREFLIGHT : EXIT_RUNTIME;
}

void
pgerr_one_line(char *dst, size_t dstlen, const char *src)
{
	size_t n;

	snprintf(dst, dstlen, "%s", src ? src : "");
	for (char *p = dst; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	n = strlen(dst);
	while (n > 0 && (dst[n - 1] == ' ' || dst[n - 1] == '.'))
		dst[--n] = '\0';
}

void
pgerr_printf(struct pgerr *err, bool retryable, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	err->sqlstate[0] = '\0';
	err->retryable = retryable;
}

/*
 * libpq's own messages for a connection the server dropped. They carry no
 * SQLSTATE, and libpq does not always mark the connection bad right away
 * (after an immediate shutdown it may still report CONNECTION_OK).
 */
static bool
connection_lost(const char *msg)
{
	return strstr(msg, "server closed the connection") != NULL ||
		strstr(msg, "could not send data to server") != NULL ||
		strstr(msg, "could not receive data from server") != NULL ||
		strstr(msg, "no connection to the server") != NULL ||
		strstr(msg, "terminating connection") != NULL ||
		strstr(msg, "connection to server was lost") != NULL;
}

void
pgerr_set(struct pgerr *err, PGconn *conn, const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", state ? state : "");
	if (primary)
		pgerr_one_line(err->msg, sizeof(err->msg), primary);
	else if (res && PQresultErrorMessage(res)[0])
		pgerr_one_line(err->msg, sizeof(err->msg), PQresultErrorMessage(res));
	else
		pgerr_one_line(err->msg, sizeof(err->msg), conn ? PQerrorMessage(conn) : "unknown error");
	if (err->msg[0] == '\0')
		snprintf(err->msg, sizeof(err->msg), "unknown error");
	err->retryable = pgerr_retryable(err->sqlstate) ||
		(conn != NULL && PQstatus(conn) == CONNECTION_BAD) ||
		(err->sqlstate[0] == '\0' && connection_lost(err->msg));
}

const char *
pgerr_text(const struct pgerr *err, const char *column, char *out, size_t outlen)
{
	if (err->sqlstate[0] == '\0')
		snprintf(out, outlen, "%s", err->msg);
	else if (column != NULL)
		snprintf(out, outlen, "%s (column \"%s\", SQLSTATE %s)", err->msg, column, err->sqlstate);
	else
		snprintf(out, outlen, "%s (SQLSTATE %s)", err->msg, err->sqlstate);
	return out;
}

static bool
ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static void
redact(const char *sqlstate, const char *msg, char *out, size_t outlen)
{
	size_t o = 0;
	bool values = strncmp(sqlstate, "22", 2) == 0 && strcmp(sqlstate, "22P04") != 0;

	for (const char *p = msg; *p && o + 5 < outlen; p++)
	{
		if (values && *p == '"')
		{
			const char *end = strchr(p + 1, '"');

			if (end == NULL)
				end = p + strlen(p) - 1;
			if (ends_with(msg, (size_t) (p - msg), "encoding ") && (size_t) (end - p) + o + 6 < outlen)
			{
				/* An encoding's name, not a value. */
				memcpy(out + o, p, (size_t) (end - p) + 1);
				o += (size_t) (end - p) + 1;
			}
			else
			{
				memcpy(out + o, "\"...\"", 5);
				o += 5;
			}
			if (*end == '\0')
				break;
			p = end;
		}
		else if (values && p[0] == '0' && p[1] == 'x' && isxdigit((unsigned char) p[2]) &&
				 (p == msg || p[-1] == ' '))
		{
			/* A run of bytes "0xe2 0x82 0xac" becomes one "...". */
			while (p[0] == '0' && p[1] == 'x' && isxdigit((unsigned char) p[2]))
			{
				p += 2;
				while (isxdigit((unsigned char) p[1]))
					p++;
				if (p[1] == ' ' && p[2] == '0' && p[3] == 'x')
					p += 2;
				else
					break;
			}
			memcpy(out + o, "...", 3);
			o += 3;
		}
		else
			out[o++] = (*p == '\n' || *p == '\t' || *p == '\r') ? ' ' : *p;
	}
	out[o] = '\0';
}

void
pgerr_redact(struct pgerr *err)
{
	char msg[sizeof(err->msg)];

	redact(err->sqlstate, err->msg, msg, sizeof(msg));
	memcpy(err->msg, msg, sizeof(msg));
}

void
apply_err_set(struct apply_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->retry = false;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

void
apply_err_pg(struct apply_err *e, int code, const struct pgerr *pe, const char *fmt, ...)
{
	char what[400], text[PGERR_TEXT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	apply_err_set(e, code, "%s: %s", what, pgerr_text(pe, NULL, text, sizeof(text)));
	e->retry = pe->retryable;
}

void
pgerr_fatal(int code, const char *what, const struct pgerr *err)
{
	char text[PGERR_TEXT_MAX];

	log_fatal(code, "%s: %s", what, pgerr_text(err, NULL, text, sizeof(text)));
}
