#include "unit.h"
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[] = "/tmp/pgsync-cp-XXXXXX";

static void
put(const char *path, const char *content, size_t n)
{
	FILE *f = fopen(path, "wb");

	fwrite(content, 1, n, f);
	fclose(f);
}

static void
rejects(const char *content, size_t n, const char *why)
{
	char path[256], err[512] = "";
	struct checkpoint cp;

	snprintf(path, sizeof(path), "%s/bad", dir);
	put(path, content, n);
	CHECK(checkpoint_read(path, &cp, err, sizeof(err)) == CP_INVALID);
	CHECK(strstr(err, path) != NULL);
	if (strstr(err, why) == NULL)
	{
		fprintf(stderr, "expected \"%s\" in \"%s\"\n", why, err);
		unit_failed++;
	}
}

int
main(void)
{
	char path[256], tmp[300], err[512];
	struct checkpoint cp = {0}, got;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/applied.lsn", dir);

	CHECK(checkpoint_read(path, &got, err, sizeof(err)) == CP_MISSING);

	cp.lsn = 0x16B3748;
	snprintf(cp.sysid, sizeof(cp.sysid), "7442718406132410263");
	cp.timeline = 1;
	snprintf(cp.slot, sizeof(cp.slot), "app_slot");
	CHECK(checkpoint_write(path, &cp, err, sizeof(err)) == 0);
	CHECK(checkpoint_read(path, &got, err, sizeof(err)) == CP_OK);
	CHECK(got.lsn == cp.lsn && got.timeline == 1);
	CHECK_STR(got.sysid, cp.sysid);
	CHECK_STR(got.slot, "app_slot");

	/*
	 * A crash between writing the temp file and the rename leaves the old
	 * value in place: a stray temp file is ignored and the next write wins.
	 */
	snprintf(tmp, sizeof(tmp), "%s.tmp.99999", path);
	put(tmp, "0/FFFF", 6);		/* torn temp file from the dead writer */
	CHECK(checkpoint_read(path, &got, err, sizeof(err)) == CP_OK && got.lsn == 0x16B3748);
	cp.lsn = 0x2000000;
	CHECK(checkpoint_write(path, &cp, err, sizeof(err)) == 0);
	CHECK(checkpoint_read(path, &got, err, sizeof(err)) == CP_OK && got.lsn == 0x2000000);
	unlink(tmp);

	/* A bare LSN line is a valid checkpoint (shell-written). */
	put(path, "1/0\n", 4);
	CHECK(checkpoint_read(path, &got, err, sizeof(err)) == CP_OK && got.lsn == 0x100000000ULL);
	CHECK(got.sysid[0] == '\0' && got.timeline == 0);

	rejects("", 0, "empty");
	rejects("0/16B3748", 9, "incomplete");
	rejects("garbage\n", 8, "not an LSN");
	rejects("\n", 1, "not an LSN");
	rejects("0/1\nsysid=abc\n", 14, "bad sysid");
	rejects("0/1\ntimeline=0\n", 15, "bad timeline");
	rejects("0/1\nnonsense\n", 13, "key=value");
	rejects("0/1\0\n", 5, "NUL");

	/* Write into a directory that does not exist: an error, no crash. */
	char bad[300];
	snprintf(bad, sizeof(bad), "%s/missing/dir/cp", dir);
	CHECK(checkpoint_write(bad, &cp, err, sizeof(err)) == -1 && strstr(err, "cannot create"));

	unlink(path);
	snprintf(path, sizeof(path), "%s/bad", dir);
	unlink(path);
	rmdir(dir);
	return unit_done("checkpoint");
}
