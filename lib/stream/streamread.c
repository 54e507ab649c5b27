#include "streamread.h"
#include "buf.h"
#include "common.h"
#include "escape.h"
#include "hash.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RELATION is the widest record: 6 fields plus 4 per column. */
#define SR_MAX_FIELDS (6 + 4 * SR_MAX_COLS)
#define SR_BUCKETS_MIN 64

struct streamread {
	struct field *f;
	struct sr_rel **buckets;
	size_t nbuckets, nrels;
	uint64_t gen;
	bool started;
	bool in_txn;
	bool after_begin;			/* ORIGIN may follow BEGIN only */
	uint64_t xid;
	lsn_t commit_lsn;
	lsn_t last_commit_lsn;		/* of the previous transaction in this stream */
	bool have_last;
	/*
	 * The highest position this stream has promised (header start, COMMIT
	 * end, POSITION, END, SNAPSHOT): everything committing below it was
	 * sent. Nothing later in the same stream may lie below it.
	 */
	lsn_t promised;
	const char *promised_by;
	struct sr_rel **trunc;
	size_t trunccap;
	struct buf tmp;
	char err[512];
};

static bool
fail(struct streamread *sr, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static bool
fail(struct streamread *sr, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sr->err, sizeof(sr->err), fmt, ap);
	va_end(ap);
	return false;
}

struct streamread *
sr_new(void)
{
	struct streamread *sr = xcalloc(1, sizeof(*sr));

	sr->f = xmalloc(sizeof(struct field) * (SR_MAX_FIELDS + 1));
	sr->nbuckets = SR_BUCKETS_MIN;
	sr->buckets = xcalloc(sr->nbuckets, sizeof(*sr->buckets));
	return sr;
}

static void
free_cols(struct sr_rel *r)
{
	for (int i = 0; i < r->ncols; i++)
		free(r->cols[i].name);
	free(r->cols);
	r->cols = NULL;
	r->ncols = 0;
}

void
sr_free(struct streamread *sr)
{
	if (sr == NULL)
		return;
	for (size_t i = 0; i < sr->nbuckets; i++)
		for (struct sr_rel *r = sr->buckets[i], *next; r; r = next)
		{
			next = r->next;
			free_cols(r);
			free(r->schema);
			free(r->table);
			free(r->key);
			free(r);
		}
	free(sr->buckets);
	free(sr->trunc);
	free(sr->f);
	buf_free(&sr->tmp);
	free(sr);
}

const char *
sr_error(const struct streamread *sr)
{
	return sr->err;
}

bool
sr_in_txn(const struct streamread *sr)
{
	return sr->in_txn;
}

uint64_t
sr_txn_xid(const struct streamread *sr)
{
	return sr->xid;
}

void
sr_mark(const struct streamread *sr, struct sr_mark *m)
{
	m->have_last = sr->have_last;
	m->last_commit_lsn = sr->last_commit_lsn;
	m->promised = sr->promised;
	m->promised_by = sr->promised_by;
}

void
sr_rewind(struct streamread *sr, const struct sr_mark *m)
{
	sr->in_txn = false;
	sr->after_begin = false;
	sr->have_last = m->have_last;
	sr->last_commit_lsn = m->last_commit_lsn;
	sr->promised = m->promised;
	sr->promised_by = m->promised_by;
}

bool
sr_started(const struct streamread *sr)
{
	return sr->started;
}

const char *
sr_rel_name(const struct sr_rel *rel, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s", rel->schema, rel->table);
	return buf;
}

/* --- field checks ------------------------------------------------------ */

/* A value field: COPY text. \U only where the caller allows it. */
static bool
value_ok(const struct field *f, bool allow_unchanged)
{
	/* Fast path: most values hold no backslash and no CR. */
	if (memchr(f->p, '\\', f->n) == NULL)
		return memchr(f->p, '\r', f->n) == NULL;
	if (field_is_unchanged(f->p, f->n))
		return allow_unchanged;
	return copy_field_valid(f->p, f->n);
}

