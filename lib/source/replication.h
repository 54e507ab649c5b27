/*
 * replication.h - the streaming replication protocol on a logical
 * replication connection: START_REPLICATION with pgoutput options chosen by
 * server version, the server's XLogData ('w') and keepalive ('k') messages,
 * and the standby status update ('r') that confirms positions.
 * Confirms only the positions its caller passes: never invents one.
 */
#ifndef PGSYNC_REPLICATION_H
#define PGSYNC_REPLICATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "buf.h"
#include "conn.h"
#include "lsn.h"

/* pgoutput options for a server version: protocol 1 before 14; protocol 2
 * with messages and streaming from 14 on. Text values, never binary. */
struct repl_options {
	int proto_version;
	bool messages;
	bool streaming;
};
void repl_options_for(int server_version, struct repl_options *o);

/*
 * The START_REPLICATION command. Walsenders take only the simple query
 * protocol, so names are quoted here: the slot as an identifier, the
 * publications as a list of quoted identifiers inside a string literal.
 */
void repl_start_command(struct buf *b, const char *slot, lsn_t start,
						const struct repl_options *o,
						const char *const *pubs, int npubs);

/* Send the command and expect COPY BOTH; false with err otherwise. */
bool repl_start(PGconn *conn, const char *command, struct pgerr *err);

/* A message from the server, parsed from one CopyData payload. */
struct repl_msg {
	char kind;					/* 'w' or 'k' */
	lsn_t data_start;			/* 'w' */
	lsn_t wal_end;
	int64_t send_time;
	bool reply_requested;		/* 'k' */
	const unsigned char *data;	/* 'w': the pgoutput message */
	size_t len;
};
/* False for anything else or a short message (with a reason in err). */
bool repl_parse(const char *buf, size_t len, struct repl_msg *m,
				char *err, size_t errlen);

/* Standby status update: written, flushed and applied position. */
bool repl_send_status(PGconn *conn, lsn_t write, lsn_t flush, lsn_t apply,
					  bool reply_requested, struct pgerr *err);

/*
 * End COPY BOTH as the protocol wants: CopyDone, then wait up to timeout_ms
 * for the server's, so that the walsender ends instead of finding a closed
 * socket. Whatever data still arrives is discarded.
 */
void repl_finish(PGconn *conn, int timeout_ms);

/*
 * The exit code an error from the server means for a replication client:
 * EXIT_CONTINUITY for a missing or invalidated slot or WAL that is gone,
 * EXIT_PREFLIGHT for a missing publication or wal_level below logical,
 * EXIT_RUNTIME otherwise.
 */
int repl_error_exit(const struct pgerr *err);

#endif
