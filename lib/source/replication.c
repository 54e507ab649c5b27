#include "replication.h"
#include "common.h"
#include "record.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

void
repl_options_for(int server_version, struct repl_options *o)
{
	bool v14 = server_version >= 140000;

	/* Protocol 2 is what streaming needs; 3 (two-phase) and 4 (parallel
	 * apply) add nothing a text stream uses. */
	o->proto_version = v14 ? 2 : 1;
	o->messages = v14;
	o->streaming = v14;
}

void
repl_start_command(struct buf *b, const char *slot, lsn_t start,
				   const struct repl_options *o,
				   const char *const *pubs, int npubs)
{
	struct buf names = BUF_INIT;
	char l[LSN_BUFSZ];

	buf_puts(b, "START_REPLICATION SLOT ");
	buf_quote_ident(b, slot);
	buf_printf(b, " LOGICAL %s (proto_version '%d', publication_names '",
			   lsn_format(start, l), o->proto_version);
	for (int i = 0; i < npubs; i++)
	{
		if (i > 0)
			buf_putc(&names, ',');
		buf_quote_ident(&names, pubs[i]);
	}
	/* A string literal: single quotes doubled, no backslash escapes. */
	for (size_t i = 0; i < names.len; i++)
	{
		if (names.data[i] == '\'')
			buf_putc(b, '\'');
		buf_putc(b, names.data[i]);
	}
	buf_putc(b, '\'');
	if (o->messages)
		buf_puts(b, ", messages 'true'");
	if (o->streaming)
		buf_puts(b, ", streaming 'on'");
	buf_putc(b, ')');
	buf_free(&names);
}

bool
repl_start(PGconn *conn, const char *command, struct pgerr *err)
{
	PGresult *res = PQexec(conn, command);
	bool ok = res && PQresultStatus(res) == PGRES_COPY_BOTH;

	if (!ok)
	{
		pgerr_set(err, conn, res);
		if (res && PQresultStatus(res) != PGRES_FATAL_ERROR && !err->sqlstate[0])
			pgerr_printf(err, false, "unexpected result from START_REPLICATION: %s",
						 PQresStatus(PQresultStatus(res)));
	}
	PQclear(res);
	return ok;
}

static uint64_t
be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static void
put64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--)
	{
		p[i] = (unsigned char) v;
		v >>= 8;
	}
}

bool
repl_parse(const char *buf, size_t len, struct repl_msg *m,
		   char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *) buf;

	memset(m, 0, sizeof(*m));
	if (len == 0)
	{
		snprintf(err, errlen, "empty message from the server");
		return false;
	}
	m->kind = (char) p[0];
	if (m->kind == 'w')
	{
		if (len < 25)
		{
			snprintf(err, errlen, "streaming header too small: %zu bytes", len);
			return false;
		}
		m->data_start = be64(p + 1);
		m->wal_end = be64(p + 9);
		m->send_time = (int64_t) be64(p + 17);
		m->data = p + 25;
		m->len = len - 25;
		return true;
	}
	if (m->kind == 'k')
	{
		if (len < 18)
		{
			snprintf(err, errlen, "keepalive message too small: %zu bytes", len);
			return false;
		}
		m->wal_end = be64(p + 1);
		m->send_time = (int64_t) be64(p + 9);
		m->reply_requested = p[17] != 0;
		return true;
	}
	snprintf(err, errlen, "unrecognized streaming header: 0x%02x", (unsigned) p[0]);
	return false;
}

void
repl_finish(PGconn *conn, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t) timeout_ms;
	PGresult *res;

	if (PQputCopyEnd(conn, NULL) <= 0 || PQflush(conn) != 0)
		return;
	for (;;)
	{
		char *buf = NULL;
		int n = PQgetCopyData(conn, &buf, 1);

		if (n > 0)
			PQfreemem(buf);
		else if (n == 0)
		{
			struct pollfd pfd = {PQsocket(conn), POLLIN, 0};
			uint64_t now = now_ms();

			if (now >= deadline || poll(&pfd, 1, (int) (deadline - now)) <= 0 || !PQconsumeInput(conn))
				return;
		}
		else
			break;
	}
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);
}

/* Now as PostgreSQL timestamps count: microseconds since 2000-01-01 UTC. */
static int64_t
repl_pg_now(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t) tv.tv_sec * 1000000 + tv.tv_usec - PG_EPOCH_OFFSET_USEC;
}

bool
repl_send_status(PGconn *conn, lsn_t write, lsn_t flush, lsn_t apply,
				 bool reply_requested, struct pgerr *err)
{
	unsigned char m[34];

	m[0] = 'r';
	put64(m + 1, write);
	put64(m + 9, flush);
	put64(m + 17, apply);
	put64(m + 25, (uint64_t) repl_pg_now());
	m[33] = reply_requested ? 1 : 0;
	if (PQputCopyData(conn, (const char *) m, sizeof(m)) <= 0 || PQflush(conn) != 0)
	{
		pgerr_set(err, conn, NULL);
		err->retryable = true;
		return false;
	}
	return true;
}

int
repl_error_exit(const struct pgerr *err)
{
	static const char *const lost[] = {
		"does not exist",		/* the slot (publications are checked first) */
		"cannot read from logical replication slot",	/* 13-15 */
		"can no longer get changes from replication slot",	/* 16-17 */
		"can no longer access replication slot",	/* 18 */
		"has already been removed",	/* the WAL the slot needs */
		"has been invalidated",
		NULL
	};

	if (strstr(err->msg, "publication") && strstr(err->msg, "does not exist"))
		return EXIT_PREFLIGHT;
	if (strstr(err->msg, "wal_level"))
		return EXIT_PREFLIGHT;
	if (strstr(err->msg, "replication slot") || strstr(err->msg, "requested WAL segment"))
		for (int i = 0; lost[i]; i++)
			if (strstr(err->msg, lost[i]))
				return EXIT_CONTINUITY;
	return EXIT_RUNTIME;
}