static bool
values_ok(struct streamread *sr, const struct field *f, int n, bool allow_unchanged,
		  const char *what)
{
	for (int i = 0; i < n; i++)
		if (!value_ok(&f[i], allow_unchanged))
		{
			if (field_is_unchanged(f[i].p, f[i].n))
				return fail(sr, "unchanged-value token \\U in %s value %d", what, i + 1);
			return fail(sr, "bad escape sequence in %s value %d", what, i + 1);
		}
	return true;
}

/* Unescape a non-NULL value (a name) into a malloc'd string. */
static char *
name_dup(struct streamread *sr, const struct field *f)
{
	bool isnull;

	buf_reset(&sr->tmp);
	if (!copy_unescape(f->p, f->n, &sr->tmp, &isnull) || isnull ||
		memchr(sr->tmp.data ? sr->tmp.data : "", '\0', sr->tmp.len) != NULL)
		return NULL;
	return xstrdup(buf_cstr(&sr->tmp));
}

static bool
get_lsn(struct streamread *sr, const struct field *f, const char *rec, lsn_t *out)
{
	if (!field_lsn(f, out))
		return fail(sr, "malformed LSN in %s", rec);
	return true;
}

static bool
get_u64(struct streamread *sr, const struct field *f, const char *rec,
		const char *what, uint64_t max, uint64_t *out)
{
	if (!field_u64(f, out) || *out > max)
		return fail(sr, "malformed %s in %s", what, rec);
	return true;
}

/* "YYYY-MM-DD HH:MM:SS.ffffff+00", as the spec writes times. */
static bool
get_time(struct streamread *sr, const struct field *f, const char *rec)
{
	static const char pat[] = "dddd-dd-dd dd:dd:dd.dddddd+00";

	if (f->n != sizeof(pat) - 1)
		return fail(sr, "malformed time in %s", rec);
	for (size_t i = 0; i < f->n; i++)
		if (pat[i] == 'd' ? (f->p[i] < '0' || f->p[i] > '9') : f->p[i] != pat[i])
			return fail(sr, "malformed time in %s", rec);
	return true;
}

static bool
nfields(struct streamread *sr, size_t nf, size_t want, const char *rec)
{
	if (nf != want)
		return fail(sr, "%s has %zu fields, expected %zu", rec, nf, want);
	return true;
}

/* --- relations --------------------------------------------------------- */

/* Schema and table fields are adjacent: the key is the raw span of both. */
static struct sr_rel *
rel_find(struct streamread *sr, const struct field *schema, const struct field *table,
		 uint64_t *hash_out)
{
	const char *p = schema->p;
	size_t n = (size_t) (table->p + table->n - schema->p);
	uint64_t h = hash_bytes(HASH_INIT, p, n);

	if (hash_out)
		*hash_out = h;
	for (struct sr_rel *r = sr->buckets[h % sr->nbuckets]; r; r = r->next)
		if (r->hash == h && r->keylen == n && memcmp(r->key, p, n) == 0)
			return r;
	return NULL;
}

static void
rel_grow(struct streamread *sr)
{
	size_t nb = sr->nbuckets * 2;
	struct sr_rel **b = xcalloc(nb, sizeof(*b));

	for (size_t i = 0; i < sr->nbuckets; i++)
		for (struct sr_rel *r = sr->buckets[i], *next; r; r = next)
		{
			next = r->next;
			r->next = b[r->hash % nb];
			b[r->hash % nb] = r;
		}
	free(sr->buckets);
	sr->buckets = b;
	sr->nbuckets = nb;
}

/* The relation a change names, which must be described in this stream. */
static bool
rel_lookup(struct streamread *sr, const struct field *f, const char *rec,
		   struct sr_rel **out)
{
	struct sr_rel *r = rel_find(sr, &f[0], &f[1], NULL);

	if (r == NULL || !r->defined)
	{
		/* Names are identifiers, not row data: safe to show (bounded). */
		return fail(sr, "%s for %.*s.%.*s before its RELATION", rec,
					(int) (f[0].n > 64 ? 64 : f[0].n), f[0].p,
					(int) (f[1].n > 64 ? 64 : f[1].n), f[1].p);
	}
	*out = r;
	return true;
}

static bool
parse_typmod(const struct field *f, int32_t *out)
{
	uint64_t v;

	if (f->n == 2 && f->p[0] == '-' && f->p[1] == '1')
	{
		*out = -1;
		return true;
	}
	if (!field_u64(f, &v) || v > INT32_MAX)
		return false;
	*out = (int32_t) v;
	return true;
}

