#include "applier.h"
#include "applyerr.h"
#include "applyheld.h"
#include "buf.h"
#include "common.h"
#include "conn.h"
#include "hash.h"
#include "log.h"
#include "pipeline.h"
#include "rowstmt.h"
#include "session.h"
#include "stmtsig.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Buffered insert run bytes that switch to COPY even below the row count. */
#define RUN_BYTES_MAX (256 * 1024)
#define COPY_CHUNK (64 * 1024)

#define PROGRESS_STMT "pgsync_progress"

/*
 * A row changed many times in one target transaction piles up versions that
 * cannot be pruned before commit, and every later change walks them all:
 * the batch turns quadratic (pgbench's branches row). A fixed table of key
 * hashes counts changes per row; past HOT_ROW_LIMIT the batch asks to be
 * committed at the next source transaction boundary.
 */
#define HOT_SLOTS 1024
#define HOT_ROW_LIMIT 64

/* A value of a buffered row: where it is in the run's text. */
struct run_val {
	uint32_t off, len;
};

struct applier {
	PGconn *meta;
	struct relcache *rc;
	struct pipeline *pl;		/* the apply session's statements */
	const char *job;
	int copy_threshold;
	bool merge;					/* hold mergeable updates (opts->merge_updates) */

	/* The current run of inserts into one table. */
	struct rc_rel *run_rel;
	uint64_t run_gen;
	struct apply_txn run_txn;	/* the transaction its first row came in */
	size_t run_rows;
	struct buf run_buf;			/* rows not yet sent, COPY text, LF-terminated */
	/*
	 * Until the run turns into COPY, where the stream reader found each
	 * value of its rows in run_buf: a run that ends short goes out as
	 * single-row statements from these, without splitting its rows again.
	 */
	struct buf run_vals;		/* struct run_val, rel->ncols per row */
	struct field *fields;		/* one row's, for its statement */

	/* Reused for every row: nothing is allocated per row once warm. */
	struct buf sig, sql;

	uint64_t rows;

	struct held *held;			/* updates waiting for the end of the batch */

	struct { uint64_t hash; uint32_t count; } hot[HOT_SLOTS];
	bool hot_row;				/* some row reached HOT_ROW_LIMIT in this batch */
};

bool
applier_wants_commit(const struct applier *a)
{
	return a->hot_row;
}

static void
hot_reset(struct applier *a)
{
	memset(a->hot, 0, sizeof(a->hot));
	a->hot_row = false;
}

/* Count one more change of the row that the WHERE values of a->sig identify. */
static void
hot_count(struct applier *a, const struct rc_rel *rel, const struct field *where)
{
	uint64_t h = HASH_INIT ^ (uintptr_t) rel;
	size_t slot;

	for (int i = 0; i < rel->ncols; i++)
		if (stmtsig_compares(a->sig.data, i))
			h = hash_value_end(hash_bytes(h, where[i].p, where[i].n));
	slot = h % HOT_SLOTS;
	if (a->hot[slot].hash != h)
	{
		a->hot[slot].hash = h;
		a->hot[slot].count = 0;
	}
	if (++a->hot[slot].count >= HOT_ROW_LIMIT)
		a->hot_row = true;
}

bool
applier_txn_open(const struct applier *a)
{
	return pipeline_txn_open(a->pl) || held_rows(a->held) > 0;
}

uint64_t
applier_rows(const struct applier *a)
{
	return a->rows;
}

/* An UPDATE or DELETE sent now, counted for the hot row rule. */
static bool
update_delete(struct applier *a, struct rc_rel *rel, const struct sr_record *rec, struct apply_err *err)
{
	if (!rowstmt_update_delete(a->pl, &a->sig, rel, rec, err))
		return false;
	hot_count(a, rel, rowstmt_where_values(rec));
	return true;
}

/* --- insert runs and COPY ---------------------------------------------- */

/* What a COPY of the run reports its failure as. */
static struct pending
run_pending(const struct applier *a)
{
	struct pending p = {.kind = PK_COPY, .op = 'I', .rel = a->run_rel, .txn = a->run_txn};

	return p;
}

