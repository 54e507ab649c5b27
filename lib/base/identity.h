/*
 * identity.h - "which server is this", its first half: the source identity
 * a job recorded (system identifier, timeline) against the one a server or
 * a stream shows, and the one form of the message that says they differ.
 * Every program that finds another server says IDENTITY_OTHER_SERVER in its
 * message, and pgsync keys on those words: a job marked RESYNC_REQUIRED
 * only because another server answered continues once its own answers
 * again. The second half, whether a server of the right identity still has
 * the job's history (its WAL, its slot), is source/lineage. It only
 * compares: it never asks a server and never decides what a caller does.
 */
#ifndef PGSYNC_IDENTITY_H
#define PGSYNC_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The words every "this is another server" message holds. */
#define IDENTITY_OTHER_SERVER "another server than the job's"

/*
 * True when a server or stream of system identifier sysid can be the job's.
 * What the job does not know yet ("" or NULL) is not compared. Otherwise
 * false, with the reason in msg. Another timeline is not this rule's: it is
 * judged by its history (source/lineage).
 */
bool identity_same(const char *job_sysid, const char *sysid, char *msg, size_t msglen);

/* msg = "the source is another server than the job's: " + the detail. */
void identity_other(char *msg, size_t msglen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
