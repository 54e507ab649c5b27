/*
 * argsecret.h - connection strings given on the command line.
 *
 * argsecret_conninfo(arg): a private copy of the connection string arg
 * (a conninfo string or a postgresql:// URL), which lives until the program
 * exits (do not free it), after which the password in
 * arg itself, the program's argv, is overwritten with '*', so ps(1) and
 * /proc/PID/cmdline no longer show it. NULL when libpq cannot parse arg:
 * the caller reports a usage error (exit 2) without repeating the string.
 * Every program calls it for -d right after reading the option. A service
 * file or ~/.pgpass keeps the password off the command line altogether.
 */
#ifndef PGSYNC_ARGSECRET_H
#define PGSYNC_ARGSECRET_H

const char *argsecret_conninfo(char *arg);

#endif
