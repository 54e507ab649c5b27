/*
 * pgsync-config - strict reader of pgsync job configuration files, and the
 * small libpq-backed helpers the pgsync script needs: the display form of a
 * connection string (never its password), a libpq service-file section so
 * that child programs get their connection without a password on any command
 * line, and the target catalog DDL.
 *
 * Every problem is reported as FILE:LINE: message and exits 2, so the script
 * never starts with a configuration it half understood.
 */
#include "buf.h"
#include "catalog.h"
#include "checkpoint.h"
#include "common.h"
#include "conn.h"
#include "log.h"
#include "out.h"
#include "publication.h"
#include "session.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (UINT64_C(1024) * 1024)
#define BASELINE_BYTES (10 * MIB)		/* runtime baseline of the budget */
#define MESSAGE_CAP (32 * MIB)			/* derived max_message_bytes cap */
#define MESSAGE_FLOOR MIB				/* a derived limit below this is useless */
/*
 * How many times the largest message can be in memory at once, measured:
 * pg-walcat holds libpq's receive buffer (it grows by doubling to hold a
 * whole message, before anyone can look at its size), the copy libpq
 * returns and the encoded record, about 3 x; pg-apply the line, its
 * statement parameters and libpq's send buffer, about 3 x.
 */
#define MESSAGE_COPIES 6
#define MAX_ERRORS 20
#define MAX_LINE 65536
#define LINE_SET (-1)					/* a key given with --set, not in the file */

enum ktype { T_JOBNAME, T_PATH, T_SLOT, T_IDENTS, T_TABLES, T_ROLES, T_BOOL, T_DURATION, T_SIZE, T_INT, T_ENUM };

struct key {
	const char *name;
	enum ktype type;
	const char *def;			/* default as written in a file; NULL: required or derived */
	uint64_t min, max;			/* T_DURATION: ms; T_SIZE: bytes; T_INT: value */
	const char *choices;		/* T_ENUM: "a|b" */
	/* filled while reading */
	int line;
	uint64_t num;
	char *text;					/* canonical text form */
};

/* Designated initializers leave the read-time fields zero. */
#define K(n, t, d, lo, hi, ch) {.name = n, .type = t, .def = d, .min = lo, .max = hi, .choices = ch}

static struct key keys[] = {
	K("job.name", T_JOBNAME, NULL, 0, 0, NULL),
	K("job.state_dir", T_PATH, "", 0, 0, NULL),
	K("source.slot", T_SLOT, NULL, 0, 0, NULL),
	K("source.publication", T_IDENTS, NULL, 0, 0, NULL),
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
	K("resources.max_inflight_bytes", T_SIZE, "64MB", 64 * 1024, UINT64_C(1) << 40, NULL),
	K("resources.max_batch_bytes", T_SIZE, "16MB", 64 * 1024, UINT64_C(1) << 40, NULL),
	K("resources.max_parallel_copies", T_INT, "4", 1, 64, NULL),
	K("resources.buffer_size_kb", T_INT, "1024", 8, 1048576, NULL),
	K("resources.memory_budget_mb", T_INT, "336", 16, 16777216, NULL),
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *cfg_file;
static int nerrors;

static void
cfg_error(int line, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
cfg_error(int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (nerrors++ < MAX_ERRORS)
	{
		if (line > 0)
			log_error("%s:%d: %s", cfg_file, line, msg);
		else if (line == LINE_SET)
			log_error("%s", msg);
		else
			log_error("%s: %s", cfg_file, msg);
	}
}

static struct key *
key_find(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

/*
 * An identifier exactly as the catalog stores it: no quoting, no case
 * folding, and only characters that need no escaping anywhere the script
 * passes a name on (SQL literals, command arguments, file names).
 */
static bool
ident_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63 || isdigit((unsigned char) s[0]) || s[0] == '$')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char) s[i]) && s[i] != '_' && s[i] != '$')
			return false;
	return true;
}

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static void set_text(struct key *k, const char *v);

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
		cfg_error(line, "invalid %s \"%s\": %s", k->name, v, why);
	for (int i = 0; i < n && ok; i++)
		if (!ident_ok(names[i], strlen(names[i])))
		{
			cfg_error(line, "invalid publication \"%s\" in %s: use 1-63 letters, digits, _ or $ as stored "
					  "in the catalog, names separated by commas", names[i], k->name);
			ok = false;
		}
	for (int i = 0; i < n && ok; i++)
		buf_printf(&b, "%s%s", i ? "," : "", names[i]);
	if (ok)
		set_text(k, buf_cstr(&b));
	buf_free(&b);
	free(copy);
	return ok;
}