static bool
parse_relation(struct streamread *sr, struct sr_record *rec)
{
	struct field *f = sr->f;
	uint64_t relid, ncols, h;
	struct sr_col *cols;
	char *schema, *table;
	struct sr_rel *r;

	if (rec->nf < 6)
		return nfields(sr, rec->nf, 6, "RELATION");
	if (!get_u64(sr, &f[5], "RELATION", "column count", SR_MAX_COLS, &ncols) ||
		!nfields(sr, rec->nf, 6 + 4 * ncols, "RELATION") ||
		!get_u64(sr, &f[3], "RELATION", "relation id", UINT32_MAX, &relid))
		return false;
	/* strchr() would also find the NUL that ends its own argument. */
	if (f[4].n != 1 || f[4].p[0] == '\0' || strchr("dfin", f[4].p[0]) == NULL)
		return fail(sr, "malformed replica identity in RELATION");
	if ((schema = name_dup(sr, &f[1])) == NULL)
		return fail(sr, "malformed schema name in RELATION");
	if ((table = name_dup(sr, &f[2])) == NULL)
	{
		free(schema);
		return fail(sr, "malformed table name in RELATION");
	}
	cols = xcalloc(ncols ? ncols : 1, sizeof(*cols));
	for (uint64_t i = 0; i < ncols; i++)
	{
		const struct field *c = &f[6 + 4 * i];
		uint64_t oid;
		const char *bad = NULL;

		if ((cols[i].name = name_dup(sr, &c[0])) == NULL)
			bad = "column name";
		else if (!field_u64(&c[1], &oid) || oid > UINT32_MAX)
			bad = "type oid";
		else if (!parse_typmod(&c[2], &cols[i].typmod))
			bad = "type modifier";
		else if (c[3].n != 1 || (c[3].p[0] != 'k' && c[3].p[0] != '-'))
			bad = "column flags";
		if (bad)
		{
			for (uint64_t j = 0; j <= i; j++)
				free(cols[j].name);
			free(cols);
			free(schema);
			free(table);
			return fail(sr, "malformed %s of column %d in RELATION", bad, (int) i + 1);
		}
		cols[i].typoid = (uint32_t) oid;
		cols[i].key = c[3].p[0] == 'k';
	}

	r = rel_find(sr, &f[1], &f[2], &h);
	if (r == NULL)
	{
		size_t n = (size_t) (f[2].p + f[2].n - f[1].p);

		r = xcalloc(1, sizeof(*r));
		r->key = xmalloc(n + 1);
		memcpy(r->key, f[1].p, n);
		r->key[n] = '\0';
		r->keylen = n;
		r->hash = h;
		r->schema = schema;
		r->table = table;
		if (sr->nrels + 1 > sr->nbuckets)
			rel_grow(sr);
		r->next = sr->buckets[h % sr->nbuckets];
		sr->buckets[h % sr->nbuckets] = r;
		sr->nrels++;
	}
	else
	{
		free(schema);
		free(table);
		free_cols(r);
	}
	r->relid = (uint32_t) relid;
	r->identity = f[4].p[0];
	r->ncols = (int) ncols;
	r->cols = cols;
	r->gen = ++sr->gen;
	r->defined = true;
	rec->rel = r;
	return true;
}

/* --- positions ---------------------------------------------------------- */

/*
 * Positions only grow within a stream. A record below what the stream
 * already promised would be read as "already applied" by a consumer that
 * recorded the promise, and silently skipped: it is a malformed stream.
 */
static bool
not_below(struct streamread *sr, lsn_t lsn, const char *what)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ];

	if (lsn >= sr->promised)
		return true;
	return fail(sr, "%s %s is below position %s, which the stream's %s already reached: "
				"positions never go back within a stream",
				what, lsn_format(lsn, a), lsn_format(sr->promised, b), sr->promised_by);
}

static void
promise(struct streamread *sr, lsn_t lsn, const char *by)
{
	if (lsn > sr->promised || sr->promised_by == NULL)
	{
		sr->promised = lsn;
		sr->promised_by = by;
	}
}

