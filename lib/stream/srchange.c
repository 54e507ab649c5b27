/*
 * The stream parser's descriptions and changes: RELATION and the table of
 * relations it keeps, INSERT, UPDATE, DELETE, TRUNCATE, each checked
 * against the RELATION of its table (streamread.h).
 */
#include "srchange.h"
#include "common.h"
#include "escape.h"

#include <stdlib.h>
#include <string.h>

static void
free_cols(struct sr_rel *r)
{
	for (int i = 0; i < r->ncols; i++)
		free(r->cols[i].name);
	free(r->cols);
	r->cols = NULL;
	r->ncols = 0;
}

static void
free_rel(struct sr_key *e)
{
	struct sr_rel *r = (struct sr_rel *) e;

	free_cols(r);
	free(r->schema);
	free(r->table);
	free(r);
}

void
sr_rels_free(struct streamread *sr)
{
	sr_names_clear(&sr->rels, free_rel);
}

/* A new stream describes its tables again before using them. */
void
sr_rels_undefine(struct streamread *sr)
{
	for (size_t i = 0; i < sr->rels.nbuckets; i++)
		for (struct sr_key *e = sr->rels.buckets[i]; e; e = e->next)
			((struct sr_rel *) e)->defined = false;
}

static bool
values_ok(struct streamread *sr, const struct field *f, int n, bool allow_unchanged,
		  const char *what)
{
	for (int i = 0; i < n; i++)
		if (!sr_value_ok(&f[i], allow_unchanged))
		{
			if (field_is_unchanged(f[i].p, f[i].n))
				return sr_fail(sr, "unchanged-value token \\U in %s value %d", what, i + 1);
			return sr_fail(sr, "bad escape sequence in %s value %d", what, i + 1);
		}
	return true;
}

/* The relation a change names, which must be described in this stream. */
static bool
rel_lookup(struct streamread *sr, const struct field *f, const char *rec,
		   struct sr_rel **out)
{
	struct sr_rel *r = (struct sr_rel *) sr_names_find(&sr->rels, &f[0], &f[1], NULL);

	if (r == NULL || !r->defined)
	{
		/* Names are identifiers, not row data: safe to show (bounded). */
		return sr_fail(sr, "%s for %.*s.%.*s before its RELATION", rec,
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

bool
sr_parse_relation(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	uint64_t relid, ncols, h;
	struct sr_col *cols;
	char *schema, *table;
	struct sr_rel *r;

	if (rec->nf < 6)
		return sr_nfields(sr, rec->nf, 6, "RELATION");
	if (!sr_get_u64(sr, &f[5], "RELATION", "column count", SR_MAX_COLS, &ncols) ||
		!sr_nfields(sr, rec->nf, 6 + 4 * ncols, "RELATION") ||
		!sr_get_u64(sr, &f[3], "RELATION", "relation id", UINT32_MAX, &relid))
		return false;
	/* strchr() would also find the NUL that ends its own argument. */
	if (f[4].n != 1 || f[4].p[0] == '\0' || strchr("dfin", f[4].p[0]) == NULL)
		return sr_fail(sr, "malformed replica identity in RELATION");
	if ((schema = sr_name_dup(sr, &f[1])) == NULL)
		return sr_fail(sr, "malformed schema name in RELATION");
	if ((table = sr_name_dup(sr, &f[2])) == NULL)
	{
		free(schema);
		return sr_fail(sr, "malformed table name in RELATION");
	}
	cols = xcalloc(ncols ? ncols : 1, sizeof(*cols));
	for (uint64_t i = 0; i < ncols; i++)
	{
		const struct field *c = &f[6 + 4 * i];
		uint64_t oid;
		const char *bad = NULL;

		if ((cols[i].name = sr_name_dup(sr, &c[0])) == NULL)
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
			return sr_fail(sr, "malformed %s of column %d in RELATION", bad, (int) i + 1);
		}
		cols[i].typoid = (uint32_t) oid;
		cols[i].key = c[3].p[0] == 'k';
	}

	r = (struct sr_rel *) sr_names_find(&sr->rels, &f[1], &f[2], &h);
	if (r == NULL)
	{
		r = xcalloc(1, sizeof(*r));
		r->schema = schema;
		r->table = table;
		sr_names_add(&sr->rels, &r->k, &f[1], &f[2], h);
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

static bool
in_txn_or_fail(struct streamread *sr, const char *rec)
{
	if (!sr->in_txn)
		return sr_fail(sr, "%s outside a transaction", rec);
	return true;
}

bool
sr_parse_insert(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;

	if (!in_txn_or_fail(sr, "INSERT"))
		return false;
	if (rec->nf < 3)
		return sr_nfields(sr, rec->nf, 3, "INSERT");
	if (!rel_lookup(sr, &f[1], "INSERT", &rec->rel) ||
		!sr_nfields(sr, rec->nf, 3 + (size_t) rec->rel->ncols, "INSERT") ||
		!values_ok(sr, &f[3], rec->rel->ncols, false, "INSERT"))
		return false;
	rec->newv = &f[3];
	rec->copy_row = rec->nf > 3 ? f[3].p : line + len;
	rec->copy_len = (size_t) (line + len - rec->copy_row);
	return true;
}

/* UPDATE and DELETE: the old row's kind, then one or two rows of values. */
bool
sr_parse_update_delete(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	bool update = rec->type == SR_UPDATE;
	const char *name = update ? "UPDATE" : "DELETE";
	struct field *f = sr->f;
	struct sr_rel *r;
	size_t want;

	if (!in_txn_or_fail(sr, name))
		return false;
	if (rec->nf < 4)
		return sr_nfields(sr, rec->nf, 4, name);
	if (!rel_lookup(sr, &f[1], name, &rec->rel))
		return false;
	r = rec->rel;
	if (f[3].n != 1 || f[3].p[0] == '\0' || strchr(update ? "NKO" : "KO", f[3].p[0]) == NULL)
		return sr_fail(sr, "malformed old-row kind in %s", name);
	rec->kind = f[3].p[0];
	want = 4 + (size_t) r->ncols * (update && rec->kind != 'N' ? 2 : 1);
	if (!sr_nfields(sr, rec->nf, want, name))
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
					return sr_fail(sr, "unchanged-value token \\U in key column %d of UPDATE", i + 1);
	}
	return true;
}

bool
sr_parse_truncate(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	size_t n;

	if (!in_txn_or_fail(sr, "TRUNCATE"))
		return false;
	if (rec->nf < 4 || rec->nf % 2 != 0)
		return sr_fail(sr, "TRUNCATE has %zu fields, expected an even number of at least 4", rec->nf);
	if (field_eq(&f[1], "-"))
		rec->trunc_flags = 0;
	else if (field_eq(&f[1], "cascade"))
		rec->trunc_flags = SR_TRUNC_CASCADE;
	else if (field_eq(&f[1], "restart_identity"))
		rec->trunc_flags = SR_TRUNC_RESTART;
	else if (field_eq(&f[1], "cascade,restart_identity"))
		rec->trunc_flags = SR_TRUNC_CASCADE | SR_TRUNC_RESTART;
	else
		return sr_fail(sr, "malformed options in TRUNCATE");
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
