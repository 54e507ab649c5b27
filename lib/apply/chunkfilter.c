#include "chunkfilter.h"
#include "buf.h"
#include "chunkmap.h"
#include "common.h"
#include "escape.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

struct chunkfilter {
	struct chunkmap *map;
	struct cm_val k1[CM_MAX_KEY], k2[CM_MAX_KEY];
	struct buf kb1, kb2;		/* decoded values of k1, k2 (server-ordered keys) */
	const char *bounds[2 * CM_MAX_KEY];	/* a range DELETE's lo, then hi values */
	struct field *vals;			/* SR_MAX_COLS: a rewritten row */
	struct buf row;				/* ... as a COPY text row */
	struct sr_rel **trunc;		/* the tables a TRUNCATE still truncates whole */
	size_t trunc_cap;
	uint64_t skipped;
};

void
chunkfilter_free(struct chunkfilter *cf)
{
	if (cf == NULL)
		return;
	chunkmap_free(cf->map);
	free(cf->vals);
	free(cf->trunc);
	buf_free(&cf->row);
	buf_free(&cf->kb1);
	buf_free(&cf->kb2);
	free(cf);
}

bool
chunkfilter_load(struct chunkfilter **cf, PGconn *meta, const char *job, lsn_t applied,
				 const struct key_colls *kc, struct apply_err *err)
{
	struct chunkmap *m;
	char l[LSN_BUFSZ];

	chunkfilter_free(*cf);
	*cf = NULL;
	if (!chunkmap_load(meta, job, applied, kc, &m, err))
		return false;
	if (m == NULL)
		return true;
	*cf = xcalloc(1, sizeof(**cf));
	(*cf)->map = m;
	(*cf)->vals = xmalloc(sizeof(struct field) * SR_MAX_COLS);
	log_info("chunked copy: changes committed before %s are applied only to keys whose chunk was copied before them (%zu chunks of %zu tables, %zu kB)",
			 lsn_format(chunkmap_max_lsn(m), l), chunkmap_nchunks(m), chunkmap_ntables(m),
			 (chunkmap_bytes(m) + 1023) / 1024);
	return true;
}

lsn_t
chunkfilter_until(const struct chunkfilter *cf)
{
	return chunkmap_max_lsn(cf->map);
}

uint64_t
chunkfilter_skipped(const struct chunkfilter *cf)
{
	return cf->skipped;
}

void
chunkfilter_lookups(const struct chunkfilter *cf, uint64_t *n, uint64_t *us)
{
	chunkmap_lookups(cf->map, n, us);
}

/* Is the change at commit c to this key not in the copy yet? */
static bool
applies(struct cm_table *t, const struct cm_val *key, lsn_t c, bool *apply, struct apply_err *err)
{
	lsn_t li;

	if (!chunkmap_place(t, key, &li, err))
		return false;
	*apply = li != CM_NOT_COPIED && c >= li;
	return true;
}

/* The row's key in k from vals, and whether a change at c applies to it. */
static bool
judge(struct chunkfilter *cf, struct cm_table *t, const struct field *vals, struct cm_val *k,
	  struct buf *kb, lsn_t c, bool *apply, struct apply_err *err)
{
	if (t->nkey == 0)
	{
		*apply = c >= t->max_lsn;
		return true;
	}
	return chunkmap_key(t, vals, k, kb, err) && applies(t, k, c, apply, err);
}

/*
 * The new row of an UPDATE whose row moved into a chunk copied before it,
 * from a chunk copied after it: the target has it in neither, so it is
 * inserted whole. An unchanged TOASTed value is in the old row only under
 * replica identity full.
 */
static bool
insert_moved(struct chunkfilter *cf, struct applier *ap, const struct sr_record *rec,
			 lsn_t c, struct apply_err *err)
{
	struct sr_record ins = *rec;
	int n = rec->rel->ncols;

	buf_reset(&cf->row);
	for (int i = 0; i < n; i++)
	{
		const struct field *v = &rec->newv[i];

		if (field_is_unchanged(v->p, v->n))
		{
			char name[300];

			if (rec->kind != 'O')
			{
				apply_err_set(err, EXIT_UNSUPPORTED,
							  "cannot apply an update of %s that moves a row into a chunk copied before it: column \"%s\" kept a TOASTed value the stream does not carry: "
							  "set REPLICA IDENTITY FULL on the source table, then copy it again (pgsync bootstrap --restart-snapshot)",
							  sr_rel_name(rec->rel, name, sizeof(name)), rec->rel->cols[i].name);
				return false;
			}
			v = &rec->oldv[i];
		}
		cf->vals[i] = *v;
		if (i > 0)
			buf_putc(&cf->row, '\t');
		buf_append(&cf->row, v->p, v->n);
	}
	/* Pointers into the row only once it has stopped growing. */
	for (int i = 0, off = 0; i < n; off += (int) cf->vals[i].n + 1, i++)
		cf->vals[i].p = cf->row.data + off;
	ins.type = SR_INSERT;
	ins.kind = 0;
	ins.oldv = NULL;
	ins.newv = cf->vals;
	ins.copy_row = cf->row.data;
	ins.copy_len = cf->row.len;
	return applier_change(ap, &ins, err);
}

