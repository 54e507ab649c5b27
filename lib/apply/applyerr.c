#include "applyerr.h"
#include "common.h"
#include "conn.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
op_name(char op)
{
	switch (op)
	{
		case 'I': return "insert";
		case 'U': return "update";
		case 'D': return "delete";
		case 'T': return "truncate";
	}
	return "change";
}

const char *
applyerr_conn_msg(PGconn *conn)
{
	static char msg[512];

	snprintf(msg, sizeof(msg), "%s", conn ? PQerrorMessage(conn) : "no connection");
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\t' || *p == '\r')
			*p = ' ';
	for (size_t n = strlen(msg); n > 0 && (msg[n - 1] == ' ' || msg[n - 1] == '.'); n--)
		msg[n - 1] = '\0';
	return msg[0] ? msg : "connection closed";
}

int
applyerr_exit_code(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return EXIT_RUNTIME;
	if (strcmp(s, "42501") == 0)
		return EXIT_PREFLIGHT;	/* permission: a prerequisite on the target */
	if (strncmp(s, "22", 2) == 0 || strncmp(s, "23", 2) == 0 || strncmp(s, "42", 2) == 0)
		return EXIT_UNSUPPORTED;
	return EXIT_RUNTIME;
}

static bool
ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

void
applyerr_redact(const char *sqlstate, const char *msg, char *out, size_t outlen)
{
	size_t o = 0;
	bool values = sqlstate != NULL && strncmp(sqlstate, "22", 2) == 0 &&
		strcmp(sqlstate, "22P04") != 0;

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

/* The column of a COPY error, from its context line
 * "COPY t, line 3, column name: "value"" (the value is not kept). */
static bool
copy_column(const char *ctx, char *out, size_t outlen)
{
	const char *c = ctx ? strstr(ctx, ", column ") : NULL;
	const char *end;

	if (c == NULL)
		return false;
	c += strlen(", column ");
	end = strstr(c, ": \"");
	if (end == NULL)
		end = strstr(c, ": null input");
	if (end == NULL || end == c || (size_t) (end - c) >= outlen)
		return false;
	memcpy(out, c, (size_t) (end - c));
	out[end - c] = '\0';
	return true;
}

/*
 * The column of an error in a parameter (a conversion error happens while
 * the server binds it: context "unnamed portal parameter $2"). Only an
 * insert's parameters are its columns in order.
 */
static const char *
param_column(const struct pending *p, const char *ctx)
{
	const char *c = ctx ? strstr(ctx, "parameter $") : NULL;
	long n;

	if (c == NULL || p->kind != PK_CHANGE || p->op != 'I' || p->rel == NULL)
		return NULL;
	n = strtol(c + strlen("parameter $"), NULL, 10);
	return n >= 1 && n <= p->rel->ncols ? p->rel->cols[n - 1].name : NULL;
}

/*
 * "value too long for type character varying(3)" names a type, not a
 * column; when exactly one column of the table has that type, it is the one.
 */
static const char *
column_of_type(const struct rc_rel *rel, const char *msg)
{
	const char *t = strstr(msg, "for type ");
	const char *found = NULL;

	if (t == NULL)
		return NULL;
	t += strlen("for type ");
	for (int i = 0; i < rel->ncols; i++)
		if (strcmp(rel->cols[i].fulltype, t) == 0)
		{
			if (found)
				return NULL;
			found = rel->cols[i].name;
		}
	return found;
}

void
applyerr_result(const struct pending *p, const PGresult *res, PGconn *conn,
				struct apply_err *err)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *colname = res ? PQresultErrorField(res, PG_DIAG_COLUMN_NAME) : NULL;
	char what[400], msg[700], col[200] = "", name[128];

	if (res != NULL && PQresultStatus(res) == PGRES_PIPELINE_ABORTED)
	{
		apply_err_set(err, EXIT_RUNTIME, "statement skipped after an earlier error on the target");
		return;
	}
	if (state == NULL || PQstatus(conn) == CONNECTION_BAD)
	{
		apply_err_set(err, EXIT_RUNTIME, "lost the target connection: %s",
					  primary ? primary : applyerr_conn_msg(conn));
		err->retry = true;
		return;
	}
	switch (p->kind)
	{
		case PK_CHANGE:
		case PK_COPY:
		case PK_PREPARE:
		case PK_TRUNCATE:
			snprintf(what, sizeof(what), "cannot apply %s to %s", op_name(p->op),
					 p->rel ? p->rel->display : "?");
			break;
		case PK_PROGRESS:
			snprintf(what, sizeof(what), "cannot record progress in pgsync.job");
			break;
		case PK_COMMIT:
			snprintf(what, sizeof(what), "cannot commit on the target");
			break;
		default:
			snprintf(what, sizeof(what), "target session failed");
			break;
	}
	applyerr_redact(state, primary ? primary : "error", msg, sizeof(msg));
	if (colname == NULL && copy_column(PQresultErrorField(res, PG_DIAG_CONTEXT), name, sizeof(name)))
		colname = name;
	if (colname == NULL)
		colname = param_column(p, PQresultErrorField(res, PG_DIAG_CONTEXT));
	if (colname == NULL && p->rel != NULL && primary != NULL)
		colname = column_of_type(p->rel, primary);
	if (colname != NULL)
		snprintf(col, sizeof(col), "column \"%s\", ", colname);
	apply_err_set(err, applyerr_exit_code(state), "%s: %s (%sSQLSTATE %s)", what, msg, col, state);
	err->retry = sqlstate_retryable(state);
}