static void
set_text(struct key *k, const char *v)
{
	free(k->text);
	k->text = xstrdup(v);
}

static void
set_num(struct key *k, uint64_t v, const char *unit)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%llu%s", (unsigned long long) v, unit);
	set_text(k, tmp);
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

/* A table (or sequence) name as the catalog stores it: schema.name. */
static bool
qualified_ok(const char *t)
{
	const char *dot = strchr(t, '.');

	return dot && ident_ok(t, (size_t) (dot - t)) && ident_ok(dot + 1, strlen(dot + 1));
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
		set_text(k, "");
		return true;
	}
	copy = item = xstrdup(v);
	for (;;)
	{
		char *comma = strchr(item, ','), *t;

		if (comma)
			*comma = '\0';
		t = trim(item);
		if (t[0] == '\0')
		{
			cfg_error(line, "empty item in %s", k->name);
			ok = false;
		}
		else if (!valid(t))
		{
			cfg_error(line, "invalid %s \"%s\" in %s: %s", noun, t, k->name, expect);
			ok = false;
		}
		else
		{
			if (list_has(buf_cstr(&out), t))
			{
				cfg_error(line, "%s \"%s\" is listed twice in %s", noun, t, k->name);
				ok = false;
			}
			buf_printf(&out, "%s%s", out.len ? "," : "", t);
		}
		if (comma == NULL)
			break;
		item = comma + 1;
	}
	if (ok)
		set_text(k, buf_cstr(&out));
	free(copy);
	buf_free(&out);
	return ok;
}

/* Tables (or sequences): "schema.name" items. */
static bool
check_tables(struct key *k, const char *v, int line)
{
	bool seq = strcmp(k->name, "replication.sequences") == 0;

	return check_list(k, v, line, seq ? "sequence" : "table", qualified_ok,
					  seq ? "expected schema.sequence, each name 1-63 letters, digits, _ or $ as stored in the catalog"
					  : "expected schema.table, each name 1-63 letters, digits, _ or $ as stored in the catalog");
}

/* Roles: switchover.fence_roles. */
static bool
check_roles(struct key *k, const char *v, int line)
{
	return check_list(k, v, line, "role", role_ok,
					  "use 1-63 letters, digits, _ $ - . or @ as stored in the catalog, names separated by commas");
}

