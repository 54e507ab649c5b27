/*
 * cpwriter.c - a checkpoint file kept by a thread of its own (cpwriter.h).
 */
#include "cpwriter.h"
#include "common.h"
#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct cpwriter {
	char *path;
	pthread_mutex_t mu;
	pthread_cond_t work, done;	/* a post is waiting; a write ended */
	bool started, failed;
	struct checkpoint pending;	/* the last one posted */
	uint64_t posted, written;	/* posts so far; the last post on disk */
	char err[512];				/* the failed write's message */
};

static void *
writer(void *arg)
{
	struct cpwriter *w = arg;
	sigset_t all;

	/* Signals are the main thread's: its handlers and its poll loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&w->mu);
	for (;;)
	{
		struct checkpoint cp;
		uint64_t seq;
		char err[sizeof(w->err)];
		int rc;

		while (w->written == w->posted)
			pthread_cond_wait(&w->work, &w->mu);
		cp = w->pending;
		seq = w->posted;
		pthread_mutex_unlock(&w->mu);
		/* The fsyncs, with nobody waiting on the lock. */
		rc = checkpoint_write(w->path, &cp, err, sizeof(err));
		pthread_mutex_lock(&w->mu);
		if (rc != 0 && !w->failed)
		{
			w->failed = true;
			snprintf(w->err, sizeof(w->err), "%s", err);
		}
		w->written = seq;
		pthread_cond_broadcast(&w->done);
	}
	return NULL;
}

struct cpwriter *
cpwriter_new(const char *path)
{
	struct cpwriter *w = xcalloc(1, sizeof(*w));

	w->path = xstrdup(path);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->done, NULL);
	return w;
}

void
cpwriter_post(struct cpwriter *w, const struct checkpoint *cp)
{
	pthread_mutex_lock(&w->mu);
	if (!w->started)
	{
		pthread_t t;
		pthread_attr_t attr;

		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, writer, w) != 0)
			log_fatal(EXIT_RUNTIME, "cannot start the thread that writes checkpoint file \"%s\"", w->path);
		pthread_attr_destroy(&attr);
		w->started = true;
	}
	w->pending = *cp;
	w->posted++;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
}

int
cpwriter_wait(struct cpwriter *w, char *err, size_t errlen)
{
	pthread_mutex_lock(&w->mu);
	while (w->written < w->posted && !w->failed)
		pthread_cond_wait(&w->done, &w->mu);
	pthread_mutex_unlock(&w->mu);
	return cpwriter_failed(w, err, errlen);
}

int
cpwriter_failed(struct cpwriter *w, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&w->mu);
	if (w->failed)
	{
		snprintf(err, errlen, "%s", w->err);
		rc = -1;
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}
