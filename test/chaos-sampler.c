/*
 * chaos-sampler - the acknowledgement invariant checker test/chaos runs next
 * to the pipeline. Deliberately independent of the code under test: plain
 * libpq, its own LSN parsing, no lib/ module.
 *
 *   chaos-sampler SOURCE TARGET SLOT JOB CHECKPOINT_FILE VIOLATIONS_FILE
 *
 * Every 100 ms it reads, in this order, the slot's confirmed_flush_lsn on the
 * source, the first line of the checkpoint file and the job's applied_lsn on
 * the target. applied_lsn only grows, so the later reading bounds the earlier
 * ones: a confirmed position or a checkpoint past it means something was
 * acknowledged before the target had committed it. Each violation is a line
 * in VIOLATIONS_FILE. Servers that are down (restarts are part of the run)
 * only skip samples; connections are re-opened. On SIGTERM or SIGINT it
 * prints "samples N violations V max_ack_lag_bytes L" and exits 0.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libpq-fe.h>

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void) sig;
	stop = 1;
}

static int
parse_lsn(const char *s, uint64_t *out)
{
	unsigned hi, lo;
	char extra;

	if (s == NULL || sscanf(s, "%X/%X%c", &hi, &lo, &extra) != 2)
		return 0;
	*out = (uint64_t) hi << 32 | lo;
	return 1;
}

static PGconn *
ensure(PGconn *conn, const char *conninfo)
{
	const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
	const char *vals[] = {conninfo, "2", "chaos-sampler", NULL};

	if (conn && PQstatus(conn) == CONNECTION_OK)
		return conn;
	PQfinish(conn);
	conn = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* One LSN from a one-row, one-column query; 0 when unavailable. */
static int
query_lsn(PGconn **conn, const char *conninfo, const char *sql, const char *param,
		  uint64_t *out)
{
	PGresult *res;
	int ok = 0;

	if ((*conn = ensure(*conn, conninfo)) == NULL)
		return 0;
	res = PQexecParams(*conn, sql, 1, NULL, &param, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && PQnfields(res) == 1 &&
		!PQgetisnull(res, 0, 0))
		ok = parse_lsn(PQgetvalue(res, 0, 0), out);
	PQclear(res);
	return ok;
}

static int
file_lsn(const char *path, uint64_t *out)
{
	char line[64];
	FILE *f = fopen(path, "r");
	int ok = 0;

	if (f == NULL)
		return 0;
	if (fgets(line, sizeof(line), f))
	{
		line[strcspn(line, "\n")] = '\0';
		ok = parse_lsn(line, out);
	}
	fclose(f);
	return ok;
}

static void
violation(const char *path, const char *what, uint64_t a, uint64_t b)
{
	FILE *f = fopen(path, "a");
	struct timespec ts;

	if (f == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(f, "%lld.%03ld %s %X/%X is past the target's applied_lsn %X/%X\n",
			(long long) ts.tv_sec, ts.tv_nsec / 1000000, what,
			(unsigned) (a >> 32), (unsigned) a, (unsigned) (b >> 32), (unsigned) b);
	fclose(f);
}

int
main(int argc, char **argv)
{
	PGconn *src = NULL, *tgt = NULL;
	unsigned long long samples = 0, violations = 0;
	uint64_t max_lag = 0;
	struct sigaction sa;

	if (argc != 7)
	{
		fprintf(stderr, "usage: chaos-sampler SOURCE TARGET SLOT JOB CHECKPOINT_FILE VIOLATIONS_FILE\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	while (!stop)
	{
		struct timespec nap = {0, 100 * 1000 * 1000};
		uint64_t confirmed = 0, file = 0, applied = 0;
		int have_c, have_f;

		have_c = query_lsn(&src, argv[1],
						   "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1",
						   argv[3], &confirmed);
		have_f = file_lsn(argv[5], &file);
		if (query_lsn(&tgt, argv[2], "SELECT applied_lsn FROM pgsync.job WHERE job = $1",
					  argv[4], &applied))
		{
			samples++;
			if (have_c && confirmed > applied)
			{
				violations++;
				violation(argv[6], "slot confirmed_flush_lsn", confirmed, applied);
			}
			if (have_f && file > applied)
			{
				violations++;
				violation(argv[6], "checkpoint file", file, applied);
			}
			if (have_c && applied > confirmed && applied - confirmed > max_lag)
				max_lag = applied - confirmed;
		}
		nanosleep(&nap, NULL);
	}
	PQfinish(src);
	PQfinish(tgt);
	printf("samples %llu violations %llu max_ack_lag_bytes %llu\n", samples, violations,
		   (unsigned long long) max_lag);
	return 0;
}
