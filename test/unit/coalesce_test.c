/*
 * coalesce_test - holding and merging updates: newest value per column, an
 * unchanged TOAST marker keeping the held value, keys per table, limits, and
 * a random workload checked against a plain model (last full row per key).
 */
#include "unit.h"
#include "coalesce.h"

/* An apply error context (applyerr.h) for the held rows. */
#define TXN(x, c) ((struct apply_txn) {(x), (c)})

#include <stdint.h>
#include <stdlib.h>

static struct field
f(const char *s)
{
	return (struct field) {s, strlen(s)};
}

static const bool key1[3] = {true, false, false};

/* The held row of table rel with key k, as "v1|v2|v3", or NULL. */
static const char *
held(struct coalesce *c, void *rel, const char *k, uint64_t *xid)
{
	static char out[256];
	struct co_row r;
	size_t cur = 0;

	while (coalesce_next(c, &cur, &r))
		if (r.rel == rel && r.vals[0].n == strlen(k) && memcmp(r.vals[0].p, k, r.vals[0].n) == 0)
		{
			snprintf(out, sizeof(out), "%.*s|%.*s|%.*s", (int) r.vals[0].n, r.vals[0].p,
					 (int) r.vals[1].n, r.vals[1].p, (int) r.vals[2].n, r.vals[2].p);
			if (xid)
				*xid = r.txn.xid;
			return out;
		}
	return NULL;
}

static void
test_merge(void)
{
	struct coalesce *c = coalesce_new(1 << 16, 100);
	int ta, tb;
	struct field r1[3] = {f("1"), f("a"), f("doc1")};
	struct field r1b[3] = {f("1"), f("b"), f("\\U")};
	struct field r1c[3] = {f("1"), f("\\N"), f("\\U")};
	struct field r2[3] = {f("2"), f("x"), f("\\U")};
	struct field r2b[3] = {f("2"), f("y"), f("doc2")};
	uint64_t xid = 0;

	CHECK(coalesce_rows(c) == 0);
	CHECK(!coalesce_has(c, &ta, 3, key1, r1));
	CHECK(coalesce_put(c, &ta, 3, key1, r1, TXN(10, 100)));
	CHECK(coalesce_put(c, &ta, 3, key1, r1b, TXN(11, 110)));
	CHECK(coalesce_rows(c) == 1);
	CHECK_STR(held(c, &ta, "1", &xid), "1|b|doc1");	/* \U kept the held doc */
	CHECK(xid == 11);
	CHECK(coalesce_put(c, &ta, 3, key1, r1c, TXN(12, 120)));
	CHECK_STR(held(c, &ta, "1", NULL), "1|\\N|doc1");	/* a NULL replaces */
	/* \U with nothing held stays \U: the statement will leave the column. */
	CHECK(coalesce_put(c, &ta, 3, key1, r2, TXN(13, 130)));
	CHECK_STR(held(c, &ta, "2", NULL), "2|x|\\U");
	CHECK(coalesce_put(c, &ta, 3, key1, r2b, TXN(14, 140)));
	CHECK_STR(held(c, &ta, "2", NULL), "2|y|doc2");
	/* The same key in another table is another row. */
	CHECK(!coalesce_has(c, &tb, 3, key1, r1));
	CHECK(coalesce_put(c, &tb, 3, key1, r1, TXN(15, 150)));
	CHECK(coalesce_rows(c) == 3);
	CHECK(coalesce_has(c, &tb, 3, key1, r1));
	CHECK(coalesce_has(c, &ta, 3, key1, r2));
	/* Only the key is compared. */
	CHECK(coalesce_has(c, &ta, 3, key1, (struct field[3]) {f("1"), f("zz"), f("\\U")}));
	CHECK(!coalesce_has(c, &ta, 3, key1, (struct field[3]) {f("11"), f("b"), f("\\U")}));
	coalesce_reset(c);
	CHECK(coalesce_rows(c) == 0);
	CHECK(!coalesce_has(c, &ta, 3, key1, r1));
	CHECK(held(c, &ta, "1", NULL) == NULL);
	coalesce_free(c);
}

