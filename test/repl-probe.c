/*
 * repl-probe - pg-walcat's START_REPLICATION path without its preflight:
 * open a logical replication connection, send the START_REPLICATION command
 * pg-walcat would send for this server, and print the exit code
 * repl_error_exit() gives the server's answer, then the message.
 * versions.bats uses it to check, on every server version, that the error an
 * invalidated or dropped slot produces at START_REPLICATION (which pg-walcat
 * meets when the slot goes away between its preflight and the start) is
 * classified as continuity lost (exit 4).
 *
 *   repl-probe CONNINFO SLOT PUBLICATION
 *
 * Prints "0 streaming" when the server accepted the command.
 */
#include <stdio.h>
#include <libpq-fe.h>

#include "buf.h"
#include "conn.h"
#include "log.h"
#include "replication.h"
#include "session.h"

int
main(int argc, char **argv)
{
	struct pgerr err = {0};
	struct repl_options o;
	struct buf cmd = BUF_INIT;
	const char *pubs[1];
	PGconn *conn;

	if (argc != 4)
	{
		fprintf(stderr, "usage: repl-probe CONNINFO SLOT PUBLICATION\n");
		return 2;
	}
	log_init("repl-probe");
	pubs[0] = argv[3];
	if ((conn = session_open(argv[1], SESSION_REPLICATION, &err)) == NULL)
	{
		printf("%d %s\n", repl_error_exit(&err), err.msg);
		return 0;
	}
	repl_options_for(PQserverVersion(conn), &o);
	repl_start_command(&cmd, argv[2], 0, &o, pubs, 1);
	if (repl_start(conn, buf_cstr(&cmd), &err))
		printf("0 streaming\n");
	else
		printf("%d %s\n", repl_error_exit(&err), err.msg);
	PQfinish(conn);
	buf_free(&cmd);
	return 0;
}
