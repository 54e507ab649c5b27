/*
 * argsecret.c - take a connection string from the command line without
 * leaving its password where ps(1) and /proc/PID/cmdline show it.
 */
#include "argsecret.h"
#include "common.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

/* The copies live as long as the program (a list, however often it is
 * called), freed at exit so that leak checkers see none lost. */
static char **kept;
static size_t nkept;

static void
free_kept(void)
{
	while (nkept > 0)
		free(kept[--nkept]);
	free(kept);
	kept = NULL;
}

static void
blank(char *p, size_t n)
{
	memset(p, '*', n);
}

/* postgresql://user:PASSWORD@host/db?password=PASSWORD&... */
static void
blank_url(char *s)
{
	char *auth = strstr(s, "://") + 3;
	size_t alen = strcspn(auth, "/?");
	char *at = NULL, *q;

	for (char *p = auth; p < auth + alen; p++)
		if (*p == '@')
			at = p;
	if (at)
	{
		char *colon = memchr(auth, ':', (size_t) (at - auth));

		if (colon)
			blank(colon + 1, (size_t) (at - colon - 1));
	}
	if ((q = strchr(auth, '?')) == NULL)
		return;
	for (char *p = q + 1; *p; )
	{
		size_t n = strcspn(p, "&");

		if (strncmp(p, "password=", 9) == 0)
			blank(p + 9, n - 9);
		p += n;
		if (*p == '&')
			p++;
	}
}

/* keyword = value pairs; a value may be single-quoted, with \ escapes. */
static void
blank_keywords(char *s)
{
	char *p = s;

	while (*p)
	{
		char *kw, *val;
		size_t kwlen;

		while (isspace((unsigned char) *p))
			p++;
		kw = p;
		while (*p && *p != '=' && !isspace((unsigned char) *p))
			p++;
		kwlen = (size_t) (p - kw);
		while (isspace((unsigned char) *p))
			p++;
		if (*p != '=')
			return;				/* libpq refused it already */
		p++;
		while (isspace((unsigned char) *p))
			p++;
		val = p;
		if (*p == '\'')
		{
			val = ++p;
			while (*p && *p != '\'')
				p += p[0] == '\\' && p[1] ? 2 : 1;
		}
		else
			while (*p && !isspace((unsigned char) *p))
				p += p[0] == '\\' && p[1] ? 2 : 1;
		if (kwlen == 8 && memcmp(kw, "password", 8) == 0)
			blank(val, (size_t) (p - val));
		if (*p == '\'')
			p++;
	}
}

const char *
argsecret_conninfo(char *arg)
{
	PQconninfoOption *opts;
	char *err = NULL, *copy;

	if ((opts = PQconninfoParse(arg, &err)) == NULL)
	{
		PQfreemem(err);
		return NULL;
	}
	PQconninfoFree(opts);
	copy = xstrdup(arg);
	if (kept == NULL)
		atexit(free_kept);
	kept = xrealloc(kept, (nkept + 1) * sizeof(*kept));
	kept[nkept++] = copy;
	if (strncmp(arg, "postgresql://", 13) == 0 || strncmp(arg, "postgres://", 11) == 0)
		blank_url(arg);
	else
		blank_keywords(arg);
	return copy;
}