lsn_t
sr_promised(const struct streamread *sr)
{
	return sr->promised;
}

bool
sr_line_has_position(const char *line, size_t len)
{
	return (len > 6 && memcmp(line, REC_BEGIN "\t", 6) == 0) ||
		(len > 9 && memcmp(line, REC_POSITION "\t", 9) == 0) ||
		(len > 4 && memcmp(line, REC_END "\t", 4) == 0);
}

/* --- records ----------------------------------------------------------- */

static bool
parse_header(struct streamread *sr, struct sr_record *rec)
{
	struct field *f = sr->f;
	uint64_t v;
	char *slot;

	if (rec->nf < 6)
		return fail(sr, "PGCS has %zu fields, expected at least 6", rec->nf);
	if (!field_eq(&f[1], "1"))
		return fail(sr, "unsupported stream format version \"%.*s\"",
					(int) (f[1].n > 16 ? 16 : f[1].n), f[1].p);
	if (!field_u64(&f[2], &v) || f[2].n >= sizeof(rec->sysid))
		return fail(sr, "malformed system identifier in PGCS");
	memcpy(rec->sysid, f[2].p, f[2].n);
	rec->sysid[f[2].n] = '\0';
	if (!get_u64(sr, &f[3], "PGCS", "timeline", UINT32_MAX, &v))
		return false;
	if (v == 0)
		return fail(sr, "malformed timeline in PGCS");
	rec->timeline = (uint32_t) v;
	if ((slot = name_dup(sr, &f[4])) == NULL || slot[0] == '\0' ||
		strlen(slot) >= sizeof(rec->slot) || strpbrk(slot, "\n\r") != NULL)
	{
		free(slot);
		return fail(sr, "malformed slot name in PGCS");
	}
	strcpy(rec->slot, slot);
	free(slot);
	if (!get_lsn(sr, &f[5], "PGCS", &rec->lsn))
		return false;
	for (size_t i = 6; i < rec->nf; i++)
	{
		if (!value_ok(&f[i], false))
			return fail(sr, "malformed feature %zu in PGCS", i - 5);
		/* A "!" feature changes the meaning of the stream: never guess. */
		if (f[i].n > 0 && f[i].p[0] == '!')
		{
			const char *eq = memchr(f[i].p, '=', f[i].n);
			size_t n = eq ? (size_t) (eq - f[i].p) : f[i].n;

			return fail(sr, "unsupported stream feature \"%.*s\"", (int) (n > 64 ? 64 : n), f[i].p);
		}
	}

	rec->interrupted = sr->in_txn;
	rec->open_xid = sr->in_txn ? sr->xid : 0;
	sr->started = true;
	sr->in_txn = false;
	sr->after_begin = false;
	sr->have_last = false;
	sr->promised = rec->lsn;
	sr->promised_by = "header start";
	/* A new stream describes its tables again before using them. */
	for (size_t i = 0; i < sr->nbuckets; i++)
		for (struct sr_rel *r = sr->buckets[i]; r; r = r->next)
			r->defined = false;
	return true;
}

static bool
parse_begin(struct streamread *sr, struct sr_record *rec)
{
	struct field *f = sr->f;

	if (sr->in_txn)
		return fail(sr, "BEGIN inside transaction %llu", (unsigned long long) sr->xid);
	if (!nfields(sr, rec->nf, 4, "BEGIN") ||
		!get_u64(sr, &f[1], "BEGIN", "xid", UINT64_MAX, &rec->xid) ||
		!get_lsn(sr, &f[2], "BEGIN", &rec->lsn) ||
		!get_time(sr, &f[3], "BEGIN"))
		return false;
	if (sr->have_last && rec->lsn <= sr->last_commit_lsn)
	{
		char a[LSN_BUFSZ], b[LSN_BUFSZ];

		return fail(sr, "commit LSN %s of transaction %llu is not after the previous one (%s)",
					lsn_format(rec->lsn, a), (unsigned long long) rec->xid,
					lsn_format(sr->last_commit_lsn, b));
	}
	if (rec->lsn < sr->promised)
	{
		char what[64];

		snprintf(what, sizeof(what), "BEGIN of transaction %llu at", (unsigned long long) rec->xid);
		return not_below(sr, rec->lsn, what);
	}
	rec->time = f[3];
	sr->in_txn = true;
	sr->after_begin = true;
	sr->xid = rec->xid;
	sr->commit_lsn = rec->lsn;
	return true;
}

