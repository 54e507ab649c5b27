#include "unit.h"
#include "lsn.h"

static void
parses(const char *s, lsn_t want)
{
	lsn_t got = 12345;

	CHECK(lsn_parse(s, &got));
	CHECK(got == want);
}

static void
rejects(const char *s)
{
	lsn_t got = 777;

	CHECK(!lsn_parse(s, &got));
	CHECK(got == 777);			/* untouched on failure */
}

int
main(void)
{
	char buf[LSN_BUFSZ];

	parses("0/0", 0);
	parses("0/16B3748", 0x16B3748);
	parses("16/B374D848", 0x16B374D848ULL);
	parses("ffffffff/FFFFFFFF", UINT64_MAX);
	parses("00000000/00000001", 1);

	rejects("");
	rejects("/");
	rejects("0/");
	rejects("/0");
	rejects("1");
	rejects("123456789/0");		/* 9 digits */
	rejects("0/123456789");
	rejects("0/1g");
	rejects("0x1/2");
	rejects(" 0/1");
	rejects("0/1 ");
	rejects("0/1\n");
	rejects("0//1");
	rejects("0/1/2");
	rejects("-1/0");
	rejects(NULL);

	CHECK_STR(lsn_format(0, buf), "0/0");
	CHECK_STR(lsn_format(0x16B3748, buf), "0/16B3748");
	CHECK_STR(lsn_format(UINT64_MAX, buf), "FFFFFFFF/FFFFFFFF");
	CHECK_STR(lsn_format(0x100000000ULL, buf), "1/0");

	lsn_t x;
	CHECK(lsn_parse_n("0/10junk", 4, &x) && x == 0x10);
	CHECK(lsn_diff(0x200, 0x100) == 0x100);
	CHECK(lsn_diff(0x100, 0x200) == 0);

	/* Round trip at word boundaries. */
	lsn_t vals[] = {1, 0xFFFFFFFFULL, 0x100000000ULL, 0xDEADBEEFCAFEULL};
	for (unsigned i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
	{
		lsn_t back;
		CHECK(lsn_parse(lsn_format(vals[i], buf), &back) && back == vals[i]);
	}
	return unit_done("lsn");
}
