/*
 * confkeys.h - the keys of a pgsync job configuration: one table of every
 * key with its type, default and range, and the rule that turns a value
 * into its canonical text (durations in ms, sizes in bytes, lists joined by
 * commas). Every reader of a value (the file, --set, the defaults) goes
 * through conf_check_value(), so a key has one rule wherever it is set.
 *
 * Must never: read a file or print a setting (conffile), or know how the
 * settings add up (confbudget).
 */
#ifndef PGSYNC_CONFKEYS_H
#define PGSYNC_CONFKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIB (UINT64_C(1024) * 1024)
#define CONF_LINE_SET (-1)			/* a key given with --set, not in the file */
#define CONF_MAX_ERRORS 20

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

/* The key table, in the order pgsync-config prints it. */
extern struct key conf_keys[];
extern const size_t conf_nkeys;

/* The file errors are reported against, and how many were reported. */
extern const char *conf_file;
extern int conf_nerrors;

/* FILE:LINE: message (line 0: FILE: message; CONF_LINE_SET: message), at
 * most CONF_MAX_ERRORS of them; conf_nerrors counts them all. */
void conf_error(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct key *conf_key(const char *name);
/* The number of a key that is known to exist. */
uint64_t conf_num(const char *name);

/* Validate V for K (read on LINE) and store its canonical form. */
bool conf_check_value(struct key *k, const char *v, int line);
void conf_set_text(struct key *k, const char *v);
void conf_set_num(struct key *k, uint64_t v, const char *unit);

/*
 * An identifier exactly as the catalog stores it: no quoting, no case
 * folding, and only characters that need no escaping anywhere the script
 * passes a name on (SQL literals, command arguments, file names).
 */
bool conf_ident_ok(const char *s, size_t n);

/*
 * The tables of V, the canonical value of a table (or sequence) list, one a
 * line as pg-snapshot-dump --list-tables starts its lines: schema TAB name,
 * each in the stream's escaping (lib/stream/escape), appended to OUT. A name
 * is never split on a dot or a comma. False when V is not such a list.
 */
struct buf;
bool conf_table_lines(const char *v, struct buf *out);

/* S without leading blanks, and cut before trailing blanks (in place). */
char *conf_trim(char *s);

#endif
