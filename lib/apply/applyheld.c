#include "applyheld.h"
#include "coalesce.h"
#include "common.h"
#include "escape.h"
#include "rowstmt.h"
#include "stmtsig.h"

#include <stdlib.h>
#include <string.h>

/*
 * Held rows at most, whatever their bytes: the index is sized by it. Full
 * means sent, not refused.
 */
#define HELD_ROWS 32768

struct held {
	struct pipeline *pl;
	struct coalesce *rows;
	bool replica_role;
	struct buf sig, run_sig, row_sig;	/* a statement's, a run's and a row's signature */
};

struct held *
held_new(struct pipeline *pl, size_t bytes, bool replica_role)
{
	struct held *h = xcalloc(1, sizeof(*h));

	h->pl = pl;
	h->rows = coalesce_new(bytes, HELD_ROWS);
	h->replica_role = replica_role;
	return h;
}

void
held_free(struct held *h)
{
	if (h == NULL)
		return;
	coalesce_free(h->rows);
	buf_free(&h->sig);
	buf_free(&h->run_sig);
	buf_free(&h->row_sig);
	free(h);
}

size_t
held_rows(const struct held *h)
{
	return coalesce_rows(h->rows);
}

bool
held_has(const struct held *h, const struct rc_rel *rel, const struct field *vals)
{
	return rel->held > 0 && coalesce_has(h->rows, rel, rel->ncols, rel->keymask, vals);
}

/*
 * May this update wait for the end of the batch, merged with the row's
 * other updates? Only when the merge cannot be observed: the key stays (a
 * plain UPDATE, kind N, with every key value present), no unique index but
 * the key's can be violated in between (rows of different keys commute),
 * and no trigger or rule would see the individual changes.
 */
bool
held_mergeable(const struct held *h, const struct rc_rel *rel, const struct sr_record *rec)
{
	if (rec->type != SR_UPDATE || rec->kind != 'N' || !rel->merge_ok)
		return false;
	if (h->replica_role ? rel->trig_replica : rel->trig_origin)
		return false;
	for (int i = 0; i < rel->ncols; i++)
		if (rel->cols[i].key &&
			(field_is_null(rec->newv[i].p, rec->newv[i].n) || field_is_unchanged(rec->newv[i].p, rec->newv[i].n)))
			return false;
	return true;
}

bool
held_put(struct held *h, struct rc_rel *rel, const struct sr_record *rec)
{
	size_t before = coalesce_rows(h->rows);

	if (!coalesce_put(h->rows, rel, rel->ncols, rel->keymask, rec->newv, pipeline_txn(h->pl)))
		return false;
	rel->held += (uint32_t) (coalesce_rows(h->rows) - before);
	return true;
}

/* Forget the held rows (sent, or abandoned with the batch). */
void
held_drop(struct held *h)
{
	struct co_row row;
	size_t cur = 0;

	while (coalesce_next(h->rows, &cur, &row))
		((struct rc_rel *) row.rel)->held = 0;
	coalesce_reset(h->rows);
}

/*
 * Held rows go out several at a time: one UPDATE ... FROM (VALUES ...) per
 * run of rows of one table with the same columns saves the target most of
 * the per-statement work (about a third of an update's cost). Run lengths
 * with a prepared statement, largest first; the rest go one by one.
 */
static const int multi_rows[] = {32, 8, 1};
/* Values of one statement at most. */
#define MULTI_VALUES PIPELINE_MAX_PARAMS

/* The multi-row signature of a held row into sig (row count 0 for now);
 * returns the values per row, or -1 for a row the single-row statement
 * must apply: one with a GENERATED ALWAYS identity column to compare
 * (rowstmt.c), or with nothing to set but such a key. */
static int
held_sig(struct buf *sig, const struct rc_rel *rel, const struct field *v)
{
	int nset = 0, per_row = 0, plain_keys = 0;

	if (rel->always_nonkey)
		return -1;

	stmtsig_start(sig, 'V', 0);
	for (int i = 0; i < rel->ncols; i++)
	{
		bool set = !rel->cols[i].key && !field_is_unchanged(v[i].p, v[i].n);

		nset += set;
		plain_keys += rel->cols[i].key && !rel->cols[i].always;
		stmtsig_col(sig, set, rel->cols[i].key ? STMTSIG_COMPARE : STMTSIG_NONE);
	}
	if (nset == 0 && plain_keys == 0)
		return -1;
	/* Only unchanged values: set the key to itself, as rowstmt does. */
	for (int i = 0; i < rel->ncols; i++)
	{
		if (nset == 0 && rel->cols[i].key && !rel->cols[i].always)
			stmtsig_mark_set(sig->data, i);
		per_row += stmtsig_sets(sig->data, i) || rel->cols[i].key;
	}
	return per_row;
}

