/*
 * input.h - read a change stream line by line from a file descriptor, plain
 * or zstd (detected from the magic bytes of the first frame), with a hard
 * limit on line length so memory is bounded by configuration, never by input.
 * Never returns a partial line as if it were complete.
 */
#ifndef PGSYNC_INPUT_H
#define PGSYNC_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum input_status {
	IN_LINE = 0,				/* a complete line, LF stripped */
	IN_EOF = 1,					/* clean end: input ended after a LF (or was empty) */
	IN_AGAIN = 2,				/* no complete line within the timeout */
	IN_TRUNCATED = 3,			/* input ended in the middle of a line */
	IN_TOOLONG = 4,				/* a line exceeds the limit */
	IN_ERROR = 5,				/* read or decompression error (input_error() says which) */
};

struct input;

/* name is used in messages ("-" for stdin). max_line bounds one line. */
struct input *input_open(int fd, const char *name, size_t max_line);
/*
 * Next line. timeout_ms < 0 blocks; 0 returns IN_AGAIN at once when no
 * complete line is buffered and nothing can be read without blocking.
 * The line stays valid until the next call.
 */
enum input_status input_next(struct input *in, const char **line, size_t *len,
							 int timeout_ms);
/* The longest line accepted (max_line of input_open()). */
size_t input_max_line(const struct input *in);
/*
 * zstd input is a series of frames, each with a content checksum that is
 * checked when the frame's end is decoded (a frame without one is an
 * error). input_settled(): every line returned so far lies in a frame whose
 * checksum matched (always true for plain input); a reader applies nothing
 * before that. input_settle() decodes what can be read without blocking to
 * get there (it may move the last line returned: call it between lines) and
 * says whether it did; false while the frame goes on.
 */
bool input_settled(const struct input *in);
bool input_settle(struct input *in);
/* The one-line reason of IN_ERROR ("cannot decompress NAME: ..."). */
const char *input_error(const struct input *in);
/* Line number of the last line returned (1-based). */
uint64_t input_lineno(const struct input *in);
const char *input_name(const struct input *in);
/* Bytes consumed (decompressed). */
uint64_t input_bytes(const struct input *in);
int input_fd(const struct input *in);

/*
 * Read ahead while the caller is blocked on something else, so the producer
 * is not held up: input_readahead_fd() is the descriptor to watch, or -1
 * when nothing more can be taken (zstd input, EOF, buffer full); once it is
 * readable, input_readahead() reads into the buffer's free room: at most
 * 4 MB, more only after a longer line grew the buffer, which never exceeds
 * max_line and 640 kB. The line input_next() last returned stays valid.
 */
int input_readahead_fd(const struct input *in);
void input_readahead(struct input *in);

/*
 * input_next() has something at once: a whole line read ahead, the end, or
 * an error. A caller about to wait on the descriptor must ask first: what
 * was read ahead is no longer in the pipe to wake it.
 */
bool input_ready(const struct input *in);
void input_close(struct input *in);

#endif
