/*
 * sig.h - signals as events: handlers only write the signal number to a
 * self-pipe (and set a flag), so poll loops wake up and stop at a clean
 * boundary. Installing also ignores SIGPIPE so that a closed reader shows up
 * as EPIPE from write(2), which out.c treats as a quiet end.
 */
#ifndef PGSYNC_SIG_H
#define PGSYNC_SIG_H

#include <signal.h>
#include <stdbool.h>

/* Catch SIGINT, SIGTERM and SIGHUP; returns the pipe's read end for poll(). */
int sig_setup(void);
int sig_fd(void);
/* True once SIGINT/SIGTERM/SIGHUP arrived (cheap, no syscall). */
bool sig_stop_requested(void);
/* The first stop signal received, 0 if none. */
int sig_which(void);
/* "SIGTERM", "SIGINT", "SIGHUP" (else "a signal"), for "interrupted by ..." messages. */
const char *signal_name(int sig);
/* Empty the self-pipe after poll() reported it readable. */
void sig_drain(void);

#endif