/* Rows of one table with the same columns whose values the pipeline's parameters hold. */
struct run {
	struct rc_rel *rel;
	int n, per_row, max_rows;
	size_t nv;
	struct apply_txn txn;		/* of the last row, for messages */
};

/* Send the run (signature h->run_sig) in statements of multi_rows; empty it. */
static bool
send_run(struct held *h, struct run *r, struct apply_err *err)
{
	bool ok = true;

	buf_reset(&h->sig);
	buf_append(&h->sig, h->run_sig.data, h->run_sig.len);
	pipeline_set_txn(h->pl, r->txn);
	for (int done = 0, k = 0; ok && done < r->n;)
	{
		int rows = multi_rows[k];
		struct pending p = {.kind = PK_CHANGE, .op = 'U', .kind2 = 'N', .rel = r->rel, .nrows = (uint16_t) rows};

		if (r->n - done < rows || rows * r->per_row > MULTI_VALUES)
		{
			k++;
			continue;
		}
		stmtsig_set_rows(h->sig.data, rows);
		ok = pipeline_stmt(h->pl, r->rel, h->sig.data, h->sig.len, &p, (size_t) (done * r->per_row),
						   rows * r->per_row, err);
		done += rows;
	}
	r->n = 0;
	r->nv = 0;
	pipeline_params_reset(h->pl);
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
held_send(struct held *h, struct apply_err *err)
{
	struct co_row row;
	struct run run = {0};
	size_t cur = 0;
	struct apply_txn now = pipeline_txn(h->pl);
	bool ok;

	if (coalesce_rows(h->rows) == 0)
		return true;
	ok = pipeline_begin(h->pl, err);
	pipeline_params_reset(h->pl);
	while (ok && coalesce_next(h->rows, &cur, &row))
	{
		struct rc_rel *rel = row.rel;
		int per_row;

		per_row = text_key(rel) ? -1 : held_sig(&h->row_sig, rel, row.vals);
		if (per_row < 0)
		{
			/* Keys compared as text, or an identity column to compare
			 * (held_sig): the single-row statement knows how. */
			struct sr_record rec = {.type = SR_UPDATE, .kind = 'N', .newv = row.vals};

			ok = run.n == 0 || send_run(h, &run, err);
			pipeline_set_txn(h->pl, row.txn);
			ok = ok && rowstmt_update_delete(h->pl, &h->sig, rel, &rec, err);
			pipeline_params_reset(h->pl);
			continue;
		}
		if (run.n > 0 && (rel != run.rel || run.n == run.max_rows || h->row_sig.len != h->run_sig.len ||
						  memcmp(h->row_sig.data, h->run_sig.data, h->run_sig.len) != 0) &&
			!(ok = send_run(h, &run, err)))
			break;
		if (run.n == 0)
		{
			run.rel = rel;
			run.per_row = per_row;
			run.max_rows = MULTI_VALUES / (per_row > 0 ? per_row : 1);
			if (run.max_rows > multi_rows[0])
				run.max_rows = multi_rows[0];
			buf_reset(&h->run_sig);
			buf_append(&h->run_sig, h->row_sig.data, h->row_sig.len);
		}
		for (int i = 0; ok && i < rel->ncols; i++)
			if ((stmtsig_sets(h->run_sig.data, i) || rel->cols[i].key) &&
				!pipeline_param(h->pl, run.nv++, &row.vals[i]))
				ok = pipeline_bad_value(rel, "update", err);
		run.txn = row.txn;
		run.n++;
	}
	if (ok && run.n > 0)
		ok = send_run(h, &run, err);
	/* Each held row went out under its own transaction; back to the one read. */
	pipeline_set_txn(h->pl, now);
	held_drop(h);
	return ok;
}
