/*
 * bench-sampler - replication lag sampler for scripts/bench's steady-state
 * scenario. Deliberately independent of the code it measures: plain libpq,
 * its own LSN parsing, no lib/ module, so every contender is sampled the
 * same way.
 *
 *   bench-sampler SOURCE TARGET TARGET_QUERY INTERVAL_MS OUTFILE
 *
 * Every INTERVAL_MS it reads the position TARGET_QUERY returns on the
 * target (one pg_lsn: what the contender has applied), then the source's
 * pg_current_wal_lsn(), and appends "<ms since start> <source> <applied>"
 * (LSNs as decimal bytes) to OUTFILE. The target is read first: the source
 * only moves forward, so a sample never understates the lag. A NULL or
 * missing position skips the sample.
 * Stops on SIGTERM or SIGINT, prints the number of samples, exits 0.
 */
#include <inttypes.h>
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
		return -1;
	*out = ((uint64_t) hi << 32) | lo;
	return 0;
}

/* One pg_lsn from a one-row, one-column query; -1 on error or NULL. */
static int
query_lsn(PGconn *conn, const char *sql, uint64_t *out)
{
	PGresult *res = PQexec(conn, sql);
	int rc = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		PQnfields(res) == 1 && !PQgetisnull(res, 0, 0))
		rc = parse_lsn(PQgetvalue(res, 0, 0), out);
	PQclear(res);
	return rc;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static PGconn *
connect_to(const char *conninfo)
{
	const char *keys[] = {"dbname", "fallback_application_name", NULL};
	const char *vals[] = {conninfo, "bench-sampler", NULL};
	PGconn *conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "bench-sampler: error: cannot connect: %s", PQerrorMessage(conn));
		exit(1);
	}
	return conn;
}

int
main(int argc, char **argv)
{
	PGconn *src, *tgt;
	FILE *out;
	char *end;
	long interval;
	double t0, next;
	uint64_t s, a;
	long samples = 0;
	struct sigaction sa;

	if (argc != 6)
	{
		fprintf(stderr, "usage: bench-sampler SOURCE TARGET TARGET_QUERY INTERVAL_MS OUTFILE\n");
		return 2;
	}
	interval = strtol(argv[4], &end, 10);
	if (*argv[4] == '\0' || *end != '\0' || interval < 1 || interval > 60000)
	{
		fprintf(stderr, "bench-sampler: error: invalid interval: %s\n", argv[4]);
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	src = connect_to(argv[1]);
	tgt = connect_to(argv[2]);
	if ((out = fopen(argv[5], "w")) == NULL)
	{
		perror("bench-sampler: error: cannot open output");
		return 1;
	}
	t0 = next = now_ms();
	while (!stop)
	{
		double t = now_ms();

		if (query_lsn(tgt, argv[3], &a) == 0 &&
			query_lsn(src, "SELECT pg_current_wal_lsn()", &s) == 0)
		{
			fprintf(out, "%.1f %" PRIu64 " %" PRIu64 "\n", t - t0, s, a);
			fflush(out);
			samples++;
		}
		/* Fixed cadence: a slow query delays one sample, not all later ones. */
		next += interval;
		t = now_ms();
		if (next > t)
		{
			struct timespec d;
			double w = next - t;

			d.tv_sec = (time_t) (w / 1e3);
			d.tv_nsec = (long) ((w - d.tv_sec * 1e3) * 1e6);
			nanosleep(&d, NULL);
		}
		else
			next = t;
	}
	fclose(out);
	PQfinish(src);
	PQfinish(tgt);
	printf("%ld\n", samples);
	return 0;
}
