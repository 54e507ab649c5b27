/*
 * keyorder_test - the one list of key types a chunked copy cuts (how each
 * is ordered, and none beyond it), and the key collations file: escaped
 * fields decoded, a column without a collation kept with its reason,
 * malformed lines refused with the line number.
 */
#include "unit.h"
#include "keyorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
types(void)
{
	CHECK(key_type_of(23)->order == KO_INT && key_type_of(20)->order == KO_INT && key_type_of(21)->order == KO_INT);
	CHECK(key_type_of(2950)->order == KO_UUID);
	CHECK(key_type_of(1700)->order == KO_SERVER && strcmp(key_type_of(1700)->name, "pg_catalog.numeric") == 0);
	CHECK(key_type_of(1184)->order == KO_SERVER && key_type_of(1082)->order == KO_SERVER);
	CHECK(key_type_of(25)->order == KO_COLLATED && key_type_of(1043)->order == KO_COLLATED &&
		  key_type_of(1042)->order == KO_COLLATED);
	/* float8, interval, money, json: never cut. */
	CHECK(key_type_of(701) == NULL && key_type_of(1186) == NULL && key_type_of(790) == NULL &&
		  key_type_of(114) == NULL);
}

static char *
write_file(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/keyorder_test.%d", (int) getpid());
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void
file(void)
{
	struct key_colls kc;
	const struct key_coll *c;
	char err[800];
	char *path;

	path = write_file("public\tt\tk\tpg_catalog.\"C\"\t\\N\n"
					  "Odd\tta\\tb\tk\\\\2\t\\N\tthe source database's encoding is UTF8, the target's LATIN1\n");
	CHECK(keycolls_read(path, &kc, err, sizeof(err)) && kc.n == 2);
	c = keycolls_find(&kc, "public", "t", "k");
	CHECK(c && strcmp(c->coll, "pg_catalog.\"C\"") == 0 && c->why == NULL);
	c = keycolls_find(&kc, "Odd", "ta\tb", "k\\2");
	CHECK(c && c->coll == NULL && strstr(c->why, "LATIN1") != NULL);
	CHECK(keycolls_find(&kc, "public", "t", "other") == NULL && keycolls_find(NULL, "public", "t", "k") == NULL);
	keycolls_free(&kc);
	/* Four fields, or neither a collation nor a reason: refused. */
	path = write_file("public\tt\tk\tpg_catalog.\"C\"\t\\N\npublic\tt\tk\tx\n");
	CHECK(!keycolls_read(path, &kc, err, sizeof(err)) && strstr(err, "line 2") != NULL);
	path = write_file("public\tt\tk\t\\N\t\\N\n");
	CHECK(!keycolls_read(path, &kc, err, sizeof(err)) && strstr(err, "line 1") != NULL);
	unlink(path);
	CHECK(!keycolls_read("/nonexistent/keyorder", &kc, err, sizeof(err)) && strstr(err, "cannot open") != NULL);
}

int
main(void)
{
	types();
	file();
	return unit_done("keyorder");
}
