#include "replay.h"
#include "buf.h"
#include "common.h"
#include "streamread.h"

#include <stdlib.h>
#include <string.h>

/* A table's RELATION line as of the start of the window. */
struct rel_def {
	char *key;					/* "schema TAB table", raw */
	size_t keylen;
	char *line;
	size_t len;
};

struct replay {
	size_t limit;
	struct buf text;			/* the window's lines, each LF-terminated */
	size_t bytes;				/* ... and their size, kept or not */
	bool overflowed;
	struct buf last;			/* the last line recorded, when overflowed */
	size_t last_off;			/* where it starts in text otherwise */
	struct buf rels;			/* the window's RELATION lines, kept even when overflowed */
	size_t rels_last;			/* where the last line starts in rels, if a RELATION */
	bool last_rel;

	struct rel_def *defs;		/* every table defined before the window */
	size_t ndefs, capdefs;

	struct buf pend, spare;		/* lines to apply again; the previous ones */
	size_t pos;
};

/* The "schema TAB table" of a RELATION line (its second and third fields). */
static bool
rel_key(const char *line, size_t len, const char **key, size_t *keylen)
{
	const char *p, *end = line + len;
	const char *t1, *t2;

	if (!sr_line_is(line, len, SR_RELATION))
		return false;
	p = line + sizeof(REC_RELATION);	/* the name and its TAB */
	if ((t1 = memchr(p, '\t', (size_t) (end - p))) == NULL)
		return false;
	t2 = memchr(t1 + 1, '\t', (size_t) (end - t1 - 1));
	*key = p;
	*keylen = (size_t) ((t2 ? t2 : end) - p);
	return true;
}

static struct rel_def *
def_find(struct replay *r, const char *key, size_t keylen)
{
	for (size_t i = 0; i < r->ndefs; i++)
		if (r->defs[i].keylen == keylen && memcmp(r->defs[i].key, key, keylen) == 0)
			return &r->defs[i];
	return NULL;
}

static void
def_set(struct replay *r, const char *line, size_t len)
{
	const char *key;
	size_t keylen;
	struct rel_def *d;

	if (!rel_key(line, len, &key, &keylen))
		return;
	if ((d = def_find(r, key, keylen)) == NULL)
	{
		if (r->ndefs == r->capdefs)
		{
			r->capdefs = r->capdefs ? 2 * r->capdefs : 16;
			r->defs = xrealloc(r->defs, r->capdefs * sizeof(*r->defs));
		}
		d = &r->defs[r->ndefs++];
		d->key = xmalloc(keylen);
		memcpy(d->key, key, keylen);
		d->keylen = keylen;
		d->line = NULL;
	}
	free(d->line);
	d->line = xmalloc(len);
	memcpy(d->line, line, len);
	d->len = len;
}

struct replay *
replay_new(size_t limit)
{
	struct replay *r = xcalloc(1, sizeof(*r));

	r->limit = limit;
	return r;
}

void
replay_forget_relations(struct replay *r)
{
	for (size_t i = 0; i < r->ndefs; i++)
	{
		free(r->defs[i].key);
		free(r->defs[i].line);
	}
	r->ndefs = 0;
	buf_reset(&r->rels);
}

void
replay_free(struct replay *r)
{
	if (r == NULL)
		return;
	replay_forget_relations(r);
	free(r->defs);
	buf_free(&r->text);
	buf_free(&r->rels);
	buf_free(&r->last);
	buf_free(&r->pend);
	buf_free(&r->spare);
	free(r);
}

void
replay_record(struct replay *r, const char *line, size_t len)
{
	r->last_rel = sr_line_is(line, len, SR_RELATION);
	if (r->last_rel)
	{
		r->rels_last = r->rels.len;
		buf_append(&r->rels, line, len);
		buf_putc(&r->rels, '\n');
	}
	r->bytes += len + 1;
	if (!r->overflowed && r->bytes > r->limit)
	{
		/* Give the memory back at once: the window cannot be replayed. */
		buf_free(&r->text);
		r->overflowed = true;
	}
	if (r->overflowed)
	{
		buf_reset(&r->last);
		buf_append(&r->last, line, len);
		buf_putc(&r->last, '\n');
		return;
	}
	r->last_off = r->text.len;
	buf_append(&r->text, line, len);
	buf_putc(&r->text, '\n');
}

