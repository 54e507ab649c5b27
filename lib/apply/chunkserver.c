/*
 * A server-ordered table's chunks in a temporary table on the metadata
 * session: columns i (the chunk's index in the map), ln and hn (lo, hi
 * unbounded), l0.. and h0.. (the bounds, each of its key column's type and
 * target collation), a btree index on (h0, ...). A key k is in the chunk
 * with the least hi >= k (or the one with an unbounded hi when none is),
 * if it is above that chunk's lo; otherwise in no chunk copied yet. The
 * target compares exactly as the source did because each column compares
 * under its type's own order and, when collatable, a collation that pgsync
 * proved to have the source column's provider, locale and version.
 */
#include "chunkserver.h"
#include "buf.h"
#include "common.h"
#include "conn.h"
#include "escape.h"
#include "hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct keys remembered, direct-mapped: a row changed again and again is
 * placed once. */
#define CACHE_SLOTS 1024

struct cache_ent {
	uint64_t hash;
	char *key;					/* the values, each with its length first */
	size_t len;
	lsn_t lsn;
};

struct cm_srv {
	PGconn *meta;
	char stmt[64];
	int nparams;
	struct buf key;				/* the looked-up key, serialized */
	struct cache_ent cache[CACHE_SLOTS];
};

void
chunkserver_free(struct cm_srv *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < CACHE_SLOTS; i++)
		free(s->cache[i].key);
	buf_free(&s->key);
	free(s);
}

static bool
fail(struct apply_err *err, const struct cm_table *t, const char *what, PGconn *meta, const struct pgerr *pe)
{
	char msg[400];

	snprintf(msg, sizeof(msg), "cannot %s of %s.%s on the target", what, t->schema, t->table);
	if (pe)
		apply_err_pg(err, EXIT_RUNTIME, pe, "%s", msg);
	else
		apply_err_set(err, EXIT_RUNTIME, "%s: %s", msg, PQerrorMessage(meta));
	return false;
}

/* "p0, p1" for prefix p and the key's columns, with a table alias. */
static void
cols(struct buf *b, const struct cm_table *t, const char *alias, char p)
{
	for (int j = 0; j < t->nkey; j++)
		buf_printf(b, "%s%s%c%d", j ? ", " : "", alias, p, j);
}

/* "$1::t0, $2::t1" */
static void
params(struct buf *b, const struct cm_table *t)
{
	for (int j = 0; j < t->nkey; j++)
		buf_printf(b, "%s$%d::%s", j ? ", " : "", j + 1, t->ktype[j]->name);
}

static bool
load_rows(PGconn *meta, const struct cm_table *t, const char *name, struct apply_err *err)
{
	struct buf sql = BUF_INIT, row = BUF_INIT;
	struct pgerr pe;
	PGresult *res;
	bool ok = true, reported = false;

	buf_printf(&sql, "COPY %s FROM STDIN", name);
	res = PQexec(meta, buf_cstr(&sql));
	buf_free(&sql);
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		pgerr_set(&pe, meta, res);
		PQclear(res);
		return fail(err, t, "load the chunk bounds", meta, &pe);
	}
	PQclear(res);
	for (size_t i = 0; i < t->nchunks && ok; i++)
	{
		const struct cm_chunk *c = &t->chunks[i];

		buf_reset(&row);
		buf_printf(&row, "%zu\t%s\t%s", i, c->lo ? "f" : "t", c->hi ? "f" : "t");
		for (int side = 0; side < 2; side++)
			for (int j = 0; j < t->nkey; j++)
			{
				const struct cm_val *v = side ? c->hi : c->lo;

				buf_putc(&row, '\t');
				if (v)
					copy_escape(&row, v[j].p, v[j].n);
				else
					buf_puts(&row, ESC_NULL);
			}
		buf_putc(&row, '\n');
		ok = PQputCopyData(meta, row.data, (int) row.len) == 1;
	}
	buf_free(&row);
	if (PQputCopyEnd(meta, ok ? NULL : "aborted") != 1)
		ok = false;
	while ((res = PQgetResult(meta)) != NULL)
	{
		if (!reported && PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			pgerr_set(&pe, meta, res);
			fail(err, t, "load the chunk bounds", meta, &pe);
			reported = true;
		}
		PQclear(res);
	}
	if (!ok && !reported)
		return fail(err, t, "load the chunk bounds", meta, NULL);
	return ok && !reported;
}

