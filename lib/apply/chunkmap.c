#include "chunkmap.h"
#include "chunkserver.h"
#include "common.h"
#include "conn.h"
#include "escape.h"
#include "log.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct chunkmap {
	/* Where server-ordered tables are placed, and their collations. */
	PGconn *meta;
	const struct key_colls *kc;
	uint64_t lookups, lookup_us;
	struct cm_table **tables;
	size_t ntables, cap;
	bool tables_sorted;
	size_t nchunks, bytes;
	lsn_t max_lsn;
	/* The last table looked up, by the stream's relation. */
	const struct sr_rel *last_srel;
	uint64_t last_gen;
	struct cm_table *last;
};

struct chunkmap *
chunkmap_new(void)
{
	return xcalloc(1, sizeof(struct chunkmap));
}

static void
free_table(struct cm_table *t)
{
	for (size_t i = 0; i < t->nchunks; i++)
	{
		/* A chunk's bounds and their text are one block (see add_chunk). */
		free(t->chunks[i].lo ? (void *) t->chunks[i].lo : (void *) t->chunks[i].hi);
	}
	for (int j = 0; j < t->nkey; j++)
		free(t->key_columns[j]);
	free(t->key_columns);
	free(t->chunks);
	free(t->colidx);
	free(t->kind);
	free(t->typoid);
	free(t->ktype);
	free(t->coll);
	chunkserver_free(t->srv);
	free(t->schema);
	free(t->table);
	free(t);
}

void
chunkmap_free(struct chunkmap *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->ntables; i++)
		free_table(m->tables[i]);
	free(m->tables);
	free(m);
}

void
chunkmap_set_server(struct chunkmap *m, PGconn *meta, const struct key_colls *kc)
{
	m->meta = meta;
	m->kc = kc;
}

void
chunkmap_lookups(const struct chunkmap *m, uint64_t *n, uint64_t *us)
{
	*n = m->lookups;
	*us = m->lookup_us;
}

lsn_t chunkmap_max_lsn(const struct chunkmap *m) { return m->max_lsn; }
size_t chunkmap_nchunks(const struct chunkmap *m) { return m->nchunks; }
size_t chunkmap_ntables(const struct chunkmap *m) { return m->ntables; }
size_t chunkmap_bytes(const struct chunkmap *m) { return m->bytes; }

static struct cm_table *
find_table(struct chunkmap *m, const char *schema, const char *table)
{
	/* Loading reads the rows table by table: the last one is the usual hit. */
	if (m->ntables > 0 && strcmp(m->tables[m->ntables - 1]->schema, schema) == 0 &&
		strcmp(m->tables[m->ntables - 1]->table, table) == 0)
		return m->tables[m->ntables - 1];
	for (size_t i = 0; i < m->ntables; i++)
		if (strcmp(m->tables[i]->schema, schema) == 0 && strcmp(m->tables[i]->table, table) == 0)
			return m->tables[i];
	return NULL;
}

static struct cm_table *
new_table(struct chunkmap *m, const char *schema, const char *table, int nkey,
		  const char *const *key_columns)
{
	struct cm_table *t = xcalloc(1, sizeof(*t));

	t->map = m;
	t->schema = xstrdup(schema);
	t->table = xstrdup(table);
	t->nkey = nkey;
	t->key_columns = xcalloc(nkey ? (size_t) nkey : 1, sizeof(char *));
	m->bytes += sizeof(*t) + strlen(schema) + strlen(table) + 2 + (size_t) nkey * sizeof(char *);
	for (int j = 0; j < nkey; j++)
	{
		t->key_columns[j] = xstrdup(key_columns[j]);
		m->bytes += strlen(key_columns[j]) + 1;
	}
	t->min_lsn = UINT64_MAX;
	if (m->ntables == m->cap)
	{
		m->cap = m->cap ? 2 * m->cap : 16;
		m->tables = xrealloc(m->tables, m->cap * sizeof(*m->tables));
	}
	m->tables[m->ntables++] = t;
	m->tables_sorted = false;
	m->bytes += sizeof(*m->tables);
	return t;
}

