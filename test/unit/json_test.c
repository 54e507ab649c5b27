#include "unit.h"
#include "buf.h"
#include "json.h"

/* The one JSON string escaper. */
static void
escapes(const char *s, const char *want)
{
	struct buf b = BUF_INIT;
	char out[256];

	json_escape(out, sizeof(out), s);
	CHECK_STR(out, want);
	buf_json_string(&b, s);
	CHECK(b.len == strlen(want) + 2 && b.data[0] == '"' && b.data[b.len - 1] == '"' &&
		  memcmp(b.data + 1, want, strlen(want)) == 0);
	buf_free(&b);
}

int
main(void)
{
	char small[8];
	struct buf b = BUF_INIT;

	escapes("plain", "plain");
	escapes("", "");
	escapes("a\"b\\c", "a\\\"b\\\\c");
	escapes("l1\nl2\tx\ry", "l1\\nl2\\tx\\ry");
	escapes("\x01\x1f", "\\u0001\\u001f");
	/* UTF-8 and DEL pass as they are. */
	escapes("caf\xc3\xa9 \xe2\x82\xac\x7f", "caf\xc3\xa9 \xe2\x82\xac\x7f");
	/* Cut before an escape that does not fit, never inside it. */
	CHECK(json_escape(small, sizeof(small), "abcdef\"g") == 6);
	CHECK_STR(small, "abcdef");
	CHECK(json_escape(small, sizeof(small), "ab\x01") == 2);
	CHECK_STR(small, "ab");
	CHECK(json_escape(small, 1, "abc") == 0 && small[0] == '\0');
	/* The worst case: every byte a six-byte escape. */
	{
		char all[300];
		int n = 0;

		for (int i = 0; i < 200; i++)
			all[n++] = '\x02';
		all[n] = '\0';
		buf_json_string(&b, all);
		CHECK(b.len == 200 * 6 + 2);
		buf_free(&b);
	}
	return unit_done("json");
}
