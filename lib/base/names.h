/*
 * names.h - the rules for the names a job is given on the command line and
 * in its configuration: a slot name, a publication list. The programs'
 * options (base/cli) and pgsync-config (config/confkeys) check them here, so
 * both accept exactly what the server does. Pure string rules: never a
 * connection.
 */
#ifndef PGSYNC_NAMES_H
#define PGSYNC_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* PostgreSQL's NAMEDATALEN - 1: the longest slot name it accepts. */
#define SLOT_NAME_MAX 63

/* Slot names as the server accepts them: 1-63 of [a-z0-9_]. */
bool slot_name_valid(const char *name);

/* Most publications one job names (pg-walcat, pg-snapshot-dump, pgsync). */
#define PUB_MAX 64

/*
 * Split a --publication / source.publication value ("a,b" or "a, b, c") in
 * place into names: blanks around a name are dropped, an empty name, a name
 * given twice or more than PUB_MAX names is an error. Returns the number of
 * names, or -1 with a one-line reason in why.
 */
int pub_split_list(char *arg, const char **names, int max, char *why, size_t whylen);

#endif
