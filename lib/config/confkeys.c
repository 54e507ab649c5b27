/*
 * confkeys.c - the key table of a pgsync job configuration and the rule
 * for each type of value (confkeys.h).
 */
#include "confkeys.h"

#include "buf.h"
#include "common.h"
#include "log.h"
#include "names.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Designated initializers leave the read-time fields zero. */
#define K(n, t, d, lo, hi, ch) {.name = n, .type = t, .def = d, .min = lo, .max = hi, .choices = ch}

/*
 * Every key: a new one is a line here (and in doc/pgsync.conf.example and
 * doc/operations.md); pgsync reads it by name from pgsync-config's output.
 */
struct key conf_keys[] = {
	K("job.name", T_JOBNAME, NULL, 0, 0, NULL),
	K("job.state_dir", T_PATH, "", 0, 0, NULL),
	K("source.slot", T_SLOT, NULL, 0, 0, NULL),
	K("source.publication", T_IDENTS, NULL, 0, 0, NULL),
	/* auto: on for a PostgreSQL 17+ primary, off below (lib/pgsync/ha.sh). */
	K("source.failover_slot", T_ENUM, "auto", 0, 0, "auto|on|off"),
	K("replication.tables", T_TABLES, NULL, 0, 0, NULL),
	K("replication.sequences", T_TABLES, "", 0, 0, NULL),
	K("safety.auto_create_publication", T_BOOL, "false", 0, 0, NULL),
	K("safety.heartbeat_interval", T_DURATION, "10s", 1000, 3600000, NULL),
	K("safety.wal_retention_alarm_bytes", T_SIZE, "10GB", MIB, UINT64_C(1) << 50, NULL),
	K("safety.wal_retention_action", T_ENUM, "warn", 0, 0, "warn|stop"),
	K("safety.max_retries", T_INT, "5", 0, 1000, NULL),
	K("safety.sequence_margin", T_INT, "0", 0, 1000000000000, NULL),
	K("switchover.fence_roles", T_ROLES, "", 0, 0, NULL),
	K("switchover.max_lag", T_SIZE, "16MB", 0, UINT64_C(1) << 50, NULL),
	K("switchover.timeout", T_DURATION, "5min", 1000, 86400000, NULL),
	K("resources.snapshot_timeout", T_DURATION, "6h", 1000, UINT64_C(30) * 86400000, NULL),
	K("resources.max_message_bytes", T_SIZE, NULL, 1024, UINT64_C(1) << 30, NULL),
	/* Bounds nothing and is not in the budget (confbudget.c); accepted so
	 * that files which set it stay valid. */
	K("resources.max_inflight_bytes", T_SIZE, "64MB", 64 * 1024, UINT64_C(1) << 40, NULL),
	K("resources.max_batch_bytes", T_SIZE, "16MB", 64 * 1024, UINT64_C(1) << 40, NULL),
	K("resources.max_parallel_copies", T_INT, "4", 1, 64, NULL),
	K("resources.buffer_size_kb", T_INT, "1024", 8, 1048576, NULL),
	K("resources.memory_budget_mb", T_INT, "336", 16, 16777216, NULL),
	K("resources.snapshot_mode", T_ENUM, "chunked", 0, 0, "chunked|single"),
	K("resources.chunk_rows", T_INT, "100000", 1, 1000000000, NULL),
	K("resources.chunk_bytes", T_SIZE, "2MB", 64 * 1024, UINT64_C(1) << 30, NULL),
	K("resources.chunk_group_seconds", T_INT, "60", 1, 86400, NULL),
};
const size_t conf_nkeys = sizeof(conf_keys) / sizeof(conf_keys[0]);

const char *conf_file = "pgsync.conf";
int conf_nerrors;

void
conf_error(int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (conf_nerrors++ < CONF_MAX_ERRORS)
	{
		if (line > 0)
			log_error("%s:%d: %s", conf_file, line, msg);
		else if (line == CONF_LINE_SET)
			log_error("%s", msg);
		else
			log_error("%s: %s", conf_file, msg);
	}
}

