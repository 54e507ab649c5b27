/*
 * confservice.h - how pgsync hands a connection to its children without a
 * password on any command line: the connection string is read from stdin
 * (never argv), and written out as a libpq service-file section with every
 * option it sets and the session settings of session.h, so that psql,
 * pg_dump and pg_restore state the same settings as the programs.
 */
#ifndef PGSYNC_CONFSERVICE_H
#define PGSYNC_CONFSERVICE_H

#include "buf.h"

/* All of stdin, NUL-terminated. */
struct buf conf_read_stdin(void);
/* One connection string from stdin, without its trailing line break. */
char *conf_read_conninfo(void);
/* The section [NAME] on stdout for the connection on stdin; LABEL names it
 * in errors. A value a service file cannot hold (a line break, surrounding
 * blanks) or a service= or replication= option: EXIT_USAGE. */
int conf_print_service(const char *name, const char *label);

#endif
