/*
 * compare.h - one table compared on a source and a target session, each at
 * its exported snapshot, without a row value leaving either server.
 *
 * The rows are cut into ranges of the hash of their key, in hex: the first
 * level groups them by its first three digits (4096 ranges). Both servers
 * hash each range themselves (count, and the sum of each row's hash) and
 * send only that, both queried at once; ranges that differ
 * are cut again by three more digits until they hold at most
 * VERIFY_ROWS_MAX rows, whose key and row hashes are then compared and
 * itemized. When more than VERIFY_RANGES_MAX ranges differ and they hold
 * more rows than that, the ranges' counts are reported instead (bounded
 * memory): rows missing or extra from the counts, one differing row at
 * least for each range of equal counts and another sum. A table without a
 * key is compared with its whole row as the key, so duplicates count.
 *
 * The source's rows are those the publications' row filter passes, its
 * columns those the column list names (both from the table list); every
 * identifier reaches the SQL quoted by the server.
 *
 * The hash (enum verify_hash) is chosen once per run, the same for both
 * sides: hashtextextended() of the key's and the row's text where both
 * databases have one encoding (equal values are then equal bytes) and
 * both servers hash a fixed probe alike (PostgreSQL's hash depends on the
 * machine's byte order, and may change between major versions); md5 of
 * the text converted to UTF-8 otherwise, which any two servers compute
 * alike.
 */
#ifndef PGSYNC_COMPARE_H
#define PGSYNC_COMPARE_H

#include <stdbool.h>
#include <stdio.h>
#include <libpq-fe.h>

#include "pgerror.h"
#include "tablelist.h"

#define VERIFY_ROWS_MAX 4096	/* rows a side fetched as hashes once ranges are this small */
#define VERIFY_RANGES_MAX 256	/* differing ranges cut again; more: counted, not itemized */

enum verify_hash {
	VERIFY_HASH_MD5,			/* md5 of the UTF-8 text: key hash 32 hex digits */
	VERIFY_HASH_FAST,			/* hashtextextended() of the text, in "C": 16 hex digits */
};

struct verify_side {
	PGconn *conn;				/* an open session (session_open) */
	const char *snapshot;		/* the exported snapshot it compares at */
};

struct verify_result {
	long long rows_src, rows_tgt;
	long long missing;			/* rows on the source, not on the target */
	long long only;				/* rows only on the target */
	long long differing;		/* same key, other values */
	bool itemized;				/* every differing key was written */
	bool failed;				/* msg says why; the counts mean nothing */
	bool interrupted;			/* a stop signal cancelled it */
	char msg[PGERR_TEXT_MAX + 200];
};

/*
 * Compare table t, in one read-only transaction on each side at its
 * snapshot. The keys of the rows that differ go to keys (may be NULL) as
 * "missing|only|differing<TAB>key as JSON" lines (none for a table without
 * a key). A failure fills r->msg ("source: ..." or "target: ...") and
 * leaves both sessions outside a transaction, or closed (PQstatus bad)
 * when they broke.
 */
void verify_compare(struct verify_side *src, struct verify_side *tgt, const struct vtable *t,
					enum verify_hash hash, FILE *keys, struct verify_result *r);

/*
 * The hash two open sessions (outside a transaction) may use: FAST when
 * both servers' encodings are the same and they return the same hashes of
 * a fixed probe, else MD5. why gets the reason in a few words ("the
 * databases' encodings differ (LATIN1, UTF8)"), naming the side of a
 * failed query; *interrupted is set when a stop signal cancelled it.
 */
enum verify_hash verify_hash_choose(PGconn *src, PGconn *tgt, char *why, size_t size, bool *interrupted);

/* "md5" or "hashtextextended". */
const char *verify_hash_name(enum verify_hash hash);

#endif
