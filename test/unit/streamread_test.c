#include "unit.h"
#include "streamread.h"

#include <stdlib.h>

#define HDR "PGCS\t1\t7442718406132410263\t1\tapp_slot\t0/1A00000\tproducer=pg-walcat/0.1.0"
#define REL "RELATION\tpublic\tusers\t16385\td\t3\tid\t23\t-1\tk\tname\t25\t-1\t-\tbio\t25\t-1\t-"
#define BEGIN1 "BEGIN\t741\t0/1A01F20\t2026-11-30 14:03:07.123456+00"
#define COMMIT1 "COMMIT\t741\t0/1A01F20\t0/1A01F50\t2026-11-30 14:03:07.123456+00"

static struct sr_record rec;

static bool
p(struct streamread *sr, const char *line)
{
	return sr_parse(sr, line, strlen(line), &rec);
}

/* A reader positioned inside a transaction, with public.users described. */
static struct streamread *
in_txn(void)
{
	struct streamread *sr = sr_new();

	if (!p(sr, HDR) || !p(sr, REL) || !p(sr, BEGIN1))
		fprintf(stderr, "setup failed: %s\n", sr_error(sr));
	return sr;
}

/* Parsing fails and the message contains want. */
static void
bad(struct streamread *sr, const char *line, const char *want)
{
	bool ok = p(sr, line);

	CHECK(!ok);
	if (ok) fprintf(stderr, "parsed: %s\n", line);
	if (!ok && strstr(sr_error(sr), want) == NULL)
	{
		unit_failed++;
		fprintf(stderr, "error \"%s\" lacks \"%s\"\n", sr_error(sr), want);
	}
}

static void
bad_in_txn(const char *line, const char *want)
{
	struct streamread *sr = in_txn();

	bad(sr, line, want);
	sr_free(sr);
}

static void
test_example(void)
{
	struct streamread *sr = sr_new();
	char name[64];

	CHECK(p(sr, HDR));
	CHECK(rec.type == SR_HEADER);
	CHECK_STR(rec.sysid, "7442718406132410263");
	CHECK(rec.timeline == 1);
	CHECK_STR(rec.slot, "app_slot");
	CHECK(rec.lsn == 0x1A00000);
	CHECK(!rec.interrupted);

	CHECK(p(sr, REL));
	CHECK(rec.type == SR_RELATION);
	CHECK(rec.rel->ncols == 3);
	CHECK(rec.rel->identity == 'd');
	CHECK(rec.rel->relid == 16385);
	CHECK(rec.rel->cols[0].key && !rec.rel->cols[1].key);
	CHECK(rec.rel->cols[0].typoid == 23 && rec.rel->cols[0].typmod == -1);
	CHECK_STR(rec.rel->cols[2].name, "bio");
	CHECK_STR(sr_rel_name(rec.rel, name, sizeof(name)), "public.users");
	struct sr_rel *users = rec.rel;

	CHECK(p(sr, BEGIN1));
	CHECK(rec.type == SR_BEGIN && rec.xid == 741 && rec.lsn == 0x1A01F20);
	CHECK(sr_in_txn(sr) && sr_txn_xid(sr) == 741);

	const char *ins = "INSERT\tpublic\tusers\t2\ttab\\there\tline\\nbreak";
	CHECK(p(sr, ins));
	CHECK(rec.type == SR_INSERT && rec.rel == users);
	CHECK(rec.copy_len == strlen("2\ttab\\there\tline\\nbreak"));
	CHECK(strncmp(rec.copy_row, "2\ttab", 5) == 0);
	CHECK(rec.newv[1].n == strlen("tab\\there"));

	CHECK(p(sr, COMMIT1));
	CHECK(rec.type == SR_COMMIT && rec.end_lsn == 0x1A01F50);
	CHECK(!sr_in_txn(sr));

	CHECK(p(sr, "BEGIN\t742\t0/1A02100\t2026-11-30 14:03:08.000001+00"));
	CHECK(p(sr, "UPDATE\tpublic\tusers\tN\t1\tAda L.\t\\U"));
	CHECK(rec.kind == 'N' && rec.oldv == NULL && rec.newv[2].n == 2);
	CHECK(p(sr, "UPDATE\tpublic\tusers\tK\t1\t\\N\t\\N\t5\tAda\t\\U"));
	CHECK(rec.kind == 'K' && rec.oldv[0].n == 1 && rec.newv[0].p[0] == '5');
	CHECK(p(sr, "DELETE\tpublic\tusers\tO\t1\tx\t"));
	CHECK(rec.kind == 'O' && rec.oldv[2].n == 0);
	CHECK(p(sr, "TRUNCATE\tcascade,restart_identity\tpublic\tusers"));
	CHECK(rec.ntrunc == 1 && rec.trunc_rels[0] == users &&
		  rec.trunc_flags == (SR_TRUNC_CASCADE | SR_TRUNC_RESTART));
	CHECK(p(sr, "MESSAGE\tt\t0/1A02110\tapp\t0aff"));
	CHECK(rec.transactional);
	CHECK(p(sr, "COMMIT\t742\t0/1A02100\t0/1A02130\t2026-11-30 14:03:08.000001+00"));
	CHECK(p(sr, "POSITION\t0/1A03000\t2026-11-30 14:03:19.000000+00"));
	CHECK(rec.type == SR_POSITION && rec.lsn == 0x1A03000);
	CHECK(p(sr, "MESSAGE\tn\t0/1A03010\tapp\t"));
	CHECK(p(sr, "TYPE\t16400\tpublic\tmood"));
	CHECK(p(sr, "END\t0/1A03000"));
	CHECK(rec.type == SR_END);
	CHECK(p(sr, "SNAPSHOT\t0/1A03000\t00000003-00000002-1\t1"));
	CHECK(rec.type == SR_SNAPSHOT && rec.lsn == 0x1A03000);
	sr_free(sr);
}

