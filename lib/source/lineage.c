#include "lineage.h"
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Add an ancestor, in the order the history lists them (oldest first). */
static bool
add(struct lineage *l, uint32_t tli, lsn_t end)
{
	if (l->n == LINEAGE_MAX || tli == 0 || tli >= l->current ||
		(l->n > 0 && (tli <= l->anc[l->n - 1].tli || end < l->anc[l->n - 1].end)))
		return false;
	l->anc[l->n].tli = tli;
	l->anc[l->n].end = end;
	l->n++;
	return true;
}

/* One LSN of at most 17 characters from p[0..n). */
static bool
lsn_of(const char *p, size_t n, lsn_t *out)
{
	char tmp[LSN_BUFSZ];

	if (n == 0 || n >= sizeof(tmp))
		return false;
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	return lsn_parse(tmp, out);
}

static bool
tli_of(const char *p, size_t n, uint32_t *out)
{
	char tmp[16];
	long v;

	if (n == 0 || n >= sizeof(tmp))
		return false;
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	if (!parse_int(tmp, 1, UINT32_MAX, &v))
		return false;
	*out = (uint32_t) v;
	return true;
}

bool
lineage_parse_file(const char *text, size_t len, uint32_t current, struct lineage *out,
				   char *msg, size_t msglen)
{
	const char *p = text, *end = text + len;
	int lineno = 0;

	memset(out, 0, sizeof(*out));
	out->current = current;
	while (p < end)
	{
		const char *nl = memchr(p, '\n', (size_t) (end - p));
		const char *eol = nl ? nl : end, *f1, *f2;
		uint32_t tli;
		lsn_t sw;

		lineno++;
		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		if (p < eol && *p != '#' && *p != '\r')
		{
			f1 = memchr(p, '\t', (size_t) (eol - p));
			f2 = f1 ? memchr(f1 + 1, '\t', (size_t) (eol - f1 - 1)) : NULL;
			if (f1 == NULL || !tli_of(p, (size_t) (f1 - p), &tli) ||
				!lsn_of(f1 + 1, (size_t) ((f2 ? f2 : eol) - f1 - 1), &sw) || !add(out, tli, sw))
			{
				snprintf(msg, msglen, "the history of timeline %u is malformed at line %d", current, lineno);
				return false;
			}
		}
		p = nl ? nl + 1 : end;
	}
	return true;
}

bool
lineage_read(PGconn *repl, uint32_t current, struct lineage *out, struct pgerr *err)
{
	char sql[64], msg[128];
	PGresult *r;
	bool ok;

	memset(out, 0, sizeof(*out));
	out->current = current;
	if (current <= 1)
		return true;
	snprintf(sql, sizeof(sql), "TIMELINE_HISTORY %u", current);
	r = PQexec(repl, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		pgerr_set(err, repl, r);
		PQclear(r);
		return false;
	}
	if (PQntuples(r) != 1 || PQnfields(r) != 2)
	{
		pgerr_printf(err, false, "unexpected reply to TIMELINE_HISTORY: got %d rows and %d fields, expected 1 row and 2 fields",
					 PQntuples(r), PQnfields(r));
		PQclear(r);
		return false;
	}
	ok = lineage_parse_file(PQgetvalue(r, 0, 1), (size_t) PQgetlength(r, 0, 1), current, out, msg, sizeof(msg));
	PQclear(r);
	if (!ok)
		pgerr_printf(err, false, "%s", msg);
	return ok;
}

void
lineage_format(const struct lineage *l, struct buf *b)
{
	char e[LSN_BUFSZ];

	for (int i = 0; i < l->n; i++)
		buf_printf(b, "%s%u:%s", i ? "," : "", l->anc[i].tli, lsn_format(l->anc[i].end, e));
}

bool
lineage_parse_feature(const char *p, size_t n, uint32_t current, struct lineage *out)
{
	const char *end = p + n;

	memset(out, 0, sizeof(*out));
	out->current = current;
	while (p < end)
	{
		const char *comma = memchr(p, ',', (size_t) (end - p)), *stop = comma ? comma : end;
		const char *colon = memchr(p, ':', (size_t) (stop - p));
		uint32_t tli;
		lsn_t sw;

		if (colon == NULL || !tli_of(p, (size_t) (colon - p), &tli) ||
			!lsn_of(colon + 1, (size_t) (stop - colon - 1), &sw) || !add(out, tli, sw))
			return false;
		p = comma ? comma + 1 : end;
		if (comma && p == end)
			return false;
	}
	return true;
}

enum lineage_verdict
lineage_judge(uint32_t recorded, lsn_t applied, const struct lineage *l, char *msg, size_t msglen)
{
	char a[LSN_BUFSZ], s[LSN_BUFSZ];

	if (recorded == 0 || recorded == l->current)
		return LINEAGE_SAME;
	if (recorded > l->current)
	{
		snprintf(msg, msglen, "the source is on timeline %u, before timeline %u the target applied %s on: "
				 "an old primary, or a standby that has not followed the promotion",
				 l->current, recorded, lsn_format(applied, a));
		return LINEAGE_BEHIND;
	}
	for (int i = 0; i < l->n; i++)
	{
		if (l->anc[i].tli != recorded)
			continue;
		lsn_format(l->anc[i].end, s);
		lsn_format(applied, a);
		/* A transaction ending at the switch point is on both timelines. */
		if (applied <= l->anc[i].end)
		{
			snprintf(msg, msglen, "the source's timeline %u follows timeline %u at %s, at or after the applied position %s: "
					 "the same history", l->current, recorded, s, a);
			return LINEAGE_FOLLOWS;
		}
		snprintf(msg, msglen, "the source's timeline %u left timeline %u at %s, before the applied position %s on timeline %u: "
				 "the target holds transactions the new primary never had",
				 l->current, recorded, s, a, recorded);
		return LINEAGE_DIVERGED;
	}
	snprintf(msg, msglen, "the source's timeline %u does not descend from timeline %u the target applied %s on: "
			 "another branch of the history", l->current, recorded, lsn_format(applied, a));
	return LINEAGE_DIVERGED;
}
