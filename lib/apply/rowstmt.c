#include "rowstmt.h"
#include "applyerr.h"
#include "common.h"
#include "escape.h"
#include "stmtsig.h"

bool
rowstmt_insert(struct pipeline *pl, struct buf *sig, struct rc_rel *rel, const struct field *v,
			   uint64_t xid, lsn_t commit_lsn, struct apply_err *err)
{
	struct pending p = {.kind = PK_CHANGE, .op = 'I', .rel = rel, .xid = xid, .commit_lsn = commit_lsn};

	stmtsig_start(sig, 'I', '-');
	pipeline_params_reset(pl);
	for (int i = 0; i < rel->ncols; i++)
	{
		stmtsig_col(sig, true, STMTSIG_NONE);
		if (!pipeline_param(pl, (size_t) i, &v[i]))
			return pipeline_bad_value(rel, "insert", err);
	}
	return pipeline_stmt(pl, rel, sig->data, sig->len, &p, 0, rel->ncols, err);
}

bool
rowstmt_update_delete(struct pipeline *pl, struct buf *sig, struct rc_rel *rel,
					  const struct sr_record *rec, uint64_t xid, lsn_t commit_lsn,
					  struct apply_err *err)
{
	bool upd = rec->type == SR_UPDATE;
	char kind = rec->kind;
	const struct field *where = rowstmt_where_values(rec);
	struct pending p = {.kind = PK_CHANGE, .op = upd ? 'U' : 'D', .kind2 = kind,
						.rel = rel, .xid = xid, .commit_lsn = commit_lsn};
	int nset = 0, nwhere = 0, n = 0;

	stmtsig_start(sig, p.op, kind);
	for (int i = 0; i < rel->ncols; i++)
	{
		bool inwhere = kind == 'O' || rel->cols[i].key;
		bool set = upd && !field_is_unchanged(rec->newv[i].p, rec->newv[i].n) &&
			!(kind == 'N' && rel->cols[i].key);
		char w = STMTSIG_NONE;

		if (inwhere)
			w = field_is_null(where[i].p, where[i].n) ? STMTSIG_IS_NULL : STMTSIG_COMPARE;
		nset += set;
		nwhere += w != STMTSIG_NONE;
		stmtsig_col(sig, set, w);
	}
	if (nwhere == 0)
	{
		apply_err_set(err, EXIT_UNSUPPORTED,
					  "cannot apply %s to %s: the stream names no key columns (replica identity nothing?)",
					  upd ? "update" : "delete", rel->display);
		return false;
	}
	/* Only key columns and unchanged values: set the key to itself so the
	 * statement still proves the row exists. */
	if (upd && nset == 0)
		for (int i = 0; i < rel->ncols; i++)
			if (stmtsig_where(sig->data, i) != STMTSIG_NONE)
				stmtsig_mark_set(sig->data, i);

	pipeline_params_reset(pl);
	for (int i = 0; i < rel->ncols; i++)
		if (stmtsig_sets(sig->data, i) && !pipeline_param(pl, (size_t) n++, upd ? &rec->newv[i] : &where[i]))
			return pipeline_bad_value(rel, upd ? "update" : "delete", err);
	for (int i = 0; i < rel->ncols; i++)
		if (stmtsig_compares(sig->data, i) && !pipeline_param(pl, (size_t) n++, &where[i]))
			return pipeline_bad_value(rel, upd ? "update" : "delete", err);
	return pipeline_stmt(pl, rel, sig->data, sig->len, &p, 0, n, err);
}
