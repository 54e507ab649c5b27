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

/* --- snapshot sections --------------------------------------------------- */

#define SHDR "PGCS\t1\t7442718406132410263\t1\tapp_slot\t0/1A00000\tproducer=pg-snapshot-dump/0.1.0\tserver=170002"
#define SNAP "SNAPSHOT\t0/1A00000\t00000003-00000002-1\t2"
#define COPYU "COPY\tpublic\tusers\t3\tid\tname\tbio"

/* A reader after the lines given, each of which must parse. */
static struct streamread *
after(const char *const *lines)
{
	struct streamread *sr = sr_new();

	for (; *lines; lines++)
		if (!p(sr, *lines))
			fprintf(stderr, "setup failed at \"%s\": %s\n", *lines, sr_error(sr)), unit_failed++;
	return sr;
}

static const char *const in_section[] = {SHDR, SNAP, NULL};
static const char *const in_frame[] = {SHDR, SNAP, COPYU, "ROW\t3\tGrace\t\\N", NULL};

/* Each line is rejected with want, in a fresh reader after the lines given. */
static void
bad_after(const char *const *lines, const char *line, const char *want)
{
	struct streamread *sr = after(lines);

	bad(sr, line, want);
	sr_free(sr);
}

/* formats/stream-v1.md's example, record by record. */
static void
test_section_example(void)
{
	struct streamread *sr = sr_new();
	struct sr_table *users;

	CHECK(p(sr, SHDR));
	CHECK(rec.server.n == 6 && memcmp(rec.server.p, "170002", 6) == 0);
	CHECK(!sr_in_section(sr));
	CHECK(p(sr, SNAP));
	CHECK(rec.type == SR_SNAPSHOT && rec.lsn == 0x1A00000 && rec.ntables == 2);
	CHECK(sr_in_section(sr));
	CHECK(p(sr, COPYU));
	CHECK(rec.type == SR_COPY && rec.table != NULL);
	users = rec.table;
	CHECK_STR(users->schema, "public");
	CHECK_STR(users->table, "users");
	CHECK(users->ncols == 3 && rec.colnames[0].n == 2 && memcmp(rec.colnames[2].p, "bio", 3) == 0);
	users->user = &rec;			/* consumer data survives */
	CHECK(p(sr, "ROW\t3\tGrace\t\\N"));
	CHECK(rec.type == SR_ROW && rec.table == users && rec.nf == 1);
	CHECK(rec.copy_len == strlen("3\tGrace\t\\N") && strncmp(rec.copy_row, "3\tGrace\t\\N", rec.copy_len) == 0);
	CHECK(p(sr, "ROW\t4\t\\\\N is not NULL\t"));
	CHECK(p(sr, "ENDCOPY\t2"));
	CHECK(rec.type == SR_ENDCOPY && rec.table == users && rec.nrows == 2);
	/* COPY text: "3\tGrace\t\\N\n" and "4\t\\\\N is not NULL\t\n" */
	CHECK(rec.nbytes == 11 + 19);
	CHECK(p(sr, "TABLEDONE\tpublic\tusers\t2\t30"));
	CHECK(rec.type == SR_TABLEDONE && rec.table == users && rec.nrows == 2 && rec.nbytes == 30);
	CHECK(users->done && users->user == &rec);
	/* A table without rows gets no frame, only its TABLEDONE. */
	CHECK(p(sr, "TABLEDONE\tpublic\tempty\t0\t0"));
	CHECK(rec.table != users && rec.table->done && rec.table->cols == NULL);
	CHECK(p(sr, "SNAPSHOTDONE\t0/1A00000"));
	CHECK(rec.type == SR_SNAPSHOTDONE && rec.lsn == 0x1A00000);
	CHECK(!sr_in_section(sr));
	/* The section's tables stay valid for the loader that finishes. */
	CHECK_STR(users->table, "users");
	/* The change stream continues from the snapshot's position. */
	CHECK(p(sr, "RELATION\tpublic\tusers\t16385\td\t1\tid\t23\t-1\tk"));
	CHECK(p(sr, "BEGIN\t741\t0/1A01F20\t2026-11-30 14:03:07.123456+00"));
	CHECK(p(sr, "INSERT\tpublic\tusers\t1"));
	CHECK(p(sr, "COMMIT\t741\t0/1A01F20\t0/1A01F50\t2026-11-30 14:03:07.123456+00"));
	sr_free(sr);
}

