#include "json.h"

#include <stdio.h>
#include <string.h>

size_t
json_escape(char *out, size_t outlen, const char *s)
{
	size_t o = 0;

	if (outlen == 0)
		return 0;
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;
		char esc[8];
		size_t n;

		if (c == '"' || c == '\\')
			n = (size_t) snprintf(esc, sizeof(esc), "\\%c", c);
		else if (c == '\n')
			n = (size_t) snprintf(esc, sizeof(esc), "\\n");
		else if (c == '\t')
			n = (size_t) snprintf(esc, sizeof(esc), "\\t");
		else if (c == '\r')
			n = (size_t) snprintf(esc, sizeof(esc), "\\r");
		else if (c < 0x20)
			n = (size_t) snprintf(esc, sizeof(esc), "\\u%04x", c);
		else
		{
			esc[0] = (char) c;
			n = 1;
		}
		if (o + n >= outlen)
			break;
		memcpy(out + o, esc, n);
		o += n;
	}
	out[o] = '\0';
	return o;
}
