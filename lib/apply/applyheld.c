/*
 * Updates held back until the batch commits (lib/apply/coalesce.h stores and
 * merges them): which may wait, and sending them several rows to a
 * statement.
 */
#include "applier_int.h"
#include "common.h"
#include "escape.h"

#include <string.h>

/*
 * May this update wait for the end of the batch, merged with the row's
 * other updates? Only when the merge cannot be observed: the key stays (a
 * plain UPDATE, kind N, with every key value present), no unique index but
 * the key's can be violated in between (rows of different keys commute),
 * and no trigger or rule would see the individual changes.
 */
bool
held_mergeable(const struct applier *a, const struct rc_rel *rel, const struct sr_record *rec)
{
	if (!a->merge || rec->type != SR_UPDATE || rec->kind != 'N' || !rel->merge_ok)
		return false;
	if (a->replica_role ? rel->trig_replica : rel->trig_origin)
		return false;
	for (int i = 0; i < rel->ncols; i++)
		if (rel->cols[i].key &&
			(field_is_null(rec->newv[i].p, rec->newv[i].n) || field_is_unchanged(rec->newv[i].p, rec->newv[i].n)))
			return false;
	return true;
}

bool
held_put(struct applier *a, struct rc_rel *rel, const struct sr_record *rec, uint64_t xid, lsn_t commit_lsn)
{
	size_t before = coalesce_rows(a->held);

	if (!coalesce_put(a->held, rel, rel->ncols, rel->keymask, rec->newv, xid, commit_lsn))
		return false;
	rel->held += (uint32_t) (coalesce_rows(a->held) - before);
	return true;
}

/* Forget the held rows (sent, or abandoned with the batch). */
void
held_drop(struct applier *a)
{
	struct co_row row;
	size_t cur = 0;

	while (coalesce_next(a->held, &cur, &row))
		((struct rc_rel *) row.rel)->held = 0;
	coalesce_reset(a->held);
}

/*
 * Held rows go out several at a time: one UPDATE ... FROM (VALUES ...) per
 * run of rows of one table with the same columns saves the target most of
 * the per-statement work (about a third of an update's cost). Run lengths
 * with a prepared statement, largest first; the rest go one by one.
 */
static const int multi_rows[] = {32, 8, 1};
/* Values of one statement at most (a->offs holds 2 x SR_MAX_COLS). */
#define MULTI_VALUES (2 * SR_MAX_COLS)

/* The multi-row signature of a held row into sig (row count 0 for now);
 * returns the values per row. */
static int
held_sig(struct buf *sig, const struct rc_rel *rel, const struct field *v)
{
	int nset = 0, per_row = 0;

	buf_reset(sig);
	buf_putc(sig, 'V');
	buf_putc(sig, 0);
	for (int i = 0; i < rel->ncols; i++)
	{
		char set = !rel->cols[i].key && !field_is_unchanged(v[i].p, v[i].n) ? 's' : '-';

		nset += set == 's';
		buf_putc(sig, set);
		buf_putc(sig, rel->cols[i].key ? 'v' : '-');
	}
	/* Only unchanged values: set the key to itself, as update_delete does. */
	for (int i = 0; i < rel->ncols; i++)
	{
		if (nset == 0 && rel->cols[i].key)
			sig->data[2 + 2 * i] = 's';
		per_row += sig->data[2 + 2 * i] == 's' || rel->cols[i].key;
	}
	return per_row;
}

/* Rows of one table with the same columns whose values a->vals holds. */
struct run {
	struct rc_rel *rel;
	int n, per_row, max_rows;
	size_t nv;
	uint64_t xid;				/* of the last row, for messages */
	lsn_t commit_lsn;
};

/* Send the run (signature a->run_sig) in statements of multi_rows; empty it. */
static bool
send_run(struct applier *a, struct run *r, struct apply_err *err)
{
	bool ok = true;

	buf_reset(&a->sig);
	buf_append(&a->sig, a->run_sig.data, a->run_sig.len);
	for (int done = 0, k = 0; ok && done < r->n;)
	{
		int rows = multi_rows[k];
		struct pending p = {.kind = PK_CHANGE, .op = 'U', .kind2 = 'N', .rel = r->rel, .xid = r->xid,
							.commit_lsn = r->commit_lsn, .nrows = (uint16_t) rows};

		if (r->n - done < rows || rows * r->per_row > MULTI_VALUES)
		{
			k++;
			continue;
		}
		a->sig.data[1] = (char) rows;
		ok = ap_send_stmt_at(a, r->rel, &p, (size_t) (done * r->per_row), rows * r->per_row, err);
		done += rows;
	}
	r->n = 0;
	r->nv = 0;
	buf_reset(&a->vals);
	return ok;
}

static bool
text_key(const struct rc_rel *rel)
{
	for (int i = 0; i < rel->ncols; i++)
		if (rel->cols[i].key && rel->cols[i].text_cmp)
			return true;
	return false;
}

/* Send every held update, each row once with its newest values. */
bool
held_send(struct applier *a, struct apply_err *err)
{
	struct co_row row;
	struct run run = {0};
	size_t cur = 0;
	bool ok;

	if (coalesce_rows(a->held) == 0)
		return true;
	ok = ap_end_run(a, err) && ap_ensure_txn(a, err);
	buf_reset(&a->vals);
	while (ok && coalesce_next(a->held, &cur, &row))
	{
		struct rc_rel *rel = row.rel;
		int per_row;

		if (text_key(rel))
		{
			/* Keys compared as text: the single-row statement knows how. */
			struct sr_record rec = {.type = SR_UPDATE, .kind = 'N', .newv = row.vals};

			ok = (run.n == 0 || send_run(a, &run, err)) &&
				ap_update_delete(a, rel, &rec, row.xid, row.commit_lsn, err);
			buf_reset(&a->vals);
			continue;
		}
		per_row = held_sig(&a->row_sig, rel, row.vals);
		if (run.n > 0 && (rel != run.rel || run.n == run.max_rows || a->row_sig.len != a->run_sig.len ||
						  memcmp(a->row_sig.data, a->run_sig.data, a->run_sig.len) != 0) &&
			!(ok = send_run(a, &run, err)))
			break;
		if (run.n == 0)
		{
			run.rel = rel;
			run.per_row = per_row;
			run.max_rows = MULTI_VALUES / (per_row > 0 ? per_row : 1);
			if (run.max_rows > multi_rows[0])
				run.max_rows = multi_rows[0];
			buf_reset(&a->run_sig);
			buf_append(&a->run_sig, a->row_sig.data, a->row_sig.len);
		}
		for (int i = 0; ok && i < rel->ncols; i++)
			if ((a->run_sig.data[2 + 2 * i] == 's' || rel->cols[i].key) && !ap_add_param(a, run.nv++, &row.vals[i]))
				ok = ap_bad_value(a, rel, "update", err);
		run.xid = row.xid;
		run.commit_lsn = row.commit_lsn;
		run.n++;
	}
	if (ok && run.n > 0)
		ok = send_run(a, &run, err);
	held_drop(a);
	return ok;
}
