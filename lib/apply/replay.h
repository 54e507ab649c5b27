/*
 * replay.h - the stream lines pg-apply read since its last target commit
 * that the target has flushed, kept so that they can be applied again on a
 * new target session when the old one was lost, or the target crashed and
 * came back without its unflushed commits: a pipe cannot be read twice, and
 * the producer must not be asked for them again (it would have to restart,
 * and everything read ahead with it).
 *
 * The lines of a window (from one flushed target commit to a later one,
 * always at a source transaction boundary) are held up to a limit; past it
 * the window is marked overflowed and only a restart of the pipeline can
 * recover it. A replay must parse the lines with the table definitions the
 * stream had at the start of the window: a RELATION inside the window may
 * have redefined a table used before it, so the replay starts with the
 * definitions of those tables as they were (kept from the earlier windows).
 */
#ifndef PGSYNC_REPLAY_H
#define PGSYNC_REPLAY_H

#include <stdbool.h>
#include <stddef.h>

struct replay;

/* limit: the most bytes of lines one window holds. */
struct replay *replay_new(size_t limit);
void replay_free(struct replay *r);

/* A line was read (from the input or from replay_next()) and is applied. */
void replay_record(struct replay *r, const char *line, size_t len);

/*
 * Everything recorded is durable on the target, or void: a new window.
 * keep_last: except the last line recorded, which is being applied (a
 * batch is committed while the line after it is read), and which starts
 * the new window.
 */
void replay_reset(struct replay *r, bool keep_last);

/* A stream header: the tables of the stream before it are undefined. */
void replay_forget_relations(struct replay *r);

/* Bytes in the window; true when some were not kept. */
size_t replay_bytes(const struct replay *r);
bool replay_overflowed(const struct replay *r);

/*
 * Read the window again: replay_next() returns the definitions the window
 * needs, then its lines, then the lines an earlier replay had not reached
 * yet; the window starts empty. Must not be called when overflowed.
 */
void replay_start(struct replay *r);

/* The next line to apply again (valid until the next replay_start()). */
bool replay_next(struct replay *r, const char **line, size_t *len);

#endif