/* Validate one value and store its canonical form. */
static bool
check_value(struct key *k, const char *v, int line)
{
	long l;

	switch (k->type)
	{
		case T_JOBNAME:
			for (const char *p = v; *p; p++)
				if (!isalnum((unsigned char) *p) && *p != '_' && *p != '-')
				{
					cfg_error(line, "invalid %s \"%s\": use 1-63 letters, digits, _ or -", k->name, v);
					return false;
				}
			if (strlen(v) > 63)
			{
				cfg_error(line, "invalid %s: longer than 63 characters", k->name);
				return false;
			}
			set_text(k, v);
			return true;
		case T_PATH:
			if (strchr(v, '\n'))
			{
				cfg_error(line, "invalid %s", k->name);
				return false;
			}
			set_text(k, v);
			return true;
		case T_SLOT:
			for (const char *p = v; *p; p++)
				if (!islower((unsigned char) *p) && !isdigit((unsigned char) *p) && *p != '_')
				{
					cfg_error(line, "invalid %s \"%s\": replication slot names use 1-63 lower-case letters, digits and _", k->name, v);
					return false;
				}
			if (strlen(v) > 63)
			{
				cfg_error(line, "invalid %s: longer than 63 characters", k->name);
				return false;
			}
			set_text(k, v);
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
				cfg_error(line, "invalid %s \"%s\": expected true or false", k->name, v);
				return false;
			}
			k->num = v[0] == 't';
			set_text(k, v);
			return true;
		case T_DURATION:
			if (!parse_duration_ms(v, &k->num))
			{
				cfg_error(line, "invalid duration \"%s\" for %s: use a number with ms, s, min, h or d", v, k->name);
				return false;
			}
			if (k->num < k->min || k->num > k->max)
			{
				cfg_error(line, "%s must be between %llus and %llus", k->name,
						  (unsigned long long) k->min / 1000, (unsigned long long) k->max / 1000);
				return false;
			}
			set_num(k, k->num, "ms");
			return true;
		case T_SIZE:
			if (!parse_size(v, &k->num))
			{
				cfg_error(line, "invalid size \"%s\" for %s: use a number with optional kB, MB, GB or TB", v, k->name);
				return false;
			}
			if (k->num < k->min || k->num > k->max)
			{
				cfg_error(line, "%s must be between %llu and %llu bytes", k->name,
						  (unsigned long long) k->min, (unsigned long long) k->max);
				return false;
			}
			set_num(k, k->num, "");
			return true;
		case T_INT:
			if (!parse_int(v, (long) k->min, (long) k->max, &l))
			{
				cfg_error(line, "invalid %s \"%s\": expected an integer from %llu to %llu", k->name, v,
						  (unsigned long long) k->min, (unsigned long long) k->max);
				return false;
			}
			k->num = (uint64_t) l;
			set_num(k, k->num, "");
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
						set_text(k, v);
						return true;
					}
					c = bar ? bar + 1 : c + cl;
				}
				cfg_error(line, "invalid %s \"%s\": expected %s", k->name, v, k->choices);
				return false;
			}
	}
	return false;
}

/* A comment starts at a '#' that begins the line or follows whitespace. */
static void
strip_comment(char *s)
{
	for (char *p = s; *p; p++)
		if (*p == '#' && (p == s || p[-1] == ' ' || p[-1] == '\t'))
		{
			*p = '\0';
			return;
		}
}

static void
read_file(FILE *f)
{
	struct buf cont = BUF_INIT;		/* a list value continued on later lines */
	struct key *pending = NULL;
	int lineno = 0, pending_line = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	while ((n = getline(&line, &cap, f)) >= 0)
	{
		char *s, *eq, *name, *val;
		struct key *k;

		lineno++;
		if (n > MAX_LINE)
		{
			cfg_error(lineno, "line longer than %d bytes", MAX_LINE);
			break;
		}
		if (memchr(line, '\0', (size_t) n) != NULL)
		{
			cfg_error(lineno, "NUL byte in configuration");
			break;
		}
		if (n > 0 && line[n - 1] == '\n')
			line[n - 1] = '\0';
		strip_comment(line);
		s = trim(line);
		if (pending)
		{
			/* "replication.tables = a.b,\n  c.d": a list continues while
			 * its text ends in a comma. */
			buf_puts(&cont, s);
			if (s[0] != '\0' && s[strlen(s) - 1] == ',')
				continue;
			check_value(pending, buf_cstr(&cont), pending_line);
			pending = NULL;
			continue;
		}
		if (s[0] == '\0')
			continue;
		eq = strchr(s, '=');
		if (eq == NULL)
		{
			cfg_error(lineno, "expected \"key = value\"");
			continue;
		}
		*eq = '\0';
		name = trim(s);
		val = trim(eq + 1);
		k = key_find(name);
		if (k == NULL)
		{
			if (strcmp(name, "source.publications") == 0)
				cfg_error(lineno, "unknown key \"%s\": several publications are one list, source.publication = a, b, c", name);
			else
				cfg_error(lineno, "unknown key \"%s\"", name);
			continue;
		}
		if (k->line)
		{
			cfg_error(lineno, "duplicate key \"%s\" (first set on line %d)", name, k->line);
			continue;
		}
		k->line = lineno;
		if (val[0] == '\0')
		{
			cfg_error(lineno, "missing value for %s", name);
			continue;
		}
		if (k->type == T_TABLES && val[strlen(val) - 1] == ',')
		{
			buf_reset(&cont);
			buf_puts(&cont, val);
			pending = k;
			pending_line = lineno;
			continue;
		}
		check_value(k, val, lineno);
	}
	if (ferror(f))
		cfg_error(0, "cannot read: %s", strerror(errno));
	else if (pending)
		cfg_error(pending_line, "list in %s ends with a comma", pending->name);
	free(line);
	buf_free(&cont);
}

