#include "relcache.h"
#include "common.h"
#include "conn.h"
#include "hash.h"
#include "log.h"
#include "stmtsig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Past this many column sets a relation's rarer shapes run unnamed, so a
 * table with many TOASTed columns cannot grow the cache without bound. */
#define RC_MAX_STMTS 64
/*
 * Statements of all tables together: past this, the one used least recently
 * makes room (deallocated on the target), so that a job with many tables
 * keeps a bounded number prepared in the target session.
 */
#define RC_MAX_SESSION_STMTS 1024

struct relcache {
	char *job;
	char **tables;				/* "schema\ntable" of the job's snapshot */
	size_t ntables;
	unsigned stmt_counter;
	unsigned session;			/* bumped by relcache_new_session() */
	struct rc_stmt *retired;	/* replaced, still prepared in this session */
	struct rc_stmt *newest, *oldest;	/* every table's statements by last use */
	size_t nstmts;
};

static void
free_stmt(struct rc_stmt *s)
{
	free(s->sig);
	free(s);
}

static void
free_list(struct rc_stmt *s)
{
	for (struct rc_stmt *next; s; s = next)
	{
		next = s->next;
		free_stmt(s);
	}
}

struct relcache *
relcache_new(const char *job)
{
	struct relcache *rc = xcalloc(1, sizeof(*rc));

	rc->job = xstrdup(job);
	return rc;
}

static void
free_tables(struct relcache *rc)
{
	for (size_t i = 0; i < rc->ntables; i++)
		free(rc->tables[i]);
	free(rc->tables);
	rc->tables = NULL;
	rc->ntables = 0;
}

void
relcache_free(struct relcache *rc)
{
	if (rc == NULL)
		return;
	free_tables(rc);
	free_list(rc->retired);
	free(rc->job);
	free(rc);
}

bool
relcache_load_tables(struct relcache *rc, PGconn *meta, struct apply_err *err)
{
	const char *params[1] = {rc->job};
	struct pgerr pe;
	PGresult *res = conn_query(meta, "SELECT schema_name, table_name FROM pgsync.table_sync WHERE job = $1",
							   1, params, 2, &pe);

	if (res == NULL)
	{
		apply_err_pg(err, EXIT_RUNTIME, &pe, "cannot read pgsync.table_sync");
		return false;
	}
	free_tables(rc);
	rc->ntables = (size_t) PQntuples(res);
	rc->tables = xcalloc(rc->ntables ? rc->ntables : 1, sizeof(char *));
	for (size_t i = 0; i < rc->ntables; i++)
	{
		struct buf b = BUF_INIT;

		buf_printf(&b, "%s\n%s", PQgetvalue(res, (int) i, 0), PQgetvalue(res, (int) i, 1));
		rc->tables[i] = buf_cstr(&b);
	}
	PQclear(res);
	return true;
}

static bool
in_snapshot(const struct relcache *rc, const struct sr_rel *srel)
{
	size_t ns = strlen(srel->schema);

	if (rc->ntables == 0)
		return true;			/* no bootstrap recorded tables: no restriction */
	for (size_t i = 0; i < rc->ntables; i++)
		if (strncmp(rc->tables[i], srel->schema, ns) == 0 && rc->tables[i][ns] == '\n' &&
			strcmp(rc->tables[i] + ns + 1, srel->table) == 0)
			return true;
	return false;
}

static void
lru_unlink(struct relcache *rc, struct rc_stmt *s)
{
	*(s->newer ? &s->newer->older : &rc->newest) = s->older;
	*(s->older ? &s->older->newer : &rc->oldest) = s->newer;
	s->newer = s->older = NULL;
}

static void
lru_push(struct relcache *rc, struct rc_stmt *s)
{
	s->older = rc->newest;
	s->newer = NULL;
	*(rc->newest ? &rc->newest->newer : &rc->oldest) = s;
	rc->newest = s;
}

/*
 * A statement leaves the cache: one prepared in the current session waits
 * for relcache_retired() to be deallocated there (a name is never used
 * again), one of an earlier session is gone with it.
 */
static void
retire(struct relcache *rc, struct rc_stmt *s)
{
	lru_unlink(rc, s);
	rc->nstmts--;
	if (s->session == rc->session)
	{
		s->next = rc->retired;
		rc->retired = s;
	}
	else
		free_stmt(s);
}

/* The statements of r no longer apply. */
static void
retire_stmts(struct relcache *rc, struct rc_rel *r)
{
	for (struct rc_stmt *s = r->stmts, *next; s; s = next)
	{
		next = s->next;
		retire(rc, s);
	}
	r->stmts = NULL;
	r->nstmts = 0;
}

