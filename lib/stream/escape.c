#include "escape.h"
#include "common.h"

#include <string.h>

void
copy_escape(struct buf *b, const char *s, size_t n)
{
	size_t i, start = 0;

	/* Worst case doubles; reserve once so the loop does no bounds checks. */
	buf_reserve(b, 2 * n);
	for (i = 0; i < n; i++)
	{
		char c = s[i], e;

		switch (c)
		{
			case '\\': e = '\\'; break;
			case '\t': e = 't'; break;
			case '\n': e = 'n'; break;
			case '\r': e = 'r'; break;
			default: continue;
		}
		memcpy(b->data + b->len, s + start, i - start);
		b->len += i - start;
		b->data[b->len++] = '\\';
		b->data[b->len++] = e;
		start = i + 1;
	}
	memcpy(b->data + b->len, s + start, n - start);
	b->len += n - start;
}


/* Shared by validation and decoding: b may be NULL to only validate. */
static bool
unescape(const char *f, size_t n, struct buf *b, bool *is_null)
{
	size_t i = 0;

	if (is_null)
		*is_null = false;
	if (field_is_null(f, n))
	{
		if (is_null)
			*is_null = true;
		return true;
	}
	if (b)
		buf_reserve(b, n);
	while (i < n)
	{
		char c = f[i++];

		if (c == '\t' || c == '\n' || c == '\r')
			return false;
		if (c != '\\')
		{
			if (b)
				b->data[b->len++] = c;
			continue;
		}
		if (i >= n)
			return false;
		c = f[i++];
		switch (c)
		{
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'v': c = '\v'; break;
			case '\\': break;
			case 'N':
			case 'U':
				/* Tokens are whole fields only. */
				return false;
			case 'x':
			{
				int v = 0, d, k = 0;

				while (k < 2 && i < n && (d = hex_digit(f[i])) >= 0)
				{
					v = v * 16 + d;
					i++;
					k++;
				}
				if (k == 0)
					return false;
				c = (char) v;
				break;
			}
			default:
				if (c >= '0' && c <= '7')
				{
					int v = c - '0', k = 1;

					while (k < 3 && i < n && f[i] >= '0' && f[i] <= '7')
					{
						v = v * 8 + (f[i++] - '0');
						k++;
					}
					c = (char) (v & 0xff);
				}
				/* COPY takes any other escaped char as itself. */
				break;
		}
		if (b)
			b->data[b->len++] = c;
	}
	return true;
}

bool
copy_unescape(const char *f, size_t n, struct buf *b, bool *is_null)
{
	return unescape(f, n, b, is_null);
}

bool
copy_field_valid(const char *f, size_t n)
{
	if (field_is_unchanged(f, n))
		return true;
	return unescape(f, n, NULL, NULL);
}

void
hex_encode(struct buf *b, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	buf_reserve(b, 2 * n);
	for (size_t i = 0; i < n; i++)
	{
		b->data[b->len++] = digits[p[i] >> 4];
		b->data[b->len++] = digits[p[i] & 15];
	}
}

bool
hex_decode(const char *s, size_t n, struct buf *b)
{
	if (n % 2 != 0)
		return false;
	buf_reserve(b, n / 2);
	for (size_t i = 0; i < n; i += 2)
	{
		int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		b->data[b->len++] = (char) (hi << 4 | lo);
	}
	return true;
}