bool
applyerr_check_count(const struct pending *p, const PGresult *res, struct apply_err *err)
{
	const char *tag = PQcmdTuples((PGresult *) res);
	long n = tag[0] ? strtol(tag, NULL, 10) : -1;
	char l[LSN_BUFSZ];

	if (p->kind == PK_CHANGE && p->nrows > 1 && n != p->nrows)
	{
		char keys[600];
		size_t o = 0;

		keys[0] = '\0';
		for (int i = 0; i < p->rel->ncols && o + 4 < sizeof(keys); i++)
			if (p->rel->cols[i].key)
				o += (size_t) snprintf(keys + o, sizeof(keys) - o, "%s%s", o ? ", " : "", p->rel->cols[i].name);
		apply_err_set(err, EXIT_UNSUPPORTED,
					  n < p->nrows
					  ? "cannot apply update to %s: no row on the target matches key (%s) for %ld of %d merged updates, the last of source transaction %llu (commit LSN %s)"
					  : "cannot apply update to %s: more rows on the target than updates match key (%s) (%ld for %d merged updates), the last of source transaction %llu (commit LSN %s)",
					  p->rel->display, keys, n < p->nrows ? (long) p->nrows - n : n, p->nrows,
					  (unsigned long long) p->xid, lsn_format(p->commit_lsn, l));
		return false;
	}
	if (p->kind == PK_CHANGE && p->nrows <= 1 && (p->op == 'U' || p->op == 'D') && n != 1)
	{
		char keys[600];
		size_t o = 0;

		keys[0] = '\0';
		if (p->kind2 == 'O')
			snprintf(keys, sizeof(keys), "all columns (replica identity full)");
		else
			for (int i = 0; i < p->rel->ncols && o + 4 < sizeof(keys); i++)
				if (p->rel->cols[i].key)
					o += (size_t) snprintf(keys + o, sizeof(keys) - o, "%s%s", o ? ", " : "",
										   p->rel->cols[i].name);
		if (n == 0)
			apply_err_set(err, EXIT_UNSUPPORTED,
						  "cannot apply %s to %s: no row on the target matches key (%s) of source transaction %llu (commit LSN %s)",
						  op_name(p->op), p->rel->display, keys, (unsigned long long) p->xid,
						  lsn_format(p->commit_lsn, l));
		else
			apply_err_set(err, EXIT_UNSUPPORTED,
						  "cannot apply %s to %s: %ld rows on the target match key (%s) of source transaction %llu (commit LSN %s)",
						  op_name(p->op), p->rel->display, n, keys, (unsigned long long) p->xid,
						  lsn_format(p->commit_lsn, l));
		return false;
	}
	if (p->kind == PK_PROGRESS && n != 1)
	{
		apply_err_set(err, EXIT_RUNTIME, "cannot record progress: the job's row is gone from pgsync.job");
		return false;
	}
	if (p->kind == PK_COMMIT && strcmp(PQcmdStatus((PGresult *) res), "COMMIT") != 0)
	{
		apply_err_set(err, EXIT_RUNTIME, "the target rolled the batch back instead of committing it");
		return false;
	}
	return true;
}