/* Make room for one more statement: the least recently used one goes. */
static void
evict_oldest(struct relcache *rc)
{
	struct rc_stmt *s = rc->oldest, **prev = &s->rel->stmts;

	while (*prev != s)
		prev = &(*prev)->next;
	*prev = s->next;
	s->rel->nstmts--;
	retire(rc, s);
}

static void
free_cols(struct rc_col *cols, int n)
{
	for (int i = 0; i < n; i++)
	{
		free(cols[i].name);
		free(cols[i].qname);
		free(cols[i].type);
		free(cols[i].fulltype);
	}
	free(cols);
}

/*
 * Casts use the type's own name, schema-qualified ("pg_catalog.bpchar"):
 * format_type() without a modifier says "character", which as a cast means
 * char(1) and would silently truncate the value being looked up.
 *
 * A type without a default btree operator class (json, point, xml, arrays
 * and composites of such) has no usable "=": such columns are compared by the
 * text form of both sides, both produced by the target, which is exact for
 * values that came from the same text.
 */
static const char cols_sql[] =
	"SELECT a.attname, pg_catalog.quote_ident(tn.nspname) || '.' || pg_catalog.quote_ident(t.typname),"
	" EXISTS (SELECT 1 FROM pg_catalog.pg_opclass oc JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod"
	"   WHERE am.amname = 'btree' AND oc.opcdefault"
	"     AND oc.opcintype = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END),"
	" pg_catalog.format_type(a.atttypid, a.atttypmod), a.attidentity = 'a'"
	" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	" LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
	" LEFT JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
	" LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace"
	" WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')"
	" ORDER BY a.attnum";

/* Properties that decide whether updates of the table may be merged. */
static const char merge_sql[] =
	"SELECT c.relkind = 'r' AND NOT c.relhasrules AND NOT c.relhassubclass,"
	" EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND t.tgenabled IN ('A', 'R')),"
	" EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND t.tgenabled IN ('A', 'O'))"
	" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	" WHERE n.nspname = $1 AND c.relname = $2";

/*
 * Every unique index and exclusion constraint, one row per key column:
 * index, opaque (expressions, a predicate or an exclusion), column name
 * (NULL for an expression).
 */
static const char uniq_sql[] =
	"SELECT i.indexrelid::pg_catalog.int8,"
	" i.indisexclusion OR i.indexprs IS NOT NULL OR i.indpred IS NOT NULL, a.attname"
	" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	" JOIN pg_catalog.pg_index i ON i.indrelid = c.oid AND (i.indisunique OR i.indisexclusion)"
	" CROSS JOIN LATERAL pg_catalog.unnest((i.indkey::pg_catalog.int2[])[0:i.indnkeyatts - 1]) k(attnum)"
	" LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum"
	" WHERE n.nspname = $1 AND c.relname = $2"
	" ORDER BY 1";

/* Is the column set of rows [from, to) of res exactly the key columns? */
static bool
index_is_key(PGresult *res, int from, int to, const struct rc_col *cols, int ncols)
{
	int nkey = 0;

	for (int i = 0; i < ncols; i++)
		nkey += cols[i].key;
	if (to - from != nkey)
		return false;
	for (int j = from; j < to; j++)
	{
		bool found = false;

		if (strcmp(PQgetvalue(res, j, 1), "t") == 0 || PQgetisnull(res, j, 2))
			return false;
		for (int i = 0; i < ncols && !found; i++)
			found = cols[i].key && strcmp(cols[i].name, PQgetvalue(res, j, 2)) == 0;
		if (!found)
			return false;
	}
	return true;
}

static bool
read_merge_ok(PGconn *meta, const char *const params[2], struct rc_rel *r, const char *name,
			  struct apply_err *err)
{
	struct pgerr pe;
	PGresult *res = conn_query_one(meta, merge_sql, 2, params, 3, &pe);
	bool any_key = false;

	if (res != NULL)
	{
		r->merge_ok = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		r->trig_replica = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
		r->trig_origin = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
		PQclear(res);
		res = conn_query(meta, uniq_sql, 2, params, 3, &pe);
	}
	if (res == NULL)
	{
		apply_err_pg(err, EXIT_RUNTIME, &pe, "cannot read the indexes of %s on the target", name);
		return false;
	}
	for (int i = 0; i < r->ncols; i++)
		any_key |= r->cols[i].key;
	r->merge_ok &= any_key;
	for (int from = 0, to; from < PQntuples(res) && r->merge_ok; from = to)
	{
		for (to = from + 1; to < PQntuples(res) && strcmp(PQgetvalue(res, to, 0), PQgetvalue(res, from, 0)) == 0;)
			to++;
		r->merge_ok = index_is_key(res, from, to, r->cols, r->ncols);
	}
	PQclear(res);
	return true;
}

