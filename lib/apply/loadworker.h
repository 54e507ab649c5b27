/*
 * loadworker.h - the target side of snapload: worker threads, each with
 * its own target connection, that load whole frames (one transaction each)
 * from bounded queues of chunks, and the pgsync.table_sync rows. A table is
 * never marked done before every one of its frames committed: the "table
 * done" protocol (frames dispatched and committed, TABLEDONE read, who marks
 * the table done) is this module's alone, behind loader_add_table(),
 * loader_frame_start(), loader_table_done() and loader_tables_done().
 */
#ifndef PGSYNC_LOADWORKER_H
#define PGSYNC_LOADWORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "conn.h"
#include "streamread.h"

#define CHUNK_SIZE (1024 * 1024)
#define QUEUE_CHUNKS 8			/* per worker: one default 8 MB frame */

/* A table of the section, as the reader found it. */
/* How the section is loaded (pg-apply passes them to snapload_section()). */
struct snapload_opts {
	const char *conninfo;		/* target */
	int jobs;					/* parallel target connections, >= 1 */
	const char *job;			/* pgsync.job key the table_sync rows belong to */
	bool replica_role;			/* set session_replication_role = replica */
	/* Called between frames and while waiting for input (heartbeats). */
	void (*tick)(void);
};

struct ltable {
	struct ltable *next;		/* the loader's list */
	/* The stream parser's table: its names, whether a chunk section copies
	 * it in key chunks, the rows and bytes of its frames read; valid while
	 * the loader runs. */
	const struct sr_table *st;
	const char *schema, *name;	/* st's, unescaped */
	char *copy_sql;				/* the reader's */
	/* The table done protocol: under mu, in loadworker.c only. */
	int dispatched, committed;	/* frames */
	bool tabledone, claimed;	/* TABLEDONE read; someone marks it done */
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
	struct ltable *tables;		/* the reader's list */
	int ntables;				/* the reader's */
	int ndone;					/* under mu: loader_tables_done() */
	uint64_t total_rows, total_bytes;	/* the reader's */
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
/*
 * The table done protocol, the reader's side. A new table of the section
 * (its table_sync row set to 'copying'; NULL when that failed: the loader
 * failed, naming the stream's line). A frame of t starts: the worker to
 * send it to, and t has one more frame to commit. TABLEDONE of t was read:
 * t is marked done now if every frame committed, else by the worker that
 * commits the last one (false when marking it failed: the loader failed).
 * How many tables are marked done.
 */
struct ltable *loader_add_table(struct loader *L, const struct sr_table *st, uint64_t line);
struct lworker *loader_frame_start(struct loader *L, struct ltable *t);
bool loader_table_done(struct loader *L, struct ltable *t, uint64_t line);
int loader_tables_done(struct loader *L);

#endif
