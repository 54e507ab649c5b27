/*
 * pgoutput.h - decode one message of PostgreSQL's pgoutput logical
 * replication protocol (versions 1-4) from a byte buffer into a struct.
 * A pure function: no I/O, no allocation, pointers into the caller's buffer.
 * It must never read outside the buffer or trust a length it has not checked.
 */
#ifndef PGSYNC_PGOUTPUT_H
#define PGSYNC_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* A tuple's columns at most (common.h). */
#define PGO_MAX_COLS PG_MAX_COLS

/* Message type bytes, as on the wire. */
enum pgo_type {
	PGO_BEGIN = 'B',
	PGO_COMMIT = 'C',
	PGO_ORIGIN = 'O',
	PGO_RELATION = 'R',
	PGO_TYPE = 'Y',
	PGO_INSERT = 'I',
	PGO_UPDATE = 'U',
	PGO_DELETE = 'D',
	PGO_TRUNCATE = 'T',
	PGO_MESSAGE = 'M',
	PGO_STREAM_START = 'S',
	PGO_STREAM_STOP = 'E',
	PGO_STREAM_COMMIT = 'c',
	PGO_STREAM_ABORT = 'A',
};

/* Column value kinds in tuple data, as on the wire. */
enum pgo_kind {
	PGO_NULL = 'n',
	PGO_UNCHANGED = 'u',		/* unchanged TOASTed value, not sent */
	PGO_TEXT = 't',
	PGO_BINARY = 'b',
};

struct pgo_str {
	const char *p;				/* not NUL-terminated for values */
	uint32_t len;
};

struct pgo_col {
	const char *p;
	uint32_t len;
	char kind;					/* enum pgo_kind */
};

struct pgo_tuple {
	uint16_t ncols;
	struct pgo_col cols[PGO_MAX_COLS];
};

struct pgo_attr {
	struct pgo_str name;		/* NUL-terminated in the buffer */
	uint32_t typoid;
	int32_t typmod;
	uint8_t flags;				/* bit 0: part of the replica identity key */
};

#define PGO_ATTR_KEY 1
#define PGO_TRUNCATE_CASCADE 1
#define PGO_TRUNCATE_RESTART_SEQS 2
#define PGO_MESSAGE_TRANSACTIONAL 1

/*
 * One decoded message. Only the member for its type is filled. Strings and
 * values point into the buffer passed to pgo_decode and live as long as it.
 * Large (two tuples of PGO_MAX_COLS): allocate once and reuse.
 */
struct pgo_msg {
	char type;					/* enum pgo_type */
	bool has_xid;				/* change messages inside a stream block */
	uint32_t xid;				/* streamed (sub)transaction, or BEGIN's xid */

	union {
		struct { uint64_t final_lsn; int64_t commit_time; } begin;
		struct { uint8_t flags; uint64_t commit_lsn, end_lsn; int64_t commit_time; } commit;
		struct { uint64_t lsn; struct pgo_str name; } origin;
		struct {
			uint32_t relid;
			struct pgo_str nspname, relname;	/* nspname "" means pg_catalog */
			char replident;		/* d, f, i, n */
			uint16_t natts;
		} rel;
		struct { uint32_t typoid; struct pgo_str nspname, typname; } typ;
		struct {
			uint32_t relid;
			char old_kind;		/* 0, 'K' or 'O' (UPDATE, DELETE) */
		} change;
		struct {
			uint32_t nrelids;
			uint8_t flags;
			const unsigned char *relids;	/* nrelids big-endian uint32 */
		} truncate;
		struct {
			uint8_t flags;
			uint64_t lsn;
			struct pgo_str prefix;
			struct pgo_str content;
		} message;
		struct { bool first_segment; } stream_start;
		struct { uint32_t subxid; bool has_info; uint64_t abort_lsn; int64_t abort_time; } stream_abort;
	} u;

	/* RELATION attributes; UPDATE/DELETE old tuple; INSERT/UPDATE new tuple. */
	struct pgo_attr attrs[PGO_MAX_COLS];
	struct pgo_tuple oldtup, newtup;
};

/*
 * Decode the message in buf[0..len). in_stream says whether it was received
 * between STREAM START and STREAM STOP: there, change, relation, type and
 * message messages carry a transaction id first. Returns true on success; on
 * failure writes a one-line reason (no data from the message) to err.
 */
/* Does a message of this type carry its (sub)transaction id first when it is
 * sent inside a stream block (STREAM START .. STOP)? */
bool pgo_streamed_has_xid(char type);

bool pgo_decode(const unsigned char *buf, size_t len, bool in_stream,
				struct pgo_msg *m, char *err, size_t errlen);

/* The i-th relation id of a decoded TRUNCATE. */
uint32_t pgo_truncate_relid(const struct pgo_msg *m, uint32_t i);

/* A short name for a message type byte, for messages ("insert"). */
const char *pgo_type_name(char type);

#endif
