/*
 * srcstatus.h - the state of pg-walcat's source connection, handed to
 * pg-apply for its heartbeat. The monitoring row (pgsync.job_runtime) is
 * written by pg-apply, which never talks to the source, yet it must say when
 * the source is unreachable and how often the connection was lost; pg-walcat
 * knows both. So pg-walcat --status-file writes them to a file and pg-apply
 * --source-status reads it at each heartbeat, the way positions pass between
 * the programs as checkpoint files.
 *
 * File format: one line, replaced atomically (temp file, rename; no fsync:
 * it describes the present, not progress that must survive a crash):
 *     <state> TAB <reconnects> LF
 * <state> is connected, reconnecting or disconnected; <reconnects> counts
 * the connections that were lost and streamed again in this run.
 */
#ifndef PGSYNC_SRCSTATUS_H
#define PGSYNC_SRCSTATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum src_state { SRC_CONNECTED, SRC_RECONNECTING, SRC_DISCONNECTED };

struct src_status {
	enum src_state state;
	uint32_t reconnects;
};

/* "connected", "reconnecting" or "disconnected". */
const char *srcstatus_name(enum src_state state);

/* 0 on success; -1 with a message in err. */
int srcstatus_write(const char *path, const struct src_status *st, char *err, size_t errlen);

/* true when the file holds a valid line; false when it is missing, empty or
 * anything else (the caller reports the state as unknown). */
bool srcstatus_read(const char *path, struct src_status *st);

#endif
