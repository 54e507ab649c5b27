/*
 * confservice.c - connections handed to pgsync's children (confservice.h).
 */
#include "confservice.h"

#include "common.h"
#include "log.h"
#include "out.h"
#include "session.h"

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct buf
conf_read_stdin(void)
{
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;

	while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
		buf_append(&b, chunk, n);
	buf_cstr(&b);
	return b;
}

char *
conf_read_conninfo(void)
{
	struct buf b = conf_read_stdin();

	while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
		b.len--;
	return buf_cstr(&b);
}

/*
 * A pg_service.conf section with every option the connection string sets,
 * and the session settings. libpq's service files hold one key=value a
 * line, so a value with a line break or surrounding blanks cannot be
 * represented: refuse it.
 */
int
conf_print_service(const char *name, const char *label)
{
	char *conninfo = conf_read_conninfo();
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
