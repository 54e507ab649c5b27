#include "unit.h"
#include "record.h"

int
main(void)
{
	struct buf b = BUF_INIT;
	struct field f[8];

	rec_header(&b, "7442718406132410263", 1, "app_slot", 0x1A00000, "pg-walcat/0.1.0", 150018, NULL);
	CHECK_STR(buf_cstr(&b), "PGCS\t1\t7442718406132410263\t1\tapp_slot\t0/1A00000\tproducer=pg-walcat/0.1.0\tserver=150018\n");

	buf_reset(&b);
	rec_header(&b, "1", 2, NULL, 0, "x", 0, NULL);
	CHECK_STR(buf_cstr(&b), "PGCS\t1\t1\t2\t-\t0/0\tproducer=x\n");

	buf_reset(&b);
	rec_start(&b, REC_INSERT);
	rec_valuez(&b, "public");
	rec_valuez(&b, "users");
	rec_u64(&b, 0);
	rec_value(&b, "a\tb", 3);
	rec_null(&b);
	rec_unchanged(&b);
	rec_i64(&b, -42);
	rec_i64(&b, INT64_MIN);
	rec_finish(&b);
	CHECK_STR(buf_cstr(&b), "INSERT\tpublic\tusers\t0\ta\\tb\t\\N\t\\U\t-42\t-9223372036854775808\n");

	/* 2000-01-01 00:00:00 UTC is PostgreSQL's epoch. */
	buf_reset(&b);
	rec_start(&b, REC_BEGIN);
	rec_pgtime(&b, 0);
	rec_pgtime(&b, -1);
	CHECK_STR(buf_cstr(&b), "BEGIN\t2000-01-01 00:00:00.000000+00\t1999-12-31 23:59:59.999999+00");

	const char *line = "COMMIT\t741\t0/1A01F20\t0/1A01F50\t";
	size_t n = rec_split(line, strlen(line), f, 8);
	CHECK(n == 5);
	CHECK(field_eq(&f[0], "COMMIT") && field_is_name(&f[0]));
	CHECK(f[4].n == 0);
	uint64_t v;
	lsn_t l;
	CHECK(field_u64(&f[1], &v) && v == 741);
	CHECK(field_lsn(&f[3], &l) && l == 0x1A01F50);
	CHECK(rec_split(line, strlen(line), f, 3) == 4);	/* more than max */
	CHECK(rec_split("", 0, f, 8) == 1 && f[0].n == 0);

	struct field g = {"007", 3};
	CHECK(!field_u64(&g, &v));
	struct field h = {"18446744073709551616", 20};
	CHECK(!field_u64(&h, &v));
	struct field k = {"Begin", 5};
	CHECK(!field_is_name(&k));
	buf_free(&b);
	return unit_done("record");
}