void
replay_reset(struct replay *r, bool keep_last)
{
	size_t upto = keep_last && r->last_rel ? r->rels_last : r->rels.len;

	/* The window's definitions are the next window's starting ones. */
	for (size_t o = 0; o < upto;)
	{
		const char *nl = memchr(r->rels.data + o, '\n', r->rels.len - o);

		def_set(r, r->rels.data + o, (size_t) (nl - (r->rels.data + o)));
		o = (size_t) (nl - r->rels.data) + 1;
	}
	if (keep_last && r->bytes > 0)
	{
		/* The line being applied belongs to the next window. */
		if (r->overflowed)
		{
			buf_reset(&r->text);
			buf_append(&r->text, r->last.data, r->last.len);
		}
		else
		{
			memmove(r->text.data, r->text.data + r->last_off, r->text.len - r->last_off);
			r->text.len -= r->last_off;
		}
		r->last_off = 0;
		r->bytes = r->text.len;
		if (r->rels.len > upto)
			memmove(r->rels.data, r->rels.data + upto, r->rels.len - upto);
		r->rels.len -= upto;
		r->rels_last = 0;
	}
	else
	{
		buf_reset(&r->rels);
		buf_reset(&r->text);
		r->bytes = 0;
	}
	r->overflowed = false;
}

size_t
replay_bytes(const struct replay *r)
{
	return r->bytes;
}

bool
replay_overflowed(const struct replay *r)
{
	return r->overflowed;
}

/* Was the table of this RELATION line already redefined earlier in rels[0, upto)? */
static bool
seen_before(const struct buf *rels, size_t upto, const char *key, size_t keylen)
{
	for (size_t o = 0; o < upto;)
	{
		const char *line = rels->data + o, *nl = memchr(line, '\n', rels->len - o);
		const char *k;
		size_t kl;

		if (rel_key(line, (size_t) (nl - line), &k, &kl) && kl == keylen && memcmp(k, key, kl) == 0)
			return true;
		o = (size_t) (nl - rels->data) + 1;
	}
	return false;
}

void
replay_start(struct replay *r)
{
	struct buf old = r->pend;

	/* The line being applied when the session was lost may point into
	 * pend: it becomes spare, overwritten only at the next replay_start(). */
	r->pend = r->spare;
	r->spare = old;
	buf_reset(&r->pend);
	for (size_t o = 0; o < r->rels.len;)
	{
		const char *line = r->rels.data + o, *nl = memchr(line, '\n', r->rels.len - o);
		const char *key;
		size_t keylen;
		struct rel_def *d;

		if (rel_key(line, (size_t) (nl - line), &key, &keylen) &&
			(d = def_find(r, key, keylen)) != NULL && !seen_before(&r->rels, o, key, keylen))
		{
			buf_append(&r->pend, d->line, d->len);
			buf_putc(&r->pend, '\n');
		}
		o = (size_t) (nl - r->rels.data) + 1;
	}
	if (r->text.len > 0)
		buf_append(&r->pend, r->text.data, r->text.len);
	if (r->pos < r->spare.len)
		buf_append(&r->pend, r->spare.data + r->pos, r->spare.len - r->pos);
	r->pos = 0;
	buf_reset(&r->rels);
	buf_reset(&r->text);
	r->bytes = 0;
}

bool
replay_next(struct replay *r, const char **line, size_t *len)
{
	const char *p, *nl;

	if (r->pos >= r->pend.len)
		return false;
	p = r->pend.data + r->pos;
	nl = memchr(p, '\n', r->pend.len - r->pos);
	*line = p;
	*len = (size_t) (nl - p);
	r->pos += *len + 1;
	return true;
}
