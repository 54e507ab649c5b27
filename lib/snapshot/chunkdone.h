/*
 * chunkdone.h - the chunks a chunked copy already holds (--done FILE, the
 * lines pgsync writes from pgsync.table_chunk): read, looked up by table.
 * Below chunkplan, which cuts the gaps they leave; it never plans.
 */
#ifndef PGSYNC_CHUNKDONE_H
#define PGSYNC_CHUNKDONE_H

#include <stdbool.h>
#include <stddef.h>

/* A done chunk of --done: bounds NULL for unbounded. */
struct done_chunk {
	char *schema, *name;
	int nkey;					/* 0: a table copied in one piece, done */
	char **cols, **lo, **hi;
};

struct done_set {
	struct done_chunk *c;
	int n;
};

/* Read --done FILE. False with a message in err (a usage error). */
bool chunkdone_read(const char *path, struct done_set *ds, char *err, size_t errlen);
void chunkdone_free(struct done_set *ds);
/* The chunks of schema.name: the index of the first, *n of them. */
int chunkdone_find(const struct done_set *ds, const char *schema, const char *name, int *n);
/* Is schema.name listed as a table done in one piece? */
bool chunkdone_whole(const struct done_set *ds, const char *schema, const char *name);

/* Free n key values (NULL: nothing). */
void chunk_values_free(char **v, int n);

#endif