/* Frames of several tables interleave; each table keeps one object and
 * counts the rows and bytes of all its frames. A table of no columns has
 * bare ROW lines. */
static void
test_section_frames(void)
{
	const char *const lines[] = {SHDR, SNAP, NULL};
	struct streamread *sr = after(lines);
	struct sr_table *a, *e;

	CHECK(p(sr, "COPY\tpublic\ta\t1\tid"));
	a = rec.table;
	CHECK(p(sr, "ROW\t1") && p(sr, "ENDCOPY\t1"));
	CHECK(p(sr, "COPY\tpublic\te\t0"));
	e = rec.table;
	CHECK(e != a && e->ncols == 0);
	CHECK(p(sr, "ROW") && rec.copy_len == 0);
	CHECK(p(sr, "ROW") && p(sr, "ENDCOPY\t2") && rec.nbytes == 2);
	CHECK(p(sr, "COPY\tpublic\ta\t1\tid") && rec.table == a);
	CHECK(p(sr, "ROW\t22") && p(sr, "ROW\t333") && p(sr, "ENDCOPY\t2"));
	CHECK(rec.nrows == 2 && rec.nbytes == 7);
	CHECK(a->rows == 3 && a->bytes == 9);
	CHECK(p(sr, "COPY\tpublic\ta\t1\tid") && p(sr, "ENDCOPY\t0"));
	bad(sr, "TABLEDONE\tpublic\ta\t3\t10", "TABLEDONE of public.a counts 3 rows and 10 bytes, its frames had 3 and 9");
	CHECK(p(sr, "TABLEDONE\tpublic\ta\t3\t9"));
	CHECK(p(sr, "TABLEDONE\tpublic\te\t2\t2"));
	bad(sr, "SNAPSHOTDONE\t0/1A00001", "SNAPSHOTDONE position differs from its SNAPSHOT");
	CHECK(p(sr, "SNAPSHOTDONE\t0/1A00000"));
	/* A new section has tables of its own. */
	CHECK(p(sr, "SNAPSHOT\t0/1A00000\tx\t1"));
	CHECK(p(sr, "COPY\tpublic\ta\t1\tid") && !rec.table->done && rec.table->rows == 0);
	sr_free(sr);
}

/* Where each record may stand. */
static void
test_section_places(void)
{
	const char *const stream[] = {SHDR, NULL};
	const char *const in_txn[] = {SHDR, "BEGIN\t741\t0/1A01F20\t2026-11-30 14:03:07.123456+00", NULL};

	bad_after(stream, "ROW\t1", "ROW outside a snapshot section");
	bad_after(stream, "COPY\tpublic\tusers\t1\tid", "COPY outside a snapshot section");
	bad_after(stream, "ENDCOPY\t0", "ENDCOPY outside a snapshot section");
	bad_after(stream, "TABLEDONE\tpublic\tusers\t0\t0", "TABLEDONE outside a snapshot section");
	bad_after(stream, "SNAPSHOTDONE\t0/1A00000", "SNAPSHOTDONE outside a snapshot section");
	bad_after(in_txn, "SNAPSHOT\t0/1A00000\tx\t1", "SNAPSHOT inside transaction 741");

	bad_after(in_section, "BEGIN\t741\t0/1A01F20\t2026-11-30 14:03:07.123456+00",
			  "unexpected BEGIN record inside the snapshot section");
	bad_after(in_section, SHDR, "unexpected PGCS record inside the snapshot section");
	bad_after(in_section, "SNAPSHOT\t0/1A00000\tx\t1", "unexpected SNAPSHOT record inside the snapshot section");
	bad_after(in_section, "ROW\t1", "unexpected ROW record inside the snapshot section");
	bad_after(in_section, "ENDCOPY\t0", "unexpected ENDCOPY record inside the snapshot section");
	bad_after(in_section, "NOSUCHRECORDATALLXYZ\t1", "unexpected NOSUCHRECORDATAL record inside");
	bad_after(in_section, "copy\tpublic\tusers\t0", "malformed record inside the snapshot section");
	bad_after(in_section, "", "malformed record inside the snapshot section");

	bad_after(in_frame, "TABLEDONE\tpublic\tusers\t1\t12", "expected ROW or ENDCOPY in the frame of public.users");
	bad_after(in_frame, COPYU, "expected ROW or ENDCOPY in the frame of public.users");
	bad_after(in_frame, "SNAPSHOTDONE\t0/1A00000", "expected ROW or ENDCOPY in the frame of public.users");
	bad_after(in_frame, "POSITION\t0/1A03000\t2026-11-30 14:03:19.000000+00", "expected ROW or ENDCOPY in the frame of");
	bad_after(in_frame, "", "expected ROW or ENDCOPY in the frame of public.users");
	bad_after(in_frame, "ROWS\t1", "expected ROW or ENDCOPY in the frame of public.users");
	/* A bare ROW is a row of no values: only for a table of no columns. */
	bad_after(in_frame, "ROW", "expected ROW or ENDCOPY in the frame of public.users");
	{
		const char *const empty[] = {SHDR, SNAP, "COPY\tpublic\te\t0", NULL};

		bad_after(empty, "ROW\t1", "expected ROW or ENDCOPY in the frame of public.e");
		bad_after(empty, "ROW\t", "expected ROW or ENDCOPY in the frame of public.e");
	}
}