/* One block: the lo values, the hi values, then their text. */
static void
add_chunk(struct chunkmap *m, struct cm_table *t, const char *const *lo, const char *const *hi, lsn_t lsn)
{
	size_t nv = (size_t) t->nkey * ((lo != NULL) + (hi != NULL)), text = 0;
	struct cm_chunk *c;
	struct cm_val *v;
	char *p;

	for (int j = 0; j < t->nkey; j++)
		text += (lo ? strlen(lo[j]) + 1 : 0) + (hi ? strlen(hi[j]) + 1 : 0);
	if (t->nchunks == t->cap)
	{
		m->bytes += (t->cap ? t->cap : 4) * sizeof(*t->chunks);
		t->cap = t->cap ? 2 * t->cap : 4;
		t->chunks = xrealloc(t->chunks, t->cap * sizeof(*t->chunks));
	}
	c = &t->chunks[t->nchunks++];
	c->lsn = lsn;
	c->lo = c->hi = NULL;
	if (nv > 0)
	{
		v = xmalloc(nv * sizeof(*v) + text);
		p = (char *) (v + nv);
		m->bytes += nv * sizeof(*v) + text;
		for (int side = 0; side < 2; side++)
		{
			const char *const *src = side ? hi : lo;

			if (src == NULL)
				continue;
			if (side == 0)
				c->lo = v;
			else
				c->hi = v;
			for (int j = 0; j < t->nkey; j++, v++)
			{
				v->n = strlen(src[j]);
				memcpy(p, src[j], v->n + 1);
				v->p = p;
				v->i = 0;
				p += v->n + 1;
			}
		}
	}
	if (lsn < t->min_lsn)
		t->min_lsn = lsn;
	if (lsn > t->max_lsn)
		t->max_lsn = lsn;
	if (lsn > m->max_lsn)
		m->max_lsn = lsn;
	m->nchunks++;
	t->sorted = false;
}

bool
chunkmap_add(struct chunkmap *m, const struct cm_chunk_spec *c, struct apply_err *err)
{
	const char *schema = c->schema, *table = c->table;
	int nkey = c->nkey;
	const char *const *key_columns = c->key_columns, *const *lo = c->lo, *const *hi = c->hi;
	lsn_t lsn = c->lsn;
	struct cm_table *t = find_table(m, schema, table);
	bool same = t != NULL && t->nkey == nkey;

	for (int j = 0; same && j < nkey; j++)
		same = strcmp(t->key_columns[j], key_columns[j]) == 0;
	if (t != NULL && !same)
	{
		apply_err_set(err, EXIT_UNSUPPORTED,
					  "the chunks of %s.%s in pgsync.table_chunk name different keys: copy it again (pgsync bootstrap --restart-snapshot)",
					  schema, table);
		return false;
	}
	if (t == NULL)
		t = new_table(m, schema, table, nkey, key_columns);
	add_chunk(m, t, nkey ? lo : NULL, nkey ? hi : NULL, lsn);
	return true;
}

/* --- comparing keys ---------------------------------------------------- */