static bool
copy_start(struct applier *a, struct apply_err *err)
{
	struct rc_rel *rel = a->run_rel;
	struct pending p = run_pending(a);

	buf_reset(&a->sql);
	buf_printf(&a->sql, "COPY %s (", rel->qname);
	for (int i = 0; i < rel->ncols; i++)
		buf_printf(&a->sql, "%s%s", i ? ", " : "", rel->cols[i].qname);
	buf_puts(&a->sql, ") FROM STDIN");
	if (!pipeline_copy_start(a->pl, buf_cstr(&a->sql), &p, err))
		return false;
	log_debug("copying a run of inserts into %s", rel->display);
	return true;
}

static bool
copy_put(struct applier *a, struct apply_err *err)
{
	if (!pipeline_copy_data(a->pl, a->run_buf.data, a->run_buf.len, err))
		return false;
	buf_reset(&a->run_buf);
	return true;
}

static bool
copy_end(struct applier *a, const char *abort_msg, struct apply_err *err)
{
	struct pending p = run_pending(a);

	if (abort_msg == NULL && !copy_put(a, err))
		return false;
	return pipeline_copy_end(a->pl, abort_msg, &p, err);
}

/* Send what the run buffered as single-row statements. */
static bool
run_as_statements(struct applier *a, struct apply_err *err)
{
	struct rc_rel *rel = a->run_rel;
	const struct run_val *v = (const struct run_val *) a->run_vals.data;
	struct apply_txn now = pipeline_txn(a->pl);
	bool ok = true;

	/* Buffered rows are the run's, however many transactions it spans. */
	pipeline_set_txn(a->pl, a->run_txn);
	for (size_t r = 0; ok && r < a->run_rows; r++)
	{
		for (int i = 0; i < rel->ncols; i++, v++)
		{
			a->fields[i].p = a->run_buf.data + v->off;
			a->fields[i].n = v->len;
		}
		ok = rowstmt_insert(a->pl, &a->sig, rel, a->fields, err);
	}
	pipeline_set_txn(a->pl, now);
	buf_reset(&a->run_buf);
	buf_reset(&a->run_vals);
	return ok;
}

static bool
end_run(struct applier *a, struct apply_err *err)
{
	bool ok;

	if (a->run_rel == NULL)
		return true;
	ok = pipeline_in_copy(a->pl) ? copy_end(a, NULL, err) : run_as_statements(a, err);
	a->run_rel = NULL;
	a->run_rows = 0;
	return ok;
}

/* The held updates go out, after the insert run they may not overtake. */
static bool
send_held(struct applier *a, struct apply_err *err)
{
	return end_run(a, err) && held_send(a->held, err);
}

static bool
run_add(struct applier *a, const struct sr_record *rec, struct apply_err *err)
{
	size_t start = a->run_buf.len;

	buf_append(&a->run_buf, rec->copy_row, rec->copy_len);
	buf_putc(&a->run_buf, '\n');
	a->run_rows++;
	if (pipeline_in_copy(a->pl))
		return a->run_buf.len < COPY_CHUNK || copy_put(a, err);
	if (a->run_rows >= (size_t) a->copy_threshold || a->run_buf.len >= RUN_BYTES_MAX)
	{
		buf_reset(&a->run_vals);
		return copy_start(a, err) && copy_put(a, err);
	}
	/* The values lie in the line as in copy_row: the same offsets. */
	for (int i = 0; i < a->run_rel->ncols; i++)
	{
		struct run_val v = {(uint32_t) (start + (size_t) (rec->newv[i].p - rec->copy_row)),
							(uint32_t) rec->newv[i].n};

		buf_append(&a->run_vals, &v, sizeof(v));
	}
	return true;
}

/* --- public ------------------------------------------------------------ */

static struct rc_rel *
resolve(struct applier *a, struct sr_rel *srel, struct apply_err *err)
{
	struct rc_rel *r = srel->user;
	bool dropped;

	if (r != NULL && r->gen == srel->gen)
		return r;
	/* Buffered and held rows are in the old layout: send them first. */
	if (r != NULL && !send_held(a, err))
		return NULL;
	/* Pending results may point at statements about to be replaced. */
	if (!pipeline_wait(a->pl, err))
		return NULL;
	return relcache_get(a->rc, a->meta, srel, &dropped, err);
}

