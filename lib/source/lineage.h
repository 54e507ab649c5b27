/*
 * lineage.h - the one rule that decides whether a source on some timeline
 * shares the history the target applied, and the timeline history it is
 * decided by: read from the server (TIMELINE_HISTORY), carried in a stream
 * header (the history= feature) and judged against the timeline and
 * position the target recorded. pg-walcat judges on every (re)connection,
 * pg-apply on every header, pg-ack before it confirms.
 *
 * A promotion starts a new timeline at a switch point: the new primary's
 * WAL below it is the old timeline's, above it its own. A target that
 * applied up to a position at or below the switch point holds only what the
 * new primary has; one past it holds transactions the new primary never had.
 */
#ifndef PGSYNC_LINEAGE_H
#define PGSYNC_LINEAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "buf.h"
#include "conn.h"
#include "lsn.h"

/* More ancestors than this is not a history a job follows. */
#define LINEAGE_MAX 64

/* The ancestors of timeline `current`: timeline tli ended at `end`. */
struct lineage {
	uint32_t current;
	int n;
	struct {
		uint32_t tli;
		lsn_t end;
	} anc[LINEAGE_MAX];
};

enum lineage_verdict {
	LINEAGE_SAME,				/* the recorded timeline (or none recorded) */
	LINEAGE_FOLLOWS,			/* a later timeline whose switch point is at or after the position */
	LINEAGE_DIVERGED,			/* a switch point below the position, or another branch */
	LINEAGE_BEHIND,				/* the server is on an earlier timeline than recorded */
};

/*
 * TIMELINE_HISTORY for the server's timeline `current` on a replication
 * connection; timeline 1 has no history and none is asked for. False with
 * err filled (err->retryable as the failure's).
 */
bool lineage_read(PGconn *repl, uint32_t current, struct lineage *out, struct pgerr *err);

/* A history file's text: "parent<TAB>switchpoint<TAB>reason" lines, '#'
 * comments, blank lines. False with a reason in msg. */
bool lineage_parse_file(const char *text, size_t len, uint32_t current, struct lineage *out,
						char *msg, size_t msglen);

/* The header feature's value: "1:0/3000060,2:0/5000028" ("" for none). */
void lineage_format(const struct lineage *l, struct buf *b);
bool lineage_parse_feature(const char *p, size_t n, uint32_t current, struct lineage *out);

/*
 * The rule. recorded is the timeline the target's position was applied on
 * (0: not recorded, judged SAME), applied its position; l the server's (or
 * the stream's) timeline and its ancestors. msg gets the one-line reason
 * for anything but SAME, naming both timelines and positions.
 */
enum lineage_verdict lineage_judge(uint32_t recorded, lsn_t applied, const struct lineage *l,
								   char *msg, size_t msglen);

#endif
