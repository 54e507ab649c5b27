#include "publication.h"
#include "buf.h"
#include "common.h"
#include "conn.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* {"a","b"}: names as one text[] parameter. */
static char *
text_array(const char *const *v, int n)
{
	struct buf b = BUF_INIT;

	buf_putc(&b, '{');
	for (int i = 0; i < n; i++)
	{
		buf_puts(&b, i ? ",\"" : "\"");
		for (const char *s = v[i]; *s; s++)
		{
			if (*s == '"' || *s == '\\')
				buf_putc(&b, '\\');
			buf_putc(&b, *s);
		}
		buf_putc(&b, '"');
	}
	buf_putc(&b, '}');
	return buf_cstr(&b);
}

int
pub_query_failed(const char *what, const struct pgerr *err)
{
	char text[PGERR_TEXT_MAX];

	log_error("cannot %s: %s", what, pgerr_text(err, NULL, text, sizeof(text)));
	return EXIT_RUNTIME;
}

static int
check_exist(PGconn *conn, const char *const *pubs, int npubs, const char *arr)
{
	const char *params[1] = {arr};
	struct pgerr err;
	PGresult *res;

	res = conn_query(conn, "SELECT u.n FROM unnest($1::text[]) WITH ORDINALITY u(n, i)"
					 " WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication p WHERE p.pubname = u.n)"
					 " ORDER BY u.i", 1, params, 1, &err);
	if (res == NULL)
		return pub_query_failed("look up the publications", &err);
	if (PQntuples(res) > 0)
	{
		log_error("publication \"%s\" does not exist in database \"%s\": create it "
				  "(CREATE PUBLICATION %s FOR TABLE ...) or fix the publication list",
				  PQgetvalue(res, 0, 0), PQdb(conn), PQgetvalue(res, 0, 0));
		PQclear(res);
		return EXIT_PREFLIGHT;
	}
	PQclear(res);
	return EXIT_DONE;
}

/*
 * The table set. From 16 the server resolves several publications at once
 * (pg_get_publication_tables(VARIADIC)), dropping partitions whose ancestor
 * is listed when any publication publishes via the root. 14 and 15 list each
 * publication alone, and their own subscriptions then copy such a partition
 * twice (once under the root, once under its own name): the same rule is
 * applied here so that each row is copied once on every version.
 */
/* One row per table: which publications publish it, or a partition of it. */
#define TABLE_ROW \
	" SELECT c.oid, n.nspname, c.relname, c.relkind," \
	"        (SELECT pg_catalog.string_agg(p.pubname, ',' ORDER BY x.i)" \
	"           FROM unnest($1::text[]) WITH ORDINALITY x(n, i)" \
	"           JOIN pg_catalog.pg_publication p ON p.pubname = x.n" \
	"          WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_get_publication_tables(p.pubname) g" \
	"                         WHERE g.relid = c.oid" \
	"                            OR g.relid IN (SELECT t.relid FROM pg_catalog.pg_partition_tree(c.oid) t)))"

static const char *const TABLES_SQL_16 =
	"WITH u AS (SELECT DISTINCT g.relid FROM pg_catalog.pg_get_publication_tables(VARIADIC $1::text[]) g)"
	TABLE_ROW
	"   FROM u JOIN pg_catalog.pg_class c ON c.oid = u.relid"
	"   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	"  ORDER BY n.nspname, c.relname";

static const char *const TABLES_SQL_14 =
	"WITH u AS (SELECT DISTINCT g.relid FROM pg_catalog.pg_publication p,"
	"                  LATERAL pg_catalog.pg_get_publication_tables(p.pubname) g"
	"            WHERE p.pubname = ANY ($1::text[])),"
	" v AS (SELECT u.relid FROM u WHERE NOT (EXISTS (SELECT 1 FROM pg_catalog.pg_publication p"
	"                                                 WHERE p.pubname = ANY ($1::text[]) AND p.pubviaroot)"
	"        AND EXISTS (SELECT 1 FROM pg_catalog.pg_partition_ancestors(u.relid) a"
	"                     WHERE a.relid <> u.relid AND a.relid IN (SELECT relid FROM u))))"
	TABLE_ROW
	"   FROM v JOIN pg_catalog.pg_class c ON c.oid = v.relid"
	"   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	"  ORDER BY n.nspname, c.relname";

static int
find(const struct pub_set *s, unsigned oid)
{
	for (int i = 0; i < s->n; i++)
		if (s->t[i].oid == oid)
			return i;
	return -1;
}

static char *
oid_array(const struct pub_set *s)
{
	struct buf b = BUF_INIT;

	buf_putc(&b, '{');
	for (int i = 0; i < s->n; i++)
		buf_printf(&b, "%s%u", i ? "," : "", s->t[i].oid);
	buf_putc(&b, '}');
	return buf_cstr(&b);
}

