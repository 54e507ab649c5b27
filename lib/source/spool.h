/*
 * spool.h - streamed in-progress transactions (pgoutput streaming mode) kept
 * on disk until their STREAM COMMIT, so that the output stays commit-ordered
 * and memory stays bounded whatever the transaction size. Files are unlinked
 * at creation: an aborted transaction or a killed process leaves no trace.
 * Never holds more than one message and one I/O buffer in memory.
 */
#ifndef PGSYNC_SPOOL_H
#define PGSYNC_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spool;

/* Files go to dir (NULL: $TMPDIR, else /tmp); no message exceeds max_message. */
struct spool *spool_new(const char *dir, size_t max_message);
void spool_free(struct spool *s);

/*
 * STREAM START of top-level transaction xid: later appends go to its file
 * (created for the first segment). False with err on an I/O error or a
 * protocol violation (a later segment of an unknown transaction).
 */
bool spool_start(struct spool *s, uint32_t xid, bool first_segment,
				 char *err, size_t errlen);
/*
 * One raw message of the current segment. subxid is the transaction id the
 * message carries (0 for none): where a subtransaction's changes begin is
 * remembered, as PostgreSQL's apply worker does, so that aborting it can cut
 * them off.
 */
bool spool_append(struct spool *s, uint32_t subxid, const void *p, size_t n,
				  char *err, size_t errlen);
/* STREAM STOP: the segment is complete (its buffer is written out). */
bool spool_stop(struct spool *s, char *err, size_t errlen);
/*
 * STREAM ABORT: subxid == xid discards the transaction; otherwise the file
 * is cut back to where subxid's first change was (nothing when it had none).
 */
bool spool_abort(struct spool *s, uint32_t xid, uint32_t subxid,
				 char *err, size_t errlen);

/* STREAM COMMIT: read xid's messages back, in order, then discard them. */
bool spool_replay_open(struct spool *s, uint32_t xid, char *err, size_t errlen);
/* 1 with the next message in *p, *n (valid until the next call); 0 at the
 * end; -1 with err on an I/O error or a damaged file. */
int spool_replay_next(struct spool *s, const unsigned char **p, size_t *n,
					  char *err, size_t errlen);
void spool_replay_close(struct spool *s);

/* Forget every transaction (after a reconnect the server sends them again). */
void spool_reset(struct spool *s);

#endif
