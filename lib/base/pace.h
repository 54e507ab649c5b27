/*
 * pace.h - is a stream's producer live or catching up? Both ends of the
 * pipe ask it: pg-walcat before it naps to let messages gather, pg-apply
 * before it commits a batch as its input runs dry.
 *
 * A producer that sent less than LIVE_BYTES in the last one to two rate
 * windows is live (pgbench at 500 transactions a second is about 250 kB/s of
 * stream, a backlog being read tens of MB/s). A live stream gets no waiting:
 * each transaction goes on, and is committed, the moment it is whole.
 * Waiting is only for a backlog: there the gaps between writes are
 * microseconds, and passing on (or committing) at each one would cost both
 * processes more than the data, hundreds of times a second. pg-apply
 * commits a backlog's batch once its input has been quiet for QUIET_MS;
 * committing is what slows a live producer down enough to be batched
 * again, as in a group commit.
 */
#ifndef PGSYNC_PACE_H
#define PGSYNC_PACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Stream bytes read in the current and the previous rate window. */
struct pace {
	uint64_t start_ms, cur, prev;
};

/* n bytes of stream were read (or received). */
static inline void
pace_add(struct pace *p, size_t n)
{
	p->cur += n;
}

/*
 * Start a new rate window once the current one is old enough. Called every
 * 256 lines and whenever the input runs dry, so a window grows past two only
 * when no line was read for that long: its bytes are then not recent, and a
 * producer that is still ahead shows again within a window.
 */
void pace_tick(struct pace *p);

/* Is the producer live rather than catching up? */
bool pace_live(struct pace *p);

/*
 * Did fd stay quiet for QUIET_MS (false: more arrived first)? Never waits
 * past max_delay_ms after batch_start_ms (0: the batch has no start, as a
 * POSITION-only one).
 */
bool pace_quiet(int fd, uint64_t batch_start_ms, uint64_t max_delay_ms);

#endif
