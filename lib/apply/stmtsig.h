/*
 * stmtsig.h - the signature of a statement that applies a change: which
 * operation, and per column whether it is set and how the row is found. It
 * is the key of the prepared statement cache (relcache.h) and the recipe
 * its SQL and parameters are built from. This header is the only code that
 * knows the layout; everything else uses these functions.
 *
 * Layout: op (I insert, U update, D delete, V update of several rows by
 * key), then the kind (- N K O: which values the WHERE compares, as in the
 * stream; for V the row count), then two marks per column: SET ('s' set,
 * '-' not, 'r' set to itself, without a value) and WHERE ('v' compare with a
 * value, 'n' IS NULL, '-' not used).
 * Parameters: the SET columns in column order, then the 'v' columns; for V,
 * per row each column that is set or compared, once, in column order.
 */
#ifndef PGSYNC_STMTSIG_H
#define PGSYNC_STMTSIG_H

#include <stdbool.h>

#include "buf.h"

#define STMTSIG_COMPARE 'v'
#define STMTSIG_IS_NULL 'n'
#define STMTSIG_NONE '-'

/* Start sig for op with kind (I U D: '-', N, K or O; V: see stmtsig_set_rows). */
static inline void
stmtsig_start(struct buf *sig, char op, char kind)
{
	buf_reset(sig);
	buf_putc(sig, op);
	buf_putc(sig, kind);
}

/* The marks of the next column: set or not, and its WHERE mark. */
static inline void
stmtsig_col(struct buf *sig, bool set, char where)
{
	buf_putc(sig, set ? 's' : '-');
	buf_putc(sig, where);
}

static inline char
stmtsig_op(const char *sig)
{
	return sig[0];
}

static inline char
stmtsig_kind(const char *sig)
{
	return sig[1];
}

/* Rows a statement changes: 1, or for op V the row count. */
static inline int
stmtsig_rows(const char *sig)
{
	return sig[0] == 'V' ? (unsigned char) sig[1] : 1;
}

static inline void
stmtsig_set_rows(char *sig, int rows)
{
	sig[1] = (char) rows;
}

static inline bool
stmtsig_sets(const char *sig, int col)
{
	return sig[2 + 2 * col] == 's';
}

static inline void
stmtsig_mark_set(char *sig, int col)
{
	sig[2 + 2 * col] = 's';
}

/* "col = col": an update that must change a row but has no value to set. */
static inline bool
stmtsig_sets_itself(const char *sig, int col)
{
	return sig[2 + 2 * col] == 'r';
}

static inline void
stmtsig_mark_itself(char *sig, int col)
{
	sig[2 + 2 * col] = 'r';
}

/* The WHERE mark of col: STMTSIG_COMPARE, STMTSIG_IS_NULL or STMTSIG_NONE. */
static inline char
stmtsig_where(const char *sig, int col)
{
	return sig[3 + 2 * col];
}

static inline bool
stmtsig_compares(const char *sig, int col)
{
	return sig[3 + 2 * col] == STMTSIG_COMPARE;
}

/* Parameters of the statement of sig over a table of ncols columns. */
static inline int
stmtsig_nparams(const char *sig, int ncols)
{
	int n = 0;

	for (int i = 0; i < ncols; i++)
		n += sig[0] == 'V' ? (stmtsig_sets(sig, i) || stmtsig_compares(sig, i))
			: stmtsig_sets(sig, i) + stmtsig_compares(sig, i);
	return n * stmtsig_rows(sig);
}

#endif