static bool
parse_commit(struct streamread *sr, struct sr_record *rec)
{
	struct field *f = sr->f;

	if (!sr->in_txn)
		return fail(sr, "COMMIT outside a transaction");
	if (!nfields(sr, rec->nf, 5, "COMMIT") ||
		!get_u64(sr, &f[1], "COMMIT", "xid", UINT64_MAX, &rec->xid) ||
		!get_lsn(sr, &f[2], "COMMIT", &rec->lsn) ||
		!get_lsn(sr, &f[3], "COMMIT", &rec->end_lsn) ||
		!get_time(sr, &f[4], "COMMIT"))
		return false;
	if (rec->xid != sr->xid)
		return fail(sr, "COMMIT of transaction %llu inside transaction %llu",
					(unsigned long long) rec->xid, (unsigned long long) sr->xid);
	if (rec->lsn != sr->commit_lsn)
		return fail(sr, "COMMIT LSN of transaction %llu differs from its BEGIN",
					(unsigned long long) rec->xid);
	if (rec->end_lsn <= rec->lsn)
		return fail(sr, "end LSN of transaction %llu is not after its commit LSN",
					(unsigned long long) rec->xid);
	rec->time = f[4];
	sr->in_txn = false;
	sr->after_begin = false;
	sr->last_commit_lsn = rec->lsn;
	sr->have_last = true;
	promise(sr, rec->end_lsn, "COMMIT end");
	return true;
}

static bool
in_txn_or_fail(struct streamread *sr, const char *rec)
{
	if (!sr->in_txn)
		return fail(sr, "%s outside a transaction", rec);
	return true;
}

static bool
parse_insert(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;

	if (!in_txn_or_fail(sr, "INSERT"))
		return false;
	if (rec->nf < 3)
		return nfields(sr, rec->nf, 3, "INSERT");
	if (!rel_lookup(sr, &f[1], "INSERT", &rec->rel) ||
		!nfields(sr, rec->nf, 3 + (size_t) rec->rel->ncols, "INSERT") ||
		!values_ok(sr, &f[3], rec->rel->ncols, false, "INSERT"))
		return false;
	rec->newv = &f[3];
	rec->copy_row = rec->nf > 3 ? f[3].p : line + len;
	rec->copy_len = (size_t) (line + len - rec->copy_row);
	return true;
}

static bool
parse_update_delete(struct streamread *sr, struct sr_record *rec, bool update)
{
	const char *name = update ? "UPDATE" : "DELETE";
	struct field *f = sr->f;
	struct sr_rel *r;
	size_t want;

	if (!in_txn_or_fail(sr, name))
		return false;
	if (rec->nf < 4)
		return nfields(sr, rec->nf, 4, name);
	if (!rel_lookup(sr, &f[1], name, &rec->rel))
		return false;
	r = rec->rel;
	if (f[3].n != 1 || f[3].p[0] == '\0' || strchr(update ? "NKO" : "KO", f[3].p[0]) == NULL)
		return fail(sr, "malformed old-row kind in %s", name);
	rec->kind = f[3].p[0];
	want = 4 + (size_t) r->ncols * (update && rec->kind != 'N' ? 2 : 1);
	if (!nfields(sr, rec->nf, want, name))
		return false;
	if (rec->kind != 'N')
	{
		rec->oldv = &f[4];
		if (!values_ok(sr, rec->oldv, r->ncols, false, update ? "UPDATE old" : "DELETE"))
			return false;
	}
	if (update)
	{
		rec->newv = &f[4 + (rec->kind == 'N' ? 0 : r->ncols)];
		if (!values_ok(sr, rec->newv, r->ncols, true, "UPDATE"))
			return false;
		/* The row is found by the new key: it must be there. */
		if (rec->kind == 'N')
			for (int i = 0; i < r->ncols; i++)
				if (r->cols[i].key && field_is_unchanged(rec->newv[i].p, rec->newv[i].n))
					return fail(sr, "unchanged-value token \\U in key column %d of UPDATE", i + 1);
	}
	return true;
}

