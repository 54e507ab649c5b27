/*
 * tablelist_test - pg-verify's --tables file: --list-tables lines and bare
 * schema<TAB>table lines, names with a dot, a comma, a quote, a TAB and a
 * backslash decoded exactly (never split on a dot), the row filter and
 * column list kept, malformed lines refused with the file and line number.
 */
#include "unit.h"
#include "tablelist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *
write_file(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/tablelist_test.%d", (int) getpid());
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void
good(void)
{
	struct vtable_list l;
	char err[700] = "";
	char *path = write_file("s.x\ta.b\tp1,p2\t(id > 3)\tid,v\t\n"
							"\n"
							"public\tc,d\n"
							"we\"ird\ttab\\there\\\\x\tp\t\tid\t\n");

	CHECK(vtable_list_read(path, &l, err, sizeof(err)));
	CHECK(l.n == 3);
	if (l.n == 3)
	{
		CHECK_STR(l.t[0].schema, "s.x");
		CHECK_STR(l.t[0].name, "a.b");
		CHECK_STR(l.t[0].filter, "(id > 3)");
		CHECK_STR(l.t[0].cols, "id,v");
		CHECK_STR(l.t[0].display, "s.x.a.b");
		CHECK_STR(l.t[1].schema, "public");
		CHECK_STR(l.t[1].name, "c,d");
		CHECK_STR(l.t[1].filter, "");
		CHECK_STR(l.t[1].cols, "");
		CHECK_STR(l.t[2].schema, "we\"ird");
		CHECK_STR(l.t[2].name, "tab\there\\x");
		/* The line's name as printed: in the stream's escaping, one field. */
		CHECK_STR(l.t[2].display, "we\"ird.tab\\there\\\\x");
	}
	vtable_list_free(&l);
	unlink(path);
}

static void
bad(const char *text, const char *want)
{
	struct vtable_list l;
	char err[700] = "", expect[800];
	char *path = write_file(text);

	CHECK(!vtable_list_read(path, &l, err, sizeof(err)));
	CHECK(l.n == 0 && l.t == NULL);
	snprintf(expect, sizeof(expect), "--tables file \"%s\" %s", path, want);
	CHECK_STR(err, expect);
	unlink(path);
}

int
main(void)
{
	char err[700] = "";
	struct vtable_list l;

	good();
	bad("public\tok\nonefield\n", "line 2: expected schema<TAB>table, then optionally the other fields of pg-snapshot-dump --list-tables");
	bad("a\tb\tc\td\te\tf\tg\n", "line 1: expected schema<TAB>table, then optionally the other fields of pg-snapshot-dump --list-tables");
	bad("public\tbad\\\n", "line 1: a name or field is empty or not in the stream's escaping");
	bad("\tnoschema\n", "line 1: a name or field is empty or not in the stream's escaping");
	bad("public\t\\N\n", "line 1: a name or field is empty or not in the stream's escaping");
	CHECK(!vtable_list_read("/nonexistent/tables", &l, err, sizeof(err)));
	CHECK_STR(err, "cannot open --tables file \"/nonexistent/tables\": No such file or directory");
	return unit_done("tablelist_test");
}