struct key *
conf_key(const char *name)
{
	for (size_t i = 0; i < conf_nkeys; i++)
		if (strcmp(conf_keys[i].name, name) == 0)
			return &conf_keys[i];
	return NULL;
}

uint64_t
conf_num(const char *name)
{
	return conf_key(name)->num;
}

bool
conf_ident_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63 || isdigit((unsigned char) s[0]) || s[0] == '$')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char) s[i]) && s[i] != '_' && s[i] != '$')
			return false;
	return true;
}

char *
conf_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/*
 * A list of names ("a, b, c"), split as pg-walcat and pg-snapshot-dump
 * split --publication; its canonical form is "a,b,c".
 */
static bool
check_idents(struct key *k, const char *v, int line)
{
	char *copy = xstrdup(v), why[128];
	const char *names[PUB_MAX];
	struct buf b = BUF_INIT;
	int n = pub_split_list(copy, names, PUB_MAX, why, sizeof(why));
	bool ok = n > 0;

	if (n < 0)
		conf_error(line, "invalid %s \"%s\": %s", k->name, v, why);
	for (int i = 0; i < n && ok; i++)
		if (!conf_ident_ok(names[i], strlen(names[i])))
		{
			conf_error(line, "invalid publication \"%s\" in %s: use 1-63 letters, digits, _ or $ as stored "
					  "in the catalog, names separated by commas", names[i], k->name);
			ok = false;
		}
	for (int i = 0; i < n && ok; i++)
		buf_printf(&b, "%s%s", i ? "," : "", names[i]);
	if (ok)
		conf_set_text(k, buf_cstr(&b));
	buf_free(&b);
	free(copy);
	return ok;
}

void
conf_set_text(struct key *k, const char *v)
{
	free(k->text);
	k->text = xstrdup(v);
}

void
conf_set_num(struct key *k, uint64_t v, const char *unit)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%llu%s", (unsigned long long) v, unit);
	conf_set_text(k, tmp);
}

/* Whether the comma-separated LIST already holds ITEM, exactly. */
static bool
list_has(const char *list, const char *item)
{
	size_t il = strlen(item);

	for (const char *q = list; q && *q;)
	{
		const char *c = strchr(q, ',');
		size_t ql = c ? (size_t) (c - q) : strlen(q);

		if (ql == il && memcmp(q, item, il) == 0)
			return true;
		q = c ? c + 1 : NULL;
	}
	return false;
}

/*
 * One part of a table's (or sequence's) name written as the catalog stores
 * it, unquoted: the characters of an identifier, and also spaces and double
 * quotes, taken exactly (no case folding). Never a dot or a comma, which
 * separate the parts and the items, nor blanks around the name; a part that
 * starts and ends with a double quote is SQL's quoting (quoted_part).
 */
static bool
name_part_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63 || s[0] == ' ' || s[n - 1] == ' ' || (n > 1 && s[0] == '"' && s[n - 1] == '"'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char) s[i]) && strchr("_$ \"", s[i]) == NULL)
			return false;
	return true;
}

static const char *
skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/*
 * A part in SQL's double quotes at P (*P == '"'): "" is one quote, any
 * character but a control character, 1-63 bytes (PostgreSQL's NAMEDATALEN),
 * case kept. Returns the position after the closing quote and its blanks,
 * which must be a dot, a comma or the end; NULL when P does not read so
 * (no closing quote, or more after it), and then the part is read as stored
 * ("q.x was the schema "q before quoting was read); *WHY set when the
 * quoted name itself is wrong.
 */
