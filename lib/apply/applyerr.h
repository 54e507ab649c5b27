/*
 * applyerr.h - what the applier has in flight, and turning a failed or
 * surprising result into one line for the operator with the right exit code.
 * Messages name the table, the column when known and the SQLSTATE; they
 * never carry a row value. What a SQLSTATE means, the form of the line and
 * the value-stripping rule are pgerror's (lib/base).
 */
#ifndef PGSYNC_APPLYERR_H
#define PGSYNC_APPLYERR_H

#include <stdbool.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "lsn.h"
#include "pgerror.h"
#include "relcache.h"

enum pend_kind {
	PK_BEGIN, PK_PREPARE, PK_CHANGE, PK_COPY, PK_TRUNCATE, PK_PROGRESS,
	PK_COMMIT, PK_ROLLBACK, PK_SYNC, PK_DEALLOCATE,
};

/*
 * The source transaction a statement belongs to, which its error names: the
 * apply error context (as the built-in apply worker keeps one). The
 * pipeline holds the current one and stamps every statement it sends with
 * it; what is sent later than read (held updates, a buffered insert run)
 * sends under its own (pipeline_set_txn()).
 */
struct apply_txn {
	uint64_t xid;
	lsn_t commit_lsn;
};

/* One statement whose result has not been read yet. */
struct pending {
	unsigned char kind;			/* enum pend_kind */
	char op;					/* I U D T */
	char kind2;					/* UPDATE/DELETE: N K O */
	struct rc_rel *rel;
	struct apply_txn txn;
	uint16_t nrows;				/* UPDATE of several held rows at once: how many */
};

/* Fill err from a failed result of p. */
void applyerr_result(const struct pending *p, const PGresult *res, PGconn *conn,
					 struct apply_err *err);
/* Check the row count or command tag of a successful result of p. */
bool applyerr_check_count(const struct pending *p, const PGresult *res,
						  struct apply_err *err);
/* The connection's error message on one line. */
const char *applyerr_conn_msg(PGconn *conn);
#endif
