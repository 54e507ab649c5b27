/*
 * input_test - reading ahead while the caller holds a line: the held line
 * stays intact, lines keep their order across the read-ahead, EOF and a
 * truncated last line found by a read-ahead are reported as usual, and a
 * full buffer stops the read-ahead instead of growing it.
 */
#include "unit.h"
#include "input.h"
#include "out.h"

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

/* Compressed input through out.c: frame boundaries, checksums, settling. */
static int
tmpfd(void)
{
	char path[] = "/tmp/input_test.XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	unlink(path);
	return fd;
}

static void
test_zstd_frames(void)
{
	int fd = tmpfd();
	struct out *o = out_open(fd, 3);
	struct input *in;
	const char *line;
	size_t len, first, size;
	char *bytes;
	int tried = 0, errors = 0;

	out_write(o, "one\n", 4);
	out_boundary(o);
	out_flush(o);				/* at a boundary: the frame ends */
	first = (size_t) lseek(fd, 0, SEEK_CUR);
	out_write(o, "two\n", 4);
	out_flush(o);				/* not at a boundary: the frame goes on */
	out_write(o, "three\n", 6);
	out_close(o, false);
	size = (size_t) lseek(fd, 0, SEEK_END);
	bytes = malloc(size);
	CHECK(pread(fd, bytes, size, 0) == (ssize_t) size);
	/* Two frames, each with a checksum: FLG bit 2 of each header. */
	CHECK((unsigned char) bytes[0] == 0x28 && (bytes[4] & 0x04));
	CHECK((unsigned char) bytes[first] == 0x28 && (bytes[first + 4] & 0x04));

	lseek(fd, 0, SEEK_SET);
	in = input_open(fd, "z", 1 << 20);
	CHECK(input_next(in, &line, &len, -1) == IN_LINE && len == 3);
	CHECK(input_settle(in));
	CHECK(input_next(in, &line, &len, -1) == IN_LINE && len == 3);
	CHECK(input_next(in, &line, &len, -1) == IN_LINE && len == 5);
	CHECK(input_settle(in));
	CHECK(input_next(in, &line, &len, -1) == IN_EOF);
	input_close(in);

	/* Every bit of the second frame flipped: no line of it is ever settled
	 * unless the result is the original, and an error is one line. */
	for (size_t i = first; i < size; i++)
		for (int bit = 0; bit < 8; bit++)
		{
			int g = tmpfd();
			bool wrong = false;
			enum input_status st;
			char got[16] = "";

			bytes[i] ^= (char) (1 << bit);
			CHECK(write(g, bytes, size) == (ssize_t) size);
			bytes[i] ^= (char) (1 << bit);
			lseek(g, 0, SEEK_SET);
			in = input_open(g, "z", 1 << 20);
			CHECK(input_next(in, &line, &len, -1) == IN_LINE);
			while ((st = input_next(in, &line, &len, -1)) == IN_LINE)
			{
				if (strlen(got) + len + 1 < sizeof(got))
					snprintf(got + strlen(got), sizeof(got) - strlen(got), "%.*s,", (int) len, line);
				else
					wrong = true;
			}
			/* Settled at the end: the frame checked out, so it is the original. */
			if (st == IN_EOF && input_settle(in))
				wrong |= strcmp(got, "two,three,") != 0;
			else
			{
				errors++;
				CHECK(st != IN_EOF);
				if (st == IN_ERROR)
					CHECK(strstr(input_error(in), " z: ") != NULL && strchr(input_error(in), '\n') == NULL);
			}
			CHECK(!wrong);
			tried++;
			input_close(in);
			close(g);
		}
	CHECK(tried > 100 && errors > tried / 2);
	free(bytes);
	close(fd);
}

int
main(void)
{
	test_zstd_frames();
	test_order_and_eof(false);
	test_order_and_eof(true);
	test_full_buffer();
	return unit_done("input");
}
