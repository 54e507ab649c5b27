/*
 * srrecord.h - what a parsed line of the stream is: the record types, the
 * table descriptions the parser keeps, and struct sr_record. The parser's
 * parts (srtoken, srchange, srsection, streamread) and every reader share
 * them, with the checks of a field that need no parser state. Below all
 * of them.
 */
#ifndef PGSYNC_SRRECORD_H
#define PGSYNC_SRRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "lsn.h"
#include "record.h"

/* A table's columns at most (common.h). */
#define SR_MAX_COLS PG_MAX_COLS

enum sr_type {
	SR_HEADER, SR_RELATION, SR_TYPE, SR_BEGIN, SR_ORIGIN, SR_COMMIT,
	SR_INSERT, SR_UPDATE, SR_DELETE, SR_TRUNCATE, SR_MESSAGE, SR_POSITION,
	SR_END, SR_SNAPSHOT, SR_COPY, SR_ROW, SR_ENDCOPY, SR_TABLEDONE, SR_SNAPSHOTDONE,
	SR_CHUNKS, SR_CHUNK, SR_CHUNKSDONE,
};

/* The link of a name table entry, keyed by the raw "schema TAB table" span
 * of the stream (p, n). The parser's own: consumers never touch it. */
struct sr_key {
	struct sr_key *next;
	uint64_t hash;
	char *p;
	size_t n;
};

struct sr_col {
	char *name;					/* unescaped */
	uint32_t typoid;
	int32_t typmod;
	bool key;
};

/*
 * A table as the stream describes it. One object per schema/table name for
 * the reader's lifetime: a new RELATION updates it in place and bumps gen,
 * so consumers can keep pointers and notice redefinitions cheaply.
 */
struct sr_rel {
	struct sr_key k;			/* first: the raw "schema TAB table" of the stream */
	char *schema, *table;		/* unescaped */
	uint32_t relid;
	char identity;				/* d f i n */
	int ncols;
	struct sr_col *cols;
	uint64_t gen;				/* distinct for every RELATION read */
	bool defined;				/* described in the current stream */
	void *user;					/* consumer data, never touched here */
};

/*
 * A table of a snapshot section, as its COPY and TABLEDONE records name
 * it. One object per name for the section; it stays valid after
 * SNAPSHOTDONE until the next section opens, sr_rewind() or sr_free().
 */
struct sr_table {
	struct sr_key k;			/* first: the raw "schema TAB table" */
	char *schema, *table;		/* unescaped */
	char *shown;				/* "schema.table" for messages, escaped as in the stream */
	char *cols;					/* raw "ncols TAB names" of its first COPY, or NULL */
	size_t colslen;
	int ncols;					/* of its first COPY */
	uint64_t rows, bytes;		/* of its closed frames */
	bool done;					/* its TABLEDONE was read */
	bool keyed;					/* a chunk section copies it in key chunks, not in one piece */
	void *user;					/* consumer data, never touched here */
};

#define SR_TRUNC_CASCADE 1
#define SR_TRUNC_RESTART 2

struct sr_record {
	enum sr_type type;
	struct field *f;			/* the raw fields, valid until the next call */
	size_t nf;					/* ROW: 1, its values are not split (copy_row) */
	/* PGCS */
	char sysid[24];
	uint32_t timeline;
	char slot[128];
	bool interrupted;			/* a transaction was open: it is void */
	uint64_t open_xid;			/* ... and this was its xid */
	struct field server;		/* the server= feature's value, empty if none */
	struct field history;		/* the history= feature's value, empty if none */
	/* BEGIN, COMMIT, ORIGIN; start of PGCS; POSITION, END, SNAPSHOT,
	 * SNAPSHOTDONE, CHUNKS and CHUNKSDONE position */
	uint64_t xid;
	lsn_t lsn;					/* commit LSN or position */
	lsn_t end_lsn;				/* COMMIT */
	struct field time;			/* BEGIN, COMMIT, POSITION */
	/* changes */
	struct sr_rel *rel;
	char kind;					/* UPDATE/DELETE: N K O; INSERT: 0 */
	const struct field *oldv, *newv;	/* ncols values each, or NULL */
	const char *copy_row;		/* INSERT, ROW: the values as a COPY text row */
	size_t copy_len;
	/* TRUNCATE */
	int trunc_flags;
	struct sr_rel **trunc_rels;
	size_t ntrunc;
	/* MESSAGE */
	bool transactional;
	/* snapshot and chunk sections */
	struct sr_table *table;		/* COPY, ROW, ENDCOPY, TABLEDONE, CHUNK */
	uint64_t ntables;			/* SNAPSHOT, CHUNKS */
	int nkey;					/* CHUNK: nkey key columns, lo and hi values: */
	const struct field *key_cols, *lo, *hi;	/* lo, hi all \N: unbounded */
	const struct field *colnames;	/* COPY: table->ncols column names */
	uint64_t nrows, nbytes;		/* ENDCOPY: the frame's; TABLEDONE: the table's.
								 * nbytes counts COPY text: rows without ROW, with LF */
};

/* A value field: valid COPY text; \\U only where allowed. */
bool sr_value_ok(const struct field *f, bool allow_unchanged);

/*
 * The chunk fields after schema and table, as a CHUNK record and a line of
 * pg-snapshot-dump's --done file both carry them: a key column count n,
 * n key column names, n lo values and n hi values, each bound all \N
 * (unbounded) or none. n = 0 (a table copied in one piece) only when
 * whole_ok. Returns n, SR_CHUNK_LAYOUT for a wrong count of fields, or
 * SR_CHUNK_VALUES for a malformed value or a half-unbounded bound.
 */
#define SR_CHUNK_LAYOUT (-1)
#define SR_CHUNK_VALUES (-2)
int sr_chunk_fields(const struct field *f, size_t nf, bool whole_ok);

#endif
