/*
 * compare.c - one table compared by ranges of its key's hash (compare.h).
 */
#include "compare.h"

#include "buf.h"
#include "common.h"
#include "conn.h"
#include "log.h"
#include "pgwait.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * The table's key, from the source at the snapshot, quoted by the server:
 * the primary key, else the replica identity index; none: the whole row.
 * With it whether the table exists and its name quoted.
 */
static const char shape_sql[] =
	"WITH t AS (\n"
	"  SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n"
	"   WHERE n.nspname = $1 AND c.relname = $2\n"
	"), idx AS (\n"
	"  SELECT i.indkey FROM t JOIN pg_catalog.pg_index i ON i.indrelid = t.oid\n"
	"   WHERE i.indisprimary OR i.indisreplident ORDER BY i.indisprimary DESC LIMIT 1\n"
	"), keycols AS (\n"
	"  SELECT a.attname, k.ord FROM idx CROSS JOIN LATERAL unnest(idx.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)\n"
	"    JOIN t ON true JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum\n"
	")\n"
	"SELECT coalesce((SELECT pg_catalog.string_agg(pg_catalog.quote_ident(attname), ', ' ORDER BY ord) FROM keycols), ''),\n"
	"       EXISTS (SELECT 1 FROM t),\n"
	"       pg_catalog.format('%I.%I', $1::text, $2::text),\n"
	"       (SELECT count(*) FROM keycols)";

/* Its columns in the source's order: name, name quoted, generated. */
static const char cols_sql[] =
	"SELECT a.attname, pg_catalog.quote_ident(a.attname), a.attgenerated <> ''\n"
	"  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid\n"
	"  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n"
	" WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped\n"
	" ORDER BY a.attnum";

/*
 * The columns compared, quoted and comma-separated into out: those of the
 * line's column list (list: names joined by commas in the source's order,
 * as --list-tables prints them; "" for all), never generated ones (they
 * are the source's own computation, not what the target was sent). The
 * list is matched name by name in order, not split on commas, so that a
 * column named with a comma is one column. False when the list names a
 * column the table does not have.
 */
static bool
published_cols(const PGresult *res, const char *list, struct buf *out)
{
	size_t pos = 0, len = strlen(list);

	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *name = PQgetvalue(res, i, 0);
		size_t n = strlen(name);
		bool listed = len == 0;

		if (!listed && strncmp(list + pos, name, n) == 0 && (list[pos + n] == ',' || list[pos + n] == '\0'))
		{
			listed = true;
			pos += n + (list[pos + n] == ',');
		}
		if (listed && PQgetvalue(res, i, 2)[0] != 't')
			buf_printf(out, "%s%s", out->len ? ", " : "", PQgetvalue(res, i, 1));
	}
	return pos == len;
}

/* --- both sides at once ------------------------------------------------------ */

struct side_q {
	struct verify_side *s;
	const char *who;			/* "source" or "target" */
	const char *sql;
	int nparams;
	const char *const *params;
	PGresult *res;
};

