#include "snapplan.h"
#include "buf.h"
#include "common.h"
#include "conn.h"
#include "log.h"
#include "publication.h"
#include "record.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More parts than this per relation only adds scans and round trips. */
#define MAX_PARTS_PER_LEAF 1024
/* The most heap tuples an 8 kB page holds: a relation with fewer pages than
 * split_rows / this can never need splitting, so it needs no estimate. */
#define MAX_TUPLES_PER_PAGE 291

#define INT2OID 21
#define INT4OID 23
#define INT8OID 20

/* Per table, what only the planner needs. */
struct tinfo {
	unsigned oid;
	char relkind;
	char *rowfilter;			/* publication row filter, NULL for none */
	bool generated;				/* a generated column is published (18+) */
	char *qname;				/* quoted schema.table */
	struct buf cols;			/* quoted, comma-separated column list */
	char **names;				/* the columns copied */
	struct buf header;			/* the frame header line being built */
};

/* One relation to read: the table itself or one of its leaf partitions. */
struct leaf {
	int table;
	char *qname;
	double est;					/* < 0 unknown */
	int64_t pages;
	char *key;					/* quoted leading key column, NULL for none */
	unsigned keytype;
	char *keytypename;
};

struct planner {
	PGconn *conn;
	int version;
	const struct snapplan_opts *o;
	struct snap_plan *plan;
	struct tinfo *ti;
	int tcap;
	struct snap_part *parts;
	int pcap;
};

static int
add_table(struct planner *p, unsigned oid, const char *schema, const char *name, char relkind)
{
	struct snap_plan *plan = p->plan;
	struct snap_table *t;
	struct tinfo *ti;
	char *qs, *qt;

	for (int i = 0; i < plan->ntables; i++)
		if (p->ti[i].oid == oid)
			return i;			/* named twice */
	if (plan->ntables == p->tcap)
	{
		p->tcap = p->tcap ? p->tcap * 2 : 16;
		plan->tables = xrealloc(plan->tables, sizeof(*plan->tables) * (size_t) p->tcap);
		p->ti = xrealloc(p->ti, sizeof(*p->ti) * (size_t) p->tcap);
	}
	t = &plan->tables[plan->ntables];
	ti = &p->ti[plan->ntables];
	memset(t, 0, sizeof(*t));
	memset(ti, 0, sizeof(*ti));
	t->schema = xstrdup(schema);
	t->name = xstrdup(name);
	ti->oid = oid;
	ti->relkind = relkind;
	qs = conn_quote_ident(p->conn, t->schema);
	qt = conn_quote_ident(p->conn, t->name);
	ti->qname = xmalloc(strlen(qs) + strlen(qt) + 2);
	sprintf(ti->qname, "%s.%s", qs, qt);
	free(qs);
	free(qt);
	return plan->ntables++;
}

/* One column of table t, in copy order: the query's list and the header's. */
static void
add_column(struct planner *p, int t, const char *col)
{
	char *q = conn_quote_ident(p->conn, col);

	if (p->ti[t].cols.len)
		buf_puts(&p->ti[t].cols, ", ");
	buf_puts(&p->ti[t].cols, q);
	free(q);
	rec_valuez(&p->ti[t].header, col);
	p->ti[t].names = xrealloc(p->ti[t].names, sizeof(char *) * (size_t) (p->plan->tables[t].ncols + 1));
	p->ti[t].names[p->plan->tables[t].ncols] = xstrdup(col);
	p->plan->tables[t].ncols++;
}

/* The publications' tables, row filters and columns (lib/source/publication.c). */
static int
tables_from_publications(struct planner *p)
{
	struct pub_set set;
	int rc = pub_resolve(p->conn, p->o->pubs, p->o->npubs, &set);

	if (rc != EXIT_DONE)
		return rc;
	for (int i = 0; i < set.n; i++)
	{
		const struct pub_table *pt = &set.t[i];
		int t = add_table(p, pt->oid, pt->schema, pt->name, pt->relkind);
		struct tinfo *ti = &p->ti[t];

		ti->rowfilter = pt->rowfilter ? xstrdup(pt->rowfilter) : NULL;
		for (int c = 0; c < pt->ncols; c++)
		{
			/* COPY cannot name a generated column; a query can (18+). */
			ti->generated |= pt->colgen[c];
			add_column(p, t, pt->cols[c]);
		}
	}
	pub_set_free(&set);
	if (p->plan->ntables == 0 && p->o->npubs == 1)
		log_warn("publication \"%s\" has no tables", p->o->pubs[0]);
	else if (p->plan->ntables == 0)
		log_warn("publications \"%s\" ... \"%s\" have no tables", p->o->pubs[0], p->o->pubs[p->o->npubs - 1]);
	return EXIT_DONE;
}

