#include "coalesce.h"
#include "common.h"
#include "escape.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

/*
 * An entry in the arena: this header, ncols uint32 lengths, then the field
 * bytes, padded to 8. A merge appends a new version of the row and marks the
 * old one dead, so entries never move and nothing is freed until reset.
 */
struct entry {
	void *rel;
	struct apply_txn txn;
	uint64_t hash;
	uint32_t size;				/* whole entry, padded */
	int32_t ncols;
	uint32_t live;
	uint32_t pad;
};

struct coalesce {
	char *arena;
	size_t cap, len;
	uint32_t *slots;			/* entry offset + 1; 0: empty */
	size_t nslots;				/* a power of two, at least twice max_rows */
	size_t rows, max_rows;
	struct field *scratch;		/* coalesce_next's fields */
	size_t scratch_cap;
};

#define ALIGN8(n) (((n) + 7) & ~(size_t) 7)

static inline uint32_t *
lens_of(struct entry *e)
{
	return (uint32_t *) (e + 1);
}

static inline char *
bytes_of(struct entry *e)
{
	return (char *) (lens_of(e) + e->ncols);
}

static uint64_t
key_hash(const void *rel, int ncols, const bool *key, const struct field *vals)
{
	uint64_t h = HASH_INIT ^ (uint64_t) (uintptr_t) rel;

	for (int i = 0; i < ncols; i++)
		if (key[i])
			h = hash_value_end(hash_bytes(h, vals[i].p, vals[i].n));
	/* The slot is taken from the low bits: fold the high ones in. */
	return h ^ (h >> 29);
}

static bool
key_equal(struct entry *e, const void *rel, int ncols, const bool *key, const struct field *vals)
{
	const uint32_t *len = lens_of(e);
	const char *p = bytes_of(e);

	if (e->rel != rel || e->ncols != ncols)
		return false;
	for (int i = 0; i < ncols; p += len[i], i++)
		if (key[i] && (len[i] != vals[i].n || memcmp(p, vals[i].p, vals[i].n) != 0))
			return false;
	return true;
}

struct coalesce *
coalesce_new(size_t arena_bytes, size_t max_rows)
{
	struct coalesce *c = xcalloc(1, sizeof(*c));

	c->cap = arena_bytes;
	c->max_rows = max_rows;
	c->nslots = 16;
	while (c->nslots < 2 * max_rows)
		c->nslots *= 2;
	return c;
}

void
coalesce_free(struct coalesce *c)
{
	if (c == NULL)
		return;
	free(c->arena);
	free(c->slots);
	free(c->scratch);
	free(c);
}

size_t
coalesce_rows(const struct coalesce *c)
{
	return c->rows;
}

/* The slot holding the row for this key, or the empty slot where it goes. */
static size_t
find(const struct coalesce *c, uint64_t h, const void *rel, int ncols, const bool *key,
	 const struct field *vals)
{
	size_t mask = c->nslots - 1, i = (size_t) h & mask;

	for (;; i = (i + 1) & mask)
	{
		struct entry *e;

		if (c->slots[i] == 0)
			return i;
		e = (struct entry *) (c->arena + c->slots[i] - 1);
		if (e->hash == h && key_equal(e, rel, ncols, key, vals))
			return i;
	}
}

bool
coalesce_has(const struct coalesce *c, const void *rel, int ncols, const bool *key,
			 const struct field *vals)
{
	if (c->rows == 0)
		return false;
	return c->slots[find(c, key_hash(rel, ncols, key, vals), rel, ncols, key, vals)] != 0;
}

bool
coalesce_put(struct coalesce *c, void *rel, int ncols, const bool *key,
			 const struct field *vals, struct apply_txn txn)
{
	uint64_t h = key_hash(rel, ncols, key, vals);
	struct entry *old = NULL, *e;
	const uint32_t *olen = NULL;
	const char *op = NULL;
	size_t slot, size = sizeof(struct entry) + sizeof(uint32_t) * (size_t) ncols;
	char *p;

	if (c->arena == NULL)
	{
		c->arena = xmalloc(c->cap);
		c->slots = xcalloc(c->nslots, sizeof(*c->slots));
	}
	slot = find(c, h, rel, ncols, key, vals);
	if (c->slots[slot] != 0)
	{
		old = (struct entry *) (c->arena + c->slots[slot] - 1);
		olen = lens_of(old);
		op = bytes_of(old);
	}
	else if (c->rows >= c->max_rows)
		return false;

	/* Size of the merged row: an unchanged TOAST value keeps what was held. */
	for (int i = 0; i < ncols; i++)
		size += old && field_is_unchanged(vals[i].p, vals[i].n) ? olen[i] : vals[i].n;
	size = ALIGN8(size);
	if (size > c->cap - c->len || c->len + size >= UINT32_MAX)
		return false;

	e = (struct entry *) (c->arena + c->len);
	e->rel = rel;
	e->txn = txn;
	e->hash = h;
	e->size = (uint32_t) size;
	e->ncols = ncols;
	e->live = 1;
	e->pad = 0;
	p = bytes_of(e);
	for (int i = 0; i < ncols; i++)
	{
		size_t olen_i = old ? olen[i] : 0;

		if (old && field_is_unchanged(vals[i].p, vals[i].n))
		{
			memcpy(p, op, olen_i);
			lens_of(e)[i] = (uint32_t) olen_i;
			p += olen_i;
		}
		else
		{
			memcpy(p, vals[i].p, vals[i].n);
			lens_of(e)[i] = (uint32_t) vals[i].n;
			p += vals[i].n;
		}
		op += olen_i;
	}
	if (old)
		old->live = 0;
	else
		c->rows++;
	c->slots[slot] = (uint32_t) c->len + 1;
	c->len += size;
	return true;
}

bool
coalesce_next(struct coalesce *c, size_t *cursor, struct co_row *row)
{
	while (*cursor < c->len)
	{
		struct entry *e = (struct entry *) (c->arena + *cursor);
		const uint32_t *len = lens_of(e);
		const char *p = bytes_of(e);

		*cursor += e->size;
		if (!e->live)
			continue;
		if ((size_t) e->ncols > c->scratch_cap)
		{
			c->scratch_cap = (size_t) e->ncols < 64 ? 64 : (size_t) e->ncols;
			c->scratch = xrealloc(c->scratch, sizeof(*c->scratch) * c->scratch_cap);
		}
		for (int i = 0; i < e->ncols; p += len[i], i++)
		{
			c->scratch[i].p = p;
			c->scratch[i].n = len[i];
		}
		row->rel = e->rel;
		row->txn = e->txn;
		row->ncols = e->ncols;
		row->vals = c->scratch;
		return true;
	}
	return false;
}

void
coalesce_reset(struct coalesce *c)
{
	if (c->rows > 0)
		memset(c->slots, 0, c->nslots * sizeof(*c->slots));
	c->rows = 0;
	c->len = 0;
}