/* --set KEY=VALUE: a command's option in place of the file's value, checked
 * by the same rules (pgsync switchover --max-lag sets switchover.max_lag). */
static void
apply_sets(char **sets, int nsets)
{
	for (int i = 0; i < nsets; i++)
	{
		char *eq = strchr(sets[i], '=');
		struct key *k;

		if (eq == NULL)
		{
			cfg_error(LINE_SET, "--set needs KEY=VALUE, got \"%s\"", sets[i]);
			continue;
		}
		*eq = '\0';
		if ((k = key_find(sets[i])) == NULL)
		{
			cfg_error(LINE_SET, "unknown key \"%s\" in --set", sets[i]);
			continue;
		}
		k->line = LINE_SET;
		check_value(k, eq + 1, LINE_SET);
	}
}

static uint64_t
knum(const char *name)
{
	return key_find(name)->num;
}

/* Defaults, required keys, the derived message limit and the budget. */
static void
finish(void)
{
	struct key *msg = key_find("resources.max_message_bytes");
	struct key *budget = key_find("resources.memory_budget_mb");
	uint64_t fixed, total;
	int blame = 0;

	for (size_t i = 0; i < NKEYS; i++)
	{
		struct key *k = &keys[i];

		if (k->line)
			continue;
		if (k->def == NULL)
		{
			if (k != msg)
				cfg_error(0, "missing required key %s", k->name);
			continue;
		}
		if (!check_value(k, k->def, 0))
			log_fatal(EXIT_RUNTIME, "internal error: bad default for %s", k->name);
	}
	if (nerrors)
		return;

	/* A batch's updates held to be merged, and the stream read since the
	 * last target commit, kept to apply it again (at most two batches). */
	fixed = knum("resources.max_inflight_bytes") + 3 * knum("resources.max_batch_bytes") +
		knum("resources.max_parallel_copies") * 2 * knum("resources.buffer_size_kb") * 1024 +
		BASELINE_BYTES;
	total = budget->num * MIB;
	/* The line to blame: the budget when it is set, else the last setting
	 * that made the sum grow past the default budget. */
	if (budget->line)
		blame = budget->line;
	else
		for (size_t i = 0; i < NKEYS; i++)
			if (strncmp(keys[i].name, "resources.", 10) == 0 && keys[i].line > blame)
				blame = keys[i].line;

	if (msg->line == 0)
	{
		uint64_t room = total > fixed ? (total - fixed) / MESSAGE_COPIES : 0;

		if (room < MESSAGE_FLOOR)
		{
			cfg_error(blame, "resources.memory_budget_mb = %llu does not cover max_inflight_bytes + 3 x max_batch_bytes + max_parallel_copies x 2 x buffer_size_kb + %d x 1 MiB (smallest derived max_message_bytes) + 10 MiB = %llu MiB",
					  (unsigned long long) budget->num, MESSAGE_COPIES,
					  (unsigned long long) ((fixed + MESSAGE_COPIES * MESSAGE_FLOOR + MIB - 1) / MIB));
			return;
		}
		msg->num = room < MESSAGE_CAP ? room : MESSAGE_CAP;
		set_num(msg, msg->num, "");
		return;
	}
	if (fixed + MESSAGE_COPIES * msg->num > total)
		cfg_error(blame ? blame : msg->line,
				  "resources.memory_budget_mb = %llu does not cover max_inflight_bytes + 3 x max_batch_bytes + max_parallel_copies x 2 x buffer_size_kb + %d x max_message_bytes + 10 MiB = %llu MiB",
				  (unsigned long long) budget->num, MESSAGE_COPIES,
				  (unsigned long long) ((fixed + MESSAGE_COPIES * msg->num + MIB - 1) / MIB));
}