static int
tables_from_args(struct planner *p)
{
	for (int i = 0; i < p->o->ntables; i++)
	{
		const char *arg = p->o->tables[i];
		const char *params[2] = {arg, NULL};
		struct pgerr err;
		PGresult *res;
		char *schema, *name;

		/* The server's own identifier rules: quoting and case folding. */
		res = conn_query_one(p->conn, "SELECT i[1], i[2], pg_catalog.array_length(i, 1)"
						 "  FROM (SELECT pg_catalog.parse_ident($1) AS i) s",
						 1, params, 3, &err);
		if (res == NULL)
		{
			log_error("invalid --table \"%s\": %s", arg, err.msg);
			return EXIT_USAGE;
		}
		if (strcmp(PQgetvalue(res, 0, 2), "2") != 0)
		{
			PQclear(res);
			log_error("invalid --table \"%s\": expected SCHEMA.TABLE", arg);
			return EXIT_USAGE;
		}
		schema = xstrdup(PQgetvalue(res, 0, 0));
		name = xstrdup(PQgetvalue(res, 0, 1));
		PQclear(res);
		params[0] = schema;
		params[1] = name;
		res = conn_query(p->conn, "SELECT c.oid, n.nspname, c.relname, c.relkind"
						 "  FROM pg_catalog.pg_class c"
						 "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						 " WHERE n.nspname = $1 AND c.relname = $2",
						 2, params, 4, &err);
		free(schema);
		free(name);
		if (res == NULL)
			return pub_query_failed("look up the table", &err);
		if (PQntuples(res) == 0)
		{
			PQclear(res);
			log_error("table \"%s\" does not exist on the source", arg);
			return EXIT_PREFLIGHT;
		}
		if (strcmp(PQgetvalue(res, 0, 3), "r") != 0 && strcmp(PQgetvalue(res, 0, 3), "p") != 0)
		{
			PQclear(res);
			log_error("\"%s\" is not a table", arg);
			return EXIT_USAGE;
		}
		add_table(p, (unsigned) strtoul(PQgetvalue(res, 0, 0), NULL, 10), PQgetvalue(res, 0, 1),
				  PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3)[0]);
		PQclear(res);
	}
	return EXIT_DONE;
}

/* "{1,2,3}": the table oids as one array parameter. */
static char *
oid_array(const struct planner *p)
{
	struct buf b = BUF_INIT;

	buf_putc(&b, '{');
	for (int i = 0; i < p->plan->ntables; i++)
		buf_printf(&b, "%s%u", i ? "," : "", p->ti[i].oid);
	buf_putc(&b, '}');
	return buf_cstr(&b);
}

static int
table_by_oid(const struct planner *p, unsigned oid)
{
	for (int i = 0; i < p->plan->ntables; i++)
		if (p->ti[i].oid == oid)
			return i;
	return -1;
}

/* The frame headers; with --table, every column but generated ones. */
static int
load_columns(struct planner *p)
{
	if (!p->o->npubs)
	{
		char *oids = oid_array(p);
		const char *params[1] = {oids};
		struct pgerr err;
		PGresult *res;
		int last = -1;

		res = conn_query(p->conn, "SELECT a.attrelid, a.attname FROM pg_catalog.pg_attribute a"
						 " WHERE a.attrelid = ANY ($1::pg_catalog.oid[]) AND a.attnum > 0"
						 "   AND NOT a.attisdropped AND a.attgenerated = ''"
						 " ORDER BY a.attrelid, a.attnum",
						 1, params, 2, &err);
		free(oids);
		if (res == NULL)
			return pub_query_failed("list the columns to copy", &err);
		for (int r = 0; r < PQntuples(res); r++)
		{
			unsigned oid = (unsigned) strtoul(PQgetvalue(res, r, 0), NULL, 10);
			int t = (last >= 0 && p->ti[last].oid == oid) ? last : table_by_oid(p, oid);

			if (t < 0)
				continue;
			last = t;
			add_column(p, t, PQgetvalue(res, r, 1));
		}
		PQclear(res);
	}
	for (int t = 0; t < p->plan->ntables; t++)
	{
		struct snap_table *st = &p->plan->tables[t];
		struct buf h = BUF_INIT;

		rec_start(&h, REC_COPY);
		rec_valuez(&h, st->schema);
		rec_valuez(&h, st->name);
		rec_u64(&h, (uint64_t) st->ncols);
		buf_append(&h, p->ti[t].header.data, p->ti[t].header.len);
		rec_finish(&h);
		st->frame_header_len = h.len;
		st->frame_header = buf_cstr(&h);
		buf_free(&p->ti[t].header);
	}
	return EXIT_DONE;
}

