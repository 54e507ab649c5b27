/*
 * cmtable.h - one table's chunks as the chunk filter holds them: the types
 * chunkmap (which fills and searches them) and chunkserver (which asks the
 * target to place a key among them) share. Types only, below both.
 */
#ifndef PGSYNC_CMTABLE_H
#define PGSYNC_CMTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keyorder.h"
#include "lsn.h"
#include "record.h"
#include "streamread.h"

struct chunkmap;

/* Key columns of one chunk at most: an index has at most 32 (INDEX_MAX_KEYS). */
#define CM_MAX_KEY CHUNK_MAX_KEY

/* "No chunk holds this key yet": the chunk's later copy will have it. */
#define CM_NOT_COPIED UINT64_MAX

/* A key or bound value: its text and, for an integer column, its value. */
struct cm_val {
	const char *p;
	size_t n;
	int64_t i;
};

struct cm_chunk {
	struct cm_val *lo, *hi;		/* nkey values each; NULL: unbounded */
	lsn_t lsn;
};

enum cm_kind { CM_INT, CM_UUID, CM_SERVER };

struct cm_srv;

struct cm_table {
	struct chunkmap *map;
	char *schema, *table;
	int nkey;					/* 0: copied in one piece */
	char **key_columns;			/* nkey names */
	struct cm_chunk *chunks;	/* by hi once resolved; unbounded hi last */
	size_t nchunks, cap;
	lsn_t min_lsn, max_lsn;

	/* Resolved against the stream's description of the table. */
	const struct sr_rel *srel;
	uint64_t gen;
	int *colidx;				/* nkey: the stream's column of each key column */
	enum cm_kind *kind;			/* nkey */
	uint32_t *typoid;			/* nkey: the stream's type OIDs */
	bool sorted;

	/* Server-ordered (a key column that is not int or uuid): chunks are
	 * in load order, placed by the target (chunkserver.c). */
	bool server;
	const struct key_type **ktype;	/* nkey */
	const char **coll;			/* nkey: the target collation, quoted; NULL: none */
	struct cm_srv *srv;
};

struct chunkmap;

#endif