/* Within one stream positions only grow; a new header starts over. */
static void
test_positions(void)
{
	struct streamread *sr = sr_new();

	CHECK(p(sr, HDR) && sr_promised(sr) == 0x1A00000);
	/* Below the header's start. */
	bad(sr, "BEGIN\t1\t0/19FFFFF\t2026-11-30 14:03:07.123456+00",
		"BEGIN of transaction 1 at 0/19FFFFF is below position 0/1A00000, which the stream's header start");
	CHECK(p(sr, "POSITION\t0/5000000\t2026-11-30 14:03:07.123456+00"));
	CHECK(sr_promised(sr) == 0x5000000);
	/* The reproduction: a transaction below an idle position. */
	bad(sr, BEGIN1, "below position 0/5000000, which the stream's POSITION already reached");
	bad(sr, "POSITION\t0/4FFFFFF\t2026-11-30 14:03:07.123456+00", "POSITION 0/4FFFFFF is below");
	bad(sr, "END\t0/1A00000", "END 0/1A00000 is below");
	bad(sr, "SNAPSHOT\t0/1A00000\tx\t1", "SNAPSHOT 0/1A00000 is below");
	/* Equal is fine: a transaction may commit exactly at a position. */
	CHECK(p(sr, "BEGIN\t2\t0/5000000\t2026-11-30 14:03:07.123456+00"));
	/* A COMMIT end far ahead promises everything below it. */
	CHECK(p(sr, "COMMIT\t2\t0/5000000\tA/0\t2026-11-30 14:03:07.123456+00"));
	CHECK(sr_promised(sr) == 0xA00000000ULL);
	bad(sr, "BEGIN\t3\t0/5000100\t2026-11-30 14:03:07.123456+00", "which the stream's COMMIT end already reached");
	CHECK(p(sr, "POSITION\tA/0\t2026-11-30 14:03:07.123456+00"));
	/* A new stream (a producer restarted from what was confirmed) may go back. */
	CHECK(p(sr, HDR) && sr_promised(sr) == 0x1A00000);
	CHECK(p(sr, BEGIN1));
	sr_free(sr);
}