static void
test_limits(void)
{
	struct coalesce *c = coalesce_new(1024, 4);
	int t;
	char k[8][12];
	static char big[2048];
	struct field r[3];

	for (int i = 0; i < 8; i++)
		snprintf(k[i], sizeof(k[i]), "%d", i);
	for (int i = 0; i < 4; i++)
	{
		r[0] = f(k[i]), r[1] = f("v"), r[2] = f("w");
		CHECK(coalesce_put(c, &t, 3, key1, r, TXN(1, 1)));
	}
	/* Row limit: a fifth key is refused, a held key still merges. */
	r[0] = f(k[4]);
	CHECK(!coalesce_put(c, &t, 3, key1, r, TXN(1, 1)));
	r[0] = f(k[0]), r[1] = f("v2");
	CHECK(coalesce_put(c, &t, 3, key1, r, TXN(1, 1)));
	CHECK(coalesce_rows(c) == 4);
	CHECK_STR(held(c, &t, "0", NULL), "0|v2|w");
	coalesce_reset(c);
	/* Arena: a row larger than the arena never fits; refusing changes nothing. */
	memset(big, 'x', sizeof(big) - 1);
	r[0] = f("9"), r[1] = f(big), r[2] = f("w");
	CHECK(!coalesce_put(c, &t, 3, key1, r, TXN(1, 1)));
	CHECK(coalesce_rows(c) == 0);
	big[600] = '\0';
	r[1] = f(big);
	CHECK(coalesce_put(c, &t, 3, key1, r, TXN(1, 1)));
	/* A second version of the same size no longer fits: still the first. */
	big[0] = 'y';
	CHECK(!coalesce_put(c, &t, 3, key1, r, TXN(2, 2)));
	CHECK(coalesce_rows(c) == 1);
	CHECK(held(c, &t, "9", NULL)[2] == 'x');
	coalesce_free(c);
}

/* Random updates of 50 keys in 3 tables against the model. */
static void
test_model(void)
{
	enum { KEYS = 50, TABLES = 3, OPS = 20000 };
	struct coalesce *c = coalesce_new(1 << 20, 1000);
	int tables[TABLES];
	char model[TABLES][KEYS][2][16];	/* current v1, v2; "" = not held */
	char kbuf[16], v1[16], v2[16];
	unsigned seed = 12345;
	int bad = 0, flushes = 0;

	memset(model, 0, sizeof(model));
	for (int op = 0; op < OPS; op++)
	{
		int t = (int) (rand_r(&seed) % TABLES), k = (int) (rand_r(&seed) % KEYS);
		bool unchanged = rand_r(&seed) % 3 == 0;
		struct field r[3];

		snprintf(kbuf, sizeof(kbuf), "k%d", k);
		snprintf(v1, sizeof(v1), "a%d", op);
		snprintf(v2, sizeof(v2), "b%d", op);
		r[0] = f(kbuf), r[1] = f(v1), r[2] = unchanged ? f("\\U") : f(v2);
		if (!coalesce_put(c, &tables[t], 3, key1, r, TXN((uint64_t) op, 0)))
		{
			/* "Send" and start over, as the applier does. */
			coalesce_reset(c);
			memset(model, 0, sizeof(model));
			flushes++;
			CHECK(coalesce_put(c, &tables[t], 3, key1, r, TXN((uint64_t) op, 0)));
		}
		strcpy(model[t][k][0], v1);
		if (!unchanged || model[t][k][1][0] == '\0')
			strcpy(model[t][k][1], unchanged ? "\\U" : v2);
		if (op % 997 == 0)
		{
			size_t rows = 0;

			for (int tt = 0; tt < TABLES; tt++)
				for (int kk = 0; kk < KEYS; kk++)
				{
					char want[64];
					const char *got;

					snprintf(kbuf, sizeof(kbuf), "k%d", kk);
					got = held(c, &tables[tt], kbuf, NULL);
					if (model[tt][kk][0][0] == '\0')
					{
						bad += got != NULL;
						continue;
					}
					rows++;
					snprintf(want, sizeof(want), "%s|%s|%s", kbuf, model[tt][kk][0], model[tt][kk][1]);
					bad += got == NULL || strcmp(got, want) != 0;
				}
			bad += rows != coalesce_rows(c);
		}
	}
	CHECK(bad == 0);
	CHECK(flushes > 0);			/* the arena filled up on the way */
	coalesce_free(c);
}

int
main(void)
{
	test_merge();
	test_limits();
	test_model();
	return unit_done("coalesce");
}
