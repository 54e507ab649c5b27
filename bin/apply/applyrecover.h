/*
 * applyrecover.h - a lost or failed target session replaced: new sessions,
 * the position the target committed, the stream rewound to apply again.
 * It never commits or skips a line itself: the main loop applies them again.
 */
#ifndef PGSYNC_APPLYRECOVER_H
#define PGSYNC_APPLYRECOVER_H

#include <stdbool.h>

#include "applystate.h"

/*
 * Replace the sessions after the retryable error why, or exit when that
 * cannot be done: not retryable, --no-loop, the lines read since the last
 * commit were not all kept, or --max-retries attempts failed.
 */
void applyrecover_session(struct apply_state *a, const struct apply_err *why);

/*
 * Everything read so far is committed on the target, or void: start the
 * replay window again once every commit in it is flushed; force: flush
 * them first (when even that fails, it starts again, and a->window_lsn
 * tells a recovery what it no longer holds). With keep_line while a line
 * is being applied, that line stays in it, with the stream's state from
 * before it.
 */
void applyrecover_window_settle(struct apply_state *a, bool keep_line, bool force);

/* Close the sessions (a clean end). */
void applyrecover_drop_sessions(struct apply_state *a);

#endif