static void
test_restart_and_redefinition(void)
{
	struct streamread *sr = in_txn();
	struct sr_rel *users;
	uint64_t gen;

	CHECK(p(sr, "INSERT\tpublic\tusers\t1\ta\tb"));
	users = rec.rel;
	gen = users->gen;
	/* A header inside a transaction: the producer restarted. */
	CHECK(p(sr, HDR));
	CHECK(rec.interrupted && rec.open_xid == 741);
	CHECK(!sr_in_txn(sr));
	/* Relations must be described again in the new stream. */
	CHECK(p(sr, BEGIN1));
	bad(sr, "INSERT\tpublic\tusers\t1\ta\tb", "before its RELATION");
	sr_free(sr);

	sr = in_txn();
	CHECK(p(sr, "INSERT\tpublic\tusers\t1\ta\tb"));
	users = rec.rel;
	gen = users->gen;
	CHECK(p(sr, "RELATION\tpublic\tusers\t16385\td\t2\tid\t23\t-1\tk\tname\t25\t-1\t-"));
	CHECK(rec.rel == users && users->gen != gen && users->ncols == 2);
	bad(sr, "INSERT\tpublic\tusers\t1\ta\tb", "INSERT has 6 fields, expected 5");
	CHECK(p(sr, "INSERT\tpublic\tusers\t1\ta"));
	/* Commit LSNs grow strictly within a stream, and restart with a header. */
	CHECK(p(sr, COMMIT1));
	bad(sr, BEGIN1, "is not after the previous one");
	CHECK(p(sr, HDR));
	CHECK(!rec.interrupted);
	CHECK(p(sr, BEGIN1));
	sr_free(sr);

	/* Many tables: the hash table grows and finds them all. */
	sr = sr_new();
	CHECK(p(sr, HDR));
	char line[256];
	int ok = 0;

	for (int i = 0; i < 300; i++)
	{
		snprintf(line, sizeof(line), "RELATION\ts\tt%d\t%d\tf\t1\tc\t23\t-1\tk", i, i + 1);
		ok += p(sr, line);
	}
	CHECK(ok == 300);
	CHECK(p(sr, BEGIN1));
	ok = 0;
	for (int i = 0; i < 300; i++)
	{
		snprintf(line, sizeof(line), "INSERT\ts\tt%d\t%d", i, i);
		ok += p(sr, line) && rec.rel->relid == (uint32_t) i + 1;
	}
	CHECK(ok == 300);
	sr_free(sr);
}

