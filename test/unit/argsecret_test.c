/*
 * argsecret_test - the password of a -d connection string is blanked in
 * place, in every form libpq accepts, and the private copy keeps it.
 */
#include "unit.h"
#include "argsecret.h"

#include <stdlib.h>

static void
check_blanked(const char *given, const char *shown)
{
	char *arg = strdup(given);
	const char *copy = argsecret_conninfo(arg);

	CHECK(copy != NULL && strcmp(copy, given) == 0);
	if (copy == NULL)
		fprintf(stderr, "  refused: %s\n", given);
	CHECK(strcmp(arg, shown) == 0);
	if (strcmp(arg, shown) != 0)
		fprintf(stderr, "  %s -> %s, want %s\n", given, arg, shown);

	free(arg);
}

int
main(void)
{
	char bad[] = "host=a port";

	check_blanked("postgresql://u:secret@h:5432/db", "postgresql://u:******@h:5432/db");
	check_blanked("postgres://u:s%40x@h/db?sslmode=disable&password=two",
				  "postgres://u:*****@h/db?sslmode=disable&password=***");
	check_blanked("postgresql://u@h/db", "postgresql://u@h/db");
	check_blanked("postgresql:///db?host=/tmp&password=pw", "postgresql:///db?host=/tmp&password=**");
	check_blanked("host=h password=secret dbname=d", "host=h password=****** dbname=d");
	check_blanked("password = 'sec ret\\'x' host=h", "password = '**********' host=h");
	check_blanked("host=h application_name=password", "host=h application_name=password");
	check_blanked("dbname=d", "dbname=d");
	check_blanked("", "");
	CHECK(argsecret_conninfo(bad) == NULL);
	CHECK(strcmp(bad, "host=a port") == 0);
	return unit_done("argsecret");
}
