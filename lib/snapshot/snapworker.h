/*
 * snapworker.h - the copy engine of pg-snapshot-dump: worker threads, each
 * with its own source connection inside the imported snapshot, take parts
 * of the plan (largest first) and fill frame buffers; one writer thread puts
 * whole frames on the output and writes TABLEDONE once every part of a table
 * is out, then SNAPSHOTDONE. Memory is (workers + 1) x frame size, plus one
 * frame grown for a row larger than a frame (up to max_row). It never
 * retries inside a snapshot and never reports done what was not written.
 */
#ifndef PGSYNC_SNAPWORKER_H
#define PGSYNC_SNAPWORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "out.h"
#include "snapplan.h"

struct snaprun_opts {
	const char *conninfo;		/* source */
	const char *snapshot;		/* exported snapshot every worker imports */
	lsn_t position;				/* for SNAPSHOTDONE */
	int jobs;					/* worker threads, >= 1 */
	size_t frame_size;			/* upper bound of one frame, bytes */
	size_t max_row;				/* longest ROW line: a frame grows for one row up to it */
	bool chunked;				/* a CHUNKS section: key parts cut into chunks */
	uint64_t chunk_rows;		/* chunked: rows of a chunk at most */
};

/* What has been written for one table (rows and bytes of COPY text). */
struct snap_tstat {
	uint64_t rows;
	uint64_t bytes;
	int parts_done;
	bool started;
	bool done;					/* TABLEDONE written */
	uint64_t started_ms;
	uint64_t finished_ms;
};

enum snaprun_state { SNAPRUN_COPYING, SNAPRUN_DONE, SNAPRUN_FAILED };

struct snaprun;

/* Start the workers and the writer; the writer owns out from now on. */
struct snaprun *snaprun_start(const struct snap_plan *plan, const struct snaprun_opts *o,
							  struct out *out);
/* Wait up to timeout_ms for the run to change (a table done, the end). */
enum snaprun_state snaprun_wait(struct snaprun *r, int timeout_ms);
/* Copy the per-table counters (plan->ntables entries) and the tables done. */
int snaprun_stats(struct snaprun *r, struct snap_tstat *stats);
/* Make the run fail with this message unless it failed already. */
void snaprun_fail(struct snaprun *r, int exit_code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Chunked: the group's time is up. No chunk is started any more, each
 * worker ends its chunk at the row it is at and stops its part there; a
 * table copied in one piece that started is finished. Then CHUNKSDONE. */
void snaprun_time_up(struct snaprun *r);
/* Cancel the workers' queries and wait up to wait_ms for them to exit. */
void snaprun_cancel(struct snaprun *r, int wait_ms);
/* The failure: exit code, and the message through *msg. */
int snaprun_error(struct snaprun *r, const char **msg);
/* After SNAPRUN_DONE: join the threads and free the run. */
void snaprun_finish(struct snaprun *r);

#endif
