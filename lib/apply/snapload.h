/*
 * snapload.h - loading a snapshot section of the change stream (SNAPSHOT ..
 * SNAPSHOTDONE, formats/stream-v1.md) into the target over several
 * connections in parallel: each COPY frame goes to one worker as a
 * COPY ... FROM STDIN of its rows, passed through unchanged. Per-table state
 * lands in pgsync.table_sync. Memory is bounded by the number of frames in
 * flight, never by table size. pg-apply calls this when it reads SNAPSHOT.
 */
#ifndef PGSYNC_SNAPLOAD_H
#define PGSYNC_SNAPLOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "input.h"
#include "loadworker.h"
#include "lsn.h"
#include "streamread.h"

/*
 * Called right after pg-apply's parser sr read the SNAPSHOT record snapshot.
 * Reads lines from in up to and including SNAPSHOTDONE, each through sr,
 * loads every frame and records table_sync state. Returns an exit code (EXIT_DONE when
 * the whole section was loaded and committed) and sets *position to the
 * SNAPSHOTDONE position. Errors are logged with the line number; on any
 * error nothing is reported done that was not committed.
 */
int snapload_section(struct input *in, struct streamread *sr, const struct sr_record *snapshot,
					 const struct snapload_opts *opts, lsn_t *position);

#endif
