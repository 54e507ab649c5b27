/*
 * flushwatch.h - which committed source positions are on the target's disk.
 *
 * pg-apply commits with synchronous_commit off by default, as a
 * subscription's apply worker does: a commit returns before the target has
 * flushed its WAL, so a target crash may take the last few commits back.
 * The checkpoint file (what pg-walcat and pg-ack confirm to the source) must
 * therefore say only positions whose commits are flushed. A client cannot
 * read a commit's own WAL position, so this watch bounds it: every commit
 * that returned before a query of pg_current_wal_insert_lsn() ends at or
 * below the position it returns, and is flushed once
 * pg_current_wal_flush_lsn() reaches that position. The WAL writer flushes
 * an asynchronous commit within three wal_writer_delay (600 ms by default);
 * a commit still unflushed after FLUSHWATCH_PATIENCE_MS, and every forced
 * check, is flushed by one synchronous commit that writes WAL (WAL is
 * flushed in order, so it carries every earlier commit of every session).
 */
#ifndef PGSYNC_FLUSHWATCH_H
#define PGSYNC_FLUSHWATCH_H

#include <stdbool.h>
#include <libpq-fe.h>

#include "lsn.h"
#include "pgerror.h"

/* The WAL positions are asked at most this often. */
#define FLUSHWATCH_POLL_MS 200
/* A commit not flushed after this long is flushed by a synchronous write. */
#define FLUSHWATCH_PATIENCE_MS 1000

struct flushwatch;

/*
 * durable_commits: the apply session commits with a synchronous_commit
 * that waits for the local flush (anything but off): every commit is
 * flushed when it returns. job: the pgsync.job row the synchronous write
 * touches.
 */
struct flushwatch *flushwatch_new(bool durable_commits, const char *job);
void flushwatch_free(struct flushwatch *w);

/* The target committed the source position source (it returned). */
void flushwatch_committed(struct flushwatch *w, lsn_t source);

/*
 * A session found the target holding committed (at start, or reconnected,
 * where it may be less than was noted: a crash lost unflushed commits):
 * forget every noted commit and watch committed alone, flushed or not
 * whatever durable_commits says (another session committed it). What was
 * flushed stays.
 */
void flushwatch_restart(struct flushwatch *w, lsn_t committed);

/*
 * Learn what is flushed, on conn (a session in no transaction, with
 * synchronous_commit on): at most every FLUSHWATCH_POLL_MS unless force;
 * force, or a commit unflushed for FLUSHWATCH_PATIENCE_MS, flushes
 * everything noted before returning. False with err on a failed query, and
 * nothing learned.
 */
bool flushwatch_poll(struct flushwatch *w, PGconn *conn, bool force, struct pgerr *err);

/* Some commit noted is not known to be flushed yet. */
bool flushwatch_pending(const struct flushwatch *w);

/* The newest source position known flushed; LSN_INVALID: none yet. */
lsn_t flushwatch_flushed(const struct flushwatch *w);

/* Milliseconds until a poll may learn more; -1: nothing is unflushed. */
int flushwatch_wait_ms(const struct flushwatch *w);

#endif
