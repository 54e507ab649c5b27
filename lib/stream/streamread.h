/*
 * streamread.h - the one parser of the change stream (formats/stream-v1.md):
 * every line of it, transactions and snapshot sections alike, into records:
 * record names, where each may stand, field counts, escaping, LSNs,
 * integers, transaction structure, the RELATION each change refers to, the
 * frames of a snapshot section and their counts. Pure: no I/O and no
 * database, so it can be unit-tested and fuzzed on its own. Never returns a
 * malformed line as a record, and never puts a value into an error.
 *
 * A new record is one entry in the table of streamread.c (its name, where
 * it may stand, its handler) plus its type here and its handler.
 */
#ifndef PGSYNC_STREAMREAD_H
#define PGSYNC_STREAMREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "record.h"
#include "srrecord.h"

struct streamread;

struct streamread *sr_new(void);
void sr_free(struct streamread *sr);

/*
 * Parse one line (without its LF). Returns true with rec filled, or false
 * with a one-line message in sr_error() (no location: the caller adds input
 * name and line number). Field pointers point into line. Fields a record
 * type does not name are zero, except for ROW, which sets only type, f, nf,
 * table, copy_row and copy_len (a copy's every line: clearing is its cost).
 */
bool sr_parse(struct streamread *sr, const char *line, size_t len,
			  struct sr_record *rec);
const char *sr_error(const struct streamread *sr);

/* Inside BEGIN .. COMMIT? And which transaction. */
bool sr_in_txn(const struct streamread *sr);
uint64_t sr_txn_xid(const struct streamread *sr);
/*
 * The highest position the current stream has promised: its header's start,
 * a COMMIT end, a POSITION, END or SNAPSHOT. Within one stream (header to
 * header) no BEGIN, POSITION, END or SNAPSHOT may lie below it: sr_parse()
 * rejects one that does.
 */
lsn_t sr_promised(const struct streamread *sr);
/* Is line a BEGIN, POSITION or END: one sr_parse() checks against that
 * promise, and that changes no RELATION? */
bool sr_line_has_position(const char *line, size_t len);
/* The record name of a type ("COPY"). */
const char *sr_type_name(enum sr_type type);
/* Is line a record of type with fields (its name, then a TAB)? Nothing
 * else of it is checked: for a look at a line before it is parsed. */
bool sr_line_is(const char *line, size_t len, enum sr_type type);
/* Inside a snapshot or chunk section (SNAPSHOT or CHUNKS read, its
 * SNAPSHOTDONE or CHUNKSDONE not yet)? */
bool sr_in_section(const struct streamread *sr);
/* Has a header been read yet. */
bool sr_started(const struct streamread *sr);

/*
 * The transaction structure at a transaction boundary, to read the lines
 * after it a second time (pg-apply replays what the target lost): taken with
 * sr_mark() outside a transaction, restored with sr_rewind(). Relation
 * definitions are not part of it: the lines replayed redefine them.
 */
struct sr_mark {
	bool have_last;
	lsn_t last_commit_lsn;
	lsn_t promised;
	const char *promised_by;
};
/* A rewind also leaves any snapshot section: none is open at a mark. */
void sr_mark(const struct streamread *sr, struct sr_mark *m);
void sr_rewind(struct streamread *sr, const struct sr_mark *m);

/* "public.users" for messages (unquoted, as named in the stream). */
const char *sr_rel_name(const struct sr_rel *rel, char *buf, size_t len);

#endif