/* The planner's own estimate for a relation that was never analyzed. */
static double
explain_rows(struct planner *p, const char *qname)
{
	struct buf sql = BUF_INIT;
	struct pgerr err;
	PGresult *res;
	double rows = -1;

	buf_printf(&sql, "EXPLAIN SELECT 1 FROM ONLY %s", qname);
	res = conn_query(p->conn, buf_cstr(&sql), 0, NULL, 1, &err);
	buf_free(&sql);
	if (res == NULL)
		return -1;
	if (PQntuples(res) > 0)
	{
		const char *r = strstr(PQgetvalue(res, 0, 0), " rows=");

		if (r)
			rows = strtod(r + 6, NULL);
	}
	PQclear(res);
	return rows;
}

static int
load_leaves(struct planner *p, struct leaf **out, int *nout)
{
	char *oids = oid_array(p);
	const char *params[1] = {oids};
	struct pgerr err;
	PGresult *res;
	struct leaf *lv;
	int n;

	/* The leaves of a partitioned table are read one by one under its name;
	 * the splitting key is the leading column of the primary key (or of the
	 * replica identity index), which every range condition can use. */
	res = conn_query(p->conn,
					 "SELECT t.idx, ln.nspname, l.relname, l.reltuples::float8,"
					 "       pg_catalog.pg_relation_size(l.oid) / pg_catalog.current_setting('block_size')::int8,"
					 "       k.attname, k.atttypid, pg_catalog.format_type(k.atttypid, k.atttypmod)"
					 "  FROM unnest($1::pg_catalog.oid[]) WITH ORDINALITY AS t(oid, idx)"
					 "  JOIN pg_catalog.pg_class tc ON tc.oid = t.oid"
					 "  JOIN LATERAL (SELECT relid FROM pg_catalog.pg_partition_tree(t.oid)"
					 "                 WHERE isleaf AND tc.relkind = 'p'"
					 "                UNION ALL SELECT t.oid WHERE tc.relkind <> 'p') pt ON true"
					 "  JOIN pg_catalog.pg_class l ON l.oid = pt.relid AND l.relkind = 'r'"
					 "  JOIN pg_catalog.pg_namespace ln ON ln.oid = l.relnamespace"
					 "  LEFT JOIN LATERAL (SELECT a.attname, a.atttypid, a.atttypmod"
					 "                       FROM pg_catalog.pg_index i"
					 "                       JOIN pg_catalog.pg_attribute a"
					 "                         ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
					 "                      WHERE i.indrelid = l.oid AND i.indisvalid"
					 "                        AND (i.indisprimary OR i.indisreplident)"
					 "                      ORDER BY i.indisprimary DESC LIMIT 1) k ON true"
					 " ORDER BY t.idx, l.oid",
					 1, params, 8, &err);
	free(oids);
	if (res == NULL)
		return pub_query_failed("read table sizes and keys", &err);
	n = PQntuples(res);
	lv = xcalloc((size_t) n, sizeof(*lv));
	for (int r = 0; r < n; r++)
	{
		struct leaf *l = &lv[r];
		char *qs = conn_quote_ident(p->conn, PQgetvalue(res, r, 1));
		char *qt = conn_quote_ident(p->conn, PQgetvalue(res, r, 2));
		double reltuples = strtod(PQgetvalue(res, r, 3), NULL);

		l->table = atoi(PQgetvalue(res, r, 0)) - 1;
		l->qname = xmalloc(strlen(qs) + strlen(qt) + 2);
		sprintf(l->qname, "%s.%s", qs, qt);
		free(qs);
		free(qt);
		l->pages = strtoll(PQgetvalue(res, r, 4), NULL, 10);
		if (!PQgetisnull(res, r, 5))
		{
			l->key = conn_quote_ident(p->conn, PQgetvalue(res, r, 5));
			l->keytype = (unsigned) strtoul(PQgetvalue(res, r, 6), NULL, 10);
			l->keytypename = xstrdup(PQgetvalue(res, r, 7));
		}
		/* -1 (14+) or 0 with pages (older) means never analyzed. */
		if (l->pages == 0)
			l->est = 0;
		else if (reltuples > 0)
			l->est = reltuples;
		else if ((double) l->pages * MAX_TUPLES_PER_PAGE > (double) p->o->split_rows)
			l->est = explain_rows(p, l->qname);
		else
			l->est = -1;
	}
	PQclear(res);
	*out = lv;
	*nout = n;
	return EXIT_DONE;
}

