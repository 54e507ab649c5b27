/*
 * pipeline.h - the statements of one target session, sent in libpq pipeline
 * mode and each result checked the moment it arrives: a fixed ring of what
 * is in flight (struct pending, applyerr.h), the target transaction they
 * run in, their parameters, the prepared statement of each signature
 * (stmtsig.h, relcache.h) prepared on first use and deallocated when it is
 * replaced, and COPY in between, which pipeline mode does not allow.
 *
 * Knows no change records and no batching: the applier (applier.c), the row
 * statements (rowstmt.c) and the held updates (applyheld.c) all send
 * through it. Never lets a COMMIT go out before every earlier result is in
 * and checked.
 */
#ifndef PGSYNC_PIPELINE_H
#define PGSYNC_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <libpq-fe.h>

#include "applyerr.h"
#include "record.h"
#include "relcache.h"
#include "streamread.h"

/* Parameters of one statement at most. */
#define PIPELINE_MAX_PARAMS (2 * SR_MAX_COLS)

struct pipeline;

/*
 * Over conn, already in pipeline mode. While blocked on the target's
 * results it watches side_fd() (unless NULL or -1) and calls side_read()
 * when that is readable, so the input keeps flowing; a stop request
 * cancels the running statement.
 */
struct pipeline *pipeline_new(PGconn *conn, struct relcache *rc, int (*side_fd)(void),
							  void (*side_read)(void));
void pipeline_free(struct pipeline *pl);

/* Open the target transaction (BEGIN) unless it is open. */
bool pipeline_begin(struct pipeline *pl, struct apply_err *err);
bool pipeline_txn_open(const struct pipeline *pl);

/* Send sql without parameters; its result is checked as p. */
bool pipeline_sql(struct pipeline *pl, const char *sql, const struct pending *p,
				  struct apply_err *err);
/* ... with text parameters (NULL for SQL NULL), sent unnamed. */
bool pipeline_sql_params(struct pipeline *pl, const char *sql, int nparams, const char *const *params,
						 const struct pending *p, struct apply_err *err);
/* Run a statement the caller prepared before pipeline mode. */
bool pipeline_prepared(struct pipeline *pl, const char *name, int nparams,
					   const char *const *params, const struct pending *p, struct apply_err *err);

/*
 * Parameters: pipeline_params_reset() forgets them, pipeline_param() sets
 * parameter i from a stream field (COPY-escaped, \N for NULL); false when
 * the value is malformed (pipeline_bad_value() says so).
 */
void pipeline_params_reset(struct pipeline *pl);
bool pipeline_param(struct pipeline *pl, size_t i, const struct field *f);
bool pipeline_bad_value(const struct rc_rel *rel, const char *op, struct apply_err *err);

/*
 * The statement of signature sig for rel with parameters [base, base +
 * nparams), prepared on first use (unnamed when the table has too many
 * shapes); its result is checked as p.
 */
bool pipeline_stmt(struct pipeline *pl, struct rc_rel *rel, const char *sig, size_t siglen,
				   const struct pending *p, size_t base, int nparams, struct apply_err *err);

/* The apply error context every statement sent from now on carries. */
void pipeline_set_txn(struct pipeline *pl, struct apply_txn txn);
struct apply_txn pipeline_txn(const struct pipeline *pl);

/* Wait until every result sent so far is in and checked. */
bool pipeline_wait(struct pipeline *pl, struct apply_err *err);

/* Every result in and checked, then COMMIT (ROLLBACK) and its result. */
bool pipeline_commit(struct pipeline *pl, struct apply_err *err);
/* True at once when no transaction is open. */
bool pipeline_rollback(struct pipeline *pl, struct apply_err *err);

/*
 * COPY sql FROM STDIN: waits for every result, leaves pipeline mode and
 * starts the COPY; a failure is reported as p. Then pipeline_copy_data()
 * sends rows, and pipeline_copy_end() finishes (abort_msg NULL) or abandons
 * the COPY and returns to pipeline mode.
 */
bool pipeline_copy_start(struct pipeline *pl, const char *sql, const struct pending *p,
						 struct apply_err *err);
bool pipeline_copy_data(struct pipeline *pl, const char *data, size_t len, struct apply_err *err);
bool pipeline_copy_end(struct pipeline *pl, const char *abort_msg, const struct pending *p,
					   struct apply_err *err);
bool pipeline_in_copy(const struct pipeline *pl);

/*
 * On the way out after an error: a COPY in flight fails with 'why' (never
 * ends as a success), and a ROLLBACK of the open transaction is sent behind
 * everything queued. Waits for nothing: the session is closed next, which
 * rolls back on the server too; this only makes the end explicit.
 */
void pipeline_abandon(struct pipeline *pl, const char *why);

#endif
