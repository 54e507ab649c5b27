/*
 * tablelist.h - the tables pg-verify compares, read from a file of
 * pg-snapshot-dump --list-tables lines: schema, table, publications, row
 * filter, columns, generated columns, TAB-separated, each field in the
 * stream's escaping (lib/stream/escape), so that a dot, a comma, a quote
 * or a TAB in a name is carried exactly. Only the first two fields are
 * needed; the row filter (the source's own expression) and the column list
 * (comma-separated) are used when present. A name is never split on a dot.
 */
#ifndef PGSYNC_TABLELIST_H
#define PGSYNC_TABLELIST_H

#include <stdbool.h>
#include <stddef.h>

struct vtable {
	char *schema;
	char *name;
	char *filter;				/* "" when the publications filter no rows */
	char *cols;					/* "" for every column */
	char *display;				/* schema.name, each in the stream's escaping */
};

struct vtable_list {
	struct vtable *t;
	int n;
};

/* Read PATH into list; false with err set ("--tables FILE line N: ..."). */
bool vtable_list_read(const char *path, struct vtable_list *list, char *err, size_t errlen);
void vtable_list_free(struct vtable_list *list);

#endif