static struct snap_part *
add_part(struct planner *p, int table, const char *from, bool only, const char *cond,
		 double weight, const char *order)
{
	struct snap_plan *plan = p->plan;
	struct tinfo *ti = &p->ti[table];
	struct snap_part *part;
	struct buf sql = BUF_INIT;

	if (plan->nparts == p->pcap)
	{
		p->pcap = p->pcap ? p->pcap * 2 : 64;
		plan->parts = xrealloc(plan->parts, sizeof(*plan->parts) * (size_t) p->pcap);
	}
	part = &plan->parts[plan->nparts++];
	part->table = table;
	part->index = ++plan->tables[table].nparts;
	part->weight = weight;
	part->lo = part->hi = NULL;
	part->from = xstrdup(from);
	part->by = NULL;
	if (cond == NULL && order == NULL && ti->rowfilter == NULL && !ti->generated && only &&
		strcmp(from, ti->qname) == 0)
	{
		/* The whole table: plain COPY skips the executor's projection. */
		if (plan->tables[table].ncols > 0)
			buf_printf(&sql, "COPY %s (%s) TO STDOUT", from, buf_cstr(&ti->cols));
		else
			buf_printf(&sql, "COPY %s TO STDOUT", from);
	}
	else
	{
		buf_printf(&sql, "COPY (SELECT %s FROM %s%s", ti->cols.len ? buf_cstr(&ti->cols) : "",
				   only ? "ONLY " : "", from);
		if (cond && ti->rowfilter)
			buf_printf(&sql, " WHERE (%s) AND (%s)", cond, ti->rowfilter);
		else if (cond || ti->rowfilter)
			buf_printf(&sql, " WHERE (%s)", cond ? cond : ti->rowfilter);
		if (order)
			buf_printf(&sql, " ORDER BY %s", order);
		buf_puts(&sql, ") TO STDOUT");
	}
	part->sql = buf_cstr(&sql);
	return part;
}

/* Boundaries of the leading key column: values from the arithmetic of an
 * integer key or a sample's percentiles (chunkplan_cuts), as literals. */
static int
key_bounds(struct planner *p, const struct leaf *l, int n, char ***bounds, int *nb)
{
	bool integer = l->keytype == INT2OID || l->keytype == INT4OID || l->keytype == INT8OID;
	char *rel = xmalloc(strlen(l->qname) + 6);
	int rc;

	sprintf(rel, "ONLY %s", l->qname);
	{
		struct cut_spec cs = {rel, l->key, NULL, integer, n, l->est};

		rc = chunkplan_cuts(p->conn, &cs, bounds, nb);
	}
	free(rel);

	for (int i = 0; i < *nb && !integer; i++)
	{
		char *lit = PQescapeLiteral(p->conn, (*bounds)[i], strlen((*bounds)[i]));
		size_t len;

		if (lit == NULL)
			log_fatal(EXIT_RUNTIME, "cannot quote a key boundary: %s", PQerrorMessage(p->conn));
		len = strlen(lit) + strlen(l->keytypename) + 3;
		free((*bounds)[i]);
		(*bounds)[i] = xmalloc(len);
		snprintf((*bounds)[i], len, "%s::%s", lit, l->keytypename);
		PQfreemem(lit);
	}
	return rc;
}

/* Block boundaries: with 14+ a ctid range is a TID range scan of its blocks. */
static void
ctid_bounds(const struct leaf *l, int n, char ***bounds, int *nb)
{
	if ((int64_t) n > l->pages)
		n = (int) l->pages;
	*nb = 0;
	if (n < 2)
		return;
	*bounds = xcalloc((size_t) n - 1, sizeof(char *));
	for (int i = 1; i < n; i++)
	{
		char tmp[48];

		snprintf(tmp, sizeof(tmp), "'(%" PRId64 ",0)'::tid", l->pages * i / n);
		(*bounds)[(*nb)++] = xstrdup(tmp);
	}
}