bool
chunkserver_build(PGconn *meta, struct cm_table *t, int id, struct apply_err *err)
{
	struct buf sql = BUF_INIT, a = BUF_INIT, b = BUF_INIT;
	char name[64];
	struct pgerr pe;
	PGresult *res;
	long overlaps;

	chunkserver_free(t->srv);
	t->srv = NULL;
	snprintf(name, sizeof(name), "pg_temp.pgsync_chunk_%d", id);
	buf_printf(&sql, "DROP TABLE IF EXISTS %s; CREATE TABLE %s (i int4 NOT NULL, ln bool NOT NULL, hn bool NOT NULL",
			   name, name);
	for (int side = 0; side < 2; side++)
		for (int j = 0; j < t->nkey; j++)
			buf_printf(&sql, ", %c%d %s%s%s", side ? 'h' : 'l', j, t->ktype[j]->name, t->coll[j] ? " COLLATE " : "",
					   t->coll[j] ? t->coll[j] : "");
	buf_puts(&sql, ")");
	if (!conn_command(meta, buf_cstr(&sql), 0, NULL, &pe))
	{
		buf_free(&sql);
		return fail(err, t, "create the table of the chunk bounds", meta, &pe);
	}
	if (!load_rows(meta, t, name, err))
	{
		buf_free(&sql);
		return false;
	}
	buf_reset(&sql);
	buf_printf(&sql, "CREATE INDEX ON %s (", name);
	cols(&sql, t, "", 'h');
	buf_printf(&sql, "); ANALYZE %s", name);
	if (!conn_command(meta, buf_cstr(&sql), 0, NULL, &pe))
	{
		buf_free(&sql);
		return fail(err, t, "index the chunk bounds", meta, &pe);
	}
	/* Disjoint in the target's order: each lo at or above the hi before. */
	cols(&a, t, "s.", 'l');
	cols(&b, t, "s.", 'p');
	buf_reset(&sql);
	buf_printf(&sql, "SELECT pg_catalog.count(*) FROM (SELECT c.ln, pg_catalog.lag(c.hn) OVER o AS phn,"
			   " pg_catalog.row_number() OVER o AS r");
	for (int j = 0; j < t->nkey; j++)
		buf_printf(&sql, ", c.l%d, pg_catalog.lag(c.h%d) OVER o AS p%d", j, j, j);
	buf_printf(&sql, " FROM %s c WINDOW o AS (ORDER BY ", name);
	for (int j = 0; j < t->nkey; j++)
		buf_printf(&sql, "%sc.h%d NULLS LAST", j ? ", " : "", j);
	buf_printf(&sql, ")) s WHERE s.r > 1 AND (s.phn OR s.ln OR ROW(%s) < ROW(%s))", buf_cstr(&a), buf_cstr(&b));
	res = conn_query_one(meta, buf_cstr(&sql), 0, NULL, 1, &pe);
	if (res == NULL)
	{
		buf_free(&sql);
		buf_free(&a);
		buf_free(&b);
		return fail(err, t, "check the chunk bounds", meta, &pe);
	}
	overlaps = atol(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (overlaps > 0)
	{
		buf_free(&sql);
		buf_free(&a);
		buf_free(&b);
		apply_err_set(err, EXIT_UNSUPPORTED,
					  "chunks of %s.%s in pgsync.table_chunk overlap: copy it again (pgsync bootstrap --restart-snapshot)",
					  t->schema, t->table);
		return false;
	}
	t->srv = xcalloc(1, sizeof(*t->srv));
	t->srv->meta = meta;
	t->srv->nparams = t->nkey;
	snprintf(t->srv->stmt, sizeof(t->srv->stmt), "pgsync_chunk_place_%d", id);
	/* The chunk with the least hi at or above the key, else the one with no
	 * hi; and whether the key is above its lo. */
	buf_reset(&sql);
	buf_reset(&a);
	buf_reset(&b);
	params(&b, t);
	cols(&a, t, "c.", 'l');
	buf_printf(&sql, "SELECT x.i, x.ln OR ROW(");
	cols(&sql, t, "x.", 'l');
	buf_printf(&sql, ") < ROW(%s) FROM ((SELECT 0 AS o, c.i, c.ln, %s FROM %s c WHERE ROW(", buf_cstr(&b),
			   buf_cstr(&a), name);
	cols(&sql, t, "c.", 'h');
	buf_printf(&sql, ") >= ROW(%s) ORDER BY ", buf_cstr(&b));
	cols(&sql, t, "c.", 'h');
	/* (h0 IS NULL, not hn: the index finds it.) */
	buf_printf(&sql, " LIMIT 1) UNION ALL (SELECT 1, c.i, c.ln, %s FROM %s c WHERE c.h0 IS NULL)) x ORDER BY x.o LIMIT 1",
			   buf_cstr(&a), name);
	buf_free(&a);
	buf_free(&b);
	res = PQprepare(meta, t->srv->stmt, buf_cstr(&sql), 0, NULL);
	buf_free(&sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pgerr_set(&pe, meta, res);
		PQclear(res);
		return fail(err, t, "prepare the chunk lookup", meta, &pe);
	}
	PQclear(res);
	return true;
}

bool
chunkserver_place(struct cm_table *t, const struct cm_val *key, lsn_t *lsn, bool *asked, struct apply_err *err)
{
	struct cm_srv *s = t->srv;
	const char *vals[CM_MAX_KEY];
	struct cache_ent *e;
	struct pgerr pe;
	PGresult *res;
	uint64_t h;

	*asked = false;
	buf_reset(&s->key);
	for (int j = 0; j < t->nkey; j++)
	{
		buf_append(&s->key, (const char *) &key[j].n, sizeof(key[j].n));
		buf_append(&s->key, key[j].p, key[j].n);
	}
	h = hash_bytes(HASH_INIT, s->key.data, s->key.len);
	e = &s->cache[h % CACHE_SLOTS];
	if (e->key && e->hash == h && e->len == s->key.len && memcmp(e->key, s->key.data, e->len) == 0)
	{
		*lsn = e->lsn;
		return true;
	}
	/* The values are NUL-terminated where they lie (chunkmap_key). */
	for (int j = 0; j < t->nkey; j++)
		vals[j] = key[j].p;
	res = PQexecPrepared(s->meta, s->stmt, t->nkey, vals, NULL, NULL, 0);
	*asked = true;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != 2)
	{
		pgerr_set(&pe, s->meta, res);
		PQclear(res);
		return fail(err, t, "place a key among the chunks", s->meta, &pe);
	}
	if (PQntuples(res) == 0 || strcmp(PQgetvalue(res, 0, 1), "t") != 0)
		*lsn = CM_NOT_COPIED;
	else
	{
		size_t i = (size_t) strtoul(PQgetvalue(res, 0, 0), NULL, 10);

		*lsn = i < t->nchunks ? t->chunks[i].lsn : CM_NOT_COPIED;
	}
	PQclear(res);
	free(e->key);
	e->key = xmalloc(s->key.len);
	memcpy(e->key, s->key.data, s->key.len);
	e->len = s->key.len;
	e->hash = h;
	e->lsn = *lsn;
	return true;
}
