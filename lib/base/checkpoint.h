/*
 * checkpoint.h - checkpoint files: the durable position one program hands to
 * another (pg-apply writes, pg-walcat --ack-file and pg-ack read). Writes are
 * atomic (temp file, fsync, rename, fsync of the directory). A torn, empty or
 * garbage file is an error naming the file, never read as position 0/0.
 *
 * File format (text):
 *     <position LSN>\n
 *     sysid=<system identifier>\n      (optional lines, in any order)
 *     timeline=<timeline>\n
 *     slot=<slot name>\n
 */
#ifndef PGSYNC_CHECKPOINT_H
#define PGSYNC_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"

struct checkpoint {
	lsn_t lsn;
	char sysid[24];				/* "" when not recorded */
	uint32_t timeline;			/* 0 when not recorded */
	char slot[128];				/* "" when not recorded */
};

enum checkpoint_status { CP_OK = 0, CP_MISSING = 1, CP_INVALID = 2 };

/* 0 on success; -1 with a message in err. */
int checkpoint_write(const char *path, const struct checkpoint *cp,
					 char *err, size_t errlen);
/* CP_MISSING when the file does not exist; CP_INVALID with a message in err. */
enum checkpoint_status checkpoint_read(const char *path, struct checkpoint *cp,
									   char *err, size_t errlen);

/*
 * The same rules for a file's contents already in memory: DATA holds LEN
 * bytes and one more byte of room (it is modified); PATH names it in
 * messages. CP_INVALID with a message in err.
 */
enum checkpoint_status checkpoint_parse(const char *path, char *data, size_t len,
										struct checkpoint *cp, char *err, size_t errlen);

#endif
