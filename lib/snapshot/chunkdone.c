/*
 * The --done file of the chunked copy: the chunks already on the target,
 * one a line in the CHUNK record's layout, read and found by table.
 */
#include "chunkdone.h"
#include "buf.h"
#include "common.h"
#include "escape.h"
#include "record.h"
#include "streamread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEY_COLS CHUNK_MAX_KEY

/* The n values decoded, or NULL when all are \N (an unbounded side). */
static char **
take_values(struct field *f, int n, struct buf *tmp, bool *ok)
{
	char **v = xcalloc((size_t) n + 1, sizeof(char *));
	int nulls = 0;

	for (int i = 0; i < n; i++)
	{
		bool is_null;

		buf_reset(tmp);
		if (!copy_unescape(f[i].p, f[i].n, tmp, &is_null))
			*ok = false;
		else if (is_null)
			nulls++;
		else
			v[i] = xstrdup(buf_cstr(tmp));
	}
	if (nulls == n)
	{
		for (int i = 0; i < n; i++)
			free(v[i]);
		free(v);
		return NULL;
	}
	return v;
}

static int
cmp_names(const char *s1, const char *n1, const char *s2, const char *n2)
{
	int c = strcmp(s1, s2);

	return c ? c : strcmp(n1, n2);
}

static int
cmp_table(const void *a, const void *b)
{
	const struct done_chunk *x = a, *y = b;

	return cmp_names(x->schema, x->name, y->schema, y->name);
}

/* What the reader of a --done file keeps between its lines. */
struct done_read {
	struct done_set *ds;
	int cap;
	const char *path;
	struct buf tmp;
};

static bool
done_line(void *ctx, struct field *fields, size_t nf, unsigned long lineno, char *err, size_t errlen)
{
	struct done_read *r = ctx;
	struct done_set *ds = r->ds;
	struct done_chunk *c;
	bool ok = true;
	int nkey;

	/* The layout and the bound rule are the CHUNK record's (streamread). */
	nkey = nf < 3 ? SR_CHUNK_LAYOUT : sr_chunk_fields(&fields[2], nf - 2, true);
	if (nkey == SR_CHUNK_LAYOUT)
	{
		snprintf(err, errlen, "--done file \"%s\" line %lu: expected schema, table, a key column count, "
				 "the key columns, the lo and the hi values", r->path, lineno);
		return false;
	}
	if (ds->n == r->cap)
	{
		r->cap = r->cap ? r->cap * 2 : 64;
		ds->c = xrealloc(ds->c, sizeof(*ds->c) * (size_t) r->cap);
	}
	c = &ds->c[ds->n++];
	memset(c, 0, sizeof(*c));
	c->nkey = nkey;
	if (nkey == SR_CHUNK_VALUES)
		ok = false;
	{
		char **names = take_values(fields, 2, &r->tmp, &ok);

		if (names == NULL || names[0] == NULL || names[1] == NULL)
			ok = false;
		else
		{
			c->schema = names[0];
			c->name = names[1];
		}
		free(names);
	}
	if (ok && nkey > 0)
	{
		c->cols = take_values(&fields[3], (int) nkey, &r->tmp, &ok);
		c->lo = take_values(&fields[3 + nkey], (int) nkey, &r->tmp, &ok);
		c->hi = take_values(&fields[3 + 2 * nkey], (int) nkey, &r->tmp, &ok);
		if (c->cols == NULL)
			ok = false;
	}
	if (!ok)
	{
		snprintf(err, errlen, "--done file \"%s\" line %lu: a malformed value, a NULL name, or a bound "
				 "with some but not all values \\N", r->path, lineno);
		return false;
	}
	return true;
}

bool
chunkdone_read(const char *path, struct done_set *ds, char *err, size_t errlen)
{
	struct done_read r = {.ds = ds, .path = path, .tmp = BUF_INIT};
	struct field fields[4 + 3 * MAX_KEY_COLS + 1];
	bool ok;

	memset(ds, 0, sizeof(*ds));
	ok = rec_file_read(path, "--done", fields, sizeof(fields) / sizeof(fields[0]) - 1, done_line, &r, err,
					   errlen);
	buf_free(&r.tmp);
	if (!ok)
	{
		chunkdone_free(ds);
		return false;
	}
	/* By table: each table finds its chunks by binary search. */
	if (ds->n > 1)
		qsort(ds->c, (size_t) ds->n, sizeof(*ds->c), cmp_table);
	return true;
}

void
chunkdone_free(struct done_set *ds)
{
	for (int i = 0; i < ds->n; i++)
	{
		struct done_chunk *c = &ds->c[i];

		free(c->schema);
		free(c->name);
		chunk_values_free(c->cols, c->nkey);
		chunk_values_free(c->lo, c->nkey);
		chunk_values_free(c->hi, c->nkey);
	}
	free(ds->c);
	memset(ds, 0, sizeof(*ds));
}

int
chunkdone_find(const struct done_set *ds, const char *schema, const char *name, int *n)
{
	int lo = 0, hi = ds ? ds->n : 0, first;

	/* The first chunk of the table, then its run. */
	while (lo < hi)
	{
		int mid = lo + (hi - lo) / 2;

		if (cmp_names(ds->c[mid].schema, ds->c[mid].name, schema, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	first = lo;
	while (ds && lo < ds->n && cmp_names(ds->c[lo].schema, ds->c[lo].name, schema, name) == 0)
		lo++;
	*n = lo - first;
	return first;
}

bool
chunkdone_whole(const struct done_set *ds, const char *schema, const char *name)
{
	int n, first = chunkdone_find(ds, schema, name, &n);

	for (int i = first; i < first + n; i++)
		if (ds->c[i].nkey == 0)
			return true;
	return false;
}

void
chunk_values_free(char **v, int n)
{
	if (v == NULL)
		return;
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