/* The state directory: configured (relative to the file's directory) or
 * <config dir>/<job.name>.state; --state-dir overrides both. */
static void
resolve_state_dir(const char *override)
{
	struct key *sd = key_find("job.state_dir");
	char *copy = xstrdup(cfg_file), *dir = dirname(copy);
	char cwd[PATH_MAX];
	struct buf b = BUF_INIT;
	const char *v = override ? override : sd->text;

	if (v[0] == '/')
		buf_puts(&b, v);
	else
	{
		const char *base = override ? "." : dir;

		if (base[0] != '/')
		{
			if (getcwd(cwd, sizeof(cwd)) == NULL)
				log_fatal(EXIT_RUNTIME, "cannot get the current directory: %s", strerror(errno));
			buf_printf(&b, "%s/", cwd);
			if (strcmp(base, ".") != 0)
				buf_printf(&b, "%s/", base);
		}
		else
			buf_printf(&b, "%s/", base);
		if (v[0] != '\0')
			buf_puts(&b, v);
		else
			buf_printf(&b, "%s.state", key_find("job.name")->text);
	}
	set_text(sd, buf_cstr(&b));
	buf_free(&b);
	free(copy);
}

static void
print_config(bool nul)
{
	char abs[PATH_MAX];

	if (realpath(cfg_file, abs) == NULL)
		snprintf(abs, sizeof(abs), "%s", cfg_file);
	if (nul)
		printf("config.file=%s%c", abs, '\0');
	else
		printf("# %s\n", abs);
	for (size_t i = 0; i < NKEYS; i++)
	{
		if (nul)
			printf("%s=%s%c", keys[i].name, keys[i].text, '\0');
		else
			printf("%s = %s%s\n", keys[i].name, keys[i].text,
				   keys[i].line ? "" : (keys[i].def ? "  # default" : "  # derived"));
	}
}

/* Read one connection string from stdin: a URL never travels in argv. */
static struct buf
read_stdin(void)
{
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;

	while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
		buf_append(&b, chunk, n);
	buf_cstr(&b);
	return b;
}

static char *
read_conninfo(void)
{
	struct buf b = read_stdin();

	while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
		b.len--;
	return buf_cstr(&b);
}

/*
 * pgsync hands pg-walcat the target's applied position in the checkpoint
 * file: written here by the C programs' one writer (temp file, fsync,
 * rename, fsync of the directory), after the readers' own checks.
 */
static int
write_checkpoint(const char *path)
{
	struct buf b = read_stdin();
	struct checkpoint cp;
	char err[512];

	if (checkpoint_parse("on standard input", b.data, b.len, &cp, err, sizeof(err)) != CP_OK)
		log_fatal(EXIT_USAGE, "%s", err);
	buf_free(&b);
	if (checkpoint_write(path, &cp, err, sizeof(err)) != 0)
		log_fatal(EXIT_RUNTIME, "%s", err);
	return EXIT_DONE;
}

/*
 * Print a pg_service.conf section with every option the connection string
 * sets, and the session settings. libpq's service files hold one key=value a line, so a value with a
 * line break or surrounding blanks cannot be represented: refuse it.
 */
