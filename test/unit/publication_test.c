#include "unit.h"
#include "publication.h"

#include <string.h>

/* split ARG: the names joined by "|", or "error: why". */
static const char *
split(const char *arg, int max)
{
	static char out[512];
	char copy[256], why[128];
	const char *names[PUB_MAX];
	int n;

	snprintf(copy, sizeof(copy), "%s", arg);
	n = pub_split_list(copy, names, max, why, sizeof(why));
	if (n < 0)
	{
		snprintf(out, sizeof(out), "error: %s", why);
		return out;
	}
	out[0] = '\0';
	for (int i = 0; i < n; i++)
	{
		if (i)
			strcat(out, "|");
		strcat(out, names[i]);
	}
	return out;
}

int
main(void)
{
	CHECK_STR(split("a", PUB_MAX), "a");
	CHECK_STR(split("a,b,c", PUB_MAX), "a|b|c");
	CHECK_STR(split(" a ,\tb,  c  ", PUB_MAX), "a|b|c");
	CHECK_STR(split("Mixed$Case,x_1", PUB_MAX), "Mixed$Case|x_1");
	CHECK_STR(split("", PUB_MAX), "error: empty publication name in the list");
	CHECK_STR(split("a,,b", PUB_MAX), "error: empty publication name in the list");
	CHECK_STR(split("a,", PUB_MAX), "error: empty publication name in the list");
	CHECK_STR(split(",a", PUB_MAX), "error: empty publication name in the list");
	CHECK_STR(split(" , ", PUB_MAX), "error: empty publication name in the list");
	CHECK_STR(split("a,b,a", PUB_MAX), "error: publication \"a\" is named twice");
	CHECK_STR(split("a, a ", PUB_MAX), "error: publication \"a\" is named twice");
	CHECK_STR(split("a,b,c", 2), "error: too many publications (at most 2)");
	CHECK_STR(split("a,b", 2), "a|b");
	return unit_done("publication");
}
