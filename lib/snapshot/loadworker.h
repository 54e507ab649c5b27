/*
 * loadworker.h - the target side of lib/snapload: worker threads, each with
 * its own target connection, that load whole frames (one transaction each)
 * from bounded queues of chunks, and the pgsync.table_sync rows. A table is
 * never marked done before every one of its frames committed.
 */
#ifndef PGSYNC_LOADWORKER_H
#define PGSYNC_LOADWORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "conn.h"
#include "snapload.h"

#define CHUNK_SIZE (1024 * 1024)
#define QUEUE_CHUNKS 8			/* per worker: one default 8 MB frame */
#define NBUCKETS 4096

/* A table of the section, as the reader found it. */
struct ltable {
	struct ltable *next;		/* hash chain */
	char *key;					/* raw "schema TAB table" of the stream */
	size_t keylen;
	char *schema, *name;		/* unescaped */
	char *cols;					/* raw "ncols TAB names" of its first COPY line */
	size_t colslen;
	char *copy_sql;
	int ncols;
	uint64_t rows, bytes;		/* ENDCOPY totals read */
	int dispatched, committed;	/* frames; under mu */
	bool tabledone, claimed;	/* under mu */
	bool keyed;					/* chunk section: copied in key chunks, not in one piece */
};

/* What a CHUNK record says, as pgsync.table_chunk stores it: text[]
 * literals, NULL for an unbounded side. */
struct chunkrec {
	char *cols, *lo, *hi;
};

struct chunk {
	struct chunk *next;
	char *data;					/* CHUNK_SIZE bytes */
	size_t len;
	struct ltable *t;
	bool first;					/* starts a frame: BEGIN and COPY */
	bool last;					/* ends it: COPY end, counters, COMMIT */
	bool abort;					/* ends it: roll back */
	bool stop;					/* no more frames: exit */
	uint64_t nrows, nbytes;
	uint64_t copy_line;			/* stream line of the frame's COPY record */
	struct chunkrec *ck;		/* with last: the chunk the frame is, recorded with it */
};

struct lworker {
	struct loader *L;
	pthread_t th;
	PGconn *conn;
	PGcancel *cancel;			/* under L->mu; NULL when not connected */
	struct chunk *head, *tail;
	int queued;
};

struct loader {
	const struct snapload_opts *o;
	const char *input;			/* input name, for messages */
	const char *chunks_lsn;		/* a CHUNKS section's position; NULL for SNAPSHOT */
	PGconn *ctl;				/* the reader's: table_sync rows */
	pthread_mutex_t mu;
	pthread_cond_t cv_work;		/* a chunk was queued */
	pthread_cond_t cv_space;	/* a chunk came back, a worker started or exited */
	struct lworker *w;
	int nw;
	int ready;					/* workers connected (or given up) */
	int alive;					/* worker threads not yet exited */
	struct chunk *pool;
	int allocated, max_chunks;
	bool failed;
	int err_code;
	char err_msg[1600];
	bool warned_role;
	int rr;						/* round-robin start among equal workers */
	struct ltable *buckets[NBUCKETS];	/* the reader's */
	int ntables, ndone;
	uint64_t total_rows, total_bytes;
};

void loader_init(struct loader *L, const struct snapload_opts *o, const char *input);
/* Start the workers and wait until each has connected; an exit code. */
int loader_start(struct loader *L);
/* Abandon the open frame (if any), let the workers finish, join them;
 * after a failure, cancel what they are doing on the target first. */
void loader_stop(struct loader *L, struct chunk *open, struct lworker *target);
void loader_free(struct loader *L);
void chunkrec_free(struct chunkrec *ck);

/* A chunk from the pool (waits while all are in use). */
struct chunk *loader_get_chunk(struct loader *L);
/* Queue c on w, waiting while w's queue is full (stop chunks never wait). */
void loader_push(struct loader *L, struct lworker *w, struct chunk *c);
/* The worker with the least queued. */
struct lworker *loader_pick(struct loader *L);

/* Record the first failure (later ones are consequences). */
void loader_fail(struct loader *L, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "input:line: cannot load schema.table: message (SQLSTATE x)", no values. */
void loader_fail_pg(struct loader *L, const struct ltable *t, uint64_t line, struct pgerr *err);
bool loader_failed(struct loader *L);
/* table_sync: 'copying' with counters reset (done = false; a table copied
 * in key chunks keeps them), or 'done' (in a chunk section, a table copied
 * in one piece gets its pgsync.table_chunk row in the same statement). */
bool loader_set_state(PGconn *conn, const struct loader *L, const struct ltable *t, bool done,
					  struct pgerr *err);

#endif