static int
plan_leaf(struct planner *p, const struct leaf *l)
{
	uint64_t split = p->o->split_rows;
	double weight = l->est >= 0 ? l->est : (double) l->pages * 50;
	char **bounds = NULL;
	const char *col = NULL;
	int nb = 0, n = 1, rc = EXIT_DONE;
	bool ctid;

	if (l->est > (double) split)
	{
		double want = ceil(l->est / (double) split);
		int jobs = p->o->jobs > 0 ? p->o->jobs : 1;

		/* A multiple of --jobs, so no worker is left alone with the tail. */
		if (want > 1 && jobs > 1)
			want = ceil(want / jobs) * jobs;
		n = want > MAX_PARTS_PER_LEAF ? MAX_PARTS_PER_LEAF : (int) want;
	}
	/* Key ranges cost an index descent per part and, where the key is not
	 * in heap order, random reads; a block range is read sequentially and
	 * exactly once. Under the snapshot each visible row version has one
	 * ctid, so block ranges cover the table exactly once too. */
	ctid = p->version >= 140000 && p->o->split_by != SPLIT_KEY;
	if (n > 1 && !ctid && l->key)
	{
		rc = key_bounds(p, l, n, &bounds, &nb);
		col = l->key;
	}
	if (rc != EXIT_DONE)
		return rc;
	if (n > 1 && nb == 0 && p->version >= 140000)
	{
		/* ctid chosen, or no key, or an empty sample. Before 14 a ctid
		 * condition is a full scan per part: such a table is not split. */
		free(bounds);
		bounds = NULL;
		ctid_bounds(l, n, &bounds, &nb);
		col = "ctid";
	}
	if (nb == 0)
		add_part(p, l->table, l->qname, true, NULL, weight, NULL);
	for (int i = 0; i < nb + (nb > 0); i++)
	{
		struct buf cond = BUF_INIT;

		if (i == 0)
			buf_printf(&cond, "%s < %s", col, bounds[0]);
		else if (i == nb)
			buf_printf(&cond, "%s >= %s", col, bounds[nb - 1]);
		else
			buf_printf(&cond, "%s >= %s AND %s < %s", col, bounds[i - 1], col, bounds[i]);
		add_part(p, l->table, l->qname, true, buf_cstr(&cond), weight / (nb + 1), NULL)->by = xstrdup(col);
		buf_free(&cond);
	}
	for (int i = 0; i < nb; i++)
		free(bounds[i]);
	free(bounds);
	return EXIT_DONE;
}

/*
 * Chunked copy: a table with a chunk key, above --chunk-rows or with
 * chunks done, is read as the key ranges still to copy, each in key order
 * so that the copy workers can cut it into chunks (lib/snapshot/chunkplan.c).
 * Others go to plan_leaf() and are copied in one piece. est is the table's
 * estimate: for a partitioned table, its leaves' summed (a root's own
 * reltuples is not that sum on every version). True when the table was
 * planned here (or failed: *rc).
 *
 * A partitioned table in the plan is one whose changes the stream names by
 * its root (publish_via_partition_root; else its leaves are in the plan,
 * each a table of its own): it is cut as one, by the root's key, which
 * holds the partition key of every level, and each range is read from the
 * root, so that the chunks and the stream's changes carry the same name and
 * one chunk holds a key whichever partition the row is in, or moves to.
 */