static bool
parse_truncate(struct streamread *sr, struct sr_record *rec)
{
	struct field *f = sr->f;
	size_t n;

	if (!in_txn_or_fail(sr, "TRUNCATE"))
		return false;
	if (rec->nf < 4 || rec->nf % 2 != 0)
		return fail(sr, "TRUNCATE has %zu fields, expected an even number of at least 4", rec->nf);
	if (field_eq(&f[1], "-"))
		rec->trunc_flags = 0;
	else if (field_eq(&f[1], "cascade"))
		rec->trunc_flags = SR_TRUNC_CASCADE;
	else if (field_eq(&f[1], "restart_identity"))
		rec->trunc_flags = SR_TRUNC_RESTART;
	else if (field_eq(&f[1], "cascade,restart_identity"))
		rec->trunc_flags = SR_TRUNC_CASCADE | SR_TRUNC_RESTART;
	else
		return fail(sr, "malformed options in TRUNCATE");
	n = (rec->nf - 2) / 2;
	if (n > sr->trunccap)
	{
		sr->trunccap = n;
		sr->trunc = xrealloc(sr->trunc, n * sizeof(*sr->trunc));
	}
	for (size_t i = 0; i < n; i++)
		if (!rel_lookup(sr, &f[2 + 2 * i], "TRUNCATE", &sr->trunc[i]))
			return false;
	rec->trunc_rels = sr->trunc;
	rec->ntrunc = n;
	return true;
}

static bool
parse_message(struct streamread *sr, struct sr_record *rec)
{
	struct field *f = sr->f;

	if (!nfields(sr, rec->nf, 5, "MESSAGE"))
		return false;
	if (field_eq(&f[1], "t"))
		rec->transactional = true;
	else if (field_eq(&f[1], "n"))
		rec->transactional = false;
	else
		return fail(sr, "malformed kind in MESSAGE");
	if (rec->transactional && !sr->in_txn)
		return fail(sr, "transactional MESSAGE outside a transaction");
	if (!rec->transactional && sr->in_txn)
		return fail(sr, "non-transactional MESSAGE inside transaction %llu",
					(unsigned long long) sr->xid);
	if (!get_lsn(sr, &f[2], "MESSAGE", &rec->lsn))
		return false;
	if (!value_ok(&f[3], false) || field_is_null(f[3].p, f[3].n))
		return fail(sr, "malformed prefix in MESSAGE");
	if (f[4].n % 2 != 0)
		return fail(sr, "malformed content in MESSAGE");
	for (size_t i = 0; i < f[4].n; i++)
		if (!((f[4].p[i] >= '0' && f[4].p[i] <= '9') || (f[4].p[i] >= 'a' && f[4].p[i] <= 'f')))
			return fail(sr, "malformed content in MESSAGE");
	return true;
}

static bool
parse_position(struct streamread *sr, struct sr_record *rec, bool end)
{
	const char *name = end ? "END" : "POSITION";
	struct field *f = sr->f;

	if (sr->in_txn)
		return fail(sr, "%s inside transaction %llu", name, (unsigned long long) sr->xid);
	if (!nfields(sr, rec->nf, end ? 2 : 3, name) ||
		!get_lsn(sr, &f[1], name, &rec->lsn))
		return false;
	if (!end)
	{
		if (!get_time(sr, &f[2], name))
			return false;
		rec->time = f[2];
	}
	if (!not_below(sr, rec->lsn, name))
		return false;
	promise(sr, rec->lsn, name);
	return true;
}

static const struct {
	const char *name;
	enum sr_type type;
} names[] = {
	{REC_HEADER, SR_HEADER}, {REC_RELATION, SR_RELATION}, {REC_TYPE, SR_TYPE},
	{REC_BEGIN, SR_BEGIN}, {REC_ORIGIN, SR_ORIGIN}, {REC_COMMIT, SR_COMMIT},
	{REC_INSERT, SR_INSERT}, {REC_UPDATE, SR_UPDATE}, {REC_DELETE, SR_DELETE},
	{REC_TRUNCATE, SR_TRUNCATE}, {REC_MESSAGE, SR_MESSAGE},
	{REC_POSITION, SR_POSITION}, {REC_END, SR_END}, {REC_SNAPSHOT, SR_SNAPSHOT},
	{REC_CHUNKS, SR_CHUNKS},
};

