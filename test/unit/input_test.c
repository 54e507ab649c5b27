/*
 * input_test - reading ahead while the caller holds a line: the held line
 * stays intact, lines keep their order across the read-ahead, EOF and a
 * truncated last line found by a read-ahead are reported as usual, and a
 * full buffer stops the read-ahead instead of growing it.
 */
#include "unit.h"
#include "input.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static void
put(int fd, const char *s)
{
	size_t n = strlen(s);

	CHECK(write(fd, s, n) == (ssize_t) n);
}

static void
test_order_and_eof(bool truncated)
{
	int p[2];
	struct input *in;
	const char *line;
	size_t len;
	char held[32];

	CHECK(pipe(p) == 0);
	in = input_open(p[0], "-", 1 << 20);
	put(p[1], "one\ntw");
	CHECK(input_next(in, &line, &len, -1) == IN_LINE);
	CHECK(len == 3 && memcmp(line, "one", 3) == 0);
	snprintf(held, sizeof(held), "%.*s", (int) len, line);
	/* More arrives while the caller still holds "one". */
	put(p[1], "o\nthree\n");
	if (truncated)
		put(p[1], "fou");
	close(p[1]);
	for (int i = 0; i < 3 && input_readahead_fd(in) >= 0; i++)
		input_readahead(in);
	CHECK(input_readahead_fd(in) < 0);	/* EOF seen */
	CHECK(len == 3 && memcmp(line, held, 3) == 0);
	CHECK(input_next(in, &line, &len, 0) == IN_LINE);
	CHECK(len == 3 && memcmp(line, "two", 3) == 0);
	CHECK(input_next(in, &line, &len, 0) == IN_LINE);
	CHECK(len == 5 && memcmp(line, "three", 5) == 0);
	CHECK(input_next(in, &line, &len, 0) == (truncated ? IN_TRUNCATED : IN_EOF));
	CHECK(input_lineno(in) == 3);
	input_close(in);
	close(p[0]);
}

/* Far more input than the buffer holds: read-ahead stops when it is full,
 * and every line still arrives once, in order. */
static void
test_full_buffer(void)
{
	int p[2];
	struct input *in;
	const char *line;
	size_t len;
	char buf[64];
	int next = 0, bad = 0, stopped = 0;
	pid_t pid;

	CHECK(pipe(p) == 0);
	pid = fork();
	if (pid == 0)
	{
		close(p[0]);
		for (int i = 0; i < 300000; i++)
		{
			int n = snprintf(buf, sizeof(buf), "line %d of many, padded to be longer\n", i);

			if (write(p[1], buf, (size_t) n) != n)
				_exit(1);
		}
		_exit(0);
	}
	close(p[1]);
	in = input_open(p[0], "-", 1 << 20);
	for (;;)
	{
		enum input_status st = input_next(in, &line, &len, -1);

		if (st != IN_LINE)
		{
			CHECK(st == IN_EOF);
			break;
		}
		snprintf(buf, sizeof(buf), "line %d of many, padded to be longer", next++);
		bad += len != strlen(buf) || memcmp(line, buf, len) != 0;
		/* Every so often, read ahead as much as there is room for. */
		if (next % 1000 == 0)
		{
			for (int i = 0; i < 100 && input_readahead_fd(in) >= 0; i++)
				input_readahead(in);
			stopped += input_readahead_fd(in) < 0;
			bad += len != strlen(buf) || memcmp(line, buf, len) != 0;
		}
	}
	CHECK(bad == 0);
	CHECK(next == 300000);
	CHECK(stopped > 0);			/* the buffer filled up at least once */
	input_close(in);
	close(p[0]);
}

int
main(void)
{
	test_order_and_eof(false);
	test_order_and_eof(true);
	test_full_buffer();
	return unit_done("input");
}