static int
load_tables(PGconn *conn, int version, const char *arr, struct pub_set *s)
{
	const char *params[1] = {arr};
	struct pgerr err;
	PGresult *res;

	res = conn_query(conn, version >= 160000 ? TABLES_SQL_16 : TABLES_SQL_14, 1, params, 5, &err);
	if (res == NULL)
		return pub_query_failed("list the tables of the publications", &err);
	s->n = PQntuples(res);
	s->t = xcalloc((size_t) s->n + 1, sizeof(*s->t));
	for (int i = 0; i < s->n; i++)
	{
		struct pub_table *t = &s->t[i];

		t->oid = (unsigned) strtoul(PQgetvalue(res, i, 0), NULL, 10);
		t->schema = xstrdup(PQgetvalue(res, i, 1));
		t->name = xstrdup(PQgetvalue(res, i, 2));
		t->relkind = PQgetvalue(res, i, 3)[0];
		t->pubs = xstrdup(PQgetvalue(res, i, 4));
	}
	PQclear(res);
	return EXIT_DONE;
}

/* Per table and column list, as tablesync's fetch_remote_table_info(). */
struct collist {
	int table;
	char *attrs;				/* "1 3 4", NULL: every column */
};

/*
 * Row filters and column lists (15+), with the subscription's own queries
 * (tablesync.c, fetch_remote_table_info()): each publication's filter on
 * the table as it publishes it, OR-ed, and none when one publication has
 * none (FOR ALL TABLES and schema publications have none); one column list
 * per table, where a list as long as relnatts counts as none. The server
 * decides what a publication without a list gives: nothing on 15 (so there
 * a list naming every live column of a table with a dropped column differs
 * from no list, and both the subscription and this refuse them), every
 * column not dropped or generated from 16 (the same list).
 */
static int
load_filters(PGconn *conn, const char *arr, struct pub_set *s, struct collist **lists, int *nlists)
{
	char *oids = oid_array(s);
	const char *params[2] = {arr, oids};
	bool *nofilter = xcalloc((size_t) s->n + 1, sizeof(bool));
	int *nfilters = xcalloc((size_t) s->n + 1, sizeof(int));
	struct buf *filters = xcalloc((size_t) s->n + 1, sizeof(struct buf));
	struct pgerr err;
	PGresult *res;
	int rc = EXIT_DONE;

	res = conn_query(conn,
					 "SELECT DISTINCT gpt.relid, pg_catalog.pg_get_expr(gpt.qual, gpt.relid),"
					 "       (CASE WHEN pg_catalog.array_length(gpt.attrs, 1) = c.relnatts"
					 "             THEN NULL ELSE gpt.attrs END)::text"
					 "  FROM pg_catalog.pg_publication p,"
					 "       LATERAL pg_catalog.pg_get_publication_tables(p.pubname) gpt,"
					 "       pg_catalog.pg_class c"
					 " WHERE c.oid = gpt.relid AND p.pubname = ANY ($1::text[])"
					 "   AND gpt.relid = ANY ($2::pg_catalog.oid[])"
					 " ORDER BY 1, 2, 3",
					 2, params, 3, &err);
	free(oids);
	if (res == NULL)
	{
		free(nofilter);
		free(nfilters);
		free(filters);
		return pub_query_failed("read the publications' row filters and column lists", &err);
	}
	*lists = xcalloc((size_t) PQntuples(res) + 1, sizeof(**lists));
	*nlists = 0;
	for (int r = 0; r < PQntuples(res); r++)
	{
		int t = find(s, (unsigned) strtoul(PQgetvalue(res, r, 0), NULL, 10));
		bool have = false;

		if (t < 0)
			continue;
		/* Rows come sorted by table and filter: a repeated filter is adjacent. */
		if (PQgetisnull(res, r, 1))
			nofilter[t] = true;
		else if (r == 0 || strcmp(PQgetvalue(res, r, 0), PQgetvalue(res, r - 1, 0)) != 0 ||
				 PQgetisnull(res, r - 1, 1) || strcmp(PQgetvalue(res, r, 1), PQgetvalue(res, r - 1, 1)) != 0)
		{
			/* One filter as the server prints it, several each parenthesized. */
			if (nfilters[t] == 1)
			{
				char *first = xstrdup(buf_cstr(&filters[t]));

				buf_reset(&filters[t]);
				buf_printf(&filters[t], "(%s)", first);
				free(first);
			}
			buf_printf(&filters[t], nfilters[t] ? " OR (%s)" : "%s", PQgetvalue(res, r, 1));
			nfilters[t]++;
		}
		for (int i = 0; i < *nlists; i++)
			if ((*lists)[i].table == t &&
				((*lists)[i].attrs == NULL) == PQgetisnull(res, r, 2) &&
				((*lists)[i].attrs == NULL || strcmp((*lists)[i].attrs, PQgetvalue(res, r, 2)) == 0))
				have = true;
		if (have)
			continue;
		for (int i = 0; i < *nlists; i++)
			if ((*lists)[i].table == t && rc == EXIT_DONE)
			{
				log_error("cannot use different column lists for table \"%s.%s\" in different "
						  "publications (%s), as PostgreSQL's own subscriptions cannot: give it the same "
						  "column list (or none) in each", s->t[t].schema, s->t[t].name, s->t[t].pubs);
				rc = EXIT_PREFLIGHT;
			}
		(*lists)[*nlists].table = t;
		(*lists)[*nlists].attrs = PQgetisnull(res, r, 2) ? NULL : xstrdup(PQgetvalue(res, r, 2));
		(*nlists)++;
	}
	PQclear(res);
	for (int t = 0; t < s->n; t++)
	{
		if (!nofilter[t] && filters[t].len)
			s->t[t].rowfilter = xstrdup(buf_cstr(&filters[t]));
		buf_free(&filters[t]);
	}
	free(filters);
	free(nofilter);
	free(nfilters);
	return rc;
}