struct rc_rel *
relcache_get(struct relcache *rc, PGconn *meta, struct sr_rel *srel,
			 bool *stmts_dropped, struct apply_err *err)
{
	struct rc_rel *r = srel->user;
	const char *params[2] = {srel->schema, srel->table};
	struct rc_col *cols;
	struct pgerr pe;
	PGresult *res;
	uint64_t h = HASH_INIT;
	char name[300];

	*stmts_dropped = false;
	if (r != NULL && r->gen == srel->gen)
		return r;
	sr_rel_name(srel, name, sizeof(name));
	if (!in_snapshot(rc, srel))
	{
		apply_err_set(err, EXIT_CONTINUITY,
					  "table %s is not part of this job's snapshot: add it to replication.tables and resync", name);
		return NULL;
	}
	res = conn_query(meta, cols_sql, 2, params, 5, &pe);
	if (res == NULL)
	{
		apply_err_pg(err, EXIT_RUNTIME, &pe, "cannot read the columns of %s on the target", name);
		return NULL;
	}
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		apply_err_set(err, EXIT_UNSUPPORTED,
					  "table %s does not exist on the target: create it on the target, then rerun", name);
		return NULL;
	}
	cols = xcalloc(srel->ncols ? (size_t) srel->ncols : 1, sizeof(*cols));
	for (int i = 0; i < srel->ncols; i++)
	{
		int row = -1;

		for (int j = 0; j < PQntuples(res) && row < 0; j++)
			if (!PQgetisnull(res, j, 0) && strcmp(PQgetvalue(res, j, 0), srel->cols[i].name) == 0)
				row = j;
		if (row < 0)
		{
			apply_err_set(err, EXIT_UNSUPPORTED,
						  "column \"%s\" of %s does not exist on the target: apply the DDL on the target, then rerun",
						  srel->cols[i].name, name);
			free_cols(cols, i);
			PQclear(res);
			return NULL;
		}
		cols[i].name = xstrdup(srel->cols[i].name);
		cols[i].qname = conn_quote_ident(meta, srel->cols[i].name);
		cols[i].type = xstrdup(PQgetvalue(res, row, 1));
		cols[i].key = srel->cols[i].key;
		cols[i].text_cmp = strcmp(PQgetvalue(res, row, 2), "t") != 0;
		cols[i].fulltype = xstrdup(PQgetvalue(res, row, 3));
		cols[i].always = strcmp(PQgetvalue(res, row, 4), "t") == 0;
		h = hash_bytes(h, cols[i].name, strlen(cols[i].name) + 1);
		h = hash_bytes(h, cols[i].type, strlen(cols[i].type) + 1);
		h = hash_bytes(h, &cols[i].key, 1);
		h = hash_bytes(h, &cols[i].text_cmp, 1);
		h = hash_bytes(h, &cols[i].always, 1);
	}
	PQclear(res);
	h = hash_bytes(h, &srel->ncols, sizeof(srel->ncols));

	if (r == NULL)
	{
		char *qs = conn_quote_ident(meta, srel->schema), *qt = conn_quote_ident(meta, srel->table);
		struct buf b = BUF_INIT;

		r = xcalloc(1, sizeof(*r));
		r->srel = srel;
		r->display = xstrdup(name);
		buf_printf(&b, "%s.%s", qs, qt);
		r->qname = buf_cstr(&b);
		free(qs);
		free(qt);
		srel->user = r;
	}
	else
	{
		free_cols(r->cols, r->ncols);
		if (r->layout_hash != h)
		{
			retire_stmts(rc, r);
			*stmts_dropped = true;
		}
	}
	r->cols = cols;
	r->ncols = srel->ncols;
	r->layout_hash = h;
	free(r->keymask);
	r->keymask = xcalloc(r->ncols ? (size_t) r->ncols : 1, sizeof(bool));
	r->always_nonkey = false;
	for (int i = 0; i < r->ncols; i++)
	{
		r->keymask[i] = cols[i].key;
		r->always_nonkey |= cols[i].always && !cols[i].key;
	}
	if (!read_merge_ok(meta, params, r, name, err))
		return NULL;
	r->gen = srel->gen;
	return r;
}

