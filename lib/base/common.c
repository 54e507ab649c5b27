#include "common.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/resource.h>

static void
oom(size_t n)
{
	log_fatal(EXIT_RUNTIME, "out of memory allocating %zu bytes", n);
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *
xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);

	if (p == NULL)
		oom(n * m);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		oom(n);
	return q;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = xmalloc(n);

	memcpy(p, s, n);
	return p;
}

bool
parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0' || isspace((unsigned char) *s))
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}


/* Split "123unit" into the number and the unit; the number must be present. */
static bool
split_unit(const char *s, uint64_t *num, const char **unit)
{
	char *end;
	unsigned long long v;

	if (s == NULL || !isdigit((unsigned char) *s))
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return false;
	*num = v;
	*unit = end;
	return true;
}

bool
parse_u64(const char *s, uint64_t *out)
{
	const char *unit;
	uint64_t n;

	if (!split_unit(s, &n, &unit) || *unit != '\0')
		return false;
	*out = n;
	return true;
}

static bool
mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	if (b != 0 && a > UINT64_MAX / b)
		return false;
	*out = a * b;
	return true;
}

struct unit { const char *name; uint64_t mult; };

/* A number and one of units (PostgreSQL's spelling), multiplied out. */
static bool
parse_with_units(const char *s, const struct unit *units, size_t nunits, uint64_t *out)
{
	uint64_t n;
	const char *unit;

	if (!split_unit(s, &n, &unit))
		return false;
	for (size_t i = 0; i < nunits; i++)
		if (strcmp(unit, units[i].name) == 0)
			return mul_ok(n, units[i].mult, out);
	return false;
}

bool
parse_size(const char *s, uint64_t *out)
{
	static const struct unit units[] = {
		{"", 1}, {"B", 1}, {"kB", 1024}, {"KB", 1024}, {"MB", 1024 * 1024},
		{"GB", 1024ULL * 1024 * 1024}, {"TB", 1024ULL * 1024 * 1024 * 1024},
	};

	return parse_with_units(s, units, sizeof(units) / sizeof(units[0]), out);
}

bool
parse_duration_ms(const char *s, uint64_t *out_ms)
{
	static const struct unit units[] = {
		{"", 1000}, {"ms", 1}, {"s", 1000}, {"min", 60000}, {"h", 3600000},
		{"d", 86400000},
	};

	return parse_with_units(s, units, sizeof(units) / sizeof(units[0]), out_ms);
}

uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

uint64_t
current_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size, resident;
	uint64_t rss = 0;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) == 2)
		rss = (uint64_t) resident * 4096;
	fclose(f);
	return rss;
}

uint64_t
peak_rss_bytes(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t) ru.ru_maxrss * 1024;
}
