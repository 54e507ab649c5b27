/*
 * timedwait.h - the one clock of the thread pools' timed waits (the copy
 * workers of pg-snapshot-dump, the loader of pg-apply): condition variables
 * wait on CLOCK_MONOTONIC, so a step of the wall clock never stretches or
 * cuts a wait. Never anything but the clock.
 */
#ifndef PGSYNC_TIMEDWAIT_H
#define PGSYNC_TIMEDWAIT_H

#include <pthread.h>
#include <time.h>

/* A condition variable whose timed waits take tw_deadline()'s times. */
void tw_cond_init(pthread_cond_t *cv);
/* The time ms milliseconds from now, for pthread_cond_timedwait(). */
void tw_deadline(struct timespec *ts, int ms);

#endif