static const char *const frame_names[] = {
	REC_COPY, REC_ROW, REC_ENDCOPY, REC_TABLEDONE, REC_SNAPSHOTDONE, REC_CHUNK, REC_CHUNKSDONE,
};

bool
sr_parse(struct streamread *sr, const char *line, size_t len, struct sr_record *rec)
{
	struct field *f = sr->f;
	bool after_begin = sr->after_begin;
	size_t i;

	memset(rec, 0, sizeof(*rec));
	sr->err[0] = '\0';
	sr->after_begin = false;
	rec->nf = rec_split(line, len, f, SR_MAX_FIELDS);
	rec->f = f;
	if (rec->nf > SR_MAX_FIELDS)
		return fail(sr, "too many fields (more than %d)", SR_MAX_FIELDS);
	if (!field_is_name(&f[0]))
		return fail(sr, "malformed record name");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (field_eq(&f[0], names[i].name))
			break;
	if (i == sizeof(names) / sizeof(names[0]))
	{
		for (size_t j = 0; j < sizeof(frame_names) / sizeof(frame_names[0]); j++)
			if (field_eq(&f[0], frame_names[j]))
				return fail(sr, "%s outside a snapshot section", frame_names[j]);
		return fail(sr, "unknown record \"%.*s\"", (int) (f[0].n > 32 ? 32 : f[0].n), f[0].p);
	}
	rec->type = names[i].type;
	if (!sr->started && rec->type != SR_HEADER)
		return fail(sr, "stream does not start with a PGCS header");

	switch (rec->type)
	{
		case SR_HEADER:
			return parse_header(sr, rec);
		case SR_RELATION:
			return parse_relation(sr, rec);
		case SR_TYPE:
		{
			uint64_t oid;

			return nfields(sr, rec->nf, 4, "TYPE") &&
				get_u64(sr, &f[1], "TYPE", "type oid", UINT32_MAX, &oid) &&
				(value_ok(&f[2], false) && value_ok(&f[3], false)
				 ? true : fail(sr, "malformed name in TYPE"));
		}
		case SR_BEGIN:
			return parse_begin(sr, rec);
		case SR_ORIGIN:
			if (!after_begin)
				return fail(sr, "ORIGIN not right after a BEGIN");
			if (!nfields(sr, rec->nf, 3, "ORIGIN") || !get_lsn(sr, &f[1], "ORIGIN", &rec->lsn))
				return false;
			if (!value_ok(&f[2], false))
				return fail(sr, "malformed origin name in ORIGIN");
			return true;
		case SR_COMMIT:
			return parse_commit(sr, rec);
		case SR_INSERT:
			return parse_insert(sr, rec, line, len);
		case SR_UPDATE:
			return parse_update_delete(sr, rec, true);
		case SR_DELETE:
			return parse_update_delete(sr, rec, false);
		case SR_TRUNCATE:
			return parse_truncate(sr, rec);
		case SR_MESSAGE:
			return parse_message(sr, rec);
		case SR_POSITION:
			return parse_position(sr, rec, false);
		case SR_END:
			return parse_position(sr, rec, true);
		case SR_SNAPSHOT:
			if (sr->in_txn)
				return fail(sr, "SNAPSHOT inside transaction %llu", (unsigned long long) sr->xid);
			if (!nfields(sr, rec->nf, 4, "SNAPSHOT") || !get_lsn(sr, &f[1], "SNAPSHOT", &rec->lsn) ||
				!not_below(sr, rec->lsn, "SNAPSHOT"))
				return false;
			promise(sr, rec->lsn, "SNAPSHOT");
			return true;
		case SR_CHUNKS:
			/* No promise: the stream goes on from the job's own position,
			 * below this one (formats/stream-v1.md). */
			if (sr->in_txn)
				return fail(sr, "CHUNKS inside transaction %llu", (unsigned long long) sr->xid);
			return nfields(sr, rec->nf, 4, "CHUNKS") && get_lsn(sr, &f[1], "CHUNKS", &rec->lsn);
	}
	return fail(sr, "unknown record");
}
