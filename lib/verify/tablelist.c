/*
 * tablelist.c - the --tables file of pg-verify (tablelist.h).
 */
#include "tablelist.h"

#include "buf.h"
#include "common.h"
#include "escape.h"
#include "record.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The list-tables fields: schema, table, publications, filter, columns, generated. */
enum { F_SCHEMA, F_NAME, F_PUBS, F_FILTER, F_COLS, F_GEN, F_MAX };

static bool
field_text(const struct field *f, char **out)
{
	struct buf b = BUF_INIT;
	bool is_null = false;

	if (!copy_unescape(f->p, f->n, &b, &is_null) || is_null || memchr(b.data ? b.data : "", '\0', b.len))
	{
		buf_free(&b);
		return false;
	}
	*out = xstrdup(b.data ? buf_cstr(&b) : "");
	buf_free(&b);
	return true;
}

static bool
table_line(void *ctx, struct field *f, size_t nf, unsigned long lineno, char *err, size_t errlen)
{
	struct vtable_list *list = ctx;
	struct vtable t = {0};
	struct buf d = BUF_INIT;

	if (nf < 2 || nf > F_MAX)
	{
		snprintf(err, errlen, "line %lu: expected schema<TAB>table, then optionally the other fields of pg-snapshot-dump --list-tables", lineno);
		return false;
	}
	if (!field_text(&f[F_SCHEMA], &t.schema) || !field_text(&f[F_NAME], &t.name) ||
		!field_text(nf > F_FILTER ? &f[F_FILTER] : &(struct field) {"", 0}, &t.filter) ||
		!field_text(nf > F_COLS ? &f[F_COLS] : &(struct field) {"", 0}, &t.cols) ||
		!*t.schema || !*t.name)
	{
		free(t.schema);
		free(t.name);
		free(t.filter);
		free(t.cols);
		snprintf(err, errlen, "line %lu: a name or field is empty or not in the stream's escaping", lineno);
		return false;
	}
	buf_append(&d, f[F_SCHEMA].p, f[F_SCHEMA].n);
	buf_putc(&d, '.');
	buf_append(&d, f[F_NAME].p, f[F_NAME].n);
	t.display = xstrdup(buf_cstr(&d));
	buf_free(&d);
	list->t = xrealloc(list->t, sizeof(*list->t) * (size_t) (list->n + 1));
	list->t[list->n++] = t;
	return true;
}

bool
vtable_list_read(const char *path, struct vtable_list *list, char *err, size_t errlen)
{
	struct field f[F_MAX + 1];
	char e[600];

	memset(list, 0, sizeof(*list));
	if (!rec_file_read(path, "--tables", f, F_MAX, table_line, list, e, sizeof(e)))
	{
		/* The open and read errors name the file already. */
		if (strncmp(e, "line ", 5) == 0)
			snprintf(err, errlen, "--tables file \"%s\" %s", path, e);
		else
			snprintf(err, errlen, "%s", e);
		vtable_list_free(list);
		return false;
	}
	return true;
}

void
vtable_list_free(struct vtable_list *list)
{
	for (int i = 0; i < list->n; i++)
	{
		free(list->t[i].schema);
		free(list->t[i].name);
		free(list->t[i].filter);
		free(list->t[i].cols);
		free(list->t[i].display);
	}
	free(list->t);
	memset(list, 0, sizeof(*list));
}