/* The WHERE clause of a signature, parameters numbered from first. */
static void
where_sql(const struct rc_rel *rel, const char *sig, int first, struct buf *sql)
{
	int p = first;
	bool any = false;

	for (int i = 0; i < rel->ncols; i++)
	{
		char w = stmtsig_where(sig, i);
		const struct rc_col *c = &rel->cols[i];

		if (w == STMTSIG_NONE)
			continue;
		buf_puts(sql, any ? " AND " : "");
		any = true;
		if (w == STMTSIG_IS_NULL)
			buf_printf(sql, "%s IS NULL", c->qname);
		else if (c->text_cmp)
			buf_printf(sql, "%s::pg_catalog.text = $%d::%s::pg_catalog.text", c->qname, p++, c->type);
		else
			buf_printf(sql, "%s = $%d::%s", c->qname, p++, c->type);
	}
}

/*
 * Several rows' updates in one statement (signature op V, row count in
 * the kind's place): a VALUES list, every value cast to its column's type
 * as the single-row statement's parameters are, joined on the key.
 * Parameters: per row, each SET or key column once, in column order.
 */
static void
multi_update_sql(const struct rc_rel *rel, const char *sig, struct buf *sql)
{
	int rows = stmtsig_rows(sig), p = 1;
	bool any = false;

	buf_printf(sql, "UPDATE %s AS t SET ", rel->qname);
	for (int i = 0; i < rel->ncols; i++)
		if (stmtsig_sets(sig, i))
		{
			buf_printf(sql, "%s%s = v.c%d", any ? ", " : "", rel->cols[i].qname, i);
			any = true;
		}
	buf_puts(sql, " FROM (VALUES ");
	for (int r = 0; r < rows; r++)
	{
		any = false;
		buf_puts(sql, r ? ", (" : "(");
		for (int i = 0; i < rel->ncols; i++)
			if (stmtsig_sets(sig, i) || stmtsig_compares(sig, i))
			{
				buf_printf(sql, "%s$%d::%s", any ? ", " : "", p++, rel->cols[i].type);
				any = true;
			}
		buf_putc(sql, ')');
	}
	buf_puts(sql, ") AS v (");
	any = false;
	for (int i = 0; i < rel->ncols; i++)
		if (stmtsig_sets(sig, i) || stmtsig_compares(sig, i))
		{
			buf_printf(sql, "%sc%d", any ? ", " : "", i);
			any = true;
		}
	buf_puts(sql, ") WHERE ");
	any = false;
	for (int i = 0; i < rel->ncols; i++)
		if (stmtsig_compares(sig, i))
		{
			buf_printf(sql, "%st.%s = v.c%d", any ? " AND " : "", rel->cols[i].qname, i);
			any = true;
		}
}

void
relcache_sql(const struct rc_rel *rel, const char *sig, struct buf *sql)
{
	int p = 1;
	bool any = false;

	buf_reset(sql);
	if (stmtsig_op(sig) == 'V')
	{
		multi_update_sql(rel, sig, sql);
		return;
	}
	if (stmtsig_op(sig) == 'I')
	{
		if (rel->ncols == 0)
		{
			buf_printf(sql, "INSERT INTO %s DEFAULT VALUES", rel->qname);
			return;
		}
		buf_printf(sql, "INSERT INTO %s (", rel->qname);
		for (int i = 0; i < rel->ncols; i++)
			buf_printf(sql, "%s%s", i ? ", " : "", rel->cols[i].qname);
		/* The source's value, also in a GENERATED ALWAYS identity column,
		 * as the copy's COPY writes it. */
		buf_puts(sql, ") OVERRIDING SYSTEM VALUE VALUES (");
		for (int i = 0; i < rel->ncols; i++)
			buf_printf(sql, "%s$%d", i ? ", " : "", i + 1);
		buf_putc(sql, ')');
		return;
	}
	if (stmtsig_op(sig) == 'U')
	{
		buf_printf(sql, "UPDATE %s SET ", rel->qname);
		for (int i = 0; i < rel->ncols; i++)
			if (stmtsig_sets(sig, i))
			{
				buf_printf(sql, "%s%s = $%d", any ? ", " : "", rel->cols[i].qname, p++);
				any = true;
			}
			else if (stmtsig_sets_itself(sig, i))
			{
				buf_printf(sql, "%s%s = %s", any ? ", " : "", rel->cols[i].qname, rel->cols[i].qname);
				any = true;
			}
	}
	else
		buf_printf(sql, "DELETE FROM %s", rel->qname);
	buf_puts(sql, " WHERE ");
	/*
	 * With replica identity full, identical rows are possible: change only
	 * one of them, as the source did. The condition is repeated outside the
	 * subquery so that equal ctids in different partitions cannot match.
	 */
	if (stmtsig_kind(sig) == 'O')
	{
		buf_printf(sql, "ctid = (SELECT ctid FROM %s WHERE ", rel->qname);
		where_sql(rel, sig, p, sql);
		buf_puts(sql, " LIMIT 1) AND ");
	}
	where_sql(rel, sig, p, sql);
}