/* Malformed section records, each naming what is wrong. */
static void
test_section_malformed(void)
{
	const char *const stream[] = {SHDR, NULL};
	const char *const done[] = {SHDR, SNAP, COPYU, "ENDCOPY\t0", "TABLEDONE\tpublic\tusers\t0\t0", NULL};
	const char *const framed[] = {SHDR, SNAP, COPYU, "ENDCOPY\t0", NULL};

	bad_after(stream, "SNAPSHOT\t0/1A00000\tx", "SNAPSHOT has 3 fields, expected 4");
	bad_after(stream, "SNAPSHOT\tnope\tx\t1", "malformed LSN in SNAPSHOT");
	bad_after(stream, "SNAPSHOT\t0/1A00000\tx\t-1", "malformed table count in SNAPSHOT");
	bad_after(stream, "SNAPSHOT\t0/1A00000\tbad\\N\t1", "malformed snapshot name in SNAPSHOT");
	bad_after(stream, "SNAPSHOT\t0/19FFFFF\tx\t1", "SNAPSHOT 0/19FFFFF is below position 0/1A00000");

	bad_after(in_section, "COPY\tpublic\tusers", "malformed COPY record: expected schema, table, a column count");
	bad_after(in_section, "COPY\tpublic\tusers\t2\tid", "malformed COPY record");
	bad_after(in_section, "COPY\tpublic\tusers\t1\tid\tname", "malformed COPY record");
	bad_after(in_section, "COPY\tpublic\tusers\tx", "malformed COPY record");
	bad_after(in_section, "COPY\t\\N\tusers\t1\tid", "malformed schema or table name");
	bad_after(in_section, "COPY\tpublic\tbad\\x\t1\tid", "malformed schema or table name");
	bad_after(in_section, "COPY\tpublic\tusers\t1\t\\N", "malformed column name in the frame of public.users");
	bad_after(in_section, "COPY\tpublic\tusers\t1\tnul\\0", "malformed column name in the frame of public.users");
	bad_after(framed, "COPY\tpublic\tusers\t2\tid\tname", "frame of public.users names other columns than its first frame");
	bad_after(done, COPYU, "frame of public.users after its TABLEDONE");
	bad_after(done, "TABLEDONE\tpublic\tusers\t0\t0", "second TABLEDONE for public.users");

	bad_after(in_frame, "ENDCOPY", "malformed ENDCOPY record in the frame of public.users");
	bad_after(in_frame, "ENDCOPY\tone", "malformed ENDCOPY record in the frame of public.users");
	bad_after(in_frame, "ENDCOPY\t1\t2", "malformed ENDCOPY record in the frame of public.users");
	bad_after(in_frame, "ENDCOPY\t2", "ENDCOPY of public.users counts 2 rows, the frame has 1");

	bad_after(in_section, "TABLEDONE\tpublic\tusers\t0", "malformed TABLEDONE record: expected schema, table, rows and bytes");
	bad_after(in_section, "TABLEDONE\tpublic\tusers\t0\tx", "malformed TABLEDONE record");
	bad_after(in_section, "TABLEDONE\tpublic\tusers\t1\t1", "TABLEDONE of public.users counts 1 rows and 1 bytes, its frames had 0 and 0");
	bad_after(in_section, "SNAPSHOTDONE", "malformed SNAPSHOTDONE record: expected a position");
	bad_after(in_section, "SNAPSHOTDONE\t0/1A00000\tx", "malformed SNAPSHOTDONE record");
}

