/*
 * chunkmap_test - which chunk holds a key: integer keys compared as
 * integers (not as text), uuid keys as lowercase text, composite keys
 * lexicographically with a chunk boundary inside a run of equal leading
 * values, gaps and unbounded ends, a table copied in one piece, refusals
 * (overlapping chunks, a key type chunks are never cut by, a missing key
 * value), the memory the map counts, and random maps against a linear scan.
 */
#include "unit.h"
#include "chunkmap.h"

/* One chunk, as the catalog row gives it. */
#define ADD(m, s, t, n, k, lo, hi, lsn, err) \
	chunkmap_add((m), &(struct cm_chunk_spec) {(s), (t), (n), (k), (lo), (hi), (lsn)}, (err))
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct sr_col cols_id[3] = {{"Id", 23, -1, true}, {"name", 25, -1, false}, {"doc", 25, -1, false}};
static struct sr_col cols_ab[3] = {{"a", 20, -1, true}, {"b", 21, -1, true}, {"v", 25, -1, false}};
static struct sr_col cols_u[2] = {{"u", 2950, -1, true}, {"v", 25, -1, false}};
static struct sr_col cols_t[2] = {{"t", 25, -1, true}, {"v", 25, -1, false}};

static struct sr_rel
rel(const char *schema, const char *table, struct sr_col *cols, int ncols)
{
	static uint64_t gen;
	struct sr_rel r = {0};

	r.schema = (char *) schema;
	r.table = (char *) table;
	r.cols = cols;
	r.ncols = ncols;
	r.gen = ++gen;
	return r;
}

static struct field
f(const char *s)
{
	return (struct field) {s, strlen(s)};
}

/* The position of the chunk holding the key made of values v (the stream's columns). */
static lsn_t
find(struct chunkmap *m, const struct sr_rel *r, const char *const *v)
{
	struct apply_err err;
	struct field vals[8];
	struct cm_val key[8];
	struct cm_table *t = chunkmap_table(m, r, &err);

	if (t == NULL)
		return err.code ? 1 : 0;
	for (int i = 0; i < r->ncols; i++)
		vals[i] = f(v[i]);
	if (!chunkmap_key(t, vals, key, NULL, &err))
		return 2;
	return chunkmap_find(t, key);
}

#define K1(x) ((const char *const[]) {x})
#define K2(x, y) ((const char *const[]) {x, y})

static void
integer_keys(void)
{
	struct chunkmap *m = chunkmap_new();
	struct apply_err err;
	const char *key[] = {"Id"};
	struct sr_rel r = rel("Sales", "Order Lines", cols_id, 3);

	/* Added out of order: (-inf, -5] (-5, 9] (9, 100] gap (200, +inf). */
	CHECK(ADD(m, "Sales", "Order Lines", 1, key, K1("9"), K1("100"), 0x300, &err));
	CHECK(ADD(m, "Sales", "Order Lines", 1, key, NULL, K1("-5"), 0x100, &err));
	CHECK(ADD(m, "Sales", "Order Lines", 1, key, K1("200"), NULL, 0x400, &err));
	CHECK(ADD(m, "Sales", "Order Lines", 1, key, K1("-5"), K1("9"), 0x200, &err));
	CHECK(chunkmap_max_lsn(m) == 0x400);
	CHECK(chunkmap_nchunks(m) == 4 && chunkmap_ntables(m) == 1);
	CHECK(find(m, &r, (const char *[]) {"-9223372036854775808", "x", "y"}) == 0x100);
	CHECK(find(m, &r, (const char *[]) {"-5", "x", "y"}) == 0x100);
	CHECK(find(m, &r, (const char *[]) {"-4", "x", "y"}) == 0x200);
	/* As text "10" < "9": integers must compare as integers. */
	CHECK(find(m, &r, (const char *[]) {"9", "x", "y"}) == 0x200);
	CHECK(find(m, &r, (const char *[]) {"10", "x", "y"}) == 0x300);
	CHECK(find(m, &r, (const char *[]) {"100", "x", "y"}) == 0x300);
	CHECK(find(m, &r, (const char *[]) {"101", "x", "y"}) == CM_NOT_COPIED);
	CHECK(find(m, &r, (const char *[]) {"200", "x", "y"}) == CM_NOT_COPIED);
	CHECK(find(m, &r, (const char *[]) {"201", "x", "y"}) == 0x400);
	CHECK(find(m, &r, (const char *[]) {"9223372036854775807", "x", "y"}) == 0x400);
	/* No key value: an error, never a guess. */
	CHECK(find(m, &r, (const char *[]) {"\\N", "x", "y"}) == 2);
	CHECK(find(m, &r, (const char *[]) {"9223372036854775808", "x", "y"}) == 2);
	/* Another table has no chunks: not filtered. */
	struct sr_rel other = rel("Sales", "order lines", cols_id, 3);
	CHECK(find(m, &other, (const char *[]) {"1", "x", "y"}) == 0);
	/* A stream relation without the key column. */
	struct sr_rel nokey = rel("Sales", "Order Lines", cols_ab, 3);
	CHECK(chunkmap_table(m, &nokey, &err) == NULL && err.code == EXIT_UNSUPPORTED);
	CHECK(strstr(err.msg, "no column \"Id\"") != NULL);
	chunkmap_free(m);
}

