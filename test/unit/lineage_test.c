/* The lineage rule and the two forms a timeline history travels in. */
#include "unit.h"
#include "lineage.h"

static struct lineage
file(const char *text, uint32_t current)
{
	struct lineage l;
	char msg[128];

	CHECK(lineage_parse_file(text, strlen(text), current, &l, msg, sizeof(msg)));
	return l;
}

int
main(void)
{
	struct lineage l, f;
	struct buf b = BUF_INIT;
	char msg[512];

	/* The server's file: oldest first, comments and blank lines ignored. */
	l = file("1\t0/3000060\tno recovery target specified\n\n# note\n2\t0/5000028\tafter promotion\n", 3);
	CHECK(l.n == 2 && l.anc[0].tli == 1 && l.anc[0].end == 0x3000060 && l.anc[1].tli == 2);
	lineage_format(&l, &b);
	CHECK_STR(buf_cstr(&b), "1:0/3000060,2:0/5000028");
	CHECK(lineage_parse_feature(b.data, b.len, 3, &f));
	CHECK(f.n == 2 && f.anc[1].end == 0x5000028 && f.current == 3);
	/* Malformed: an ancestor not before the current timeline, out of
	 * order, a missing position, a trailing comma. */
	CHECK(!lineage_parse_feature("3:0/1", 5, 3, &f));
	CHECK(!lineage_parse_feature("2:0/5,1:0/3", 11, 3, &f));
	CHECK(!lineage_parse_feature("1:", 2, 3, &f));
	CHECK(!lineage_parse_feature("1:0/3,", 6, 3, &f));
	CHECK(!lineage_parse_file("x\t0/1\n", 6, 2, &f, msg, sizeof(msg)));
	CHECK(lineage_parse_feature("", 0, 1, &f) && f.n == 0);

	/* The rule. */
	CHECK(lineage_judge(3, 0x9000000, &l, msg, sizeof(msg)) == LINEAGE_SAME);
	CHECK(lineage_judge(0, 0x9000000, &l, msg, sizeof(msg)) == LINEAGE_SAME);
	/* Applied up to the switch point exactly: the same history. */
	CHECK(lineage_judge(2, 0x5000028, &l, msg, sizeof(msg)) == LINEAGE_FOLLOWS);
	CHECK(lineage_judge(1, 0x2000000, &l, msg, sizeof(msg)) == LINEAGE_FOLLOWS);
	/* One byte past it: transactions the new primary never had. */
	CHECK(lineage_judge(2, 0x5000029, &l, msg, sizeof(msg)) == LINEAGE_DIVERGED);
	CHECK(strstr(msg, "0/5000028") && strstr(msg, "0/5000029") && strstr(msg, "timeline 3") &&
		  strstr(msg, "timeline 2"));
	CHECK(lineage_judge(1, 0x3000061, &l, msg, sizeof(msg)) == LINEAGE_DIVERGED);
	/* An old primary coming back. */
	CHECK(lineage_judge(4, 0x1000, &l, msg, sizeof(msg)) == LINEAGE_BEHIND);
	/* Another branch: timeline 2 is not an ancestor of this 3. */
	f = file("1\t0/3000060\tx\n", 3);
	CHECK(lineage_judge(2, 0x3000000, &f, msg, sizeof(msg)) == LINEAGE_DIVERGED);
	buf_free(&b);
	return unit_done("lineage");
}
