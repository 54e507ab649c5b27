/*
 * conffile.h - a job configuration as pgsync-config reads it: the file's
 * "key = value" lines (a list may continue on lines while it ends in a
 * comma; '#' after whitespace starts a comment), then --set, then the
 * defaults; the state directory resolved; every setting printed.
 * Every value goes through conf_check_value() (confkeys.h); every problem
 * is one conf_error().
 */
#ifndef PGSYNC_CONFFILE_H
#define PGSYNC_CONFFILE_H

#include <stdbool.h>
#include <stdio.h>

void conf_read_file(FILE *f);
/* --set KEY=VALUE, each in place of the file's value. */
void conf_apply_sets(char **sets, int nsets);
/* Every key not set gets its default; a required one is an error. */
void conf_defaults(void);
/* job.state_dir made absolute: configured (relative to the file's
 * directory) or <config dir>/<job.name>.state; OVERRIDE (--state-dir,
 * relative to the current directory) wins over both. */
void conf_resolve_state_dir(const char *override);
/* "# FILE" and "key = value" lines, or with NUL config.file=FILE and
 * key=value entries each ended by a NUL byte. */
void conf_print(bool nul);

#endif