static void
composite_keys(void)
{
	struct chunkmap *m = chunkmap_new();
	struct apply_err err;
	const char *key[] = {"a", "b"};
	struct sr_rel r = rel("public", "ab", cols_ab, 3);

	/* A boundary inside the run a = 5: (-inf, (5,3)] ((5,3), (5,10)] ((5,10), +inf). */
	CHECK(ADD(m, "public", "ab", 2, key, NULL, K2("5", "3"), 0x10, &err));
	CHECK(ADD(m, "public", "ab", 2, key, K2("5", "3"), K2("5", "10"), 0x20, &err));
	CHECK(ADD(m, "public", "ab", 2, key, K2("5", "10"), NULL, 0x30, &err));
	CHECK(find(m, &r, (const char *[]) {"4", "32767", "v"}) == 0x10);
	CHECK(find(m, &r, (const char *[]) {"5", "-1", "v"}) == 0x10);
	CHECK(find(m, &r, (const char *[]) {"5", "3", "v"}) == 0x10);
	CHECK(find(m, &r, (const char *[]) {"5", "4", "v"}) == 0x20);
	CHECK(find(m, &r, (const char *[]) {"5", "10", "v"}) == 0x20);
	CHECK(find(m, &r, (const char *[]) {"5", "11", "v"}) == 0x30);
	CHECK(find(m, &r, (const char *[]) {"6", "-32768", "v"}) == 0x30);
	chunkmap_free(m);
}

static void
uuid_keys(void)
{
	struct chunkmap *m = chunkmap_new();
	struct apply_err err;
	const char *key[] = {"u"};
	struct sr_rel r = rel("public", "u", cols_u, 2);

	CHECK(ADD(m, "public", "u", 1, key, NULL, K1("3fffffff-ffff-ffff-ffff-ffffffffffff"), 1, &err));
	CHECK(ADD(m, "public", "u", 1, key, K1("3fffffff-ffff-ffff-ffff-ffffffffffff"),
					   K1("a0000000-0000-0000-0000-000000000000"), 2, &err));
	CHECK(ADD(m, "public", "u", 1, key, K1("a0000000-0000-0000-0000-000000000000"), NULL, 3, &err));
	CHECK(find(m, &r, (const char *[]) {"00000000-0000-0000-0000-000000000000", "v"}) == 1);
	CHECK(find(m, &r, (const char *[]) {"3fffffff-ffff-ffff-ffff-ffffffffffff", "v"}) == 1);
	CHECK(find(m, &r, (const char *[]) {"40000000-0000-0000-0000-000000000000", "v"}) == 2);
	/* Digits sort before letters in uuid order as in text; case folded. */
	CHECK(find(m, &r, (const char *[]) {"9fffffff-ffff-ffff-ffff-ffffffffffff", "v"}) == 2);
	CHECK(find(m, &r, (const char *[]) {"A0000000-0000-0000-0000-000000000000", "v"}) == 2);
	CHECK(find(m, &r, (const char *[]) {"a0000000-0000-0000-0000-000000000001", "v"}) == 3);
	CHECK(find(m, &r, (const char *[]) {"not-a-uuid", "v"}) == 2);
	chunkmap_free(m);
}

static void
one_piece_and_refusals(void)
{
	struct chunkmap *m = chunkmap_new();
	struct apply_err err;
	const char *key[] = {"t"}, *idkey[] = {"Id"};
	struct sr_rel r = rel("public", "heap", cols_t, 2), t = rel("public", "texts", cols_t, 2);
	struct sr_rel o = rel("public", "overlap", cols_id, 3);

	CHECK(ADD(m, "public", "heap", 0, NULL, NULL, NULL, 0x50, &err));
	CHECK(find(m, &r, (const char *[]) {"anything", "v"}) == 0x50);
	/* Chunks of the same table must agree on their key. */
	CHECK(!ADD(m, "public", "heap", 1, key, NULL, NULL, 0x60, &err) && err.code == EXIT_UNSUPPORTED);
	/* A text key with no target collation known to order it as the
	 * source does (no --key-collations): refused, not guessed. */
	CHECK(ADD(m, "public", "texts", 1, key, NULL, K1("m"), 0x60, &err));
	CHECK(chunkmap_table(m, &t, &err) == NULL && err.code == EXIT_UNSUPPORTED);
	CHECK(strstr(err.msg, "no --key-collations line names a target collation") != NULL);
	CHECK(ADD(m, "public", "overlap", 1, idkey, NULL, K1("10"), 0x60, &err));
	CHECK(ADD(m, "public", "overlap", 1, idkey, K1("5"), NULL, 0x70, &err));
	CHECK(chunkmap_table(m, &o, &err) == NULL && err.code == EXIT_UNSUPPORTED);
	CHECK(strstr(err.msg, "overlap") != NULL);
	chunkmap_free(m);
}