/* The whole text is a decimal int64 (what int2/int4/int8 output is). */
static bool
parse_i64(const char *p, size_t n, int64_t *out)
{
	uint64_t v = 0, lim;
	bool neg = n > 0 && p[0] == '-';
	size_t i = neg;

	if (i == n)
		return false;
	lim = neg ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
	for (; i < n; i++)
	{
		if (p[i] < '0' || p[i] > '9' || v > (lim - (uint64_t) (p[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t) (p[i] - '0');
	}
	*out = neg ? (int64_t) (0 - v) : (int64_t) v;
	return true;
}

static int
cmp_val(enum cm_kind k, const struct cm_val *a, const struct cm_val *b)
{
	size_t n;

	if (k == CM_INT)
		return a->i < b->i ? -1 : a->i > b->i;
	if (k == CM_SERVER)
	{
		/* Only equal or not: the order is the server's. */
		n = a->n < b->n ? a->n : b->n;
		return a->n != b->n || memcmp(a->p, b->p, n) != 0;
	}
	/* uuid: the same length, hex digits and hyphens at the same places;
	 * case folded in case a writer printed upper case. */
	n = a->n < b->n ? a->n : b->n;
	for (size_t i = 0; i < n; i++)
	{
		int ca = tolower((unsigned char) a->p[i]), cb = tolower((unsigned char) b->p[i]);

		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
	return a->n < b->n ? -1 : a->n > b->n;
}

int
chunkmap_cmp(const struct cm_table *t, const struct cm_val *a, const struct cm_val *b)
{
	for (int j = 0; j < t->nkey; j++)
	{
		int c = cmp_val(t->kind[j], &a[j], &b[j]);

		if (c != 0)
			return c;
	}
	return 0;
}

/* By hi, the unbounded one last. */
static int
cmp_hi(const void *x, const void *y, void *arg)
{
	const struct cm_chunk *a = x, *b = y;

	if (a->hi == NULL || b->hi == NULL)
		return (a->hi == NULL) - (b->hi == NULL);
	return chunkmap_cmp(arg, a->hi, b->hi);
}

static bool
bad_bound(const struct cm_table *t, int j, struct apply_err *err)
{
	apply_err_set(err, EXIT_UNSUPPORTED,
				  "a chunk bound of %s.%s in pgsync.table_chunk is not a value of key column \"%s\": copy it again (pgsync bootstrap --restart-snapshot)",
				  t->schema, t->table, t->key_columns[j]);
	return false;
}

/* Parse the bounds for the key's types, sort the chunks, check they are disjoint. */
static bool
sort_chunks(struct cm_table *t, struct apply_err *err)
{
	for (size_t i = 0; i < t->nchunks; i++)
		for (int side = 0; side < 2; side++)
		{
			struct cm_val *v = side ? t->chunks[i].hi : t->chunks[i].lo;

			for (int j = 0; v && j < t->nkey; j++)
				if (t->kind[j] == CM_INT ? !parse_i64(v[j].p, v[j].n, &v[j].i) : v[j].n != 36)
					return bad_bound(t, j, err);
		}
	qsort_r(t->chunks, t->nchunks, sizeof(*t->chunks), cmp_hi, t);
	for (size_t i = 1; i < t->nchunks; i++)
	{
		const struct cm_chunk *a = &t->chunks[i - 1], *b = &t->chunks[i];

		if (a->hi == NULL || b->lo == NULL || chunkmap_cmp(t, b->lo, a->hi) < 0)
		{
			apply_err_set(err, EXIT_UNSUPPORTED,
						  "chunks of %s.%s in pgsync.table_chunk overlap: copy it again (pgsync bootstrap --restart-snapshot)",
						  t->schema, t->table);
			return false;
		}
	}
	t->sorted = true;
	return true;
}

static int
cmp_table(const void *x, const void *y)
{
	const struct cm_table *a = *(struct cm_table *const *) x, *b = *(struct cm_table *const *) y;
	int c = strcmp(a->schema, b->schema);

	return c ? c : strcmp(a->table, b->table);
}

/* Each load's temporary tables and statements get new names (chunkserver.h). */
static int server_ids;

/* Find the stream's key columns and how they compare. */
static bool
resolve(struct chunkmap *m, struct cm_table *t, const struct sr_rel *srel, struct apply_err *err)
{
	bool changed = false, server = false;

	if (t->colidx == NULL && t->nkey > 0)
	{
		t->colidx = xcalloc((size_t) t->nkey, sizeof(*t->colidx));
		t->kind = xcalloc((size_t) t->nkey, sizeof(*t->kind));
		t->typoid = xcalloc((size_t) t->nkey, sizeof(*t->typoid));
		t->ktype = xcalloc((size_t) t->nkey, sizeof(*t->ktype));
		t->coll = xcalloc((size_t) t->nkey, sizeof(*t->coll));
	}
	for (int j = 0; j < t->nkey; j++)
	{
		int col = -1;
		uint32_t typ;
		const struct key_type *kt;

		for (int i = 0; i < srel->ncols && col < 0; i++)
			if (strcmp(srel->cols[i].name, t->key_columns[j]) == 0)
				col = i;
		if (col < 0)
		{
			apply_err_set(err, EXIT_UNSUPPORTED,
						  "the stream's table %s.%s has no column \"%s\" of the key it was copied in chunks by: the copy and the stream disagree, copy it again (pgsync bootstrap --restart-snapshot)",
						  t->schema, t->table, t->key_columns[j]);
			return false;
		}
		typ = srel->cols[col].typoid;
		if ((kt = key_type_of(typ)) == NULL)
		{
			apply_err_set(err, EXIT_UNSUPPORTED,
						  "key column \"%s\" of %s.%s has type oid %u in the stream, which is never cut into chunks: the copy and the stream disagree, copy it again (pgsync bootstrap --restart-snapshot)",
						  t->key_columns[j], t->schema, t->table, typ);
			return false;
		}
		t->coll[j] = NULL;
		if (kt->order == KO_COLLATED)
		{
			const struct key_coll *c = keycolls_find(m->kc, t->schema, t->table, t->key_columns[j]);

			if (c == NULL || c->coll == NULL)
			{
				apply_err_set(err, EXIT_UNSUPPORTED,
							  "key column \"%s\" of %s.%s was copied in chunks by its collation, but no --key-collations line names a target collation that orders it as the source does%s%s: "
							  "run the catch-up with pgsync bootstrap, or copy the table again (pgsync bootstrap --restart-snapshot)",
							  t->key_columns[j], t->schema, t->table, c ? " now: " : "", c ? c->why : "");
				return false;
			}
			t->coll[j] = c->coll;
		}
		changed |= t->typoid[j] != typ;
		t->colidx[j] = col;
		t->typoid[j] = typ;
		t->ktype[j] = kt;
		t->kind[j] = kt->order == KO_INT ? CM_INT : kt->order == KO_UUID ? CM_UUID : CM_SERVER;
		server |= t->kind[j] == CM_SERVER;
	}
	if (server)
	{
		/* Every column by the server (a composite key's int ones too). */
		for (int j = 0; j < t->nkey; j++)
			t->kind[j] = CM_SERVER;
		if (m->meta == NULL)
		{
			apply_err_set(err, EXIT_RUNTIME, "no target session to place the keys of %s.%s", t->schema, t->table);
			return false;
		}
		if ((changed || t->srv == NULL) && !chunkserver_build(m->meta, t, ++server_ids, err))
			return false;
	}
	t->server = server;
	if (!server && (changed || !t->sorted) && !sort_chunks(t, err))
		return false;
	t->srel = srel;
	t->gen = srel->gen;
	return true;
}

struct cm_table *
chunkmap_table(struct chunkmap *m, const struct sr_rel *srel, struct apply_err *err)
{
	struct cm_table key = {.schema = srel->schema, .table = srel->table}, *kp = &key, **found;

	err->code = 0;
	if (m->last_srel == srel && m->last_gen == srel->gen)
		return m->last;
	if (m->ntables == 0)
		return NULL;
	if (!m->tables_sorted)
	{
		qsort(m->tables, m->ntables, sizeof(*m->tables), cmp_table);
		m->tables_sorted = true;
	}
	found = bsearch(&kp, m->tables, m->ntables, sizeof(*m->tables), cmp_table);
	if (found != NULL && ((*found)->srel != srel || (*found)->gen != srel->gen) && !resolve(m, *found, srel, err))
		return NULL;
	m->last_srel = srel;
	m->last_gen = srel->gen;
	m->last = found ? *found : NULL;
	return m->last;
}

static bool
no_value(const struct cm_table *t, int j, struct apply_err *err)
{
	apply_err_set(err, EXIT_UNSUPPORTED,
				  "a change to %s.%s carries no value of key column \"%s\" (replica identity?): its chunk cannot be found",
				  t->schema, t->table, t->key_columns[j]);
	return false;
}

bool
chunkmap_key(const struct cm_table *t, const struct field *vals, struct cm_val *key, struct buf *tmp,
			 struct apply_err *err)
{
	size_t off[CM_MAX_KEY];

	if (t->server)
	{
		/* Decoded, each NUL-terminated (a statement parameter); pointers
		 * only once tmp has stopped growing. */
		buf_reset(tmp);
		for (int j = 0; j < t->nkey; j++)
		{
			const struct field *f = &vals[t->colidx[j]];
			bool is_null;

			off[j] = tmp->len;
			if (field_is_unchanged(f->p, f->n) || !copy_unescape(f->p, f->n, tmp, &is_null) || is_null)
				return no_value(t, j, err);
			key[j].n = tmp->len - off[j];
			key[j].i = 0;
			buf_putc(tmp, '\0');
		}
		for (int j = 0; j < t->nkey; j++)
			key[j].p = tmp->data + off[j];
		return true;
	}
	for (int j = 0; j < t->nkey; j++)
	{
		const struct field *f = &vals[t->colidx[j]];
		bool ok;

		key[j].p = f->p;
		key[j].n = f->n;
		key[j].i = 0;
		if (memchr(f->p, '\\', f->n) != NULL)
			ok = false;			/* \N, \U: no value (int and uuid text has no escapes) */
		else if (t->kind[j] == CM_INT)
			ok = parse_i64(f->p, f->n, &key[j].i);
		else
			ok = f->n == 36;
		if (!ok)
			return no_value(t, j, err);
	}
	return true;
}

bool
chunkmap_place(struct cm_table *t, const struct cm_val *key, lsn_t *lsn, struct apply_err *err)
{
	struct chunkmap *m = t->map;
	struct timespec a, b;
	bool asked, ok;

	if (!t->server || t->nkey == 0)
	{
		*lsn = chunkmap_find(t, key);
		return true;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	ok = chunkserver_place(t, key, lsn, &asked, err);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (asked)
	{
		m->lookups++;
		m->lookup_us += (uint64_t) ((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000);
	}
	return ok;
}

lsn_t
chunkmap_find(const struct cm_table *t, const struct cm_val *key)
{
	size_t lo = 0, hi = t->nchunks;
	const struct cm_chunk *c;

	if (t->nkey == 0)
		return t->max_lsn;		/* one piece: its latest copy is what the target holds */
	/* The first chunk whose hi is at or above the key. */
	while (lo < hi)
	{
		size_t mid = lo + (hi - lo) / 2;

		if (t->chunks[mid].hi == NULL || chunkmap_cmp(t, key, t->chunks[mid].hi) <= 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == t->nchunks)
		return CM_NOT_COPIED;
	c = &t->chunks[lo];
	if (c->lo != NULL && chunkmap_cmp(t, key, c->lo) <= 0)
		return CM_NOT_COPIED;	/* in a gap before this chunk */
	return c->lsn;
}

/* --- loading ----------------------------------------------------------- */

/*
 * One row per key column of each chunk (its name and bounds side by side),
 * one row for a chunk of a table copied in one piece. Only when some chunk
 * lies above the applied position: past the last one nothing is filtered.
 */
static const char load_sql[] =
	"SELECT c.schema_name, c.table_name, c.lsn, c.ctid::pg_catalog.text,"
	" pg_catalog.cardinality(c.key_columns), c.lo IS NULL, c.hi IS NULL, u.o, u.k, u.l, u.h"
	" FROM pgsync.table_chunk c"
	" LEFT JOIN LATERAL ROWS FROM (pg_catalog.unnest(c.key_columns), pg_catalog.unnest(c.lo), pg_catalog.unnest(c.hi))"
	"   WITH ORDINALITY AS u(k, l, h, o) ON true"
	" WHERE c.job = $1"
	"   AND $2::pg_catalog.pg_lsn < (SELECT pg_catalog.max(x.lsn) FROM pgsync.table_chunk x WHERE x.job = $1)"
	" ORDER BY c.schema_name, c.table_name, c.ctid, u.o";

static bool
bad_row(const char *schema, const char *table, struct apply_err *err)
{
	apply_err_set(err, EXIT_UNSUPPORTED,
				  "a chunk of %s.%s in pgsync.table_chunk has key columns and bounds of different lengths: copy it again (pgsync bootstrap --restart-snapshot)",
				  schema, table);
	return false;
}

/*
 * The rows arrive one at a time (single-row mode), so reading holds one
 * row and the chunk it belongs to, never the whole result: a chunk's rows
 * (one per key column) are gathered here until the next chunk starts.
 */
struct chunk_rows {
	struct chunkmap *m;
	bool open;
	char *schema, *table, *ctid;
	int nkey, j;
	bool lo_null, hi_null;
	lsn_t lsn;
	char *vals[3 * CM_MAX_KEY];	/* key column names, lo values, hi values */
};

static void
loader_clear(struct chunk_rows *L)
{
	free(L->schema);
	free(L->table);
	free(L->ctid);
	L->schema = L->table = L->ctid = NULL;
	for (int j = 0; j < 3 * CM_MAX_KEY; j++)
	{
		free(L->vals[j]);
		L->vals[j] = NULL;
	}
	L->open = false;
}

/* The chunk gathered so far is complete: into the map. */
static bool
loader_flush(struct chunk_rows *L, struct apply_err *err)
{
	const char *const *v = (const char *const *) L->vals;
	bool ok;

	if (!L->open)
		return true;
	if (L->nkey > 0 && L->j != L->nkey)
		ok = bad_row(L->schema, L->table, err);
	else
	{
		struct cm_chunk_spec c = {L->schema, L->table, L->nkey, v, L->lo_null ? NULL : v + CM_MAX_KEY,
								  L->hi_null ? NULL : v + 2 * CM_MAX_KEY, L->lsn};

		ok = chunkmap_add(L->m, &c, err);
	}
	loader_clear(L);
	return ok;
}

static bool
loader_row(struct chunk_rows *L, const PGresult *res, struct apply_err *err)
{
	const char *schema = PQgetvalue(res, 0, 0), *table = PQgetvalue(res, 0, 1), *ctid = PQgetvalue(res, 0, 3);

	if (L->open && (strcmp(L->ctid, ctid) != 0 || strcmp(L->schema, schema) != 0 || strcmp(L->table, table) != 0) &&
		!loader_flush(L, err))
		return false;
	if (!L->open)
	{
		L->open = true;
		L->schema = xstrdup(schema);
		L->table = xstrdup(table);
		L->ctid = xstrdup(ctid);
		L->nkey = PQgetisnull(res, 0, 4) ? 0 : atoi(PQgetvalue(res, 0, 4));
		L->lo_null = strcmp(PQgetvalue(res, 0, 5), "t") == 0;
		L->hi_null = strcmp(PQgetvalue(res, 0, 6), "t") == 0;
		L->j = 0;
		if (L->nkey < 0 || L->nkey > CM_MAX_KEY || !lsn_parse(PQgetvalue(res, 0, 2), &L->lsn))
			return bad_row(schema, table, err);
	}
	if (L->nkey == 0)
		return true;
	if (L->j >= L->nkey || PQgetisnull(res, 0, 8) || PQgetisnull(res, 0, 9) != L->lo_null ||
		PQgetisnull(res, 0, 10) != L->hi_null)
		return bad_row(schema, table, err);
	L->vals[L->j] = xstrdup(PQgetvalue(res, 0, 8));
	if (!L->lo_null)
		L->vals[CM_MAX_KEY + L->j] = xstrdup(PQgetvalue(res, 0, 9));
	if (!L->hi_null)
		L->vals[2 * CM_MAX_KEY + L->j] = xstrdup(PQgetvalue(res, 0, 10));
	L->j++;
	return true;
}

/* Read every result of the query sent, row by row; false with err set. */
static bool
load_rows(PGconn *meta, struct chunk_rows *L, struct apply_err *err)
{
	struct pgerr pe;
	PGresult *res;
	bool ok = true;

	while ((res = PQgetResult(meta)) != NULL)
	{
		ExecStatusType st = PQresultStatus(res);

		if (ok && st == PGRES_SINGLE_TUPLE)
		{
			if (PQnfields(res) != 11)
			{
				apply_err_set(err, EXIT_RUNTIME, "cannot read pgsync.table_chunk: unexpected columns");
				ok = false;
			}
			else
				ok = loader_row(L, res, err);
		}
		else if (ok && st != PGRES_TUPLES_OK)
		{
			pgerr_set(&pe, meta, res);
			apply_err_pg(err, EXIT_RUNTIME, &pe, "cannot read pgsync.table_chunk");
			ok = false;
		}
		PQclear(res);
	}
	return ok && loader_flush(L, err);
}

bool
chunkmap_load(PGconn *meta, const char *job, lsn_t applied, const struct key_colls *kc, struct chunkmap **out,
			  struct apply_err *err)
{
	char l[LSN_BUFSZ];
	const char *params[2] = {job, lsn_format(applied, l)};
	struct chunk_rows L = {.m = chunkmap_new()};
	struct pgerr pe;

	*out = NULL;
	if (!PQsendQueryParams(meta, load_sql, 2, NULL, params, NULL, NULL, 0) || !PQsetSingleRowMode(meta))
	{
		pgerr_set(&pe, meta, NULL);
		apply_err_pg(err, EXIT_RUNTIME, &pe, "cannot read pgsync.table_chunk");
		while (PQgetResult(meta) != NULL)
			;
		chunkmap_free(L.m);
		return false;
	}
	if (!load_rows(meta, &L, err))
	{
		loader_clear(&L);
		chunkmap_free(L.m);
		return false;
	}
	if (chunkmap_nchunks(L.m) == 0)
		chunkmap_free(L.m);
	else
	{
		chunkmap_set_server(L.m, meta, kc);
		*out = L.m;
	}
	return true;
}
