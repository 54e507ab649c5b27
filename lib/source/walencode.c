#include "walencode.h"
#include "common.h"
#include "escape.h"
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A described object (relation or type): its record line, ready to write,
 * and the header generation in which it was last written. Relations also
 * keep the escaped "TAB schema TAB table" that every change record repeats,
 * so a row costs one memcpy for its table name.
 */
struct desc {
	uint32_t oid;				/* 0: free slot (no object has OID 0) */
	uint64_t gen;				/* written after header number gen */
	struct buf line;			/* the RELATION or TYPE record, LF included */
	struct buf name;			/* relations: TAB schema TAB table */
	uint16_t ncols;
	uint32_t *typoids;			/* relations: column types, for TYPE records */
};

/* Open addressing on the OID; grows at half full, never shrinks. */
struct map {
	struct desc *slots;
	size_t cap;
	size_t used;
};

struct walenc {
	struct map rels, types;
	uint64_t gen;				/* headers written so far */
	struct buf scratch;			/* a description being built, TRUNCATE names */
};

static struct desc *
map_find(struct map *m, uint32_t oid)
{
	/* OID 0 marks free slots, so it never names a described object. */
	if (m->cap == 0 || oid == 0)
		return NULL;
	for (size_t i = (oid * 2654435761u) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
	{
		if (m->slots[i].oid == oid)
			return &m->slots[i];
		if (m->slots[i].oid == 0)
			return NULL;
	}
}

static struct desc *
map_insert(struct map *m, uint32_t oid)
{
	struct desc *d = map_find(m, oid);

	if (d)
		return d;
	if ((m->used + 1) * 2 > m->cap)
	{
		struct map bigger = {xcalloc(m->cap ? m->cap * 2 : 64, sizeof(struct desc)),
			m->cap ? m->cap * 2 : 64, 0};

		for (size_t i = 0; i < m->cap; i++)
			if (m->slots[i].oid != 0)
			{
				size_t j = (m->slots[i].oid * 2654435761u) & (bigger.cap - 1);

				while (bigger.slots[j].oid != 0)
					j = (j + 1) & (bigger.cap - 1);
				bigger.slots[j] = m->slots[i];
				bigger.used++;
			}
		free(m->slots);
		*m = bigger;
	}
	for (size_t i = (oid * 2654435761u) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].oid == 0)
		{
			d = &m->slots[i];
			memset(d, 0, sizeof(*d));
			d->oid = oid;
			m->used++;
			return d;
		}
}