static bool
attnum_listed(const char *attrs, int attnum)
{
	const char *p = attrs;

	while (*p)
	{
		char *e;
		long v = strtol(p, &e, 10);

		if (e == p)
			break;
		if (v == attnum)
			return true;
		p = e;
		while (*p == ' ')
			p++;
	}
	return false;
}

/*
 * The columns, in attnum order: generated ones only from 18, where the
 * publication's list (or publish_generated_columns) says they are published.
 */
static int
load_columns(PGconn *conn, int version, struct pub_set *s, const struct collist *lists, int nlists)
{
	char *oids = oid_array(s);
	const char *params[1] = {oids};
	struct pgerr err;
	PGresult *res;

	res = conn_query(conn, version >= 180000
					 ? "SELECT a.attrelid, a.attnum, a.attname, a.attgenerated <> ''"
					 "  FROM pg_catalog.pg_attribute a WHERE a.attrelid = ANY ($1::pg_catalog.oid[])"
					 "   AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum"
					 : "SELECT a.attrelid, a.attnum, a.attname, false"
					 "  FROM pg_catalog.pg_attribute a WHERE a.attrelid = ANY ($1::pg_catalog.oid[])"
					 "   AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''"
					 " ORDER BY a.attrelid, a.attnum",
					 1, params, 4, &err);
	free(oids);
	if (res == NULL)
		return pub_query_failed("list the published columns", &err);
	for (int r = 0; r < PQntuples(res); r++)
	{
		int t = find(s, (unsigned) strtoul(PQgetvalue(res, r, 0), NULL, 10));
		const char *attrs = NULL;
		struct pub_table *pt;

		if (t < 0)
			continue;
		for (int i = 0; i < nlists; i++)
			if (lists[i].table == t)
			{
				attrs = lists[i].attrs;
				break;
			}
		if (attrs && !attnum_listed(attrs, atoi(PQgetvalue(res, r, 1))))
			continue;
		pt = &s->t[t];
		pt->cols = xrealloc(pt->cols, sizeof(char *) * (size_t) (pt->ncols + 1));
		pt->colgen = xrealloc(pt->colgen, sizeof(bool) * (size_t) (pt->ncols + 1));
		pt->cols[pt->ncols] = xstrdup(PQgetvalue(res, r, 2));
		pt->colgen[pt->ncols] = PQgetvalue(res, r, 3)[0] == 't';
		pt->ncols++;
	}
	PQclear(res);
	return EXIT_DONE;
}

int
pub_resolve(PGconn *conn, const char *const *pubs, int npubs, struct pub_set *out)
{
	int version = PQserverVersion(conn);
	char *arr = text_array(pubs, npubs);
	struct collist *lists = NULL;
	int nlists = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_exist(conn, pubs, npubs, arr);
	if (rc == EXIT_DONE)
		rc = load_tables(conn, version, arr, out);
	/* 14 has neither row filters nor column lists. */
	if (rc == EXIT_DONE && out->n > 0 && version >= 150000)
		rc = load_filters(conn, arr, out, &lists, &nlists);
	if (rc == EXIT_DONE && out->n > 0)
		rc = load_columns(conn, version, out, lists, nlists);
	for (int i = 0; i < nlists; i++)
		free(lists[i].attrs);
	free(lists);
	free(arr);
	/* A refusal (different column lists, say) leaves nothing to free. */
	if (rc != EXIT_DONE)
		pub_set_free(out);
	return rc;
}

void
pub_set_free(struct pub_set *set)
{
	for (int i = 0; i < set->n; i++)
	{
		struct pub_table *t = &set->t[i];

		free(t->schema);
		free(t->name);
		free(t->pubs);
		free(t->rowfilter);
		for (int c = 0; c < t->ncols; c++)
			free(t->cols[c]);
		free(t->cols);
		free(t->colgen);
	}
	free(set->t);
	memset(set, 0, sizeof(*set));
}