static bool
update(struct chunkfilter *cf, struct applier *ap, struct cm_table *t, const struct sr_record *rec,
	   lsn_t c, struct apply_err *err)
{
	const struct field *oldv = rec->kind == 'N' ? rec->newv : rec->oldv;
	struct sr_record del;
	bool old_applies, new_applies;

	if (!judge(cf, t, oldv, cf->k1, &cf->kb1, c, &old_applies, err))
		return false;
	if (t->nkey > 0 && rec->kind != 'N')
	{
		/* A new key value left out is the old one (unchanged). */
		for (int j = 0; j < t->nkey; j++)
		{
			int col = t->colidx[j];
			const struct field *v = &rec->newv[col];

			cf->vals[col] = field_is_unchanged(v->p, v->n) ? rec->oldv[col] : *v;
		}
		if (!chunkmap_key(t, cf->vals, cf->k2, &cf->kb2, err))
			return false;
		/* (Of a server-ordered key: whether the text differs; two texts of
		 * one key are judged alike, each on its own.) */
		if (chunkmap_cmp(t, cf->k1, cf->k2) != 0)
		{
			if (!applies(t, cf->k2, c, &new_applies, err))
				return false;
			if (old_applies && new_applies)
				return applier_change(ap, rec, err);
			if (new_applies)
				return insert_moved(cf, ap, rec, c, err);
			if (!old_applies)
			{
				cf->skipped++;
				return true;
			}
			/* Only the old row is on the target: the new one's chunk was
			 * copied after the update and holds it already. */
			del = *rec;
			del.type = SR_DELETE;
			del.newv = NULL;
			return applier_change(ap, &del, err);
		}
	}
	if (!old_applies)
	{
		cf->skipped++;
		return true;
	}
	return applier_change(ap, rec, err);
}

/*
 * TRUNCATE at c: a table whose chunks were all copied before it is
 * truncated; otherwise only the key ranges of the chunks copied before it
 * are emptied (the others were copied after it and hold what followed).
 */
static bool
truncate_tables(struct chunkfilter *cf, struct applier *ap, const struct sr_record *rec,
				lsn_t c, struct apply_err *err)
{
	struct sr_record tr = *rec;
	size_t n = 0;

	if (cf->trunc_cap < rec->ntrunc)
	{
		cf->trunc_cap = rec->ntrunc;
		cf->trunc = xrealloc(cf->trunc, cf->trunc_cap * sizeof(*cf->trunc));
	}
	for (size_t i = 0; i < rec->ntrunc; i++)
	{
		struct cm_table *t = chunkmap_table(cf->map, rec->trunc_rels[i], err);

		if (t == NULL && err->code != 0)
			return false;
		if (t == NULL || c >= t->max_lsn)
		{
			cf->trunc[n++] = rec->trunc_rels[i];
			continue;
		}
		cf->skipped++;
		for (size_t k = 0; k < t->nchunks && t->nkey > 0; k++)
		{
			const struct cm_chunk *ch = &t->chunks[k];
			int nb = 0;

			if (c < ch->lsn)
				continue;
			for (int j = 0; ch->lo && j < t->nkey; j++)
				cf->bounds[nb++] = ch->lo[j].p;
			for (int j = 0; ch->hi && j < t->nkey; j++)
				cf->bounds[nb++] = ch->hi[j].p;
			struct range_delete r = {t->nkey, t->colidx, t->server ? t->coll : NULL, ch->lo != NULL,
								  ch->hi != NULL, cf->bounds};

			if (!applier_range_delete(ap, rec->trunc_rels[i], &r, err))
				return false;
		}
	}
	if (n == 0)
		return true;
	tr.trunc_rels = cf->trunc;
	tr.ntrunc = n;
	return applier_change(ap, &tr, err);
}

bool
chunkfilter_change(struct chunkfilter *cf, struct applier *ap, const struct sr_record *rec,
				   struct apply_err *err)
{
	lsn_t c = applier_commit_lsn(ap);
	struct cm_table *t;
	bool apply;

	if (rec->type == SR_TRUNCATE)
		return truncate_tables(cf, ap, rec, c, err);
	if ((t = chunkmap_table(cf->map, rec->rel, err)) == NULL)
		return err->code == 0 && applier_change(ap, rec, err);
	/* Past the table's last chunk: nothing of it is filtered any more. */
	if (c >= t->max_lsn)
		return applier_change(ap, rec, err);
	if (rec->type == SR_UPDATE)
		return update(cf, ap, t, rec, c, err);
	if (!judge(cf, t, rec->type == SR_INSERT ? rec->newv : rec->oldv, cf->k1, &cf->kb1, c, &apply, err))
		return false;
	if (!apply)
	{
		cf->skipped++;
		return true;
	}
	return applier_change(ap, rec, err);
}