static void
fail(struct verify_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

static void
fail_pg(struct verify_result *r, const char *who, PGconn *conn, const PGresult *res)
{
	struct pgerr err;
	char text[PGERR_TEXT_MAX];

	pgerr_set(&err, conn, res);
	pgerr_redact(&err);
	fail(r, "%s: %s", who, pgerr_text(&err, NULL, text, sizeof(text)));
}

/*
 * Send every query, then read every result: the servers work at the same
 * time. A query that failed fails r (the first failure names its side).
 */
static bool
run_all(struct side_q *q, int n, struct verify_result *r)
{
	bool sent[2] = {false, false};

	for (int i = 0; i < n; i++)
	{
		q[i].res = NULL;
		if (PQsendQueryParams(q[i].s->conn, q[i].sql, q[i].nparams, NULL, q[i].params, NULL, NULL, 0))
			sent[i] = true;
		else
			fail_pg(r, q[i].who, q[i].s->conn, NULL);
	}
	for (int i = 0; i < n; i++)
	{
		bool intr = false;
		ExecStatusType st;

		if (!sent[i])
			continue;
		q[i].res = pgwait_result(q[i].s->conn, 0, NULL, NULL, &intr);
		if (intr)
		{
			r->interrupted = true;
			fail(r, "interrupted");
			continue;
		}
		st = q[i].res ? PQresultStatus(q[i].res) : PGRES_FATAL_ERROR;
		if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
			fail_pg(r, q[i].who, q[i].s->conn, q[i].res);
	}
	if (r->failed)
		for (int i = 0; i < n; i++)
		{
			PQclear(q[i].res);
			q[i].res = NULL;
		}
	return !r->failed;
}

/* The same statement on both sides (no parameters, no rows wanted). */
static bool
both(struct verify_side *src, const char *sql_src, struct verify_side *tgt, const char *sql_tgt,
	 struct verify_result *r)
{
	struct side_q q[2] = {{src, "source", sql_src, 0, NULL, NULL}, {tgt, "target", sql_tgt, 0, NULL, NULL}};

	if (!run_all(q, 2, r))
		return false;
	PQclear(q[0].res);
	PQclear(q[1].res);
	return true;
}

/* --- the hash ------------------------------------------------------------------ */

/*
 * A server's encoding, and its hashtextextended() of the first 0 to 40
 * bytes of an ASCII text (the same bytes in every server encoding): every
 * tail length of the hash's 12-byte blocks, and more than one block. Two
 * servers that agree on these hash every text alike (the hash depends on
 * the machine's byte order and on the hash function of the major version,
 * never on the data).
 */
static const char probe_sql[] =
	"SELECT pg_catalog.current_setting('server_encoding'),\n"
	"       (SELECT pg_catalog.string_agg(pg_catalog.hashtextextended(\n"
	"                   pg_catalog.\"left\"('Pack my box with five dozen liquor jugs!', n) COLLATE \"C\", 0)::text,\n"
	"                 ' ' ORDER BY n)\n"
	"          FROM pg_catalog.generate_series(0, 40) n)";

const char *
verify_hash_name(enum verify_hash hash)
{
	return hash == VERIFY_HASH_FAST ? "hashtextextended" : "md5";
}

enum verify_hash
verify_hash_choose(PGconn *src, PGconn *tgt, char *why, size_t size, bool *interrupted)
{
	struct verify_side ss = {src, NULL}, st = {tgt, NULL};
	struct side_q q[2] = {{&ss, "source", probe_sql, 0, NULL, NULL}, {&st, "target", probe_sql, 0, NULL, NULL}};
	struct verify_result r;
	enum verify_hash h = VERIFY_HASH_MD5;

	memset(&r, 0, sizeof(r));
	*interrupted = false;
	if (!run_all(q, 2, &r))
	{
		*interrupted = r.interrupted;
		snprintf(why, size, "cannot compare the servers' hashes: %s", r.msg);
		return h;
	}
	if (PQntuples(q[0].res) != 1 || PQntuples(q[1].res) != 1 || PQnfields(q[0].res) != 2 || PQnfields(q[1].res) != 2)
		snprintf(why, size, "unexpected answer comparing the servers' hashes");
	else if (strcmp(PQgetvalue(q[0].res, 0, 0), PQgetvalue(q[1].res, 0, 0)) != 0)
		snprintf(why, size, "the databases' encodings differ (%s, %s)", PQgetvalue(q[0].res, 0, 0),
				 PQgetvalue(q[1].res, 0, 0));
	else if (strcmp(PQgetvalue(q[0].res, 0, 1), PQgetvalue(q[1].res, 0, 1)) != 0)
		snprintf(why, size, "the servers' hashtextextended() differ (another byte order or major version)");
	else
	{
		snprintf(why, size, "both databases are %s and the servers hash alike", PQgetvalue(q[0].res, 0, 0));
		h = VERIFY_HASH_FAST;
	}
	PQclear(q[0].res);
	PQclear(q[1].res);
	return h;
}

/*
 * The planner cannot know how few hash prefixes a level groups by and
 * takes every row for a group: it then sorts every row (spilling to disk),
 * with parallel workers too, where a hash table of the few thousand groups
 * does. Sorts stay possible where nothing else is (the groups' own order).
 * Set once the catalog queries of the table are done: their plans need
 * sorts. And no JIT: a plan with a disabled node costs more than JIT's
 * thresholds, and compiling each level's query cost 150 ms a table (1,000
 * small tables took minutes, not seconds).
 */
#define NO_ROW_SORT "SELECT pg_catalog.set_config('enable_sort', 'off', true), pg_catalog.set_config('jit', 'off', true)"

/* Each side at its snapshot, with the verify settings: the sessions have
 * pgsync's session settings (session_open); money's, which they leave to the
 * server, is fixed here so that its text form is the same on both sides. */
static bool
begin_both(struct verify_side *src, struct verify_side *tgt, struct verify_result *r)
{
	char *ls = PQescapeLiteral(src->conn, src->snapshot, strlen(src->snapshot));
	char *lt = PQescapeLiteral(tgt->conn, tgt->snapshot, strlen(tgt->snapshot));
	struct buf ss = BUF_INIT, st = BUF_INIT;
	bool ok;

	if (ls == NULL || lt == NULL)
	{
		fail(r, "out of memory");
		ok = false;
	}
	else
	{
		buf_printf(&ss, "SET TRANSACTION SNAPSHOT %s", ls);
		buf_printf(&st, "SET TRANSACTION SNAPSHOT %s", lt);
		ok = both(src, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", tgt,
				  "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", r) &&
			both(src, buf_cstr(&ss), tgt, buf_cstr(&st), r) &&
			both(src, "SET LOCAL lc_monetary = 'C'", tgt, "SET LOCAL lc_monetary = 'C'", r);
	}
	PQfreemem(ls);
	PQfreemem(lt);
	buf_free(&ss);
	buf_free(&st);
	return ok;
}

/* After a failure: no transaction left open, a broken session closed. */
static void
end_side(struct verify_side *s, bool commit)
{
	PGresult *res;

	if (s->conn == NULL)
		return;
	if (PQstatus(s->conn) != CONNECTION_OK)
	{
		PQfinish(s->conn);
		s->conn = NULL;
		return;
	}
	if (PQtransactionStatus(s->conn) == PQTRANS_IDLE)
		return;
	res = PQexec(s->conn, commit ? "COMMIT" : "ROLLBACK");
	PQclear(res);
	if (PQstatus(s->conn) != CONNECTION_OK || PQtransactionStatus(s->conn) != PQTRANS_IDLE)
	{
		PQfinish(s->conn);
		s->conn = NULL;
	}
}

/* --- the levels ---------------------------------------------------------------- */

/* What one level of ranges says: the differing ranges, the most rows either
 * side has in them, and the counts as far as the ranges tell them. */
struct level {
	long long rows_src, rows_tgt;
	long long ndiff, diff_rows;
	long long missing, only, differing;
	struct buf list;			/* the differing prefixes as an array literal */
};

static long long
count_at(const PGresult *res, int row, int col)
{
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* Merge two results sorted by their first column (the prefix or key hash,
 * lower-case hex of one length, in "C" order). */
static int
next_cmp(const PGresult *a, int i, const PGresult *b, int j)
{
	if (i >= PQntuples(a))
		return 1;
	if (j >= PQntuples(b))
		return -1;
	return strcmp(PQgetvalue(a, i, 0), PQgetvalue(b, j, 0));
}

static void
level_merge(const PGresult *s, const PGresult *t, struct level *lv)
{
	int i = 0, j = 0;

	buf_reset(&lv->list);
	buf_putc(&lv->list, '{');
	lv->rows_src = lv->rows_tgt = lv->ndiff = lv->diff_rows = 0;
	lv->missing = lv->only = lv->differing = 0;
	while (i < PQntuples(s) || j < PQntuples(t))
	{
		int c = next_cmp(s, i, t, j);
		long long sc = c <= 0 ? count_at(s, i, 1) : 0;
		long long tc = c >= 0 ? count_at(t, j, 1) : 0;
		const char *prefix = c <= 0 ? PQgetvalue(s, i, 0) : PQgetvalue(t, j, 0);
		bool differ = c != 0 || sc != tc || strcmp(PQgetvalue(s, i, 2), PQgetvalue(t, j, 2)) != 0;

		lv->rows_src += sc;
		lv->rows_tgt += tc;
		if (differ)
		{
			lv->ndiff++;
			lv->diff_rows += sc > tc ? sc : tc;
			buf_printf(&lv->list, "%s%s", lv->list.len > 1 ? "," : "", prefix);
			if (sc > tc)
				lv->missing += sc - tc;
			else if (tc > sc)
				lv->only += tc - sc;
			else
				lv->differing++;
		}
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	buf_putc(&lv->list, '}');
}

static void
key_line(FILE *keys, const char *kind, const char *key)
{
	if (keys && *key)
		fprintf(keys, "%s\t%s\n", kind, key);
}

/* The rows of the last ranges: key hash, count, row hash, key shown. */
static void
rows_merge(const PGresult *s, const PGresult *t, FILE *keys, struct verify_result *r)
{
	int i = 0, j = 0;

	r->missing = r->only = r->differing = 0;
	while (i < PQntuples(s) || j < PQntuples(t))
	{
		int c = next_cmp(s, i, t, j);
		long long sc = c <= 0 ? count_at(s, i, 1) : 0;
		long long tc = c >= 0 ? count_at(t, j, 1) : 0;

		if (sc > tc)
		{
			r->missing += sc - tc;
			key_line(keys, "missing", PQgetvalue(s, i, 3));
		}
		else if (tc > sc)
		{
			r->only += tc - sc;
			key_line(keys, "only", PQgetvalue(t, j, 3));
		}
		else if (strcmp(PQgetvalue(s, i, 2), PQgetvalue(t, j, 2)) != 0)
		{
			r->differing++;
			key_line(keys, "differing", PQgetvalue(s, i, 3));
		}
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
}

/*
 * The row source of every level: key hash (lower-case hex of one length),
 * row hash, key shown (JSON; none for a table without a key). md5: of the
 * text converted to UTF-8, the same bytes whatever the databases'
 * encodings. FAST: hashtextextended() of the text in "C" (no collation,
 * deterministic or not, changes it: the bytes are hashed), the key's as 16
 * hex digits, the row's a bigint.
 */
static void
base_query(struct buf *b, enum verify_hash hash, const char *cols, const char *key, long nkey, const char *qname)
{
	struct buf row = BUF_INIT, k = BUF_INIT;

	buf_printf(&row, "ROW(%s)::text", cols);
	if (nkey == 1)
		buf_printf(&k, "(%s)::text", key);	/* one column: its own text, not a one-field row */
	else if (nkey > 1)
		buf_printf(&k, "ROW(%s)::text", key);
	else
		buf_puts(&k, buf_cstr(&row));
	if (hash == VERIFY_HASH_FAST)
		buf_printf(b, "SELECT lpad(to_hex(hashtextextended((%s) COLLATE \"C\", 0)), 16, '0') AS kh, "
				   "hashtextextended((%s) COLLATE \"C\", 0) AS rh, ", buf_cstr(&k), buf_cstr(&row));
	else
		buf_printf(b, "SELECT md5(convert_to(%s, 'UTF8')) AS kh, md5(convert_to(%s, 'UTF8')) AS rh, ",
				   buf_cstr(&k), buf_cstr(&row));
	if (nkey > 0)
		buf_printf(b, "to_json(%s)::text AS ks", buf_cstr(&k));
	else
		buf_puts(b, "''::text AS ks");
	buf_printf(b, " FROM %s x", qname);
	buf_free(&row);
	buf_free(&k);
}

/*
 * The level's query on one side: a range's count and the sum of its rows'
 * hashes (md5: their 60-bit prefixes), or (rows) each key hash's count, row
 * hash (FAST: the sum, so that keys whose hashes collide still show a
 * change) and key. Grouped in a subquery, its groups sorted after
 * (NO_ROW_SORT).
 */
static void
level_query(struct buf *q, enum verify_hash hash, const char *base, const char *filter, int len, bool prefixes,
			bool rows)
{
	const char *h;

	if (hash == VERIFY_HASH_FAST)
		h = "sum(rh)";
	else
		h = rows ? "min(rh)" : "sum(('x' || left(rh, 15))::bit(60)::bigint)";
	buf_reset(q);
	if (rows)
		buf_printf(q, "SELECT g COLLATE \"C\", n, h, k FROM (SELECT kh AS g, count(*) AS n, %s AS h, min(ks) AS k FROM (",
				   h);
	else
		buf_printf(q, "SELECT g COLLATE \"C\", n, h FROM (SELECT left(kh, %d) AS g, count(*) AS n, %s AS h FROM (",
				   len, h);
	buf_puts(q, base);
	/* The source's rows are those the row filter publishes (the source's
	 * own expression, run on the source only). */
	if (filter && *filter)
		buf_printf(q, " WHERE (%s)", filter);
	buf_puts(q, ") r");
	if (prefixes)
		buf_printf(q, " WHERE left(kh, %d) = ANY ($1::text[])", rows ? len : len - 3);
	/* In "C" order, which the merge follows. */
	buf_puts(q, " GROUP BY 1) s ORDER BY 1");
}

void
verify_compare(struct verify_side *src, struct verify_side *tgt, const struct vtable *t,
			   enum verify_hash hash, FILE *keys, struct verify_result *r)
{
	const char *sp[2] = {t->schema, t->name};
	struct side_q shape = {src, "source", shape_sql, 2, sp, NULL};
	struct side_q colq = {src, "source", cols_sql, 2, sp, NULL};
	struct buf base = BUF_INIT, qs = BUF_INIT, qt = BUF_INIT, cols = BUF_INIT;
	struct level lv = {0};
	PGresult *rs = NULL, *rt = NULL;
	long nkey;
	int len = 3;
	/* Ranges are cut no finer than this, then their rows fetched: short
	 * of the key hash's whole length (md5 32 hex digits, FAST 16). */
	int len_max = hash == VERIFY_HASH_FAST ? 15 : 30;
	bool first = true, prefixes = false;

	memset(r, 0, sizeof(*r));
	r->itemized = true;
	if (!begin_both(src, tgt, r) || !run_all(&shape, 1, r) || !run_all(&colq, 1, r))
		goto done;
	if (PQntuples(shape.res) != 1 || PQnfields(shape.res) != 4 || PQnfields(colq.res) != 3)
	{
		fail(r, "source: unexpected answer describing the table");
		goto done;
	}
	if (PQgetvalue(shape.res, 0, 1)[0] != 't')
	{
		fail(r, "table %s does not exist on the source", t->display);
		goto done;
	}
	if (!published_cols(colq.res, t->cols, &cols))
	{
		fail(r, "the column list of %s names columns the source table does not have", t->display);
		goto done;
	}
	if (cols.len == 0)
	{
		fail(r, "table %s has no published column to compare", t->display);
		goto done;
	}
	if (!both(src, NO_ROW_SORT, tgt, NO_ROW_SORT, r))
		goto done;
	nkey = atol(PQgetvalue(shape.res, 0, 3));
	base_query(&base, hash, buf_cstr(&cols), PQgetvalue(shape.res, 0, 0), nkey, PQgetvalue(shape.res, 0, 2));
	for (;;)
	{
		const char *param[1] = {prefixes ? buf_cstr(&lv.list) : NULL};
		struct side_q q[2] = {{src, "source", NULL, prefixes, param, NULL}, {tgt, "target", NULL, prefixes, param, NULL}};

		level_query(&qs, hash, buf_cstr(&base), t->filter, len, prefixes, false);
		level_query(&qt, hash, buf_cstr(&base), NULL, len, prefixes, false);
		q[0].sql = buf_cstr(&qs);
		q[1].sql = buf_cstr(&qt);
		if (!run_all(q, 2, r))
			goto done;
		level_merge(q[0].res, q[1].res, &lv);
		PQclear(q[0].res);
		PQclear(q[1].res);
		if (first)
		{
			r->rows_src = lv.rows_src;
			r->rows_tgt = lv.rows_tgt;
			first = false;
		}
		log_debug("%s: ranges of %d hex digits: %lld differ, with %lld rows", t->display, len, lv.ndiff,
				  lv.diff_rows);
		if (lv.ndiff == 0)
			break;
		prefixes = true;
		if (lv.diff_rows > VERIFY_ROWS_MAX && lv.ndiff > VERIFY_RANGES_MAX)
		{
			/* Too much differs to find every row within bounded memory:
			 * the ranges' counts say how many rows are missing or extra,
			 * each range of equal counts holds one differing row at least. */
			r->missing = lv.missing;
			r->only = lv.only;
			r->differing = lv.differing;
			r->itemized = false;
			break;
		}
		if (lv.diff_rows > VERIFY_ROWS_MAX && len < len_max)
		{
			len += 3;
			continue;
		}
		/* Few rows left: their key and row hashes. */
		param[0] = buf_cstr(&lv.list);
		level_query(&qs, hash, buf_cstr(&base), t->filter, len, true, true);
		level_query(&qt, hash, buf_cstr(&base), NULL, len, true, true);
		q[0].sql = buf_cstr(&qs);
		q[1].sql = buf_cstr(&qt);
		q[0].nparams = q[1].nparams = 1;
		if (!run_all(q, 2, r))
			goto done;
		rs = q[0].res;
		rt = q[1].res;
		rows_merge(rs, rt, keys, r);
		break;
	}
done:
	PQclear(shape.res);
	PQclear(colq.res);
	buf_free(&cols);
	PQclear(rs);
	PQclear(rt);
	buf_free(&base);
	buf_free(&qs);
	buf_free(&qt);
	buf_free(&lv.list);
	end_side(src, !r->failed);
	end_side(tgt, !r->failed);
}