static const char *
quoted_part(const char *p, struct buf *out, const char **why)
{
	const char *q = p + 1, *after;

	buf_reset(out);
	for (;; q++)
	{
		if (*q == '\0')
			return NULL;
		if (*q == '"')
		{
			if (q[1] != '"')
				break;
			q++;
		}
		buf_putc(out, *q);
	}
	after = skip_blanks(q + 1);
	if (*after != '.' && *after != ',' && *after != '\0')
		return NULL;
	for (size_t i = 0; i < out->len; i++)
		if ((unsigned char) out->data[i] < 0x20 || out->data[i] == 0x7f)
			*why = "a name must not hold a control character";
	if (out->len == 0)
		*why = "a quoted name must not be empty";
	else if (out->len > 63)
		*why = "a name is at most 63 bytes";
	return after;
}

/* One part at P, quoted or as stored, into OUT; the position after it, or
 * NULL (*WHY). */
static const char *
name_part(const char *p, struct buf *out, const char **why)
{
	const char *e;
	size_t n;

	if (*p == '"' && (e = quoted_part(p, out, why)) != NULL)
		return *why ? NULL : e;
	n = strcspn(p, ".,");
	e = p + n;
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (!name_part_ok(p, n))
	{
		*why = NULL;
		return NULL;
	}
	buf_reset(out);
	buf_append(out, p, n);
	return e;
}

/* The canonical form of a part: as stored when that reads back the same,
 * else in double quotes. */
static void
put_part(struct buf *b, const char *s)
{
	if (name_part_ok(s, strlen(s)))
		buf_puts(b, s);
	else
		buf_quote_ident(b, s);
}

/*
 * Read a list of schema.name items separated by commas into LIST (schema,
 * name, schema, name ...). Returns the number of items, or -1 with *BAD
 * (the item, as written) and *WHY (NULL: not schema.name) set.
 */
static int
table_items(const char *v, char ***list, char **bad, const char **why)
{
	struct buf part = BUF_INIT;
	const char *p = v;
	int n = 0;

	*list = NULL;
	*bad = NULL;
	*why = NULL;
	for (;;)
	{
		const char *item = p = skip_blanks(p), *e;
		char *names[2];

		if (*p == ',' || *p == '\0')
		{
			*bad = xstrdup("");
			break;
		}
		e = name_part(p, &part, why);
		names[0] = e && *e == '.' ? xstrdup(buf_cstr(&part)) : NULL;
		e = names[0] ? name_part(e + 1, &part, why) : NULL;
		e = e ? skip_blanks(e) : NULL;
		if (e == NULL || (*e != ',' && *e != '\0'))
		{
			free(names[0]);
			*bad = xstrdup(item);
			(*bad)[strcspn(item, ",")] = '\0';
			break;
		}
		names[1] = xstrdup(buf_cstr(&part));
		*list = xrealloc(*list, sizeof(char *) * (size_t) (2 * n + 2));
		(*list)[2 * n] = names[0];
		(*list)[2 * n + 1] = names[1];
		n++;
		if (*e == '\0')
			break;
		p = e + 1;
	}
	buf_free(&part);
	if (*bad == NULL)
		return n;
	for (int i = 0; i < 2 * n; i++)
		free((*list)[i]);
	free(*list);
	*list = NULL;
	return -1;
}

/*
 * Tables (or sequences): "schema.name" items, each part as the catalog
 * stores it or in SQL's double quotes ("my.schema"."a,b"), no duplicates.
 * An optional list (default "") may be empty. The canonical form writes
 * each part as stored where that reads back the same, else quoted.
 */
