/*
 * Checks of a stream field that need no parser state (srrecord.h): a COPY
 * text value, and the layout of a CHUNK record's key fields, which the
 * --done file repeats.
 */
#include "srrecord.h"
#include "escape.h"

#include <string.h>

/* A value field: COPY text. \U only where the caller allows it. */
bool
sr_value_ok(const struct field *f, bool allow_unchanged)
{
	/* Fast path: most values hold no backslash and no CR. */
	if (memchr(f->p, '\\', f->n) == NULL)
		return memchr(f->p, '\r', f->n) == NULL;
	if (field_is_unchanged(f->p, f->n))
		return allow_unchanged;
	return copy_field_valid(f->p, f->n);
}

/* Key columns are names; each bound is all \N (unbounded) or no \N. */
static bool
chunk_values_ok(const struct field *f, int n, bool bound)
{
	int nulls = 0;

	for (int i = 0; i < n; i++)
	{
		if (!sr_value_ok(&f[i], false))
			return false;
		nulls += field_is_null(f[i].p, f[i].n);
	}
	return bound ? nulls == 0 || nulls == n : nulls == 0;
}

int
sr_chunk_fields(const struct field *f, size_t nf, bool whole_ok)
{
	uint64_t n;

	if (nf < 1 || !field_u64(&f[0], &n) || n > CHUNK_MAX_KEY || (n == 0 && !whole_ok) || nf != 1 + 3 * n)
		return SR_CHUNK_LAYOUT;
	if (!chunk_values_ok(&f[1], (int) n, false) || !chunk_values_ok(&f[1 + n], (int) n, true) ||
		!chunk_values_ok(&f[1 + 2 * n], (int) n, true))
		return SR_CHUNK_VALUES;
	return (int) n;
}