/* What pg-apply looks at before it parses a line, and a rewind (a replay
 * after a lost target session) that leaves a section. */
static void
test_section_helpers(void)
{
	struct streamread *sr = after(in_frame);
	struct sr_mark m = {0};

	CHECK(sr_line_is("PGCS\t1", 6, SR_HEADER));
	CHECK(!sr_line_is("PGCS", 4, SR_HEADER));
	CHECK(!sr_line_is("PGCSX\t1", 7, SR_HEADER));
	CHECK(sr_line_is("SNAPSHOTDONE\t0/1", 16, SR_SNAPSHOTDONE));
	CHECK(!sr_line_is("SNAPSHOT\t0/1", 12, SR_SNAPSHOTDONE));
	CHECK(sr_line_has_position("BEGIN\t1", 7) && sr_line_has_position("END\t0/1", 7) &&
		  sr_line_has_position("POSITION\t0/1", 12));
	CHECK(!sr_line_has_position("BEGIN", 5) && !sr_line_has_position("ENDCOPY\t1", 9) &&
		  !sr_line_has_position("COMMIT\t1", 8));
	CHECK_STR(sr_type_name(SR_TABLEDONE), "TABLEDONE");
	CHECK_STR(sr_type_name(SR_HEADER), "PGCS");

	CHECK(sr_in_section(sr));
	sr_rewind(sr, &m);
	CHECK(!sr_in_section(sr));
	CHECK(p(sr, "POSITION\t0/1A03000\t2026-11-30 14:03:19.000000+00"));
	sr_free(sr);
}

/* Chunk sections: CHUNKS .. CHUNKSDONE, a CHUNK before each frame of a
 * table copied in key chunks, none before a table copied in one piece. */
#define CHUNKS "CHUNKS\t0/1A04000\t00000005-00000004-1\t2"
#define CHUNK1 "CHUNK\tpublic\tusers\t1\tid\t2\t4"

static const char *const in_chunks[] = {SHDR, CHUNKS, NULL};

