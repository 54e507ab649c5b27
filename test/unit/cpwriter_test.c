/*
 * The checkpoint writer thread: the last position posted is the one on
 * disk once waited for; a reader meanwhile only ever sees a whole file and
 * positions that go forward; a failed write is reported, with its file.
 */
#include "unit.h"
#include "cpwriter.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define POSTS 5000

static char dir[] = "/tmp/pgsync-cpw-XXXXXX";
static char path[256];
static atomic_bool stop;
static atomic_int bad_reads, reads;

/* Reads the file over and over while it is written: whole and forward. */
static void *
reader(void *arg)
{
	lsn_t last = 0;

	(void) arg;
	while (!atomic_load(&stop))
	{
		struct checkpoint got;
		char err[512];
		enum checkpoint_status st = checkpoint_read(path, &got, err, sizeof(err));

		if (st == CP_MISSING)
			continue;
		atomic_fetch_add(&reads, 1);
		if (st != CP_OK || got.lsn < last || got.timeline != 3)
			atomic_fetch_add(&bad_reads, 1);
		else
			last = got.lsn;
	}
	return NULL;
}

int
main(void)
{
	struct checkpoint cp = {0}, got;
	struct cpwriter *w, *bad;
	pthread_t t;
	char err[512] = "";

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/applied.lsn", dir);
	w = cpwriter_new(path);
	cp.timeline = 3;
	snprintf(cp.sysid, sizeof(cp.sysid), "7442718406132410263");

	pthread_create(&t, NULL, reader, NULL);
	for (int i = 1; i <= POSTS; i++)
	{
		cp.lsn = 0x1000000 + (lsn_t) i * 0x100;
		cpwriter_post(w, &cp);
		if (i % 1000 == 0)
			usleep(2000);
	}
	CHECK(cpwriter_wait(w, err, sizeof(err)) == 0);
	CHECK(checkpoint_read(path, &got, err, sizeof(err)) == CP_OK);
	CHECK(got.lsn == 0x1000000 + (lsn_t) POSTS * 0x100);
	CHECK_STR(got.sysid, cp.sysid);
	/* A wait with nothing new posted returns at once. */
	CHECK(cpwriter_wait(w, err, sizeof(err)) == 0);
	usleep(20000);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	CHECK(atomic_load(&reads) > 0);
	CHECK(atomic_load(&bad_reads) == 0);
	CHECK(cpwriter_failed(w, err, sizeof(err)) == 0);

	/* A file that cannot be written: the wait fails, naming it, and so
	 * does every later check. */
	{
		char nowhere[300];

		snprintf(nowhere, sizeof(nowhere), "%s/no-such-dir/applied.lsn", dir);
		bad = cpwriter_new(nowhere);
		cpwriter_post(bad, &cp);
		err[0] = '\0';
		CHECK(cpwriter_wait(bad, err, sizeof(err)) == -1);
		CHECK(strstr(err, nowhere) != NULL);
		err[0] = '\0';
		CHECK(cpwriter_failed(bad, err, sizeof(err)) == -1);
		CHECK(strstr(err, nowhere) != NULL);
	}

	unlink(path);
	rmdir(dir);
	return unit_done("cpwriter");
}
