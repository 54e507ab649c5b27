/*
 * pace.h - when pg-apply commits a batch as its input runs dry: at once for
 * a live producer, after a moment of quiet for one catching up. A batch is
 * committed once the input has been quiet for QUIET_MS. A producer catching
 * up leaves gaps of microseconds between its writes; committing in each
 * would stop reading (and so stall decoding on the source) while the target
 * finishes the batch, hundreds of times a second. Only a producer that is
 * catching up needs that wait: one that sent less than LIVE_BYTES in the
 * last one to two rate windows is live, and each of its transactions is
 * committed the moment the input runs dry (pgbench at 500 transactions a
 * second is about 250 kB/s of stream, a backlog being read tens of MB/s).
 * Committing is what slows a live producer down enough to be batched again,
 * as in a group commit.
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

/* n bytes of stream were read. */
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
