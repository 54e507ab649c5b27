/*
 * conffile.c - reading a job configuration (conffile.h).
 */
#include "conffile.h"

#include "buf.h"
#include "common.h"
#include "confkeys.h"
#include "log.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINE 65536

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

void
conf_read_file(FILE *f)
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
			conf_error(lineno, "line longer than %d bytes", MAX_LINE);
			break;
		}
		if (memchr(line, '\0', (size_t) n) != NULL)
		{
			conf_error(lineno, "NUL byte in configuration");
			break;
		}
		if (n > 0 && line[n - 1] == '\n')
			line[n - 1] = '\0';
		strip_comment(line);
		s = conf_trim(line);
		if (pending)
		{
			/* "replication.tables = a.b,\n  c.d": a list continues while
			 * its text ends in a comma. */
			buf_puts(&cont, s);
			if (s[0] != '\0' && s[strlen(s) - 1] == ',')
				continue;
			conf_check_value(pending, buf_cstr(&cont), pending_line);
			pending = NULL;
			continue;
		}
		if (s[0] == '\0')
			continue;
		eq = strchr(s, '=');
		if (eq == NULL)
		{
			conf_error(lineno, "expected \"key = value\"");
			continue;
		}
		*eq = '\0';
		name = conf_trim(s);
		val = conf_trim(eq + 1);
		k = conf_key(name);
		if (k == NULL)
		{
			if (strcmp(name, "source.publications") == 0)
				conf_error(lineno, "unknown key \"%s\": several publications are one list, source.publication = a, b, c", name);
			else
				conf_error(lineno, "unknown key \"%s\"", name);
			continue;
		}
		if (k->line)
		{
			conf_error(lineno, "duplicate key \"%s\" (first set on line %d)", name, k->line);
			continue;
		}
		k->line = lineno;
		if (val[0] == '\0')
		{
			conf_error(lineno, "missing value for %s", name);
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
		conf_check_value(k, val, lineno);
	}
	if (ferror(f))
		conf_error(0, "cannot read: %s", strerror(errno));
	else if (pending)
		conf_error(pending_line, "list in %s ends with a comma", pending->name);
	free(line);
	buf_free(&cont);
}

/* --set KEY=VALUE: a command's option in place of the file's value, checked
 * by the same rules (pgsync switchover --max-lag sets switchover.max_lag). */
void
conf_apply_sets(char **sets, int nsets)
{
	for (int i = 0; i < nsets; i++)
	{
		char *eq = strchr(sets[i], '=');
		struct key *k;

		if (eq == NULL)
		{
			conf_error(CONF_LINE_SET, "--set needs KEY=VALUE, got \"%s\"", sets[i]);
			continue;
		}
		*eq = '\0';
		if ((k = conf_key(sets[i])) == NULL)
		{
			conf_error(CONF_LINE_SET, "unknown key \"%s\" in --set", sets[i]);
			continue;
		}
		k->line = CONF_LINE_SET;
		conf_check_value(k, eq + 1, CONF_LINE_SET);
	}
}

/* Defaults and required keys; the derived max_message_bytes is the
 * budget's (confbudget). */
void
conf_defaults(void)
{
	for (size_t i = 0; i < conf_nkeys; i++)
	{
		struct key *k = &conf_keys[i];

		if (k->line)
			continue;
		if (k->def == NULL)
		{
			if (strcmp(k->name, "resources.max_message_bytes") != 0)
				conf_error(0, "missing required key %s", k->name);
			continue;
		}
		if (!conf_check_value(k, k->def, 0))
			log_fatal(EXIT_RUNTIME, "internal error: bad default for %s", k->name);
	}
}

/* The state directory: configured (relative to the file's directory) or
 * <config dir>/<job.name>.state; --state-dir overrides both. */
void
conf_resolve_state_dir(const char *override)
{
	struct key *sd = conf_key("job.state_dir");
	char *copy = xstrdup(conf_file), *dir = dirname(copy);
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
			buf_printf(&b, "%s.state", conf_key("job.name")->text);
	}
	conf_set_text(sd, buf_cstr(&b));
	buf_free(&b);
	free(copy);
}

void
conf_print(bool nul)
{
	char abs[PATH_MAX];

	if (realpath(conf_file, abs) == NULL)
		snprintf(abs, sizeof(abs), "%s", conf_file);
	if (nul)
		printf("config.file=%s%c", abs, '\0');
	else
		printf("# %s\n", abs);
	for (size_t i = 0; i < conf_nkeys; i++)
	{
		if (nul)
			printf("%s=%s%c", conf_keys[i].name, conf_keys[i].text, '\0');
		else
			printf("%s = %s%s\n", conf_keys[i].name, conf_keys[i].text,
				   conf_keys[i].line ? "" : (conf_keys[i].def ? "  # default" : "  # derived"));
	}
}
