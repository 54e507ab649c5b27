/*
 * keyorder.h - which key types a chunked copy cuts into chunks, and how the
 * target orders them exactly as the source did (doc/snapshot.md, "Keys the
 * target orders"). The one list of trusted types: int2, int4, int8 and uuid
 * are compared in C by pg-apply; the others by the target server, which
 * orders a collation-free type the same on every PostgreSQL (numeric, date,
 * time, timestamp, timestamptz, bool, oid, bytea) and a collatable one
 * (text, varchar, bpchar) the same only under a collation with the source
 * column's provider, locale and version, which pgsync finds on the target
 * and writes into the key collations file both programs read.
 */
#ifndef PGSYNC_KEYORDER_H
#define PGSYNC_KEYORDER_H

#include <stdbool.h>
#include <stddef.h>

enum key_order {
	KO_INT,						/* int2, int4, int8: int64 in C */
	KO_UUID,					/* lower-case hex text in C */
	KO_SERVER,					/* the target compares; the same everywhere */
	KO_COLLATED					/* the target compares, under a proven collation */
};

struct key_type {
	unsigned oid;				/* built-in: the same on every server */
	const char *name;			/* qualified, for casts */
	enum key_order order;
};

/* The type of built-in oid if chunks are cut by it, else NULL. */
const struct key_type *key_type_of(unsigned oid);

/*
 * The key collations file (pgsync writes it; pg-snapshot-dump --key-collations
 * and pg-apply --key-collations read it): one line per collatable column of
 * the job's tables, TAB between fields, each with COPY text escaping:
 * schema, table, column, the target collation that orders as the source
 * column's does (qualified and quoted; \N for none) and, for none, why.
 */
struct key_coll {
	char *schema, *table, *column;
	char *coll;					/* NULL: none */
	char *why;					/* with no collation */
};

struct key_colls {
	struct key_coll *c;
	size_t n;
};

/* Read FILE; false with a message in err. */
bool keycolls_read(const char *path, struct key_colls *kc, char *err, size_t errlen);
void keycolls_free(struct key_colls *kc);
/* The line of schema.table's column, or NULL (kc NULL: none). */
const struct key_coll *keycolls_find(const struct key_colls *kc, const char *schema, const char *table,
									 const char *column);

#endif
