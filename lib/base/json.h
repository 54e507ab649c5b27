/*
 * json.h - the one JSON string escaper, for every JSON a program writes by
 * hand (log lines with --json, pg-slot and pg-ack output, the progress
 * file; buf_json_string() in buf.h appends one): '"' and '\' escaped, control characters as \n, \t, \r or \u00XX,
 * everything else (UTF-8 included) as it is.
 */
#ifndef PGSYNC_JSON_H
#define PGSYNC_JSON_H

#include <stddef.h>

/*
 * s escaped (without quotes) into out, NUL-terminated; a string that does
 * not fit is cut before the first escape or byte that does not fit, never
 * inside one. Returns the length written. Allocates nothing: the log uses
 * it on the way to reporting that memory ran out.
 */
size_t json_escape(char *out, size_t outlen, const char *s);

#endif
