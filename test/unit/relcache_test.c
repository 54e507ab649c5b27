#include "unit.h"
#include "relcache.h"

/* A table as relcache_get() would resolve it, built by hand: no database. */
static struct rc_col cols[] = {
	{"id", "\"id\"", "pg_catalog.int4", "integer", true, false, false},
	{"name", "\"name\"", "pg_catalog.bpchar", "character(5)", false, false, false},
	{"doc", "\"doc\"", "pg_catalog.json", "json", false, true, false},
};
static struct rc_rel rel = {.gen = 1, .display = "public.t", .qname = "\"public\".\"t\"", .ncols = 3, .cols = cols};

static const char *
sql_of(const char *sig)
{
	static struct buf b = BUF_INIT;

	relcache_sql(&rel, sig, &b);
	return buf_cstr(&b);
}

int
main(void)
{
	struct relcache *rc = relcache_new("job");
	struct buf sql = BUF_INIT;
	struct rc_stmt *s1, *s2, *s3;
	bool created;

	CHECK_STR(sql_of("I-s-s-s-"), "INSERT INTO \"public\".\"t\" (\"id\", \"name\", \"doc\") OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3)");
	/* Key from the new row; the unchanged TOASTed doc is left out. */
	CHECK_STR(sql_of("UN-vs---"), "UPDATE \"public\".\"t\" SET \"name\" = $1 WHERE \"id\" = $2::pg_catalog.int4");
	/* Old key: every present column is set, the row found by the old id. */
	CHECK_STR(sql_of("UKsvs-s-"),
			  "UPDATE \"public\".\"t\" SET \"id\" = $1, \"name\" = $2, \"doc\" = $3 WHERE \"id\" = $4::pg_catalog.int4");
	/* Replica identity full: one row by ctid, NULLs by IS NULL, json as text. */
	CHECK_STR(sql_of("DO-v-n-v"),
			  "DELETE FROM \"public\".\"t\" WHERE ctid = (SELECT ctid FROM \"public\".\"t\" WHERE \"id\" = $1::pg_catalog.int4"
			  " AND \"name\" IS NULL AND \"doc\"::pg_catalog.text = $2::pg_catalog.json::pg_catalog.text LIMIT 1)"
			  " AND \"id\" = $1::pg_catalog.int4 AND \"name\" IS NULL AND \"doc\"::pg_catalog.text = $2::pg_catalog.json::pg_catalog.text");
	CHECK_STR(sql_of("DK-v----"), "DELETE FROM \"public\".\"t\" WHERE \"id\" = $1::pg_catalog.int4");
	/* Nothing to set (only unchanged TOAST): a column set to itself, no value. */
	CHECK_STR(sql_of("UN-vr---"), "UPDATE \"public\".\"t\" SET \"name\" = \"name\" WHERE \"id\" = $1::pg_catalog.int4");

	/* One statement per signature, found again, named uniquely. */
	s1 = relcache_stmt(rc, &rel, "UN-vs---", 8, &sql, &created);
	CHECK(s1 != NULL && created && s1->nparams == 2);
	CHECK_STR(buf_cstr(&sql), "UPDATE \"public\".\"t\" SET \"name\" = $1 WHERE \"id\" = $2::pg_catalog.int4");
	s2 = relcache_stmt(rc, &rel, "UN-vs-s-", 8, &sql, &created);
	CHECK(s2 != NULL && created && s2 != s1 && s2->nparams == 3 && strcmp(s1->name, s2->name) != 0);
	s3 = relcache_stmt(rc, &rel, "UN-vs---", 8, &sql, &created);
	CHECK(s3 == s1 && !created);
	CHECK(rel.nstmts == 2);

	/* Past the cap, rare shapes run unnamed instead of growing the cache. */
	char sig[9] = "UO------";
	int made = 0, refused = 0;

	for (int i = 0; i < 200; i++)
	{
		sig[3] = "vn"[i % 2];
		sig[5] = "vn"[(i / 2) % 2];
		sig[7] = "vn"[(i / 4) % 2];
		sig[2] = "s-"[(i / 8) % 2];
		sig[4] = "s-"[(i / 16) % 2];
		sig[6] = "s-"[(i / 32) % 2];
		sig[1] = "OK"[(i / 64) % 2];
		if (relcache_stmt(rc, &rel, sig, 8, &sql, &created) == NULL)
			refused++;
		else
			made += created;
	}
	CHECK(rel.nstmts <= 64);
	CHECK(refused > 0);
	CHECK(made + 2 == rel.nstmts);

	/*
	 * Many tables: past 1024 statements of all tables together the least
	 * recently used ones are retired, to be deallocated, and one in use
	 * stays.
	 */
	{
		struct relcache *rc2 = relcache_new("job");
		static struct rc_rel rels[20];
		char name[24];
		int named = 0, retired = 0;
		struct rc_stmt *kept = NULL;

		for (int t = 0; t < 20; t++)
		{
			rels[t] = rel;
			rels[t].stmts = NULL;
			rels[t].nstmts = 0;
			for (int i = 0; i < 64; i++)
			{
				/* 64 shapes: each of 3 columns set or not, compared or IS NULL. */
				for (int c = 0; c < 3; c++)
				{
					sig[2 + 2 * c] = "s-"[(i >> c) & 1];
					sig[3 + 2 * c] = "vn"[(i >> (c + 3)) & 1];
				}
				CHECK(relcache_stmt(rc2, &rels[t], sig, 8, &sql, &created) != NULL);
				if (t == 0 && i == 0)
					kept = rels[0].stmts;
				/* The first table's first statement is used all along. */
				CHECK(relcache_stmt(rc2, &rels[0], kept->sig, kept->siglen, &sql, &created) == kept);
			}
		}
		for (int t = 0; t < 20; t++)
			named += rels[t].nstmts;
		while (relcache_retired(rc2, name, sizeof(name)))
			retired++;
		CHECK(named == 1024);
		CHECK(retired == 20 * 64 - 1024);
		CHECK(rels[0].stmts == kept);
		CHECK(!relcache_retired(rc2, name, sizeof(name)));
		relcache_free(rc2);
	}
	buf_free(&sql);
	relcache_free(rc);
	return unit_done("relcache_test");
}
