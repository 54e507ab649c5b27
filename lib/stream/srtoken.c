/*
 * The stream parser's shared pieces: the one-line error, the field checks
 * every record uses, the name tables and the position rule (srtoken.h).
 */
#include "srtoken.h"
#include "common.h"
#include "escape.h"
#include "hash.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
sr_fail(struct streamread *sr, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sr->err, sizeof(sr->err), fmt, ap);
	va_end(ap);
	return false;
}

/* --- field checks ------------------------------------------------------ */

/* Unescape a non-NULL value (a name) into a malloc'd string. */
char *
sr_name_dup(struct streamread *sr, const struct field *f)
{
	bool isnull;

	buf_reset(&sr->tmp);
	if (!copy_unescape(f->p, f->n, &sr->tmp, &isnull) || isnull ||
		memchr(sr->tmp.data ? sr->tmp.data : "", '\0', sr->tmp.len) != NULL)
		return NULL;
	return xstrdup(buf_cstr(&sr->tmp));
}

bool
sr_get_lsn(struct streamread *sr, const struct field *f, const char *rec, lsn_t *out)
{
	if (!field_lsn(f, out))
		return sr_fail(sr, "malformed LSN in %s", rec);
	return true;
}

bool
sr_get_u64(struct streamread *sr, const struct field *f, const char *rec,
		const char *what, uint64_t max, uint64_t *out)
{
	if (!field_u64(f, out) || *out > max)
		return sr_fail(sr, "malformed %s in %s", what, rec);
	return true;
}

bool
sr_nfields(struct streamread *sr, size_t nf, size_t want, const char *rec)
{
	if (nf != want)
		return sr_fail(sr, "%s has %zu fields, expected %zu", rec, nf, want);
	return true;
}

/* --- name tables -------------------------------------------------------- */

/* Schema and table fields are adjacent: the key is the raw span of both. */
struct sr_key *
sr_names_find(const struct sr_names *t, const struct field *schema, const struct field *table,
			  uint64_t *hash_out)
{
	const char *p = schema->p;
	size_t n = (size_t) (table->p + table->n - schema->p);
	uint64_t h = hash_bytes(HASH_INIT, p, n);

	if (hash_out)
		*hash_out = h;
	if (t->nbuckets == 0)
		return NULL;
	for (struct sr_key *e = t->buckets[h % t->nbuckets]; e; e = e->next)
		if (e->hash == h && e->n == n && memcmp(e->p, p, n) == 0)
			return e;
	return NULL;
}

static void
names_grow(struct sr_names *t)
{
	size_t nb = t->nbuckets ? t->nbuckets * 2 : 64;
	struct sr_key **b = xcalloc(nb, sizeof(*b));

	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct sr_key *e = t->buckets[i], *next; e; e = next)
		{
			next = e->next;
			e->next = b[e->hash % nb];
			b[e->hash % nb] = e;
		}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

void
sr_names_add(struct sr_names *t, struct sr_key *e, const struct field *schema,
			 const struct field *table, uint64_t hash)
{
	size_t n = (size_t) (table->p + table->n - schema->p);

	e->p = xmalloc(n + 1);
	memcpy(e->p, schema->p, n);
	e->p[n] = '\0';
	e->n = n;
	e->hash = hash;
	if (t->n + 1 > t->nbuckets)
		names_grow(t);
	e->next = t->buckets[hash % t->nbuckets];
	t->buckets[hash % t->nbuckets] = e;
	t->n++;
}

void
sr_names_clear(struct sr_names *t, void (*fn)(struct sr_key *e))
{
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct sr_key *e = t->buckets[i], *next; e; e = next)
		{
			next = e->next;
			free(e->p);
			fn(e);
		}
	free(t->buckets);
	memset(t, 0, sizeof(*t));
}

/* --- positions ---------------------------------------------------------- */

/*
 * Positions only grow within a stream. A record below what the stream
 * already promised would be read as "already applied" by a consumer that
 * recorded the promise, and silently skipped: it is a malformed stream.
 */
bool
sr_not_below(struct streamread *sr, lsn_t lsn, const char *what)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ];

	if (lsn >= sr->promised)
		return true;
	return sr_fail(sr, "%s %s is below position %s, which the stream's %s already reached: "
				"positions never go back within a stream",
				what, lsn_format(lsn, a), lsn_format(sr->promised, b), sr->promised_by);
}

void
sr_promise(struct streamread *sr, lsn_t lsn, const char *by)
{
	if (lsn > sr->promised || sr->promised_by == NULL)
	{
		sr->promised = lsn;
		sr->promised_by = by;
	}
}