/* "(a, b)" or "($1::t1, $2::t2)" from parameter first on (0: the columns),
 * each parameter under its collation in colls when there is one. */
static void
key_row(const struct rc_rel *rel, int nkey, const int *cols, const char *const *colls, int first,
		struct buf *sql)
{
	buf_putc(sql, '(');
	for (int j = 0; j < nkey; j++)
	{
		buf_puts(sql, j ? ", " : "");
		if (first == 0)
			buf_puts(sql, rel->cols[cols[j]].qname);
		else
			buf_printf(sql, "$%d::%s", first + j, rel->cols[cols[j]].type);
		if (first != 0 && colls && colls[j])
			buf_printf(sql, " COLLATE %s", colls[j]);
	}
	buf_putc(sql, ')');
}

void
relcache_range_delete_sql(const struct rc_rel *rel, const struct range_delete *r, struct buf *sql)
{
	int nkey = r->nkey;
	const int *cols = r->cols;
	const char *const *colls = r->colls;
	bool has_lo = r->has_lo, has_hi = r->has_hi;

	buf_reset(sql);
	buf_printf(sql, "DELETE FROM %s", rel->qname);
	if (has_lo)
	{
		buf_puts(sql, " WHERE ");
		key_row(rel, nkey, cols, colls, 0, sql);
		buf_puts(sql, " > ");
		key_row(rel, nkey, cols, colls, 1, sql);
	}
	if (has_hi)
	{
		buf_puts(sql, has_lo ? " AND " : " WHERE ");
		key_row(rel, nkey, cols, colls, 0, sql);
		buf_puts(sql, " <= ");
		key_row(rel, nkey, cols, colls, has_lo ? nkey + 1 : 1, sql);
	}
}

struct rc_stmt *
relcache_stmt(struct relcache *rc, struct rc_rel *rel, const char *sig, size_t siglen,
			  struct buf *sql, bool *created)
{
	uint64_t h = hash_bytes(HASH_INIT, sig, siglen);
	struct rc_stmt *s, **prev;

	*created = false;
	for (prev = &rel->stmts; (s = *prev) != NULL; prev = &s->next)
		if (s->hash == h && s->siglen == siglen && memcmp(s->sig, sig, siglen) == 0)
		{
			/* Move to the front: the next row usually has the same shape. */
			*prev = s->next;
			s->next = rel->stmts;
			rel->stmts = s;
			lru_unlink(rc, s);
			lru_push(rc, s);
			if (s->session != rc->session)
			{
				/* Prepared in a session that is gone: prepare it again. */
				s->session = rc->session;
				relcache_sql(rel, sig, sql);
				*created = true;
			}
			return s;
		}
	if (rel->nstmts >= RC_MAX_STMTS)
		return NULL;
	if (rc->nstmts >= RC_MAX_SESSION_STMTS)
		evict_oldest(rc);
	s = xcalloc(1, sizeof(*s));
	s->rel = rel;
	s->hash = h;
	s->sig = xmalloc(siglen);
	memcpy(s->sig, sig, siglen);
	s->siglen = siglen;
	s->session = rc->session;
	snprintf(s->name, sizeof(s->name), "pgsync_%u", ++rc->stmt_counter);
	s->nparams = stmtsig_nparams(sig, rel->ncols);
	s->next = rel->stmts;
	rel->stmts = s;
	rel->nstmts++;
	lru_push(rc, s);
	rc->nstmts++;
	relcache_sql(rel, sig, sql);
	*created = true;
	return s;
}

void
relcache_new_session(struct relcache *rc)
{
	rc->session++;
	free_list(rc->retired);
	rc->retired = NULL;
}

bool
relcache_retired(struct relcache *rc, char *name, size_t len)
{
	struct rc_stmt *s = rc->retired;

	if (s == NULL)
		return false;
	rc->retired = s->next;
	snprintf(name, len, "%s", s->name);
	free_stmt(s);
	return true;
}
