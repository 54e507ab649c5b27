/*
 * The key ranges of the chunked copy. A table cut by key is read as the
 * ranges (lo, hi] of its chunk key that no done chunk covers yet; each such
 * gap is cut into about --jobs parts so that one large table keeps every
 * worker busy. Part bounds are full key tuples: a leading value v followed
 * by the largest value of each further column type, so that (v, MAX, ...)
 * ends a part exactly after every key whose leading column is v. Bounds
 * need not be keys that exist; pg-apply compares with them all the same.
 * A key the server orders (a column of another type keyorder.h lists) has
 * no such largest values: its part bounds are whole key tuples of a block
 * sample, read in the source's order, and its done chunks are sorted and
 * checked by the source too, never by C comparisons.
 */
#include "chunkplan.h"
#include "buf.h"
#include "common.h"
#include "conn.h"
#include "escape.h"
#include "log.h"
#include "publication.h"
#include "record.h"
#include "streamread.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INT2OID 21
#define INT4OID 23
#define INT8OID 20
#define UUIDOID 2950
#define MAX_KEY_COLS CHUNK_MAX_KEY
/* Rows sampled to place the part bounds of a key that is not an integer:
 * the percentage of a table estimated at est rows. */
#define SAMPLE_ROWS 30000.0
#define SAMPLE_PCT(est) ((est) > 0 && 100.0 * SAMPLE_ROWS / (est) < 100.0 ? 100.0 * SAMPLE_ROWS / (est) : 100.0)

static const char *
type_max(unsigned type)
{
	switch (type)
	{
		case INT2OID: return "32767";
		case INT4OID: return "2147483647";
		case INT8OID: return "9223372036854775807";
		default: return "ffffffff-ffff-ffff-ffff-ffffffffffff";
	}
}

/* --- keys --------------------------------------------------------------- */

/* The line of the key that says why schema.name is copied in one piece. */
static void
log_whole(const char *schema, const char *name, const char *col, const struct key_coll *c)
{
	log_info("%s.%s is copied in one piece, not in key chunks: key column \"%s\": %s", schema, name, col,
			 c ? c->why : "no --key-collations line names a target collation that orders it as the source does");
}

struct snap_key *
chunkplan_key(PGconn *conn, unsigned oid, const char *schema, const char *name, char *const *copied,
			  int ncopied, const struct key_colls *kc)
{
	char oidbuf[16];
	const char *params[1] = {oidbuf};
	struct pgerr err;
	PGresult *res;
	struct snap_key *k;
	int n;

	snprintf(oidbuf, sizeof(oidbuf), "%u", oid);
	/* The replica identity index, or the primary key (also of a FULL
	 * table): the key the stream's changes are matched by. */
	res = conn_query(conn,
					 "SELECT a.attname, a.atttypid, pg_catalog.format_type(a.atttypid, a.atttypmod),"
					 "       CASE WHEN co.oid IS NOT NULL THEN pg_catalog.format('%I.%I', cn.nspname, co.collname) END"
					 "  FROM pg_catalog.pg_class c"
					 "  JOIN pg_catalog.pg_index i ON i.indrelid = c.oid AND i.indisvalid AND i.indisunique"
					 "   AND i.indexprs IS NULL AND i.indpred IS NULL"
					 "   AND CASE WHEN c.relreplident = 'i' THEN i.indisreplident ELSE i.indisprimary END"
					 "  CROSS JOIN LATERAL unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY AS k(attnum, n)"
					 "  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum"
					 "  LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation"
					 "  LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace"
					 " WHERE c.oid = $1::pg_catalog.oid AND c.relkind IN ('r', 'p') AND k.n <= i.indnkeyatts"
					 " ORDER BY k.n",
					 1, params, 4, &err);
	if (res == NULL)
	{
		log_warn("cannot read the key of relation %u: %s", oid, err.msg);
		return NULL;
	}
	n = PQntuples(res);
	if (n == 0 || n > MAX_KEY_COLS)
	{
		PQclear(res);
		return NULL;
	}
	k = xcalloc(1, sizeof(*k));
	k->nkey = n;
	k->cols = xcalloc((size_t) n, sizeof(char *));
	k->qcols = xcalloc((size_t) n, sizeof(char *));
	k->typenames = xcalloc((size_t) n, sizeof(char *));
	k->types = xcalloc((size_t) n, sizeof(unsigned));
	k->pos = xcalloc((size_t) n, sizeof(int));
	k->colls = xcalloc((size_t) n, sizeof(char *));
	for (int i = 0; i < n; i++)
	{
		k->cols[i] = xstrdup(PQgetvalue(res, i, 0));
		k->qcols[i] = conn_quote_ident(conn, k->cols[i]);
		k->types[i] = (unsigned) strtoul(PQgetvalue(res, i, 1), NULL, 10);
		k->typenames[i] = xstrdup(PQgetvalue(res, i, 2));
		if (!PQgetisnull(res, i, 3))
			k->colls[i] = xstrdup(PQgetvalue(res, i, 3));
		k->pos[i] = -1;
		for (int c = 0; c < ncopied; c++)
			if (strcmp(copied[c], k->cols[i]) == 0)
				k->pos[i] = c;
	}
	PQclear(res);
	for (int i = 0; i < n; i++)
	{
		const struct key_type *kt = key_type_of(k->types[i]);

		if (k->pos[i] < 0 || kt == NULL)
		{
			chunkplan_key_free(k);
			return NULL;
		}
		if (kt->order == KO_COLLATED)
		{
			const struct key_coll *c = keycolls_find(kc, schema, name, k->cols[i]);

			if (c == NULL || c->coll == NULL)
			{
				log_whole(schema, name, k->cols[i], c);
				chunkplan_key_free(k);
				return NULL;
			}
		}
		k->server |= kt->order == KO_SERVER || kt->order == KO_COLLATED;
	}
	return k;
}

