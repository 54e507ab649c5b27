#include "unit.h"
/* The module itself, for its static line parser. */
#include "srcstatus.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/pgsync-ss-XXXXXX";

static bool
parses(const char *line, struct src_status *st)
{
	return srcstatus_parse(line, strlen(line), st);
}

int
main(void)
{
	char path[256], err[512] = "";
	struct src_status st = {SRC_RECONNECTING, 7}, got = {SRC_CONNECTED, 0};
	FILE *f;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/source.status", dir);

	/* Missing file: unknown, never "connected". */
	CHECK(!srcstatus_read(path, &got));

	/* Round trip of every state, replacing the file each time. */
	for (int s = SRC_CONNECTED; s <= SRC_DISCONNECTED; s++)
	{
		st.state = (enum src_state) s;
		st.reconnects = (uint32_t) s * 1000u + 1u;
		CHECK(srcstatus_write(path, &st, err, sizeof(err)) == 0);
		CHECK(srcstatus_read(path, &got));
		CHECK(got.state == st.state);
		CHECK(got.reconnects == st.reconnects);
	}
	CHECK_STR(srcstatus_name(SRC_CONNECTED), "connected");
	CHECK_STR(srcstatus_name(SRC_RECONNECTING), "reconnecting");
	CHECK_STR(srcstatus_name(SRC_DISCONNECTED), "disconnected");

	/* The line format, exactly. */
	f = fopen(path, "rb");
	{
		char line[64] = "";

		CHECK(fgets(line, sizeof(line), f) != NULL);
		CHECK_STR(line, "disconnected\t2001\n");
	}
	fclose(f);

	/* Valid lines. */
	CHECK(parses("connected\t0\n", &got) && got.state == SRC_CONNECTED && got.reconnects == 0);
	CHECK(parses("reconnecting\t4294967295", &got) && got.reconnects == 4294967295u);

	/* Anything else is unknown. */
	{
		static const char *const bad[] = {
			"", "\n", "connected\n", "connected\t\n", "connected\t1x\n", "connected\t-1\n",
			"connected\t4294967296\n", "connected\t99999999999999999999\n", "Connected\t1\n",
			"connecte\t1\n", "connectedx\t1\n", "\t1\n", "connected 1\n",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			CHECK(!parses(bad[i], &got));
	}

	/* A torn file (no LF) is not read. */
	f = fopen(path, "wb");
	fputs("connected\t1", f);
	fclose(f);
	CHECK(!srcstatus_read(path, &got));

	/* An unwritable place is an error naming the file. */
	CHECK(srcstatus_write("/nonexistent-dir/x/source.status", &st, err, sizeof(err)) == -1);
	CHECK(strstr(err, "/nonexistent-dir/x/source.status") != NULL);

	unlink(path);
	rmdir(dir);
	return unit_done("srcstatus");
}
