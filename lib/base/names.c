#include "names.h"

#include <stdio.h>
#include <string.h>

bool
slot_name_valid(const char *name)
{
	size_t n = strlen(name);

	return n >= 1 && n <= SLOT_NAME_MAX &&
		strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

int
pub_split_list(char *arg, const char **names, int max, char *why, size_t whylen)
{
	int n = 0;
	char *p = arg;

	for (;;)
	{
		char *comma = strchr(p, ',');
		char *e;

		if (comma)
			*comma = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		e = p + strlen(p);
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		if (*p == '\0')
		{
			snprintf(why, whylen, "empty publication name in the list");
			return -1;
		}
		for (int i = 0; i < n; i++)
			if (strcmp(names[i], p) == 0)
			{
				snprintf(why, whylen, "publication \"%s\" is named twice", p);
				return -1;
			}
		if (n == max)
		{
			snprintf(why, whylen, "too many publications (at most %d)", max);
			return -1;
		}
		names[n++] = p;
		if (comma == NULL)
			return n;
		p = comma + 1;
	}
}
