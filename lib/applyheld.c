/*
 * Updates held back until the batch commits (lib/coalesce.h stores and
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

/* The multi-row signature of a held row into a->sig (row count 0 for now);
 * returns the values per row. */
static int
held_sig(struct applier *a, const struct rc_rel *rel, const struct field *v)
{
	int nset = 0, per_row = 0;

	buf_reset(&a->sig);
	buf_putc(&a->sig, 'V');
	buf_putc(&a->sig, 0);
	for (int i = 0; i < rel->ncols; i++)
	{
		char set = !rel->cols[i].key && !field_is_unchanged(v[i].p, v[i].n) ? 's' : '-';

		nset += set == 's';
		buf_putc(&a->sig, set);
		buf_putc(&a->sig, rel->cols[i].key ? 'v' : '-');
	}
	/* Only unchanged values: set the key to itself, as update_delete does. */
	for (int i = 0; i < rel->ncols; i++)
	{
		if (nset == 0 && rel->cols[i].key)
			a->sig.data[2 + 2 * i] = 's';
		per_row += a->sig.data[2 + 2 * i] == 's' || rel->cols[i].key;
	}
	return per_row;
}

/* Send the n rows whose values a->vals holds, in statements of multi_rows. */
static bool
send_rows(struct applier *a, struct rc_rel *rel, int n, int per_row, uint64_t xid, lsn_t commit_lsn,
		  struct apply_err *err)
{
	for (int done = 0, k = 0; done < n;)
	{
		int rows = multi_rows[k];
		struct pending p = {.kind = PK_CHANGE, .op = 'U', .kind2 = 'N', .rel = rel, .xid = xid,
							.commit_lsn = commit_lsn, .nrows = (uint16_t) rows};

		if (n - done < rows || rows * per_row > MULTI_VALUES)
		{
			k++;
			continue;
		}
		a->sig.data[1] = (char) rows;
		if (!ap_send_stmt_at(a, rel, &p, (size_t) (done * per_row), rows * per_row, err))
			return false;
		done += rows;
	}
	return true;
}

/* Send every held update, each row once with its newest values. */
bool
held_send(struct applier *a, struct apply_err *err)
{
	struct co_row row;
	struct rc_rel *rel = NULL;
	struct buf sig = BUF_INIT;	/* the run's signature */
	size_t cur = 0, nv = 0;
	int n = 0, per_row = 0, max_rows = 0;
	uint64_t xid = 0;
	lsn_t commit_lsn = 0;
	bool ok;

	if (coalesce_rows(a->held) == 0)
		return true;
	ok = ap_end_run(a, err) && ap_ensure_txn(a, err);
	buf_reset(&a->vals);
	while (ok && coalesce_next(a->held, &cur, &row))
	{
		struct rc_rel *r = row.rel;
		bool text_key = false;

		for (int i = 0; i < r->ncols; i++)
			text_key |= r->cols[i].key && r->cols[i].text_cmp;
		if (text_key)
		{
			/* Keys compared as text: the single-row statement knows how. */
			struct sr_record rec = {.type = SR_UPDATE, .kind = 'N', .newv = row.vals};

			if (n > 0)
			{
				buf_reset(&a->sig);
				buf_append(&a->sig, sig.data, sig.len);
				ok = send_rows(a, rel, n, per_row, xid, commit_lsn, err);
				n = 0;
				buf_reset(&a->vals);
				nv = 0;
			}
			ok = ok && ap_update_delete(a, r, &rec, row.xid, row.commit_lsn, err);
			buf_reset(&a->vals);
			continue;
		}
		held_sig(a, r, row.vals);
		if (n > 0 && (r != rel || a->sig.len != sig.len || memcmp(a->sig.data + 2, sig.data + 2, sig.len - 2) != 0 ||
					  n == max_rows))
		{
			struct buf mine = a->sig;

			/* Flush the run in its own signature, then carry on with this row's. */
			a->sig = sig;
			ok = send_rows(a, rel, n, per_row, xid, commit_lsn, err);
			sig = a->sig;
			a->sig = mine;
			n = 0;
			buf_reset(&a->vals);
			nv = 0;
			if (!ok)
				break;
		}
		if (n == 0)
		{
			rel = r;
			per_row = held_sig(a, r, row.vals);
			max_rows = MULTI_VALUES / (per_row > 0 ? per_row : 1);
			if (max_rows > multi_rows[0])
				max_rows = multi_rows[0];
			buf_reset(&sig);
			buf_append(&sig, a->sig.data, a->sig.len);
		}
		for (int i = 0; ok && i < r->ncols; i++)
			if (sig.data[2 + 2 * i] == 's' || r->cols[i].key)
				if (!ap_add_param(a, nv++, &row.vals[i]))
					ok = ap_bad_value(a, r, "update", err);
		xid = row.xid;
		commit_lsn = row.commit_lsn;
		n++;
	}
	if (ok && n > 0)
	{
		buf_reset(&a->sig);
		buf_append(&a->sig, sig.data, sig.len);
		ok = send_rows(a, rel, n, per_row, xid, commit_lsn, err);
	}
	buf_free(&sig);
	held_drop(a);
	return ok;
}