static void
test_malformed(void)
{
	struct streamread *sr = sr_new();

	bad(sr, BEGIN1, "does not start with a PGCS header");
	bad(sr, "PGCS\t2\t1\t1\ts\t0/0", "unsupported stream format version \"2\"");
	bad(sr, "PGCS\t1\t1\t1\ts\t0/0\tproducer=x\t!compressed=yes", "unsupported stream feature \"!compressed\"");
	bad(sr, "PGCS\t1\tabc\t1\ts\t0/0", "malformed system identifier");
	bad(sr, "PGCS\t1\t1\t0\ts\t0/0", "malformed timeline");
	bad(sr, "PGCS\t1\t1\t1\ts\t0/0/0", "malformed LSN in PGCS");
	bad(sr, "PGCS\t1\t1\t1\ts", "PGCS has 5 fields");
	CHECK(p(sr, "PGCS\t1\t1\t1\ts\t0/0\tfuture=1"));
	bad(sr, "", "malformed record name");
	bad(sr, "insert\tx", "malformed record name");
	bad(sr, "FROB\tx", "unknown record \"FROB\"");
	bad(sr, "ROW\t1", "ROW outside a snapshot section");
	bad(sr, "INSERT\tpublic\tusers\t1", "INSERT outside a transaction");
	bad(sr, "COMMIT\t1\t0/1\t0/2\t2026-11-30 14:03:07.123456+00", "COMMIT outside a transaction");
	bad(sr, "BEGIN\t01\t0/1\t2026-11-30 14:03:07.123456+00", "malformed xid in BEGIN");
	bad(sr, "BEGIN\t1\t0/G\t2026-11-30 14:03:07.123456+00", "malformed LSN in BEGIN");
	bad(sr, "BEGIN\t1\t0/1\t2026-11-30 14:03:07", "malformed time in BEGIN");
	bad(sr, "BEGIN\t1\t0/1", "BEGIN has 3 fields, expected 4");
	bad(sr, "POSITION\t0/1", "POSITION has 2 fields, expected 3");
	bad(sr, "MESSAGE\tt\t0/1\tp\t00", "transactional MESSAGE outside a transaction");
	bad(sr, "MESSAGE\tn\t0/1\tp\t0", "malformed content in MESSAGE");
	bad(sr, "MESSAGE\tn\t0/1\tp\tZZ", "malformed content in MESSAGE");
	bad(sr, "RELATION\tpublic\tt\t1\tx\t0", "malformed replica identity");
	bad(sr, "RELATION\tpublic\tt\t1\td\t1\tc\t23\t-1", "RELATION has 9 fields, expected 10");
	bad(sr, "RELATION\tpublic\tt\t1\td\t1\tc\t23\t-2\tk", "malformed type modifier of column 1");
	bad(sr, "RELATION\tpublic\tt\t1\td\t1\tc\t23\t-1\ty", "malformed column flags of column 1");
	bad(sr, "RELATION\tpublic\tt\t1\td\t1\t\\N\t23\t-1\tk", "malformed column name of column 1");
	bad(sr, "RELATION\t\\N\tt\t1\td\t0", "malformed schema name");
	bad(sr, "RELATION\tpublic\tt\t1\td\t99999", "malformed column count");
	bad(sr, "SNAPSHOT\t0/1\tname", "SNAPSHOT has 3 fields, expected 4");
	sr_free(sr);

	bad_in_txn("INSERT\tpublic\tusers\t1\ta", "INSERT has 5 fields, expected 6");
	bad_in_txn("INSERT\tpublic\tusers\t1\ta\tb\tc", "INSERT has 7 fields, expected 6");
	bad_in_txn("INSERT\tpublic\tusers\t1\ta\\\tb", "bad escape sequence in INSERT value 2");
	bad_in_txn("INSERT\tpublic\tusers\t1\ta\\N\tb", "bad escape sequence in INSERT value 2");
	bad_in_txn("INSERT\tpublic\tusers\t1\ta\rb\tc", "bad escape sequence in INSERT value 2");
	bad_in_txn("INSERT\tpublic\tusers\t1\t\\U\tc", "\\U in INSERT value 2");
	bad_in_txn("INSERT\tpublic\tother\t1", "INSERT for public.other before its RELATION");
	bad_in_txn("UPDATE\tpublic\tusers\tX\t1\ta\tb", "malformed old-row kind in UPDATE");
	bad_in_txn("UPDATE\tpublic\tusers\tN\t\\U\ta\tb", "\\U in key column 1 of UPDATE");
	bad_in_txn("UPDATE\tpublic\tusers\tK\t1\ta\tb", "UPDATE has 7 fields, expected 10");
	bad_in_txn("UPDATE\tpublic\tusers\tO\t1\t\\U\tb\t1\ta\tb", "\\U in UPDATE old value 2");
	bad_in_txn("DELETE\tpublic\tusers\tN\t1\ta\tb", "malformed old-row kind in DELETE");
	{
		/* A NUL byte where a kind or identity letter belongs. */
		struct streamread *sr = in_txn();
		static const char del[] = "DELETE\tpublic\tusers\t\0\t1\ta\tb";
		static const char rel[] = "RELATION\tpublic\tt\t1\t\0\t0";

		CHECK(!sr_parse(sr, del, sizeof(del) - 1, &rec));
		CHECK(!sr_parse(sr, rel, sizeof(rel) - 1, &rec));
		sr_free(sr);
	}
	bad_in_txn("DELETE\tpublic\tusers\tK\t1", "DELETE has 5 fields, expected 7");
	bad_in_txn("TRUNCATE\t-\tpublic", "TRUNCATE has 3 fields");
	bad_in_txn("TRUNCATE\tsoon\tpublic\tusers", "malformed options in TRUNCATE");
	bad_in_txn("TRUNCATE\t-\tpublic\tusers\tpublic\tnope", "TRUNCATE for public.nope before its RELATION");
	bad_in_txn(BEGIN1, "BEGIN inside transaction 741");
	bad_in_txn("COMMIT\t742\t0/1A01F20\t0/1A01F50\t2026-11-30 14:03:07.123456+00", "COMMIT of transaction 742 inside transaction 741");
	bad_in_txn("COMMIT\t741\t0/1A01F21\t0/1A01F50\t2026-11-30 14:03:07.123456+00", "differs from its BEGIN");
	bad_in_txn("COMMIT\t741\t0/1A01F20\t0/1A01F20\t2026-11-30 14:03:07.123456+00", "end LSN of transaction 741 is not after");
	bad_in_txn("POSITION\t0/1\t2026-11-30 14:03:07.123456+00", "POSITION inside transaction 741");
	bad_in_txn("END\t0/1", "END inside transaction 741");
	bad_in_txn("MESSAGE\tn\t0/1\tp\t", "non-transactional MESSAGE inside transaction 741");
	bad_in_txn("SNAPSHOT\t0/1\tx\t1", "SNAPSHOT inside transaction 741");

	/* ORIGIN is fine right after BEGIN. */
	sr = sr_new();
	CHECK(p(sr, HDR) && p(sr, BEGIN1) && p(sr, "ORIGIN\t0/5\tnode1"));
	bad(sr, "ORIGIN\t0/5\tnode1", "ORIGIN not right after a BEGIN");
	sr_free(sr);

	/* A line with more fields than any record can have. */
	sr = in_txn();
	size_t n = 7000 * 2;
	char *huge = malloc(n + 16);

	strcpy(huge, "INSERT");
	for (size_t i = 6; i < n; i += 2)
		huge[i] = '\t', huge[i + 1] = 'x';
	huge[n] = '\0';
	bad(sr, huge, "too many fields");
	free(huge);
	sr_free(sr);
}