static bool
check_tables(struct key *k, const char *v, int line)
{
	const char *noun = strcmp(k->name, "replication.sequences") == 0 ? "sequence" : "table", *why;
	struct buf out = BUF_INIT, one = BUF_INIT;
	char **list, *bad;
	int n;
	bool ok = true;

	if (v[0] == '\0' && k->def && k->def[0] == '\0')
	{
		conf_set_text(k, "");
		return true;
	}
	n = table_items(v, &list, &bad, &why);
	if (n < 0)
	{
		if (*bad == '\0')
			conf_error(line, "empty item in %s", k->name);
		else if (why)
			conf_error(line, "invalid %s \"%s\" in %s: %s", noun, conf_trim(bad), k->name, why);
		else
			conf_error(line, "invalid %s \"%s\" in %s: expected schema.%s, each name as the catalog stores it "
					   "(1-63 letters, digits, _, $, spaces or double quotes) or in SQL's double quotes",
					   noun, conf_trim(bad), k->name, noun);
		free(bad);
		return false;
	}
	for (int i = 0; i < n; i++)
	{
		buf_reset(&one);
		put_part(&one, list[2 * i]);
		buf_putc(&one, '.');
		put_part(&one, list[2 * i + 1]);
		for (int j = 0; j < i && ok; j++)
			if (strcmp(list[2 * i], list[2 * j]) == 0 && strcmp(list[2 * i + 1], list[2 * j + 1]) == 0)
			{
				conf_error(line, "%s \"%s\" is listed twice in %s", noun, buf_cstr(&one), k->name);
				ok = false;
			}
		buf_printf(&out, "%s%s", i ? "," : "", buf_cstr(&one));
	}
	if (ok)
		conf_set_text(k, buf_cstr(&out));
	for (int i = 0; i < 2 * n; i++)
		free(list[i]);
	free(list);
	buf_free(&out);
	buf_free(&one);
	return ok;
}

bool
conf_table_lines(const char *v, struct buf *out)
{
	char **list, *bad;
	const char *why;
	int n = v[0] ? table_items(v, &list, &bad, &why) : 0;

	if (n < 0)
	{
		free(bad);
		return false;
	}
	for (int i = 0; i < 2 * n; i++)
	{
		/* The stream's escaping: of the characters a name may hold, only
		 * the backslash needs it. */
		for (const char *c = list[i]; *c; c++)
		{
			if (*c == '\\')
				buf_putc(out, '\\');
			buf_putc(out, *c);
		}
		buf_putc(out, i % 2 ? '\n' : '\t');
		free(list[i]);
	}
	if (n > 0)
		free(list);
	return true;
}

/*
 * A role name as the catalog stores it. Beyond an identifier's characters
 * a role name may hold - . and @ (login names often do); nothing that needs
 * quoting on a command line, and never a comma.
 */
static bool
role_ok(const char *r)
{
	size_t rl = strlen(r);
	bool good = rl > 0 && rl <= 63 && !isdigit((unsigned char) r[0]);

	for (size_t i = 0; good && i < rl; i++)
		good = isalnum((unsigned char) r[i]) || strchr("_$-.@", r[i]) != NULL;
	return good;
}

/*
 * A comma-separated list of NOUNs, each VALID, no duplicates (names are not
 * case-folded, so an exact match is one). An optional list (default "")
 * may be empty. EXPECT says what an item must look like.
 */
static bool
check_list(struct key *k, const char *v, int line, const char *noun,
		   bool (*valid) (const char *), const char *expect)
{
	struct buf out = BUF_INIT;
	char *copy, *item;
	bool ok = true;

	if (v[0] == '\0' && k->def && k->def[0] == '\0')
	{
		conf_set_text(k, "");
		return true;
	}
	copy = item = xstrdup(v);
	for (;;)
	{
		char *comma = strchr(item, ','), *t;

		if (comma)
			*comma = '\0';
		t = conf_trim(item);
		if (t[0] == '\0')
		{
			conf_error(line, "empty item in %s", k->name);
			ok = false;
		}
		else if (!valid(t))
		{
			conf_error(line, "invalid %s \"%s\" in %s: %s", noun, t, k->name, expect);
			ok = false;
		}
		else
		{
			if (list_has(buf_cstr(&out), t))
			{
				conf_error(line, "%s \"%s\" is listed twice in %s", noun, t, k->name);
				ok = false;
			}
			buf_printf(&out, "%s%s", out.len ? "," : "", t);
		}
		if (comma == NULL)
			break;
		item = comma + 1;
	}
	if (ok)
		conf_set_text(k, buf_cstr(&out));
	free(copy);
	buf_free(&out);
	return ok;
}

