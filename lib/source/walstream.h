/*
 * walstream.h - pg-walcat's transaction state machine: pgoutput messages in,
 * commit-ordered change-stream records out. Plain transactions are written as
 * they arrive; streamed in-progress ones go to the spool and are written whole
 * at their STREAM COMMIT; --endpos is decided here. Never writes a change
 * outside BEGIN/COMMIT, never a POSITION inside a transaction.
 */
#ifndef PGSYNC_WALSTREAM_H
#define PGSYNC_WALSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "out.h"

struct walstream_config {
	size_t max_message;			/* --max-message-bytes */
	const char *spool_dir;		/* NULL: $TMPDIR */
	lsn_t endpos;				/* LSN_INVALID: none */
};

/* What handling a message led to. */
enum ws_status {
	WS_OK = 0,
	WS_ENDPOS = 1,				/* nothing below endpos is still to come */
	WS_CLOSED = 2,				/* the reader went away (EPIPE) */
	WS_FAILED = 3,				/* error logged; exit with ws_exit_code() */
};

struct walstream;

struct walstream *ws_new(const struct walstream_config *cfg, struct out *out);
void ws_free(struct walstream *ws);

/*
 * Start a new stream (first connection or a reconnect): a PGCS header, and
 * everything in flight from the previous connection is forgotten. A
 * transaction left open in the output is thereby discarded by the reader.
 */
enum ws_status ws_begin_stream(struct walstream *ws, const char *sysid,
							   uint32_t timeline, const char *slot, lsn_t start,
							   int server_version_num);

/* The timeline's ancestors (lineage_format()) the next headers carry, so
 * that the reader can judge a new timeline by the same rule; "" none. */
void ws_set_history(struct walstream *ws, const char *history);

/* One pgoutput message from an XLogData message. */
enum ws_status ws_message(struct walstream *ws, const unsigned char *p, size_t n);

/* A keepalive: may write a POSITION (at most one a second) or reach endpos. */
enum ws_status ws_keepalive(struct walstream *ws, lsn_t wal_end, uint64_t now);

/* Set the end position once known (--endpos now is read from the source). */
void ws_set_endpos(struct walstream *ws, lsn_t endpos);

/* Write END at endpos (after WS_ENDPOS). */
enum ws_status ws_end(struct walstream *ws);

/* Hand buffered records to the output and flush it. */
enum ws_status ws_flush(struct walstream *ws);

/*
 * The same, up to the last whole transaction: the lines of one whose
 * messages are still arriving stay buffered until its COMMIT (or until
 * they fill a chunk). The reader can do nothing with them before, and a
 * write per message would wake it once per line.
 */
enum ws_status ws_flush_whole(struct walstream *ws);

/* A transaction is open in the output (BEGIN written, COMMIT not yet). */
bool ws_in_transaction(const struct walstream *ws);
/* Every transaction committing below this was written, and keepalive
 * positions not written as POSITION (rate limit) count too: what the
 * server may be told was written, never flushed. */
lsn_t ws_written(const struct walstream *ws);
/*
 * The most written by any stream of this run: after a reconnect the
 * downstream may still apply, and acknowledge, what the stream before the
 * new header carried, beyond where the new one starts.
 */
lsn_t ws_written_ever(const struct walstream *ws);
int ws_exit_code(const struct walstream *ws);

/* One info line: position reached and the counters. */
void ws_log_stats(const struct walstream *ws);

#endif