static bool
plan_chunked(struct planner *p, int table, double est, int *rc)
{
	struct snap_table *t = &p->plan->tables[table];
	struct tinfo *ti = &p->ti[table];
	const struct done_set *ds = p->o->done;
	bool root = ti->relkind == 'p';
	struct snap_key *k = NULL;
	struct key_range *r = NULL;
	bool has_done = false;
	char *order, *rel;
	int nr = 0;

	*rc = EXIT_DONE;
	if (chunkdone_whole(ds, t->schema, t->name))
	{
		t->whole_done = true;
		return true;
	}
	{
		int n, first = chunkdone_find(ds, t->schema, t->name, &n);

		for (int i = first; i < first + n && !has_done; i++)
			has_done = ds->c[i].nkey > 0;
	}
	/* Small tables are copied in one piece whatever their key: no key
	 * lookup for them (a copy of many small tables would pay one each). */
	if (!has_done && !(est > (double) p->o->chunk_rows))
		return false;
	k = chunkplan_key(p->conn, ti->oid, t->schema, t->name, ti->names, t->ncols, p->o->keycolls);
	if (k == NULL && has_done)
	{
		log_error("--done has chunks of %s.%s, which has no chunk key now (a replica identity key "
				  "that is copied, of types a chunked copy orders): copy the table again from scratch", t->schema, t->name);
		*rc = EXIT_UNSUPPORTED;
		return true;
	}
	if (k == NULL)
		return false;
	/* A plain table without its inheritance children; a root with all
	 * its partitions, at every level. */
	rel = xmalloc(strlen(ti->qname) + 6);
	sprintf(rel, "%s%s", root ? "" : "ONLY ", ti->qname);
	{
		struct plan_rel pr = {t->schema, t->name, rel, est};

		*rc = chunkplan_ranges(p->conn, &pr, k, ds, p->o->jobs, &r, &nr);
	}
	free(rel);
	if (*rc != EXIT_DONE)
	{
		chunkplan_key_free(k);
		return true;
	}
	t->key = k;
	order = chunkplan_order(k);
	for (int i = 0; i < nr; i++)
	{
		char *cond = chunkplan_cond(p->conn, k, r[i].lo, r[i].hi);
		char *lead = root ? chunkplan_lead_cond(p->conn, k, r[i].lo, r[i].hi) : NULL;
		struct snap_part *part;

		if (lead)
		{
			char *both = xmalloc(strlen(cond) + strlen(lead) + 6);

			sprintf(both, "%s AND %s", cond, lead);
			free(cond);
			cond = both;
		}
		part = add_part(p, table, ti->qname, !root, cond, (est > 0 ? est : 0) / nr, order);
		part->lo = r[i].lo;
		part->hi = r[i].hi;
		part->by = xstrdup(k->qcols[0]);
		free(cond);
		free(lead);
	}
	free(order);
	free(r);
	return true;
}

static int
cmp_parts(const void *a, const void *b)
{
	const struct snap_part *x = a, *y = b;

	if (x->weight != y->weight)
		return x->weight > y->weight ? -1 : 1;
	if (x->table != y->table)
		return x->table < y->table ? -1 : 1;
	return x->index - y->index;
}

static int
plan_parts(struct planner *p)
{
	struct leaf *lv = NULL;
	int nl = 0, i = 0, rc;

	if ((rc = load_leaves(p, &lv, &nl)) != EXIT_DONE)
		return rc;
	/* The leaves come by table (a plain table is its own only leaf). */
	for (int t = 0; t < p->plan->ntables && rc == EXIT_DONE; t++)
	{
		struct snap_table *st = &p->plan->tables[t];
		int first = i;
		double est = 0;

		st->rows_estimate = 0;
		for (; i < nl && lv[i].table == t; i++)
		{
			if (lv[i].est < 0 || st->rows_estimate < 0)
				st->rows_estimate = -1;
			else
				st->rows_estimate += lv[i].est;
			est += lv[i].est > 0 ? lv[i].est : 0;
		}
		if (p->o->chunked && plan_chunked(p, t, est, &rc))
			continue;
		for (int j = first; j < i && rc == EXIT_DONE; j++)
			rc = plan_leaf(p, &lv[j]);
		if (rc == EXIT_DONE && first == i)
		{
			/* A partitioned table without partitions: still one (empty)
			 * read, so that it is copied and reported like any other. */
			add_part(p, t, p->ti[t].qname, p->ti[t].relkind != 'p', NULL, 0, NULL);
		}
	}
	for (int j = 0; j < nl; j++)
	{
		free(lv[j].qname);
		free(lv[j].key);
		free(lv[j].keytypename);
	}
	free(lv);
	if (rc == EXIT_DONE && p->plan->nparts > 1)
		qsort(p->plan->parts, (size_t) p->plan->nparts, sizeof(*p->plan->parts), cmp_parts);
	return rc;
}

/*
 * A table of --done outside this plan that is a partition or an ancestor of
 * a table in it was copied under the other name of the same rows: a
 * publication's publish_via_partition_root changed between two attempts.
 * Continuing would copy those rows again under the new name, so they would
 * be on the target twice: refuse (exit 5) and let the copy start over.
 * (Tables of --done that are simply not in the plan are left alone.)
 */