/* Roles: switchover.fence_roles. */
static bool
check_roles(struct key *k, const char *v, int line)
{
	return check_list(k, v, line, "role", role_ok,
					  "use 1-63 letters, digits, _ $ - . or @ as stored in the catalog, names separated by commas");
}

static bool
jobname_char(int c)
{
	return isalnum(c) || c == '_' || c == '-';
}

/* A name of at most 63 characters, each one VALID_CHAR allows. */
static bool
check_name(struct key *k, const char *v, int line, bool (*valid_char) (int), const char *expect)
{
	for (const char *p = v; *p; p++)
		if (!valid_char((unsigned char) *p))
		{
			conf_error(line, "invalid %s \"%s\": %s", k->name, v, expect);
			return false;
		}
	if (strlen(v) > 63)
	{
		conf_error(line, "invalid %s: longer than 63 characters", k->name);
		return false;
	}
	conf_set_text(k, v);
	return true;
}

/* Validate one value and store its canonical form. */
bool
conf_check_value(struct key *k, const char *v, int line)
{
	long l;

	switch (k->type)
	{
		case T_JOBNAME:
			return check_name(k, v, line, jobname_char, "use 1-63 letters, digits, _ or -");
		case T_PATH:
			if (strchr(v, '\n'))
			{
				conf_error(line, "invalid %s", k->name);
				return false;
			}
			conf_set_text(k, v);
			return true;
		case T_SLOT:
			/* The programs' own rule (slotinfo.h), which --slot checks. */
			if (!slot_name_valid(v))
			{
				conf_error(line, "invalid %s \"%s\": replication slot names use 1-63 lower-case letters, digits and _",
						   k->name, v);
				return false;
			}
			conf_set_text(k, v);
			return true;
		case T_IDENTS:
			return check_idents(k, v, line);
		case T_TABLES:
			return check_tables(k, v, line);
		case T_ROLES:
			return check_roles(k, v, line);
		case T_BOOL:
			if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
			{
				conf_error(line, "invalid %s \"%s\": expected true or false", k->name, v);
				return false;
			}
			k->num = v[0] == 't';
			conf_set_text(k, v);
			return true;
		case T_DURATION:
			if (!parse_duration_ms(v, &k->num))
			{
				conf_error(line, "invalid duration \"%s\" for %s: use a number with ms, s, min, h or d", v, k->name);
				return false;
			}
			if (k->num < k->min || k->num > k->max)
			{
				conf_error(line, "%s must be between %llus and %llus", k->name,
						  (unsigned long long) k->min / 1000, (unsigned long long) k->max / 1000);
				return false;
			}
			conf_set_num(k, k->num, "ms");
			return true;
		case T_SIZE:
			if (!parse_size(v, &k->num))
			{
				conf_error(line, "invalid size \"%s\" for %s: use a number with optional kB, MB, GB or TB", v, k->name);
				return false;
			}
			if (k->num < k->min || k->num > k->max)
			{
				conf_error(line, "%s must be between %llu and %llu bytes", k->name,
						  (unsigned long long) k->min, (unsigned long long) k->max);
				return false;
			}
			conf_set_num(k, k->num, "");
			return true;
		case T_INT:
			if (!parse_int(v, (long) k->min, (long) k->max, &l))
			{
				conf_error(line, "invalid %s \"%s\": expected an integer from %llu to %llu", k->name, v,
						  (unsigned long long) k->min, (unsigned long long) k->max);
				return false;
			}
			k->num = (uint64_t) l;
			conf_set_num(k, k->num, "");
			return true;
		case T_ENUM:
			{
				size_t vl = strlen(v);

				for (const char *c = k->choices; *c;)
				{
					const char *bar = strchr(c, '|');
					size_t cl = bar ? (size_t) (bar - c) : strlen(c);

					if (cl == vl && memcmp(c, v, vl) == 0)
					{
						conf_set_text(k, v);
						return true;
					}
					c = bar ? bar + 1 : c + cl;
				}
				conf_error(line, "invalid %s \"%s\": expected %s", k->name, v, k->choices);
				return false;
			}
	}
	return false;
}
