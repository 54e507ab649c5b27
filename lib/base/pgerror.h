/*
 * pgerror.h - what a server error means and how it reads, for every
 * program: the error as libpq reports it (struct pgerr), the one table that
 * classifies a SQLSTATE (may a new session succeed? which exit code?), the
 * one form of "message (SQLSTATE x)", the one rule that keeps row values out
 * of a message, and an error on its way to the user (struct apply_err).
 * Never: log, connect, or decide anything about a SQLSTATE outside the table
 * in pgerror.c.
 */
#ifndef PGSYNC_PGERROR_H
#define PGSYNC_PGERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <libpq-fe.h>

struct pgerr {
	char sqlstate[6];			/* "" when none (e.g. connection lost) */
	char msg[1024];				/* one line, no trailing newline */
	bool retryable;
};

/* Fill err from a failed result (res may be NULL) and the connection. */
void pgerr_set(struct pgerr *err, PGconn *conn, const PGresult *res);
/* An error of our own (no SQLSTATE). */
void pgerr_printf(struct pgerr *err, bool retryable, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* src on one line: newlines and tabs become spaces, trailing dots and
 * spaces go (libpq messages end in a newline and may span lines). */
void pgerr_one_line(char *dst, size_t dstlen, const char *src);

/*
 * The classification (one table, pgerror.c): whether a new session may
 * succeed where this one failed, and the exit code an error with this
 * SQLSTATE ends a program with when it happens to the data (a change, a
 * snapshot frame). NULL or "" (no SQLSTATE): not retryable, exit 1.
 */
bool pgerr_retryable(const char *sqlstate);
int pgerr_exit_code(const char *sqlstate);
/* The exit code of err: 1 when a new session may succeed (err->retryable,
 * which also covers a lost connection without a SQLSTATE), else the table's. */
int pgerr_exit(const struct pgerr *err);
/*
 * For a statement that is not the data (bookkeeping, setup, catalog): the
 * data's classes do not apply, only a missing privilege is a prerequisite
 * (exit 3); everything else is a runtime error (exit 1).
 */
int pgerr_exit_code_setup(const char *sqlstate);

/*
 * The one form of a server error in a message: "message (SQLSTATE x)",
 * "message (column "c", SQLSTATE x)" with a column (may be NULL), or only
 * "message" when the error has no SQLSTATE. Returns out.
 */
#define PGERR_TEXT_MAX 1300
const char *pgerr_text(const struct pgerr *err, const char *column, char *out, size_t outlen);
/* Exit with code after "what: message (SQLSTATE x)", the form above. */
void pgerr_fatal(int code, const char *what, const struct pgerr *err) __attribute__((noreturn));

/*
 * The one rule that keeps row values out of a server message, applied to
 * err->msg in place: for data exceptions (class 22, except COPY format
 * errors 22P04, which quote column names), each "quoted" part becomes "..."
 * and each run of bytes ("0xe2 0x82 0xac", as conversion errors print a
 * character) becomes ...; the quoted name after "encoding " stays, so a
 * conversion error still names both encodings. Other messages are kept.
 */
void pgerr_redact(struct pgerr *err);

/*
 * An error on its way to the user: exit code and one line of text, and
 * whether a new target session may succeed where this one failed (a lost
 * connection, a server shutting down, a serialization failure or deadlock).
 * apply_err_set() clears retry; whoever knows better sets it after.
 */
struct apply_err {
	int code;
	bool retry;
	char msg[1200];
};

void apply_err_set(struct apply_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "WHAT: message (SQLSTATE x)" (WHAT from fmt) with code, and retry from pe. */
void apply_err_pg(struct apply_err *e, int code, const struct pgerr *pe, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