void
chunkplan_key_free(struct snap_key *k)
{
	if (k == NULL)
		return;
	for (int i = 0; i < k->nkey; i++)
	{
		free(k->cols[i]);
		free(k->qcols[i]);
		free(k->typenames[i]);
		free(k->colls[i]);
	}
	free(k->colls);
	free(k->cols);
	free(k->qcols);
	free(k->typenames);
	free(k->types);
	free(k->pos);
	free(k);
}

/* --- order -------------------------------------------------------------- */

/* A key value as the source writes it: an integer, or a uuid in lower case. */
static bool
value_ok(unsigned type, const char *v)
{
	const struct key_type *kt = key_type_of(type);

	/* Other types are read by the source, which rejects what is not one. */
	if (kt == NULL || (kt->order != KO_INT && kt->order != KO_UUID))
		return true;
	if (type == UUIDOID)
	{
		if (strlen(v) != 36)
			return false;
		for (int i = 0; i < 36; i++)
			if ((i == 8 || i == 13 || i == 18 || i == 23) ? v[i] != '-'
				: !((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
				return false;
		return true;
	}
	else
	{
		char *end;

		errno = 0;
		(void) strtoll(v, &end, 10);
		return errno == 0 && end != v && *end == '\0';
	}
}

int
chunkplan_cmp(const struct snap_key *k, char *const *a, char *const *b)
{
	for (int i = 0; i < k->nkey; i++)
	{
		int c;

		if (k->types[i] == UUIDOID)
			c = strcmp(a[i], b[i]);
		else
		{
			long long x = strtoll(a[i], NULL, 10), y = strtoll(b[i], NULL, 10);

			c = x < y ? -1 : x > y;
		}
		if (c != 0)
			return c < 0 ? -1 : 1;
	}
	return 0;
}

/* Lower bounds: NULL (unbounded) first. */
static int
cmp_lo(const struct snap_key *k, char *const *a, char *const *b)
{
	if (a == NULL || b == NULL)
		return (a != NULL) - (b != NULL);
	return chunkplan_cmp(k, a, b);
}

static char **
dup_values(char *const *v, int n)
{
	char **d;

	if (v == NULL)
		return NULL;
	d = xcalloc((size_t) n, sizeof(char *));
	for (int i = 0; i < n; i++)
		d[i] = xstrdup(v[i]);
	return d;
}

/* --- conditions --------------------------------------------------------- */

static void
put_tuple(PGconn *conn, struct buf *b, const struct snap_key *k, char *const *v)
{
	if (k->nkey > 1)
		buf_puts(b, "ROW(");
	for (int i = 0; i < k->nkey; i++)
	{
		char *lit = PQescapeLiteral(conn, v[i], strlen(v[i]));

		if (lit == NULL)
			log_fatal(EXIT_RUNTIME, "cannot quote a key bound: %s", PQerrorMessage(conn));
		buf_printf(b, "%s%s::%s", i ? ", " : "", lit, k->typenames[i]);
		PQfreemem(lit);
	}
	if (k->nkey > 1)
		buf_putc(b, ')');
}

static void
put_cols(struct buf *b, const struct snap_key *k)
{
	if (k->nkey > 1)
		buf_puts(b, "ROW(");
	for (int i = 0; i < k->nkey; i++)
		buf_printf(b, "%s%s", i ? ", " : "", k->qcols[i]);
	if (k->nkey > 1)
		buf_putc(b, ')');
}

/* The range condition, its upper side with operator hi_op. */
static char *
range_cond(PGconn *conn, const struct snap_key *k, char *const *lo, char *const *hi, const char *hi_op)
{
	struct buf b = BUF_INIT;

	if (lo == NULL && hi == NULL)
		return NULL;
	if (lo)
	{
		put_cols(&b, k);
		buf_puts(&b, " > ");
		put_tuple(conn, &b, k, lo);
	}
	if (hi)
	{
		buf_puts(&b, lo ? " AND " : "");
		put_cols(&b, k);
		buf_printf(&b, " %s ", hi_op);
		put_tuple(conn, &b, k, hi);
	}
	return buf_cstr(&b);
}

char *
chunkplan_cond(PGconn *conn, const struct snap_key *k, char *const *lo, char *const *hi)
{
	return range_cond(conn, k, lo, hi, "<=");
}

char *
chunkplan_order(const struct snap_key *k)
{
	struct buf b = BUF_INIT;

	for (int i = 0; i < k->nkey; i++)
		buf_printf(&b, "%s%s", i ? ", " : "", k->qcols[i]);
	return buf_cstr(&b);
}

/*
 * The range of the leading key column that (lo, hi] lies in, "k1 >= v AND
 * k1 <= w", or NULL: implied by the row comparison of a composite key, but
 * in a form partition pruning understands, so that a partitioned table's
 * range reads only the partitions that can hold it.
 */
char *
chunkplan_lead_cond(PGconn *conn, const struct snap_key *k, char *const *lo, char *const *hi)
{
	struct buf b = BUF_INIT;
	char *const *v[2] = {lo, hi};

	if (k->nkey < 2 || (lo == NULL && hi == NULL))
		return NULL;
	for (int i = 0; i < 2; i++)
	{
		char *lit;

		if (v[i] == NULL)
			continue;
		lit = PQescapeLiteral(conn, v[i][0], strlen(v[i][0]));
		if (lit == NULL)
			log_fatal(EXIT_RUNTIME, "cannot quote a key bound: %s", PQerrorMessage(conn));
		buf_printf(&b, "%s%s %s %s::%s", b.len ? " AND " : "", k->qcols[0], i ? "<=" : ">=", lit,
				   k->typenames[0]);
		PQfreemem(lit);
	}
	return buf_cstr(&b);
}

/* --- gaps and parts ----------------------------------------------------- */

struct ranges {
	struct key_range *r;
	int n, cap;
};

static void
add_range(struct ranges *rs, char **lo, char **hi)
{
	if (rs->n == rs->cap)
	{
		rs->cap = rs->cap ? rs->cap * 2 : 16;
		rs->r = xrealloc(rs->r, sizeof(*rs->r) * (size_t) rs->cap);
	}
	rs->r[rs->n].lo = lo;
	rs->r[rs->n].hi = hi;
	rs->n++;
}

/* A bound (v, MAX, ...) of leading value v. */
static char **
leading_bound(const struct snap_key *k, const char *v)
{
	char **b = xcalloc((size_t) k->nkey, sizeof(char *));

	b[0] = xstrdup(v);
	for (int i = 1; i < k->nkey; i++)
		b[i] = xstrdup(type_max(k->types[i]));
	return b;
}

/*
 * Values of column col that cut the rows of qname (a table with ONLY, or a
 * partitioned table: all its partitions) matching cond (NULL: all)
 * into about n parts, ascending, each the first value of a part: min/max
 * arithmetic for an integer column (exact, index-only), the percentiles of
 * a block sample for any other btree type (compared with its own order and
 * collation; a repeated percentile is dropped). Values are the server's
 * text; none for no rows.
 */
int
chunkplan_cuts(PGconn *conn, const struct cut_spec *s, char ***cuts, int *ncuts)
{
	const char *qname = s->qname, *col = s->col, *cond = s->cond;
	bool integer = s->integer;
	int n = s->n;
	double est = s->est;
	struct buf sql = BUF_INIT;
	struct pgerr err;
	PGresult *res;

	*ncuts = 0;
	*cuts = xcalloc((size_t) n + 1, sizeof(char *));
	if (integer)
	{
		int64_t lo, hi;
		uint64_t span, step;

		buf_printf(&sql, "SELECT min(%s)::int8, max(%s)::int8 FROM %s%s%s", col, col, qname,
				   cond ? " WHERE " : "", cond ? cond : "");
		res = conn_query(conn, buf_cstr(&sql), 0, NULL, 2, &err);
		buf_free(&sql);
		if (res == NULL)
			return pub_query_failed("find the key range of a table", &err);
		if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
		{
			PQclear(res);
			return EXIT_DONE;
		}
		lo = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		hi = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		PQclear(res);
		span = (uint64_t) hi - (uint64_t) lo;
		if (span < (uint64_t) n)
			n = (int) span + 1;
		if (n < 2)
			return EXIT_DONE;
		step = span / (uint64_t) n;
		for (int i = 1; i < n; i++)
		{
			char tmp[32];

			snprintf(tmp, sizeof(tmp), "%" PRId64, (int64_t) ((uint64_t) lo + step * (uint64_t) i));
			(*cuts)[(*ncuts)++] = xstrdup(tmp);
		}
		return EXIT_DONE;
	}
	else
	{
		struct buf fr = BUF_INIT;
		double pct = SAMPLE_PCT(est);

		buf_putc(&fr, '{');
		for (int i = 1; i < n; i++)
			buf_printf(&fr, "%s%.6f", i > 1 ? "," : "", (double) i / n);
		buf_putc(&fr, '}');
		buf_printf(&sql, "SELECT u.b::text FROM unnest((SELECT pg_catalog.percentile_disc('%s'::float8[])"
				   " WITHIN GROUP (ORDER BY %s) FROM %s TABLESAMPLE SYSTEM (%.6f)%s%s))"
				   " WITH ORDINALITY AS u(b, i) ORDER BY u.i",
				   buf_cstr(&fr), col, qname, pct, cond ? " WHERE " : "", cond ? cond : "");
		buf_free(&fr);
		res = conn_query(conn, buf_cstr(&sql), 0, NULL, 1, &err);
		buf_free(&sql);
		if (res == NULL)
			return pub_query_failed("sample the key of a table", &err);
		for (int r = 0; r < PQntuples(res) && *ncuts < n; r++)
		{
			const char *v = PQgetvalue(res, r, 0);

			/* Skewed keys repeat a percentile: a repeated cut is an empty part. */
			if (PQgetisnull(res, r, 0) || (*ncuts > 0 && strcmp(v, (*cuts)[*ncuts - 1]) == 0))
				continue;
			(*cuts)[(*ncuts)++] = xstrdup(v);
		}
		PQclear(res);
		return EXIT_DONE;
	}
}

/* The bound that ends a part before leading value cut: (cut - 1, MAX, ...)
 * for an integer, (cut, MAX, ...) for a uuid, whose sampled cut then ends
 * its part instead of starting the next (either way a bound). */
static char **
part_bound(const struct snap_key *k, const char *cut)
{
	char tmp[32];

	if (k->types[0] != UUIDOID)
	{
		snprintf(tmp, sizeof(tmp), "%lld", strtoll(cut, NULL, 10) - 1);
		cut = tmp;
	}
	return leading_bound(k, cut);
}

/*
 * The part bounds of a gap of a server-ordered key: the key tuples that end
 * each of about n parts of a block sample of the rows of qname (with or
 * without ONLY, as for chunkplan_ranges) strictly inside it (cond), in the
 * source's order, so real keys strictly growing. Into
 * *cuts (*ncuts tuples of k->nkey values). An exit code.
 */
static int
server_cuts(PGconn *conn, const char *qname, const struct snap_key *k, const char *cond, int n,
			double est, char ****cuts, int *ncuts)
{
	struct buf sql = BUF_INIT, cols = BUF_INIT, as = BUF_INIT;
	char *order = chunkplan_order(k);
	struct pgerr err;
	PGresult *res;

	for (int i = 0; i < k->nkey; i++)
	{
		buf_printf(&cols, "%sq.k%d", i ? ", " : "", i);
		buf_printf(&as, "%s%s AS k%d", i ? ", " : "", k->qcols[i], i);
	}
	buf_printf(&sql, "SELECT %s FROM (SELECT %s, q.t, pg_catalog.lead(q.t) OVER (ORDER BY %s) AS nt"
			   " FROM (SELECT %s, pg_catalog.ntile(%d) OVER (ORDER BY %s) AS t"
			   " FROM %s TABLESAMPLE SYSTEM (%.6f)%s%s) q) q WHERE q.nt > q.t ORDER BY %s",
			   buf_cstr(&cols), buf_cstr(&cols), buf_cstr(&cols), buf_cstr(&as), n, order,
			   qname, SAMPLE_PCT(est), cond ? " WHERE " : "", cond ? cond : "", buf_cstr(&cols));
	buf_free(&cols);
	buf_free(&as);
	free(order);
	res = conn_query(conn, buf_cstr(&sql), 0, NULL, k->nkey, &err);
	buf_free(&sql);
	*ncuts = 0;
	*cuts = NULL;
	if (res == NULL)
		return pub_query_failed("sample the key of a table", &err);
	*cuts = xcalloc((size_t) PQntuples(res) + 1, sizeof(char **));
	for (int r = 0; r < PQntuples(res); r++)
	{
		char **t = xcalloc((size_t) k->nkey, sizeof(char *));

		for (int i = 0; i < k->nkey; i++)
			t[i] = xstrdup(PQgetvalue(res, r, i));
		(*cuts)[(*ncuts)++] = t;
	}
	PQclear(res);
	return EXIT_DONE;
}

/* Cut gap into parts, appended to rs. The gap's bounds move into the parts. */
static int
cut_gap(PGconn *conn, const char *qname, const struct snap_key *k, struct key_range *gap, int jobs,
		double est, struct ranges *rs)
{
	char **cuts = NULL, **prev = gap->lo, *cond;
	int ncuts = 0, rc = EXIT_DONE;

	if (k->server)
	{
		char ***tuples = NULL;

		cond = range_cond(conn, k, gap->lo, gap->hi, "<");
		if (jobs > 1)
			rc = server_cuts(conn, qname, k, cond, jobs, est, &tuples, &ncuts);
		free(cond);
		for (int i = 0; i < ncuts; i++)
		{
			if (rc == EXIT_DONE)
			{
				add_range(rs, prev == gap->lo ? prev : dup_values(prev, k->nkey), tuples[i]);
				prev = tuples[i];
			}
			else
				chunk_values_free(tuples[i], k->nkey);
		}
		free(tuples);
		add_range(rs, prev == gap->lo ? prev : dup_values(prev, k->nkey), gap->hi);
		return rc;
	}
	cond = chunkplan_cond(conn, k, gap->lo, gap->hi);
	if (jobs > 1)
	{
		struct cut_spec cs = {qname, k->qcols[0], cond, k->types[0] != UUIDOID, jobs, est};

		rc = chunkplan_cuts(conn, &cs, &cuts, &ncuts);
	}
	free(cond);
	for (int i = 0; i < ncuts && rc == EXIT_DONE; i++)
	{
		char **b = part_bound(k, cuts[i]);

		/* Only bounds strictly inside the gap and growing: a skewed sample
		 * repeats values, a gap may end inside a run of its leading value. */
		if ((prev && chunkplan_cmp(k, b, prev) <= 0) || (gap->hi && chunkplan_cmp(k, b, gap->hi) >= 0))
		{
			chunk_values_free(b, k->nkey);
			continue;
		}
		add_range(rs, prev == gap->lo ? prev : dup_values(prev, k->nkey), b);
		prev = b;
	}
	add_range(rs, prev == gap->lo ? prev : dup_values(prev, k->nkey), gap->hi);
	for (int i = 0; i < ncuts; i++)
		free(cuts[i]);
	free(cuts);
	return rc;
}

static const struct snap_key *sort_key;

static int
cmp_done(const void *a, const void *b)
{
	const struct done_chunk *x = *(const struct done_chunk *const *) a;
	const struct done_chunk *y = *(const struct done_chunk *const *) b;

	return cmp_lo(sort_key, x->lo, y->lo);
}

/* Literal v (NULL: NULL) of a VALUES row. */
static void
put_literal(PGconn *conn, struct buf *b, const char *v)
{
	char *lit;

	if (v == NULL)
	{
		buf_puts(b, ", NULL");
		return;
	}
	if ((lit = PQescapeLiteral(conn, v, strlen(v))) == NULL)
		log_fatal(EXIT_RUNTIME, "cannot quote a key bound: %s", PQerrorMessage(conn));
	buf_printf(b, ", %s", lit);
	PQfreemem(lit);
}

/*
 * The done chunks of a server-ordered key sorted by their lo by the source
 * (under each column's collation), and d[i]: how chunk i - 1's hi compares
 * to chunk i's lo (1 when either is unbounded). An exit code.
 */
static int
server_sort(PGconn *conn, const struct snap_key *k, const struct done_chunk **mine, int n, int *d)
{
	struct buf sql = BUF_INIT, vals = BUF_INIT, cast = BUF_INIT, ord = BUF_INIT, p = BUF_INIT, l = BUF_INIT,
		lags = BUF_INIT;
	const struct done_chunk **sorted;
	struct pgerr err;
	PGresult *res;

	if (n < 2)
		return EXIT_DONE;
	for (int i = 0; i < n; i++)
	{
		buf_printf(&vals, "%s(%d, %s, %s", i ? ", " : "", i, mine[i]->lo ? "false" : "true",
				   mine[i]->hi ? "false" : "true");
		for (int side = 0; side < 2; side++)
			for (int j = 0; j < k->nkey; j++)
			{
				char *const *v = side ? mine[i]->hi : mine[i]->lo;

				put_literal(conn, &vals, v ? v[j] : NULL);
			}
		buf_putc(&vals, ')');
	}
	for (int j = 0; j < k->nkey; j++)
	{
		const char *coll = k->colls[j];

		buf_printf(&cast, ", v.l%d::%s%s%s AS l%d, v.h%d::%s%s%s AS h%d", j, k->typenames[j],
				   coll ? " COLLATE " : "", coll ? coll : "", j, j, k->typenames[j], coll ? " COLLATE " : "",
				   coll ? coll : "", j);
		buf_printf(&ord, "%sw.l%d NULLS FIRST", j ? ", " : "", j);
		buf_printf(&lags, ", pg_catalog.lag(w.h%d) OVER o AS p%d, w.l%d", j, j, j);
		buf_printf(&p, "%sx.p%d", j ? ", " : "", j);
		buf_printf(&l, "%sx.l%d", j ? ", " : "", j);
	}
	buf_printf(&sql, "SELECT x.i, CASE WHEN x.pi IS NULL THEN 0 WHEN x.phn OR x.ln THEN 1"
			   " WHEN ROW(%s) < ROW(%s) THEN -1 WHEN ROW(%s) = ROW(%s) THEN 0 ELSE 1 END"
			   " FROM (SELECT w.i, w.ln, pg_catalog.lag(w.i) OVER o AS pi, pg_catalog.lag(w.hn) OVER o AS phn%s"
			   " FROM (SELECT v.i, v.ln, v.hn%s FROM (VALUES %s) AS v(i, ln, hn",
			   buf_cstr(&p), buf_cstr(&l), buf_cstr(&p), buf_cstr(&l), buf_cstr(&lags), buf_cstr(&cast),
			   buf_cstr(&vals));
	for (int side = 0; side < 2; side++)
		for (int j = 0; j < k->nkey; j++)
			buf_printf(&sql, ", %c%d", side ? 'h' : 'l', j);
	/* The result in the window's order. */
	buf_printf(&sql, ")) w WINDOW o AS (ORDER BY %s)) x ORDER BY ", buf_cstr(&ord));
	for (int j = 0; j < k->nkey; j++)
		buf_printf(&sql, "%sx.l%d NULLS FIRST", j ? ", " : "", j);
	buf_free(&vals);
	buf_free(&cast);
	buf_free(&ord);
	buf_free(&lags);
	buf_free(&p);
	buf_free(&l);
	res = conn_query(conn, buf_cstr(&sql), 0, NULL, 2, &err);
	buf_free(&sql);
	if (res == NULL)
		return pub_query_failed("order the chunks already copied", &err);
	if (PQntuples(res) != n)
	{
		log_error("ordering the chunks already copied returned %d rows for %d", PQntuples(res), n);
		PQclear(res);
		return EXIT_RUNTIME;
	}
	sorted = xcalloc((size_t) n, sizeof(*sorted));
	for (int r = 0; r < n; r++)
	{
		sorted[r] = mine[atoi(PQgetvalue(res, r, 0))];
		d[r] = atoi(PQgetvalue(res, r, 1));
	}
	PQclear(res);
	memcpy(mine, sorted, (size_t) n * sizeof(*mine));
	free(sorted);
	return EXIT_DONE;
}

static void
key_list(struct buf *b, char *const *cols, int n)
{
	for (int i = 0; i < n; i++)
		buf_printf(b, "%s%s", i ? ", " : "", cols[i]);
}

int
chunkplan_ranges(PGconn *conn, const struct plan_rel *rel, const struct snap_key *k,
				 const struct done_set *ds, int jobs, struct key_range **out, int *nout)
{
	const char *schema = rel->schema, *name = rel->name, *qname = rel->qname;
	double est = rel->est;
	int ndone, first = chunkdone_find(ds, schema, name, &ndone);
	const struct done_chunk **mine = xcalloc((size_t) ndone + 1, sizeof(*mine));
	int *d = xcalloc((size_t) ndone + 1, sizeof(int));
	struct ranges gaps = {0}, rs = {0};
	char **cur = NULL;
	bool open_end = true;
	int n = 0, rc = EXIT_DONE;

	for (int i = first; i < first + ndone; i++)
	{
		const struct done_chunk *c = &ds->c[i];
		bool same = c->nkey == k->nkey;

		if (c->nkey == 0)
			continue;
		for (int j = 0; same && j < k->nkey; j++)
			same = strcmp(c->cols[j], k->cols[j]) == 0 &&
				(c->lo == NULL || value_ok(k->types[j], c->lo[j])) &&
				(c->hi == NULL || value_ok(k->types[j], c->hi[j]));
		if (!same)
		{
			struct buf a = BUF_INIT, b = BUF_INIT;

			key_list(&a, c->cols, c->nkey);
			key_list(&b, k->cols, k->nkey);
			log_error("--done has a chunk of %s.%s by (%s) that does not fit its chunk key (%s) now: "
					  "copy the table again from scratch", schema, name, buf_cstr(&a), buf_cstr(&b));
			buf_free(&a);
			buf_free(&b);
			free(mine);
			free(d);
			return EXIT_UNSUPPORTED;
		}
		mine[n++] = c;
	}
	if (k->server)
		rc = server_sort(conn, k, mine, n, d);
	else
	{
		sort_key = k;
		qsort(mine, (size_t) n, sizeof(*mine), cmp_done);
		for (int i = 1; i < n; i++)
			d[i] = cmp_lo(k, mine[i - 1]->hi, mine[i]->lo);
	}
	/* The gaps: what lies between the done chunks, from unbounded below to
	 * unbounded above. Done chunks never overlap; if they do, the target
	 * has rows twice. d[i]: how chunk i - 1's end compares to i's start. */
	for (int i = 0; i < n && rc == EXIT_DONE; i++)
	{
		const struct done_chunk *c = mine[i];

		/* After a chunk unbounded above, any chunk overlaps it. */
		if (!open_end || (i > 0 && d[i] > 0))
		{
			log_error("--done has overlapping chunks of %s.%s: the target holds some rows twice; "
					  "copy the table again from scratch", schema, name);
			rc = EXIT_UNSUPPORTED;
			break;
		}
		if (i == 0 ? c->lo != NULL : d[i] < 0)
			add_range(&gaps, dup_values(cur, k->nkey), dup_values(c->lo, k->nkey));
		cur = c->hi;
		open_end = cur != NULL;
	}
	free(d);
	if (rc == EXIT_DONE && open_end)
		add_range(&gaps, dup_values(cur, k->nkey), NULL);
	free(mine);
	{
		/* cut_gap moves a gap's bounds into rs; those of gaps not reached
		 * (after an overlap or a failed query) are freed here. */
		int used = 0;

		for (; used < gaps.n && rc == EXIT_DONE; used++)
			rc = cut_gap(conn, qname, k, &gaps.r[used], jobs, est, &rs);
		for (int i = used; i < gaps.n; i++)
		{
			chunk_values_free(gaps.r[i].lo, k->nkey);
			chunk_values_free(gaps.r[i].hi, k->nkey);
		}
		free(gaps.r);
	}
	if (rc != EXIT_DONE)
	{
		chunkplan_ranges_free(rs.r, rs.n, k->nkey);
		return rc;
	}
	*out = rs.r;
	*nout = rs.n;
	return EXIT_DONE;
}

void
chunkplan_ranges_free(struct key_range *r, int n, int nkey)
{
	for (int i = 0; i < n; i++)
	{
		chunk_values_free(r[i].lo, nkey);
		chunk_values_free(r[i].hi, nkey);
	}
	free(r);
}

/* --- records ------------------------------------------------------------ */

static void
put_bound(struct buf *b, const struct snap_key *k, char *const *v)
{
	for (int i = 0; i < k->nkey; i++)
		if (v)
			rec_valuez(b, v[i]);
		else
			rec_null(b);
}

void
chunkplan_record(struct buf *b, const char *schema, const char *name, const struct snap_key *k,
				 char *const *lo, char *const *hi)
{
	rec_start(b, REC_CHUNK);
	rec_valuez(b, schema);
	rec_valuez(b, name);
	rec_u64(b, (uint64_t) k->nkey);
	for (int i = 0; i < k->nkey; i++)
		rec_valuez(b, k->cols[i]);
	put_bound(b, k, lo);
	put_bound(b, k, hi);
	rec_finish(b);
}

/* Int and uuid text needs no unescaping, and the stream escapes it the
 * same way: the fields are taken as they are. Other types' are decoded. */
char **
chunkplan_row_key(const struct snap_key *k, const char *row, size_t len)
{
	char **v = xcalloc((size_t) k->nkey, sizeof(char *));
	const char *end = row + len;
	struct buf tmp = BUF_INIT;

	for (int i = 0; i < k->nkey; i++)
	{
		const char *f = row, *e;
		bool is_null;

		for (int c = 0; c < k->pos[i] && f < end; c++)
		{
			const char *tab = memchr(f, '\t', (size_t) (end - f));

			f = tab ? tab + 1 : end;
		}
		for (e = f; e < end && *e != '\t' && *e != '\n'; e++)
			;
		buf_reset(&tmp);
		if (k->server && copy_unescape(f, (size_t) (e - f), &tmp, &is_null) && !is_null)
		{
			v[i] = xstrdup(buf_cstr(&tmp));
			continue;
		}
		v[i] = xmalloc((size_t) (e - f) + 1);
		memcpy(v[i], f, (size_t) (e - f));
		v[i][e - f] = '\0';
	}
	buf_free(&tmp);
	return v;
}
