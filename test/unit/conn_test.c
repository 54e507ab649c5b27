#include "unit.h"
/* The module itself, for its static shape rule. */
#include "conn.c"
#include "log.h"

#include <unistd.h>

static void
no_password(const char *conninfo, const char *expect_substr)
{
	char out[512];

	conn_display(conninfo, out, sizeof(out));
	CHECK(strstr(out, "s3cret") == NULL);
	CHECK(strstr(out, "password") == NULL);
	if (expect_substr && strstr(out, expect_substr) == NULL)
	{
		fprintf(stderr, "expected \"%s\" in \"%s\"\n", expect_substr, out);
		unit_failed++;
	}
}

int
main(void)
{
	log_init("conn_test");
	no_password("postgres://app:s3cret@db.example.com:6543/shop", "host=db.example.com");
	no_password("postgresql://app:s3cret@db.example.com/shop?sslmode=require", "dbname=shop");
	no_password("host=db port=5433 user=app password=s3cret dbname=shop", "port=5433");
	no_password("host=db password='s3cret' dbname=shop", "host=db");
	no_password("postgres://app:s3cret@/shop?host=/tmp/sock", "host=/tmp/sock");

	char out[256];
	conn_display("this is not = valid '", out, sizeof(out));
	CHECK(strstr(out, "invalid") != NULL);

	/* Every connection named with host, port, user and database: from
	 * its service (never its password), then libpq's defaults. */
	char svc[] = "/tmp/conn_test.XXXXXX";
	int fd = mkstemp(svc);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	CHECK(f != NULL);
	if (f)
	{
		fputs("[other]\nhost=wrong\n[pgsync_target]\nhost=tgt.example.com\nport=6432\n"
			  "user=sync\npassword=s3cret\ndbname=shop\n", f);
		fclose(f);
	}
	setenv("PGSERVICEFILE", svc, 1);
	unsetenv("PGSERVICE");
	unsetenv("PGHOST");
	unsetenv("PGPORT");
	unsetenv("PGDATABASE");
	setenv("PGUSER", "envuser", 1);
	no_password("service=pgsync_target", "host=tgt.example.com port=6432 user=sync dbname=shop");
	no_password("service=pgsync_target port=7000 dbname=other", "host=tgt.example.com port=7000 user=sync dbname=other");
	unlink(svc);
	no_password("host=db", "host=db port=5432 user=envuser dbname=envuser");
	no_password("postgresql:///shop", "host=(local socket) port=5432 user=envuser dbname=shop");
	conn_display("service=pgsync_target", out, sizeof(out));
	CHECK(strstr(out, "libpq defaults") == NULL);

	/* Result shape: rows and fields both checked, streamutil.c's wording. */
	struct pgerr pe;

	CHECK(conn_check_shape(1, 3, 1, 3, &pe));
	CHECK(conn_check_shape(0, 3, -1, 3, &pe));
	CHECK(conn_check_shape(7, 3, -1, 3, &pe));
	CHECK(conn_check_shape(7, 9, -1, -1, &pe));
	CHECK(conn_check_shape(1, 9, 1, -1, &pe));
	CHECK(!conn_check_shape(0, 1, 1, 1, &pe));
	CHECK(strcmp(pe.msg, "unexpected result: got 0 rows and 1 fields, expected 1 rows and 1 fields") == 0);
	CHECK(!pe.retryable && pe.sqlstate[0] == '\0');
	CHECK(!conn_check_shape(2, 1, 1, 1, &pe));
	CHECK(strcmp(pe.msg, "unexpected result: got 2 rows and 1 fields, expected 1 rows and 1 fields") == 0);
	CHECK(!conn_check_shape(1, 2, 1, 3, &pe));
	CHECK(strcmp(pe.msg, "unexpected result: got 1 rows and 2 fields, expected 1 rows and 3 fields") == 0);
	CHECK(!conn_check_shape(4, 2, -1, 3, &pe));
	CHECK(strcmp(pe.msg, "unexpected result: got 4 rows and 2 fields, expected 3 fields") == 0);
	CHECK(!conn_check_shape(0, 2, 1, -1, &pe));
	CHECK(strcmp(pe.msg, "unexpected result: got 0 rows and 2 fields, expected 1 rows") == 0);
	return unit_done("conn");
}