static bool
truncate_rels(struct applier *a, const struct sr_record *rec, struct apply_err *err)
{
	struct pending p = {.kind = PK_TRUNCATE, .op = 'T'};

	for (size_t i = 0; i < rec->ntrunc; i++)
		if (resolve(a, rec->trunc_rels[i], err) == NULL)
			return false;
	if (!send_held(a, err) || !pipeline_begin(a->pl, err))
		return false;
	buf_reset(&a->sql);
	buf_puts(&a->sql, "TRUNCATE ");
	for (size_t i = 0; i < rec->ntrunc; i++)
	{
		struct rc_rel *r = rec->trunc_rels[i]->user;

		if (i == 0)
			p.rel = r;
		buf_printf(&a->sql, "%s%s", i ? ", " : "", r->qname);
	}
	if (rec->trunc_flags & SR_TRUNC_RESTART)
		buf_puts(&a->sql, " RESTART IDENTITY");
	if (rec->trunc_flags & SR_TRUNC_CASCADE)
		buf_puts(&a->sql, " CASCADE");
	return pipeline_sql(a->pl, buf_cstr(&a->sql), &p, err);
}

bool
applier_range_delete(struct applier *a, struct sr_rel *srel, const struct range_delete *r, struct apply_err *err)
{
	struct pending p = {.kind = PK_TRUNCATE, .op = 'T'};

	a->rows++;
	if ((p.rel = resolve(a, srel, err)) == NULL)
		return false;
	if (!send_held(a, err) || !pipeline_begin(a->pl, err))
		return false;
	relcache_range_delete_sql(p.rel, r, &a->sql);
	return pipeline_sql_params(a->pl, buf_cstr(&a->sql), r->nkey * (r->has_lo + r->has_hi), r->bounds, &p, err);
}

static bool
insert(struct applier *a, struct rc_rel *rel, const struct sr_record *rec, struct apply_err *err)
{
	/* A held row whose key comes back was deleted in between: in order. */
	if (held_has(a->held, rel, rec->newv) && !send_held(a, err))
		return false;
	if (a->run_rel == rel && a->run_gen == rel->gen)
		return run_add(a, rec, err);
	if (!end_run(a, err) || !pipeline_begin(a->pl, err))
		return false;
	if (a->copy_threshold > 0 && rel->ncols > 0)
	{
		a->run_rel = rel;
		a->run_gen = rel->gen;
		a->run_txn = pipeline_txn(a->pl);
		a->run_rows = 0;
		buf_reset(&a->run_buf);
		buf_reset(&a->run_vals);
		return run_add(a, rec, err);
	}
	return rowstmt_insert(a->pl, &a->sig, rel, rec->newv, err);
}

bool
applier_change(struct applier *a, const struct sr_record *rec, struct apply_err *err)
{
	struct rc_rel *rel;
	bool in_order;

	a->rows++;
	if (rec->type == SR_TRUNCATE)
		return truncate_rels(a, rec, err);
	if ((rel = resolve(a, rec->rel, err)) == NULL)
		return false;
	if (rec->type == SR_INSERT)
		return insert(a, rel, rec, err);
	if (a->merge && held_mergeable(a->held, rel, rec))
	{
		if (held_put(a->held, rel, rec))
			return true;
		/* Full: send what is held and hold this one; too big alone: send. */
		if (!send_held(a, err))
			return false;
		if (held_put(a->held, rel, rec))
			return true;
	}
	/*
	 * Sent now, so held rows of the table go first if this could touch one
	 * of them: a delete of another key commutes with them, anything else is
	 * kept in order.
	 */
	in_order = rel->held == 0 ||
		(rec->type == SR_DELETE && rec->kind == 'K' && !held_has(a->held, rel, rec->oldv));
	if (!end_run(a, err) || (!in_order && !held_send(a->held, err)) || !pipeline_begin(a->pl, err))
		return false;
	return update_delete(a, rel, rec, err);
}

void
applier_set_txn(struct applier *a, uint64_t xid, lsn_t commit_lsn)
{
	pipeline_set_txn(a->pl, (struct apply_txn) {xid, commit_lsn});
}

lsn_t
applier_commit_lsn(const struct applier *a)
{
	return pipeline_txn(a->pl).commit_lsn;
}

bool
applier_commit(struct applier *a, lsn_t applied, const char *commit_time, struct apply_err *err)
{
	char l[LSN_BUFSZ];
	const char *params[3] = {a->job, lsn_format(applied, l), commit_time};
	struct pending p = {.kind = PK_PROGRESS};

	if (!send_held(a, err) || !pipeline_begin(a->pl, err) ||
		!pipeline_prepared(a->pl, PROGRESS_STMT, 3, params, &p, err) || !pipeline_commit(a->pl, err))
		return false;
	hot_reset(a);
	return true;
}

