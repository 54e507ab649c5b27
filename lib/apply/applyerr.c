#include "applyerr.h"
#include "common.h"
#include "conn.h"

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

	pgerr_one_line(msg, sizeof(msg), conn ? PQerrorMessage(conn) : "no connection");
	return msg[0] ? msg : "connection closed";
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
	char what[400], text[PGERR_TEXT_MAX], name[128];
	struct pgerr pe;

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
	snprintf(pe.sqlstate, sizeof(pe.sqlstate), "%s", state);
	snprintf(pe.msg, sizeof(pe.msg), "%s", primary ? primary : "error");
	pgerr_redact(&pe);
	if (colname == NULL && copy_column(PQresultErrorField(res, PG_DIAG_CONTEXT), name, sizeof(name)))
		colname = name;
	if (colname == NULL)
		colname = param_column(p, PQresultErrorField(res, PG_DIAG_CONTEXT));
	if (colname == NULL && p->rel != NULL && primary != NULL)
		colname = column_of_type(p->rel, primary);
	apply_err_set(err, pgerr_exit_code(state), "%s: %s", what, pgerr_text(&pe, colname, text, sizeof(text)));
	err->retry = pgerr_retryable(state);
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
