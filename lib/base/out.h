/*
 * out.h - the one buffered writer every program uses for its output stream:
 * handles short writes and EINTR, optional zstd compression, and treats EPIPE
 * (the reader went away) as a quiet end.
 *
 * Compressed output is a series of independent zstd frames, each ending with
 * a content checksum. A frame ends only at a boundary the caller marks with
 * out_boundary() (between transactions, between snapshot frames): at the
 * first one after about 1 MB, and at a flush right after one. So a reader
 * can check a whole frame before applying any transaction in it.
 */
#ifndef PGSYNC_OUT_H
#define PGSYNC_OUT_H

#include <stdbool.h>
#include <stddef.h>

enum out_status { OUT_OK = 0, OUT_CLOSED = 1, OUT_ERROR = 2 };

struct out;

/* Write to fd; zstd_level 0 means plain output. */
struct out *out_open(int fd, int zstd_level);

/*
 * A pipe holds 64 kB by default, about a hundred transactions of a backlog:
 * the producer then stops each time the consumer commits. 1 MB (the most an
 * unprivileged process may ask for by default) lets it run on meanwhile: a
 * 100,000-transaction catch-up through pg-walcat | pg-apply took about 15 %
 * less time. It is kernel memory, not the process's. A file, or a refusal,
 * stays as is. (pg-snapshot-dump keeps the default: its reader is the
 * target's load, which a longer queue does not speed up, and the source
 * connection is then held while the target loads, as its status says.)
 */
void out_widen_pipe(int fd);
/* Refuse (false) when compressing to a terminal; call before writing. */
bool out_tty_ok(int fd, int zstd_level);
enum out_status out_write(struct out *o, const void *p, size_t n);
/*
 * Everything written so far ends at a record boundary where a frame may end
 * (no transaction or snapshot frame is open).
 */
enum out_status out_boundary(struct out *o);
/* End frames at the first boundary past bytes instead (0: at every one). */
void out_set_frame_target(struct out *o, size_t bytes);
/* Push everything buffered to the fd: end the zstd frame when at a boundary,
 * else a zstd block (decodable, not yet verifiable). */
enum out_status out_flush(struct out *o);
/* Bytes handed to out_write since open (uncompressed). */
unsigned long long out_bytes(const struct out *o);
/* Bytes buffered and not yet flushed. */
size_t out_pending(const struct out *o);
/* Finish (zstd epilogue), flush and free; fsync the fd first when asked. */
enum out_status out_close(struct out *o, bool do_fsync);

/* write(2) until done: retries short writes and EINTR. -1 with errno set. */
int write_all(int fd, const void *p, size_t n);

#endif
