/*
 * applyreport.h - what pg-apply tells others of its progress: the checkpoint
 * file, the heartbeat row, and the last word when it stops on an error.
 * It never moves a position: it reports the durable one in apply_state.
 */
#ifndef PGSYNC_APPLYREPORT_H
#define PGSYNC_APPLYREPORT_H

#include <stdbool.h>

#include "applystate.h"

/* The position the checkpoint file is to say (see struct apply_state). */
lsn_t applyreport_checkpoint_lsn(const struct apply_state *a);

/* Write the checkpoint file when due (or always with force). Nothing
 * before the job has a durable position; a write error exits 1. */
void applyreport_checkpoint(struct apply_state *a, bool force);

/* The heartbeat row when due (or always with force); a metadata session
 * lost alone is opened again here, once per heartbeat. */
void applyreport_heartbeat(struct apply_state *a, bool force, bool stopped, const char *state);

/* Milliseconds the main loop may sleep before the checkpoint or the
 * heartbeat needs it, and both when due. */
int applyreport_wait_ms(const struct apply_state *a);
void applyreport_tick(struct apply_state *a);

/*
 * End the open target transaction by rollback and close the apply session:
 * a COPY in flight fails with "pg-apply stopped: WHY". Every exit with a
 * transaction open passes here (pg-apply makes it log_fatal()'s hook too).
 */
void applyreport_abandon(struct apply_state *a, const char *why);

/*
 * Log the error and exit with its code, after a last checkpoint (and, for a
 * stop by signal, EXIT_DONE, a STOPPED heartbeat). Nothing uncommitted
 * survives: closing the session rolls it back.
 */
void applyreport_fail(struct apply_state *a, const struct apply_err *err)
	__attribute__((noreturn));

/* The same for an error about the input, prefixed "NAME:" or "NAME:LINE:". */
void applyreport_fail_in(struct apply_state *a, bool with_line, int code, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));
#define applyreport_fail_at(a, ...) applyreport_fail_in(a, true, __VA_ARGS__)

/* A read or decompression error of the input: one line, then exit 1. */
void applyreport_read_failed(struct apply_state *a) __attribute__((noreturn));
/* The next line is longer than --max-message-bytes: exit 5 naming the limit. */
void applyreport_line_too_long(struct apply_state *a) __attribute__((noreturn));

#endif
