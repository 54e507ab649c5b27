#include "unit.h"
#include "buf.h"
#include "replay.h"

#include <stdlib.h>

/* Record each line of a "|"-separated list. */
static void
feed(struct replay *r, const char *lines)
{
	const char *p = lines;

	while (*p)
	{
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t) (bar - p) : strlen(p);

		replay_record(r, p, n);
		p += n + (bar != NULL);
	}
}

/* Every line replay_next() gives, "|"-separated ("" when none). */
static char *
drain(struct replay *r)
{
	struct buf b = BUF_INIT;
	const char *line;
	size_t len;

	buf_puts(&b, "");
	while (replay_next(r, &line, &len))
	{
		if (b.len)
			buf_putc(&b, '|');
		buf_append(&b, line, len);
	}
	return buf_cstr(&b);
}

static void
check_replay(struct replay *r, const char *want)
{
	char *got;

	replay_start(r);
	got = drain(r);
	CHECK_STR(got, want);
	free(got);
}

int
main(void)
{
	struct replay *r = replay_new(1000);

	/* A window is what was recorded since the last reset. */
	feed(r, "BEGIN\t1|INSERT\ta|COMMIT\t1");
	replay_reset(r, false);
	feed(r, "BEGIN\t2|INSERT\tb");
	CHECK(replay_bytes(r) == strlen("BEGIN\t2|INSERT\tb") + 1);
	check_replay(r, "BEGIN\t2|INSERT\tb");
	CHECK(replay_bytes(r) == 0);

	/* The line being applied when the batch before it was committed stays. */
	feed(r, "BEGIN\t3|COMMIT\t3|BEGIN\t4");
	replay_reset(r, true);
	feed(r, "INSERT\tc");
	check_replay(r, "BEGIN\t4|INSERT\tc");

	/* A table redefined in the window is replayed with its definition
	 * from before the window first; one new in the window is not. */
	replay_reset(r, false);
	feed(r, "RELATION\tpublic\tt\t1\td\t1\tid\t23\t-1\tk|BEGIN\t5|INSERT\tpublic\tt\t1|COMMIT\t5");
	replay_reset(r, false);
	feed(r, "BEGIN\t6|INSERT\tpublic\tt\t2|COMMIT\t6|RELATION\tpublic\tt\t1\td\t2\tid\t23\t-1\tk\tv\t25\t-1\t-|"
		 "RELATION\tpublic\tu\t2\td\t1\tid\t23\t-1\tk|BEGIN\t7");
	check_replay(r, "RELATION\tpublic\tt\t1\td\t1\tid\t23\t-1\tk|BEGIN\t6|INSERT\tpublic\tt\t2|COMMIT\t6|"
				 "RELATION\tpublic\tt\t1\td\t2\tid\t23\t-1\tk\tv\t25\t-1\t-|"
				 "RELATION\tpublic\tu\t2\td\t1\tid\t23\t-1\tk|BEGIN\t7");

	/* Lost again in the middle of a replay: what was applied again since,
	 * then what the replay had not reached. */
	feed(r, "FIRST");
	feed(r, "SECOND");
	check_replay(r, "FIRST|SECOND");
	feed(r, "THIRD");
	replay_start(r);
	{
		const char *line;
		size_t len;

		CHECK(replay_next(r, &line, &len) && len == 5 && memcmp(line, "THIRD", 5) == 0);
	}
	feed(r, "THIRD");
	check_replay(r, "THIRD");

	/* Past the limit the window is not kept, but its definitions are, and
	 * a line kept across a reset still is. */
	replay_reset(r, false);
	replay_forget_relations(r);
	{
		char big[600];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		feed(r, "RELATION\tpublic\tw\t3\td\t1\tid\t23\t-1\tk");
		feed(r, big);
		feed(r, big);
		CHECK(replay_overflowed(r));
		feed(r, "BEGIN\t8");
		replay_reset(r, true);
		CHECK(!replay_overflowed(r));
		feed(r, "RELATION\tpublic\tw\t3\td\t1\tid\t20\t-1\tk");
		check_replay(r, "RELATION\tpublic\tw\t3\td\t1\tid\t23\t-1\tk|BEGIN\t8|RELATION\tpublic\tw\t3\td\t1\tid\t20\t-1\tk");
	}

	/* After a header the tables of the stream before are forgotten. */
	replay_reset(r, false);
	replay_forget_relations(r);
	feed(r, "RELATION\tpublic\tw\t3\td\t1\tid\t23\t-1\tk");
	check_replay(r, "RELATION\tpublic\tw\t3\td\t1\tid\t23\t-1\tk");

	replay_free(r);
	return unit_done("replay");
}