/* Counted memory: every chunk of one integer key column, by hand. */
static void
memory(void)
{
	struct chunkmap *m = chunkmap_new();
	struct apply_err err;
	const char *key[] = {"Id"};
	char lo[24], hi[24];
	size_t before;

	CHECK(ADD(m, "s", "t", 1, key, NULL, K1("0"), 1, &err));
	before = chunkmap_bytes(m);
	for (int i = 0; i < 100000; i++)
	{
		snprintf(lo, sizeof(lo), "%d", i * 1000);
		snprintf(hi, sizeof(hi), "%d", (i + 1) * 1000);
		CHECK(ADD(m, "s", "t", 1, key, K1(lo), K1(hi), 2, &err));
	}
	/* Two values (24 bytes each) and their text, plus the chunk (24) and
	 * growth room of its array: about 100 bytes a chunk. */
	printf("chunkmap: %zu bytes for 100000 chunks of one int key (%.1f a chunk)\n",
		   chunkmap_bytes(m) - before, (double) (chunkmap_bytes(m) - before) / 100000);
	CHECK(chunkmap_bytes(m) - before < 128 * 100000);
	chunkmap_free(m);

	m = chunkmap_new();
	key[0] = "u";
	CHECK(ADD(m, "s", "u", 1, key, NULL, K1("00000000-0000-0000-0000-000000000000"), 1, &err));
	before = chunkmap_bytes(m);
	for (int i = 0; i < 100000; i++)
	{
		char l[40], h[40];

		snprintf(l, sizeof(l), "00000000-0000-0000-0000-%012d", i);
		snprintf(h, sizeof(h), "00000000-0000-0000-0000-%012d", i + 1);
		CHECK(ADD(m, "s", "u", 1, key, K1(l), K1(h), 2, &err));
	}
	printf("chunkmap: %zu bytes for 100000 chunks of one uuid key (%.1f a chunk)\n",
		   chunkmap_bytes(m) - before, (double) (chunkmap_bytes(m) - before) / 100000);
	CHECK(chunkmap_bytes(m) - before < 192 * 100000);
	chunkmap_free(m);
}

/* Random chunk layouts with gaps against a scan of every chunk. */
static void
random_maps(void)
{
	srand(7);
	for (int round = 0; round < 200; round++)
	{
		struct chunkmap *m = chunkmap_new();
		struct apply_err err;
		const char *key[] = {"a", "b"};
		struct sr_rel r = rel("public", "ab", cols_ab, 3);
		int n = 1 + rand() % 12, bounds[2 * 13][2], nb = 0;
		char text[2 * 13][2][16];
		lsn_t lsn[13];
		bool has[13];

		/* Increasing bounds over a small (a, b) space so keys hit them. */
		for (int i = 0, a = -3, b = 0; i < 2 * n; i++)
		{
			b += 1 + rand() % 3;
			if (b > 4)
			{
				a += 1;
				b = rand() % 3;
			}
			bounds[nb][0] = a;
			bounds[nb][1] = b;
			snprintf(text[nb][0], 16, "%d", a);
			snprintf(text[nb][1], 16, "%d", b);
			nb++;
		}
		for (int i = 0; i < n; i++)
		{
			bool open_lo = i == 0 && rand() % 2, open_hi = i == n - 1 && rand() % 2;

			has[i] = rand() % 4 != 0;
			lsn[i] = (lsn_t) (1 + rand() % 1000);
			if (has[i])
				CHECK(ADD(m, "public", "ab", 2, key,
								   open_lo ? NULL : K2(text[2 * i][0], text[2 * i][1]),
								   open_hi ? NULL : K2(text[2 * i + 1][0], text[2 * i + 1][1]), lsn[i], &err));
			/* Remember open ends as the extremes. */
			if (open_lo)
				bounds[0][0] = -1000;
			if (open_hi)
				bounds[2 * n - 1][0] = 1000;
		}
		for (int a = -5; a < 12; a++)
			for (int b = -1; b < 6; b++)
			{
				char as[16], bs[16];
				lsn_t want = CM_NOT_COPIED;

				snprintf(as, sizeof(as), "%d", a);
				snprintf(bs, sizeof(bs), "%d", b);
				for (int i = 0; i < n; i++)
				{
					int *lo = bounds[2 * i], *hi = bounds[2 * i + 1];
					bool above = a > lo[0] || (a == lo[0] && b > lo[1]);
					bool below = a < hi[0] || (a == hi[0] && b <= hi[1]);

					if (has[i] && above && below)
						want = lsn[i];
				}
				if (chunkmap_nchunks(m) == 0)
					want = 0;
				CHECK(find(m, &r, (const char *[]) {as, bs, "v"}) == want);
			}
		chunkmap_free(m);
	}
}

int
main(void)
{
	integer_keys();
	composite_keys();
	uuid_keys();
	one_piece_and_refusals();
	memory();
	random_maps();
	return unit_done("chunkmap");
}
