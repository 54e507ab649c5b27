#include <stddef.h>
#include "lsn.h"
#include "common.h"

#include <stdio.h>
#include <string.h>


/* Parse 1-8 hex digits from s[0..len) up to 'stop'; returns chars used or -1. */
static int
parse_part(const char *s, size_t len, char stop, uint32_t *out)
{
	uint32_t v = 0;
	size_t i;

	for (i = 0; i < len && s[i] != stop; i++)
	{
		int h = hex_digit(s[i]);

		if (h < 0 || i >= 8)
			return -1;
		v = (v << 4) | (uint32_t) h;
	}
	if (i == 0)
		return -1;
	*out = v;
	return (int) i;
}

bool
lsn_parse_n(const char *s, size_t len, lsn_t *out)
{
	uint32_t hi, lo;
	int n1, n2;

	if (s == NULL)
		return false;
	n1 = parse_part(s, len, '/', &hi);
	if (n1 < 0 || (size_t) n1 >= len || s[n1] != '/')
		return false;
	n2 = parse_part(s + n1 + 1, len - (size_t) n1 - 1, '\0', &lo);
	if (n2 < 0 || (size_t) (n1 + 1 + n2) != len)
		return false;
	*out = ((lsn_t) hi << 32) | lo;
	return true;
}

bool
lsn_parse(const char *s, lsn_t *out)
{
	if (s == NULL)
		return false;
	return lsn_parse_n(s, strlen(s), out);
}

char *
lsn_format(lsn_t lsn, char buf[LSN_BUFSZ])
{
	snprintf(buf, LSN_BUFSZ, "%X/%X", (unsigned) (lsn >> 32), (unsigned) lsn);
	return buf;
}

uint64_t
lsn_diff(lsn_t b, lsn_t a)
{
	return b > a ? b - a : 0;
}
