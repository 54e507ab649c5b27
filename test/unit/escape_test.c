#include "unit.h"
#include "escape.h"

static void
roundtrip(const char *s, size_t n)
{
	struct buf e = BUF_INIT, d = BUF_INIT;
	bool isnull = true;

	copy_escape(&e, s, n);
	CHECK(memchr(e.data ? e.data : "", '\t', e.len) == NULL);
	CHECK(memchr(e.data ? e.data : "", '\n', e.len) == NULL);
	CHECK(!field_is_null(e.data, e.len));
	CHECK(!field_is_unchanged(e.data, e.len));
	CHECK(copy_unescape(e.data, e.len, &d, &isnull));
	CHECK(!isnull);
	CHECK(d.len == n && (n == 0 || memcmp(d.data, s, n) == 0));
	buf_free(&e);
	buf_free(&d);
}

int
main(void)
{
	struct buf b = BUF_INIT;
	bool isnull;

	copy_escape(&b, "a\tb\nc\rd\\e", 9);
	CHECK_STR(buf_cstr(&b), "a\\tb\\nc\\rd\\\\e");
	buf_reset(&b);

	roundtrip("", 0);
	roundtrip("\\N", 2);
	roundtrip("\\U", 2);
	roundtrip("\\", 1);
	roundtrip("plain text", 10);
	roundtrip("\t\n\r\\", 4);

	char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (char) i;
	roundtrip(all, 256);

	CHECK(copy_unescape("\\N", 2, &b, &isnull) && isnull && b.len == 0);
	CHECK(!copy_unescape("abc\\", 4, &b, &isnull));	/* lone trailing backslash */
	CHECK(!copy_unescape("a\\Nb", 4, &b, &isnull));		/* \N inside a field */
	CHECK(!copy_unescape("a\tb", 3, &b, &isnull));		/* raw tab */
	buf_reset(&b);
	CHECK(copy_unescape("\\x41\\101\\b", 10, &b, &isnull));
	CHECK(b.len == 3 && b.data[0] == 'A' && b.data[1] == 'A' && b.data[2] == '\b');
	CHECK(copy_field_valid("\\U", 2));
	CHECK(copy_field_valid("", 0));
	CHECK(!copy_field_valid("x\\", 2));

	buf_reset(&b);
	hex_encode(&b, (const unsigned char *) "\x00\xff\x10", 3);
	CHECK_STR(buf_cstr(&b), "00ff10");
	struct buf d = BUF_INIT;
	CHECK(hex_decode("00ff10", 6, &d) && d.len == 3 && (unsigned char) d.data[1] == 0xff);
	CHECK(!hex_decode("0", 1, &d));
	CHECK(!hex_decode("zz", 2, &d));
	buf_free(&b);
	buf_free(&d);
	return unit_done("escape");
}
