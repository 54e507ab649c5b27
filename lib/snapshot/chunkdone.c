/*
 * The --done file of the chunked copy: the chunks already on the target,
 * one a line in the CHUNK record's layout, read and found by table.
 */
#include "chunkplan.h"
#include "buf.h"
#include "common.h"
#include "escape.h"
#include "record.h"
#include "streamread.h"

#include <errno.h>
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

bool
chunkdone_read(const char *path, struct done_set *ds, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	struct field fields[4 + 3 * MAX_KEY_COLS + 1];
	struct buf tmp = BUF_INIT;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long lineno = 0;
	int cap_c = 0;

	memset(ds, 0, sizeof(*ds));
	if (f == NULL)
	{
		snprintf(err, errlen, "cannot open --done file \"%s\": %s", path, strerror(errno));
		return false;
	}
	while ((len = getline(&line, &cap, f)) >= 0)
	{
		struct done_chunk *c;
		int nkey;
		size_t nf;
		bool ok = true;

		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len == 0)
			continue;
		nf = rec_split(line, (size_t) len, fields, sizeof(fields) / sizeof(fields[0]) - 1);
		/* The layout and the bound rule are the CHUNK record's (streamread). */
		nkey = nf < 3 ? SR_CHUNK_LAYOUT : sr_chunk_fields(&fields[2], nf - 2, true);
		if (nkey == SR_CHUNK_LAYOUT)
		{
			snprintf(err, errlen, "--done file \"%s\" line %lu: expected schema, table, a key column count, "
					 "the key columns, the lo and the hi values", path, lineno);
			goto fail;
		}
		if (ds->n == cap_c)
		{
			cap_c = cap_c ? cap_c * 2 : 64;
			ds->c = xrealloc(ds->c, sizeof(*ds->c) * (size_t) cap_c);
		}
		c = &ds->c[ds->n++];
		memset(c, 0, sizeof(*c));
		c->nkey = nkey;
		if (nkey == SR_CHUNK_VALUES)
			ok = false;
		{
			char **names = take_values(fields, 2, &tmp, &ok);

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
			c->cols = take_values(&fields[3], (int) nkey, &tmp, &ok);
			c->lo = take_values(&fields[3 + nkey], (int) nkey, &tmp, &ok);
			c->hi = take_values(&fields[3 + 2 * nkey], (int) nkey, &tmp, &ok);
			if (c->cols == NULL)
				ok = false;
		}
		if (!ok)
		{
			snprintf(err, errlen, "--done file \"%s\" line %lu: a malformed value, a NULL name, or a bound "
					 "with some but not all values \\N", path, lineno);
			goto fail;
		}
	}
	if (ferror(f))
	{
		snprintf(err, errlen, "cannot read --done file \"%s\": %s", path, strerror(errno));
		goto fail;
	}
	/* By table: each table finds its chunks by binary search. */
	if (ds->n > 1)
		qsort(ds->c, (size_t) ds->n, sizeof(*ds->c), cmp_table);
	fclose(f);
	free(line);
	buf_free(&tmp);
	return true;
fail:
	fclose(f);
	free(line);
	buf_free(&tmp);
	chunkdone_free(ds);
	return false;
}

void
chunkdone_free(struct done_set *ds)
{
	for (int i = 0; i < ds->n; i++)
	{
		struct done_chunk *c = &ds->c[i];

		free(c->schema);
		free(c->name);
		chunkplan_values_free(c->cols, c->nkey);
		chunkplan_values_free(c->lo, c->nkey);
		chunkplan_values_free(c->hi, c->nkey);
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