static int
print_service(const char *name, const char *label)
{
	char *conninfo = read_conninfo();
	PQconninfoOption *opts;
	struct buf out = BUF_INIT, settings = BUF_INIT;
	const char *own_options = NULL;
	int rc = EXIT_DONE;

	if (conninfo[0] == '\0')
		log_fatal(EXIT_USAGE, "%s is not set", label);
	/* libpq's parse error can quote the string back, password and all. */
	opts = PQconninfoParse(conninfo, NULL);
	if (opts == NULL)
		log_fatal(EXIT_USAGE, "%s is not a valid connection string or URL", label);
	buf_printf(&out, "[%s]\n", name);
	for (PQconninfoOption *o = opts; o->keyword; o++)
	{
		const char *v = o->val;
		size_t vl;

		if (v == NULL || v[0] == '\0')
			continue;
		vl = strlen(v);
		if (strcmp(o->keyword, "service") == 0 || strcmp(o->keyword, "replication") == 0)
		{
			log_error("%s: the %s option is not supported here; spell the connection out", label, o->keyword);
			rc = EXIT_USAGE;
			break;
		}
		if (strpbrk(v, "\n\r") || isspace((unsigned char) v[0]) || isspace((unsigned char) v[vl - 1]))
		{
			log_error("%s: the value of %s has a line break or surrounding blanks, which a libpq service file cannot hold",
					  label, o->keyword);
			rc = EXIT_USAGE;
			break;
		}
		if (strcmp(o->keyword, "options") == 0)
			own_options = v;
		else if (strcmp(o->keyword, "client_encoding") != 0)
			buf_printf(&out, "%s=%s\n", o->keyword, v);
	}
	/* Every session pgsync opens states the same settings (session.h): so
	 * do psql, pg_dump and pg_restore here, after the connection's own
	 * options so that ours win. */
	if (own_options)
		buf_puts(&settings, own_options);
	session_startup_options(&settings);
	buf_printf(&out, "client_encoding=%s\noptions=%s\n", session_client_encoding(), buf_cstr(&settings));
	buf_free(&settings);
	PQconninfoFree(opts);
	if (rc == EXIT_DONE && write_all(STDOUT_FILENO, out.data, out.len) != 0)
		log_fatal(EXIT_RUNTIME, "cannot write the service section: %s", strerror(errno));
	/* Do not leave the password in freed memory longer than needed. */
	memset(out.data, 0, out.cap);
	memset(conninfo, 0, strlen(conninfo));
	buf_free(&out);
	free(conninfo);
	return rc;
}

static void
usage(FILE *f)
{
	fprintf(f,
			"usage: pgsync-config [-c FILE] [--state-dir DIR] [--set KEY=VALUE]... [-0|--null] [--json]\n"
			"       pgsync-config --display-url < CONNINFO\n"
			"       pgsync-config --service NAME [--label TEXT] < CONNINFO\n"
			"       pgsync-config --catalog-sql\n"
			"       pgsync-config --write-checkpoint FILE < CHECKPOINT\n");
}

static void
help(void)
{
	usage(stdout);
	printf("\nValidate a pgsync configuration file and print every setting with its\n"
		   "default or derived value resolved.\n\n"
		   "  -c, --config FILE    configuration file (default ./pgsync.conf)\n"
		   "      --state-dir DIR  override job.state_dir\n"
		   "      --set KEY=VALUE  use VALUE for KEY instead of the file's setting\n"
		   "  -0, --null           print key=value pairs separated by NUL bytes\n"
		   "      --json           log errors as JSON lines\n"
		   "      --display-url    print the connection string read from stdin without its password\n"
		   "      --service NAME   print a libpq service-file section NAME for the connection read from stdin\n"
		   "      --label TEXT     name the connection in messages (default: the connection)\n"
		   "      --catalog-sql    print the DDL of the pgsync target catalog\n"
		   "      --write-checkpoint FILE\n"
		   "                       write the checkpoint file read from stdin to FILE durably\n"
		   "  -h, --help           show this help\n"
		   "      --version        show the version\n\n"
		   "Exit status: 0 valid, 2 invalid configuration or usage.\n");
}

