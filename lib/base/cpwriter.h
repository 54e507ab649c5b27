/*
 * cpwriter.h - a checkpoint file (checkpoint.h) kept by a thread of its own,
 * so that the program's main loop never waits on its fsyncs. pg-apply
 * rewrites its file every 200 ms while it applies; done in the loop, each
 * write held up the transactions that arrived meanwhile by the time of two
 * fsyncs, which a disk busy with the target's own WAL flushes stretches to
 * milliseconds.
 *
 * The newest position handed over wins: the thread always writes the last
 * one posted, so the file only moves forward when the positions posted do.
 * A forced write (at a stop, a new timeline, a loaded snapshot) posts and
 * waits until what was posted is on disk.
 */
#ifndef PGSYNC_CPWRITER_H
#define PGSYNC_CPWRITER_H

#include <stddef.h>

#include "checkpoint.h"

struct cpwriter;

/* A writer of the file at path (its thread starts with the first post). */
struct cpwriter *cpwriter_new(const char *path);

/* Have cp written; returns at once. */
void cpwriter_post(struct cpwriter *w, const struct checkpoint *cp);

/* Wait until every position posted is on disk: 0, or -1 with the message
 * of the failed write in err. */
int cpwriter_wait(struct cpwriter *w, char *err, size_t errlen);

/* -1 with its message in err when a write of the thread failed, else 0. */
int cpwriter_failed(struct cpwriter *w, char *err, size_t errlen);

#endif
