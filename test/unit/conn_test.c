#include "unit.h"
#include "conn.h"
#include "log.h"

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

	char out[128];
	conn_display("this is not = valid '", out, sizeof(out));
	CHECK(strstr(out, "invalid") != NULL);

	CHECK(sqlstate_retryable("08006"));
	CHECK(sqlstate_retryable("57P01"));
	CHECK(sqlstate_retryable("40001"));
	CHECK(!sqlstate_retryable("42703"));
	CHECK(!sqlstate_retryable("22001"));
	CHECK(!sqlstate_retryable(""));
	CHECK(!sqlstate_retryable(NULL));
	return unit_done("conn");
}