int
main(int argc, char **argv)
{
	enum { OPT_DISPLAY = 256, OPT_SERVICE, OPT_LABEL, OPT_CATALOG, OPT_VERSION, OPT_STATEDIR, OPT_JSON, OPT_SET, OPT_CHECKPOINT };
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"null", no_argument, NULL, '0'},
		{"state-dir", required_argument, NULL, OPT_STATEDIR},
		{"display-url", no_argument, NULL, OPT_DISPLAY},
		{"service", required_argument, NULL, OPT_SERVICE},
		{"label", required_argument, NULL, OPT_LABEL},
		{"catalog-sql", no_argument, NULL, OPT_CATALOG},
		{"write-checkpoint", required_argument, NULL, OPT_CHECKPOINT},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{"json", no_argument, NULL, OPT_JSON},
		{"set", required_argument, NULL, OPT_SET},
		{NULL, 0, NULL, 0},
	};
	const char *state_dir = NULL, *service = NULL, *label = "the connection", *checkpoint = NULL;
	bool nul = false, display = false, catalog = false;
	FILE *f;
	int c, nsets = 0;
	/* Static: reachable until exit on every return path below. */
	static char **sets;

	sets = xcalloc((size_t) argc, sizeof(char *));

	log_init(argv[0]);
	cfg_file = "pgsync.conf";
	while ((c = getopt_long(argc, argv, "c:0h", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'c': cfg_file = optarg; break;
			case '0': nul = true; break;
			case OPT_STATEDIR: state_dir = optarg; break;
			case OPT_DISPLAY: display = true; break;
			case OPT_SERVICE: service = optarg; break;
			case OPT_LABEL: label = optarg; break;
			case OPT_CATALOG: catalog = true; break;
			case OPT_CHECKPOINT: checkpoint = optarg; break;
			case OPT_JSON: log_set_json(true); break;
			case OPT_SET: sets[nsets++] = optarg; break;
			case 'h': help(); return EXIT_DONE;
			case OPT_VERSION: printf("%s (pgsync) %s\n", log_progname(), PGSYNC_VERSION); return EXIT_DONE;
			default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc || (display + (service != NULL) + catalog + (checkpoint != NULL)) > 1)
	{
		usage(stderr);
		return EXIT_USAGE;
	}
	if (catalog)
	{
		fputs(catalog_ddl, stdout);
		return EXIT_DONE;
	}
	if (checkpoint)
		return write_checkpoint(checkpoint);
	if (display)
	{
		char *conninfo = read_conninfo(), out[1024];

		conn_display(conninfo, out, sizeof(out));
		memset(conninfo, 0, strlen(conninfo));
		free(conninfo);
		printf("%s\n", out);
		return EXIT_DONE;
	}
	if (service)
	{
		if (!ident_ok(service, strlen(service)))
			log_fatal(EXIT_USAGE, "invalid service name \"%s\"", service);
		return print_service(service, label);
	}
	if (state_dir && state_dir[0] == '\0')
		log_fatal(EXIT_USAGE, "--state-dir must not be empty");

	f = fopen(cfg_file, "r");
	if (f == NULL)
		log_fatal(EXIT_USAGE, "cannot open configuration file %s: %s", cfg_file, strerror(errno));
	read_file(f);
	fclose(f);
	apply_sets(sets, nsets);
	free(sets);
	if (nerrors == 0)
		finish();
	if (nerrors)
	{
		if (nerrors > MAX_ERRORS)
			log_error("%s: %d more errors not shown", cfg_file, nerrors - MAX_ERRORS);
		return EXIT_USAGE;
	}
	resolve_state_dir(state_dir);
	print_config(nul);
	if (fflush(stdout) != 0)
		log_fatal(EXIT_RUNTIME, "cannot write: %s", strerror(errno));
	return EXIT_DONE;
}