static void
test_chunk_sections(void)
{
	const char *const chunk_read[] = {SHDR, CHUNKS, CHUNK1, NULL};
	const char *const snapshot[] = {SHDR, SNAP, NULL};
	const char *const one_piece[] = {SHDR, CHUNKS, "COPY\tpublic\tlog\t1\tline", "ENDCOPY\t0", NULL};
	const char *const keyed_done[] = {SHDR, CHUNKS, CHUNK1, COPYU, "ENDCOPY\t0",
		"TABLEDONE\tpublic\tusers\t0\t0", NULL};
	struct streamread *sr = after(in_chunks);
	struct sr_table *users;

	/* formats/example-chunks.pgcs */
	CHECK(sr_in_section(sr));
	CHECK(p(sr, CHUNK1));
	CHECK(rec.type == SR_CHUNK && rec.nkey == 1 && rec.table->keyed);
	CHECK(rec.key_cols[0].n == 2 && rec.lo[0].p[0] == '2' && rec.hi[0].p[0] == '4');
	users = rec.table;
	CHECK(p(sr, COPYU) && rec.table == users);
	CHECK(p(sr, "ROW\t3\tGrace\t\\N") && p(sr, "ROW\t4\t\\\\N is not NULL\t") && p(sr, "ENDCOPY\t2"));
	CHECK(p(sr, "CHUNK\tpublic\tusers\t1\tid\t4\t\\N") && rec.hi[0].n == 2);
	CHECK(p(sr, COPYU) && p(sr, "ENDCOPY\t0"));
	CHECK(p(sr, "TABLEDONE\tpublic\tusers\t2\t30"));
	CHECK(p(sr, "COPY\tpublic\tlog\t1\tline") && !rec.table->keyed);
	CHECK(p(sr, "ROW\tstarted") && p(sr, "ENDCOPY\t1") && p(sr, "TABLEDONE\tpublic\tlog\t1\t8"));
	/* All its chunks came in earlier sections: a table named first by its
	 * TABLEDONE is copied in key chunks. */
	CHECK(p(sr, "TABLEDONE\tpublic\tearlier\t0\t0") && rec.table->keyed);
	bad(sr, "CHUNKSDONE\t0/1A04001", "CHUNKSDONE position differs from its CHUNKS");
	CHECK(p(sr, "CHUNKSDONE\t0/1A04000") && rec.type == SR_CHUNKSDONE && rec.lsn == 0x1A04000);
	CHECK(!sr_in_section(sr));
	/* A chunk section promises nothing: the stream goes on from the job's
	 * position, below it. */
	CHECK(sr_promised(sr) == 0x1A00000);
	CHECK(p(sr, "POSITION\t0/1A01000\t2026-11-30 14:03:19.000000+00"));
	sr_free(sr);

	bad_after(snapshot, CHUNK1, "CHUNK outside a chunk section");
	bad_after(snapshot, "CHUNKSDONE\t0/1A00000", "unexpected CHUNKSDONE record inside the snapshot section");
	bad_after(in_chunks, "SNAPSHOTDONE\t0/1A04000", "unexpected SNAPSHOTDONE record inside the snapshot section");
	bad_after(in_chunks, "CHUNKS\t0/1A04000\tx\t1", "unexpected CHUNKS record inside the snapshot section");
	bad_after(in_chunks, "CHUNKS", "unexpected CHUNKS record inside the snapshot section");
	bad_after(in_frame, CHUNK1, "expected ROW or ENDCOPY in the frame of public.users");
	bad_after(in_chunks, "CHUNKSDONE", "malformed CHUNKSDONE record: expected a position");
	bad_after(chunk_read, "CHUNKSDONE\t0/1A04000", "CHUNKSDONE after a CHUNK: expected its frame");
	bad_after(chunk_read, CHUNK1, "CHUNK after a CHUNK: expected its frame");
	bad_after(chunk_read, "COPY\tpublic\tlog\t1\tline", "frame of public.log after a CHUNK of another table");
	bad_after(keyed_done, CHUNK1, "CHUNK of public.users after its TABLEDONE");
	bad_after(one_piece, "CHUNK\tpublic\tlog\t1\tline\t\\N\t\\N", "CHUNK of public.log, which this section copies in one piece");
	{
		const char *const no_chunk[] = {SHDR, CHUNKS, CHUNK1, COPYU, "ENDCOPY\t0", NULL};

		bad_after(no_chunk, COPYU, "frame of public.users without its CHUNK");
	}
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t0", "malformed CHUNK record: expected schema, table, a key column count");
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t1\tid\t2", "malformed CHUNK record");
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t33", "malformed CHUNK record");
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t2\ta\tb\t1\t\\N\t\\N\t\\N",
			  "malformed CHUNK of public.users: a bad value, or a bound with some but not all values \\N");
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t1\t\\N\t1\t2", "malformed CHUNK of public.users");
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t1\tid\t\\U\t2", "malformed CHUNK of public.users");
	bad_after(in_chunks, "CHUNK\tpublic\tusers\t1\tid\t1\tbad\\", "malformed CHUNK of public.users");
	{
		const char *const txn[] = {SHDR, "BEGIN\t741\t0/1A01F20\t2026-11-30 14:03:07.123456+00", NULL};

		bad_after(txn, CHUNKS, "CHUNKS inside transaction 741");
	}
	{
		const char *const none[] = {NULL};

		bad_after(none, CHUNKS, "stream does not start with a PGCS header");
	}
	{
		const char *const hdr[] = {SHDR, NULL};

		bad_after(hdr, "CHUNKS\t0/1A04000\tbad\\N\t2", "malformed snapshot name in CHUNKS");
		bad_after(hdr, "CHUNKS\t0/1A04000\tx\ttwo", "malformed table count in CHUNKS");
		bad_after(hdr, CHUNK1, "CHUNK outside a snapshot section");
		bad_after(hdr, "CHUNKSDONE\t0/1A04000", "CHUNKSDONE outside a snapshot section");
	}
}

int
main(void)
{
	test_example();
	test_restart_and_redefinition();
	test_positions();
	test_malformed();
	test_mutations();
	test_section_example();
	test_section_frames();
	test_section_places();
	test_section_malformed();
	test_section_helpers();
	test_chunk_sections();
	return unit_done("streamread_test");
}