/* Every prefix of a valid stream, and every single-byte corruption of it,
 * parses or fails cleanly (the sanitizer build turns misuse into a crash). */
static void
test_mutations(void)
{
	const char *lines[] = {HDR, REL, BEGIN1, "INSERT\tpublic\tusers\t1\ta\\tb\t\\N",
		"UPDATE\tpublic\tusers\tK\t1\t\\N\t\\N\t2\tb\t\\U", COMMIT1};
	const char noise[] = {'\t', '\\', 'N', 'U', '0', '/', '-', 'k', '\r', 'Z'};
	int parsed = 0, failed = 0;

	for (size_t l = 0; l < sizeof(lines) / sizeof(lines[0]); l++)
	{
		size_t len = strlen(lines[l]);
		char *copy = malloc(len + 1);

		for (size_t pos = 0; pos < len; pos++)
			for (size_t k = 0; k < sizeof(noise); k++)
			{
				struct streamread *sr = sr_new();

				for (size_t j = 0; j < l; j++)
					p(sr, lines[j]);
				memcpy(copy, lines[l], len + 1);
				copy[pos] = noise[k];
				if (sr_parse(sr, copy, len, &rec))
					parsed++;
				else
				{
					failed++;
					CHECK(sr_error(sr)[0] != '\0');
				}
				/* Truncated at pos. */
				if (!sr_parse(sr, lines[l], pos, &rec))
					CHECK(sr_error(sr)[0] != '\0');
				sr_free(sr);
			}
		free(copy);
	}
	CHECK(parsed > 0 && failed > 0);
}

int
main(void)
{
	test_example();
	test_restart_and_redefinition();
	test_positions();
	test_malformed();
	test_mutations();
	return unit_done("streamread_test");
}