static int
done_renamed(struct planner *p)
{
	const struct done_set *ds = p->o->done;
	char *oids = NULL;
	int rc = EXIT_DONE;

	for (int i = 0; i < ds->n && rc == EXIT_DONE; i++)
	{
		const struct done_chunk *c = &ds->c[i];
		const char *params[3] = {c->schema, c->name, NULL};
		bool planned = false;
		struct pgerr err;
		PGresult *res;

		if (i > 0 && strcmp(c->schema, ds->c[i - 1].schema) == 0 && strcmp(c->name, ds->c[i - 1].name) == 0)
			continue;
		for (int t = 0; t < p->plan->ntables && !planned; t++)
			planned = strcmp(p->plan->tables[t].schema, c->schema) == 0 &&
				strcmp(p->plan->tables[t].name, c->name) == 0;
		if (planned)
			continue;
		if (oids == NULL)
			oids = oid_array(p);
		params[2] = oids;
		res = conn_query_one(p->conn,
							 "WITH d AS (SELECT pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text)) AS rel)"
							 " SELECT pg_catalog.count(*) FROM d, pg_catalog.unnest($3::pg_catalog.oid[]) AS t(oid)"
							 "  WHERE t.oid <> d.rel AND (d.rel IN (SELECT relid FROM pg_catalog.pg_partition_ancestors(t.oid))"
							 "     OR t.oid IN (SELECT relid FROM pg_catalog.pg_partition_ancestors(d.rel)))",
							 3, params, 1, &err);
		if (res == NULL)
			rc = pub_query_failed("relate the tables of --done to the partitioned tables copied", &err);
		else if (strcmp(PQgetvalue(res, 0, 0), "0") != 0)
		{
			log_error("--done has chunks of %s.%s, a partition or partitioned table whose rows this copy "
					  "copies under another name (a publication's publish_via_partition_root changed): "
					  "copy the tables again from scratch", c->schema, c->name);
			rc = EXIT_UNSUPPORTED;
		}
		PQclear(res);
	}
	free(oids);
	return rc;
}

int
snapplan_build(PGconn *conn, const struct snapplan_opts *o, struct snap_plan *plan)
{
	struct planner p;
	int rc;

	memset(plan, 0, sizeof(*plan));
	memset(&p, 0, sizeof(p));
	p.conn = conn;
	p.version = PQserverVersion(conn);
	p.o = o;
	p.plan = plan;
	if (o->split_by == SPLIT_CTID && p.version < 140000)
	{
		log_error("--split-by ctid needs PostgreSQL 14 or later (TID range scans); the source is %d",
				  p.version / 10000);
		return EXIT_UNSUPPORTED;
	}
	rc = o->npubs ? tables_from_publications(&p) : tables_from_args(&p);
	if (rc == EXIT_DONE && plan->ntables > 0)
		rc = load_columns(&p);
	if (rc == EXIT_DONE && o->chunked && o->done && plan->ntables > 0)
		rc = done_renamed(&p);
	if (rc == EXIT_DONE && plan->ntables > 0)
		rc = plan_parts(&p);
	for (int i = 0; i < plan->ntables; i++)
	{
		free(p.ti[i].rowfilter);
		free(p.ti[i].qname);
		buf_free(&p.ti[i].cols);
		buf_free(&p.ti[i].header);
		for (int c = 0; c < plan->tables[i].ncols; c++)
			free(p.ti[i].names[c]);
		free(p.ti[i].names);
	}
	free(p.ti);
	return rc;
}

void
snapplan_free(struct snap_plan *plan)
{
	for (int i = 0; i < plan->ntables; i++)
	{
		free(plan->tables[i].schema);
		free(plan->tables[i].name);
		free(plan->tables[i].frame_header);
	}
	for (int i = 0; i < plan->nparts; i++)
	{
		const struct snap_key *k = plan->tables[plan->parts[i].table].key;

		free(plan->parts[i].sql);
		free(plan->parts[i].from);
		free(plan->parts[i].by);
		chunk_values_free(plan->parts[i].lo, k ? k->nkey : 0);
		chunk_values_free(plan->parts[i].hi, k ? k->nkey : 0);
	}
	for (int i = 0; i < plan->ntables; i++)
		chunkplan_key_free(plan->tables[i].key);
	free(plan->tables);
	free(plan->parts);
	memset(plan, 0, sizeof(*plan));
}