bool
applier_rollback(struct applier *a, struct apply_err *err)
{
	held_drop(a->held);
	if (pipeline_in_copy(a->pl) && !copy_end(a, "batch abandoned", err))
		return false;
	a->run_rel = NULL;
	a->run_rows = 0;
	buf_reset(&a->run_buf);
	buf_reset(&a->run_vals);
	if (!pipeline_rollback(a->pl, err))
		return false;
	hot_reset(a);
	return true;
}

void
applier_abandon(struct applier *a, const char *why)
{
	held_drop(a->held);
	a->run_rel = NULL;
	a->run_rows = 0;
	pipeline_abandon(a->pl, why);
}

static bool
setup_cmd(PGconn *conn, const char *sql, struct apply_err *err)
{
	struct pgerr pe;
	char text[PGERR_TEXT_MAX];

	if (conn_command(conn, sql, 0, NULL, &pe))
		return true;
	apply_err_set(err, pe.retryable ? EXIT_RUNTIME : EXIT_PREFLIGHT, "cannot set up the apply session: %s",
				  pgerr_text(&pe, NULL, text, sizeof(text)));
	return false;
}

struct applier *
applier_new(PGconn *conn, PGconn *meta, struct relcache *rc, const struct applier_opts *opts,
			bool *replica_role, struct apply_err *err)
{
	struct applier *a;
	struct pgerr pe;
	PGresult *res;
	char sync[64];

	/* As the built-in apply worker: names resolve only when qualified,
	 * commits need not wait for the flush (pg-apply's flushwatch does), and
	 * a row is found by its key's index whenever there is one. The planner
	 * scans a table of a few pages whole, and one updated hundreds of times
	 * a second (pgbench's branches, pgsync.job) holds that many row
	 * versions to check: a tenth of the apply session's CPU at 500
	 * transactions a second, in a profile. Without an index a scan is
	 * still made. */
	snprintf(sync, sizeof(sync), "SET synchronous_commit = %s",
			 opts->synchronous_commit ? opts->synchronous_commit : "on");
	if (!setup_cmd(conn, "SET search_path = ''", err) || !setup_cmd(conn, sync, err) ||
		!setup_cmd(conn, "SET enable_seqscan = off", err))
		return NULL;
	*replica_role = session_replica_role(conn, &pe);
	if (!*replica_role && strcmp(pe.sqlstate, "42501") != 0)
	{
		char text[PGERR_TEXT_MAX];

		apply_err_set(err, EXIT_RUNTIME, "cannot set session_replication_role: %s",
					  pgerr_text(&pe, NULL, text, sizeof(text)));
		return NULL;
	}
	res = PQprepare(conn, PROGRESS_STMT,
					"UPDATE pgsync.job SET applied_lsn = $2::pg_catalog.pg_lsn,"
					" applied_commit_time = coalesce($3::pg_catalog.timestamptz, applied_commit_time),"
					" updated_at = pg_catalog.now() WHERE job = $1",
					3, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		pgerr_set(&pe, conn, res);
		PQclear(res);
		apply_err_set(err, EXIT_RUNTIME, "cannot prepare the progress update: %s", pe.msg);
		return NULL;
	}
	PQclear(res);
	if (!PQenterPipelineMode(conn))
	{
		apply_err_set(err, EXIT_RUNTIME, "cannot enter pipeline mode: %s", applyerr_conn_msg(conn));
		return NULL;
	}
	a = xcalloc(1, sizeof(*a));
	a->meta = meta;
	a->rc = rc;
	a->pl = pipeline_new(conn, rc, opts->side_fd, opts->side_read);
	a->job = opts->job;
	a->copy_threshold = opts->copy_threshold;
	a->merge = opts->merge_updates;
	a->held = held_new(a->pl, opts->held_bytes, *replica_role);
	a->fields = xmalloc(sizeof(*a->fields) * SR_MAX_COLS);
	return a;
}

void
applier_set_meta(struct applier *a, PGconn *meta)
{
	a->meta = meta;
}

void
applier_free(struct applier *a)
{
	if (a == NULL)
		return;
	held_free(a->held);
	pipeline_free(a->pl);
	buf_free(&a->run_buf);
	buf_free(&a->run_vals);
	free(a->fields);
	buf_free(&a->sig);
	buf_free(&a->sql);
	free(a);
}