static void
map_free(struct map *m)
{
	for (size_t i = 0; i < m->cap; i++)
	{
		buf_free(&m->slots[i].line);
		buf_free(&m->slots[i].name);
		free(m->slots[i].typoids);
	}
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

struct walenc *
walenc_new(void)
{
	struct walenc *e = xcalloc(1, sizeof(*e));

	e->gen = 1;
	return e;
}

void
walenc_free(struct walenc *e)
{
	if (e == NULL)
		return;
	map_free(&e->rels);
	map_free(&e->types);
	buf_free(&e->scratch);
	free(e);
}

void
walenc_header(struct walenc *e, struct buf *b, const char *sysid,
			  uint32_t timeline, const char *slot, lsn_t start,
			  int server_version_num, const char *history)
{
	e->gen++;
	rec_header(b, sysid, timeline, slot, start, "pg-walcat/" PGSYNC_VERSION,
			   server_version_num, history);
}

/* The server writes pg_catalog as an empty namespace to save space. */
static void
put_nsp(struct buf *b, const struct pgo_str *nsp)
{
	if (nsp->len == 0)
		rec_valuez(b, "pg_catalog");
	else
		rec_value(b, nsp->p, nsp->len);
}

void
walenc_relation(struct walenc *e, const struct pgo_msg *m)
{
	struct buf *line = &e->scratch;
	struct desc *d;
	char ident[2] = {m->u.rel.replident, '\0'};

	if (m->u.rel.relid == 0)
		return;					/* no relation has it; changes for it fail */
	buf_reset(line);
	rec_start(line, REC_RELATION);
	put_nsp(line, &m->u.rel.nspname);
	rec_value(line, m->u.rel.relname.p, m->u.rel.relname.len);
	rec_u64(line, m->u.rel.relid);
	rec_rawz(line, ident);
	rec_u64(line, m->u.rel.natts);
	for (uint16_t i = 0; i < m->u.rel.natts; i++)
	{
		const struct pgo_attr *a = &m->attrs[i];

		rec_value(line, a->name.p, a->name.len);
		rec_u64(line, a->typoid);
		rec_i64(line, a->typmod);
		rec_rawz(line, (a->flags & PGO_ATTR_KEY) ? "k" : "-");
	}
	rec_finish(line);

	d = map_insert(&e->rels, m->u.rel.relid);
	/* The same description again (after a reconnect, an invalidation that
	 * changed nothing) is not news: keep what was written. */
	if (d->line.len == line->len && memcmp(d->line.data, line->data, line->len) == 0)
		return;
	buf_reset(&d->line);
	buf_append(&d->line, line->data, line->len);
	buf_reset(&d->name);
	put_nsp(&d->name, &m->u.rel.nspname);
	rec_value(&d->name, m->u.rel.relname.p, m->u.rel.relname.len);
	d->ncols = m->u.rel.natts;
	free(d->typoids);
	d->typoids = xcalloc(d->ncols ? d->ncols : 1, sizeof(uint32_t));
	for (uint16_t i = 0; i < d->ncols; i++)
		d->typoids[i] = m->attrs[i].typoid;
	d->gen = 0;
}

void
walenc_type(struct walenc *e, const struct pgo_msg *m)
{
	struct buf *line = &e->scratch;
	struct desc *d;

	if (m->u.typ.typoid == 0)
		return;
	buf_reset(line);
	rec_start(line, REC_TYPE);
	rec_u64(line, m->u.typ.typoid);
	put_nsp(line, &m->u.typ.nspname);
	rec_value(line, m->u.typ.typname.p, m->u.typ.typname.len);
	rec_finish(line);
	d = map_insert(&e->types, m->u.typ.typoid);
	if (d->line.len == line->len && memcmp(d->line.data, line->data, line->len) == 0)
		return;
	buf_reset(&d->line);
	buf_append(&d->line, line->data, line->len);
	d->gen = 0;
}

/* The relation for a change, with its RELATION (and TYPE) records written
 * first when this stream has not seen them since the header or a change. */
static struct desc *
use_relation(struct walenc *e, struct buf *b, uint32_t relid, char *err, size_t errlen)
{
	struct desc *d = map_find(&e->rels, relid);

	if (d == NULL)
	{
		snprintf(err, errlen, "change for relation %u before its description", relid);
		return NULL;
	}
	if (d->gen == e->gen)
		return d;
	for (uint16_t i = 0; i < d->ncols; i++)
	{
		struct desc *t = map_find(&e->types, d->typoids[i]);

		if (t && t->gen != e->gen)
		{
			buf_append(b, t->line.data, t->line.len);
			t->gen = e->gen;
		}
	}
	buf_append(b, d->line.data, d->line.len);
	d->gen = e->gen;
	return d;
}

static bool
put_tuple(struct buf *b, const struct desc *d, const struct pgo_tuple *t,
		  bool unchanged_ok, const char *what, char *err, size_t errlen)
{
	if (t->ncols != d->ncols)
	{
		snprintf(err, errlen, "%s has %u columns, its relation %u has %u",
				 what, t->ncols, d->oid, d->ncols);
		return false;
	}
	for (uint16_t i = 0; i < t->ncols; i++)
	{
		const struct pgo_col *c = &t->cols[i];

		switch (c->kind)
		{
			case PGO_TEXT:
				rec_value(b, c->p, c->len);
				break;
			case PGO_NULL:
				rec_null(b);
				break;
			case PGO_UNCHANGED:
				if (!unchanged_ok)
				{
					snprintf(err, errlen, "%s of relation %u has an unchanged TOASTed value in column %u",
							 what, d->oid, i + 1);
					return false;
				}
				rec_unchanged(b);
				break;
			default:
				snprintf(err, errlen, "%s of relation %u has a binary value in column %u (binary mode is not supported)",
						 what, d->oid, i + 1);
				return false;
		}
	}
	return true;
}

static bool
truncate_records(struct walenc *e, struct buf *b, const struct pgo_msg *m,
				 char *err, size_t errlen)
{
	struct buf *names = &e->scratch;
	uint8_t f = m->u.truncate.flags;

	buf_reset(names);
	for (uint32_t i = 0; i < m->u.truncate.nrelids; i++)
	{
		struct desc *d = use_relation(e, b, pgo_truncate_relid(m, i), err, errlen);

		if (d == NULL)
			return false;
		buf_append(names, d->name.data, d->name.len);
	}
	rec_start(b, REC_TRUNCATE);
	if ((f & PGO_TRUNCATE_CASCADE) && (f & PGO_TRUNCATE_RESTART_SEQS))
		rec_rawz(b, "cascade,restart_identity");
	else if (f & PGO_TRUNCATE_CASCADE)
		rec_rawz(b, "cascade");
	else if (f & PGO_TRUNCATE_RESTART_SEQS)
		rec_rawz(b, "restart_identity");
	else
		rec_rawz(b, "-");
	buf_append(b, names->data, names->len);
	rec_finish(b);
	return true;
}

bool
walenc_change(struct walenc *e, struct buf *b, const struct pgo_msg *m,
			  char *err, size_t errlen)
{
	struct desc *d;
	size_t mark;
	bool ok = true;

	if (m->type == PGO_TRUNCATE)
		return truncate_records(e, b, m, err, errlen);
	d = use_relation(e, b, m->u.change.relid, err, errlen);
	if (d == NULL)
		return false;
	mark = b->len;
	switch (m->type)
	{
		case PGO_INSERT:
			rec_start(b, REC_INSERT);
			buf_append(b, d->name.data, d->name.len);
			ok = put_tuple(b, d, &m->newtup, false, "insert", err, errlen);
			break;
		case PGO_UPDATE:
			rec_start(b, REC_UPDATE);
			buf_append(b, d->name.data, d->name.len);
			if (m->u.change.old_kind == 0)
				rec_rawz(b, "N");
			else
			{
				rec_rawz(b, m->u.change.old_kind == 'O' ? "O" : "K");
				ok = put_tuple(b, d, &m->oldtup, false, "old row of update", err, errlen);
			}
			ok = ok && put_tuple(b, d, &m->newtup, true, "update", err, errlen);
			break;
		case PGO_DELETE:
			rec_start(b, REC_DELETE);
			buf_append(b, d->name.data, d->name.len);
			rec_rawz(b, m->u.change.old_kind == 'O' ? "O" : "K");
			ok = put_tuple(b, d, &m->oldtup, false, "delete", err, errlen);
			break;
		default:
			snprintf(err, errlen, "%s message is not a change", pgo_type_name(m->type));
			ok = false;
	}
	if (!ok)
	{
		b->len = mark;
		return false;
	}
	rec_finish(b);
	return true;
}

void
walenc_begin(struct buf *b, uint32_t xid, lsn_t commit_lsn, int64_t commit_time)
{
	rec_start(b, REC_BEGIN);
	rec_u64(b, xid);
	rec_lsn(b, commit_lsn);
	rec_pgtime(b, commit_time);
	rec_finish(b);
}

void
walenc_commit(struct buf *b, uint32_t xid, lsn_t commit_lsn, lsn_t end_lsn,
			  int64_t commit_time)
{
	rec_start(b, REC_COMMIT);
	rec_u64(b, xid);
	rec_lsn(b, commit_lsn);
	rec_lsn(b, end_lsn);
	rec_pgtime(b, commit_time);
	rec_finish(b);
}

void
walenc_origin(struct buf *b, const struct pgo_msg *m)
{
	rec_start(b, REC_ORIGIN);
	rec_lsn(b, m->u.origin.lsn);
	rec_value(b, m->u.origin.name.p, m->u.origin.name.len);
	rec_finish(b);
}

void
walenc_message(struct buf *b, const struct pgo_msg *m)
{
	rec_start(b, REC_MESSAGE);
	rec_rawz(b, (m->u.message.flags & PGO_MESSAGE_TRANSACTIONAL) ? "t" : "n");
	rec_lsn(b, m->u.message.lsn);
	rec_value(b, m->u.message.prefix.p, m->u.message.prefix.len);
	buf_putc(b, '\t');
	hex_encode(b, (const unsigned char *) m->u.message.content.p, m->u.message.content.len);
	rec_finish(b);
}

void
walenc_position(struct buf *b, lsn_t pos)
{
	rec_start(b, REC_POSITION);
	rec_lsn(b, pos);
	rec_now(b);
	rec_finish(b);
}

void
walenc_end(struct buf *b, lsn_t pos)
{
	rec_start(b, REC_END);
	rec_lsn(b, pos);
	rec_finish(b);
}

bool
walenc_own_message(const struct pgo_msg *m)
{
	return m->u.message.prefix.len >= 6 && memcmp(m->u.message.prefix.p, "pgsync", 6) == 0;
}
