/* fuzz_regressions_test - inputs the fuzz targets in test/fuzz/ found to
 * break a module, kept as unit tests so they stay fixed. Each case names the
 * target that found it. */
#include "unit.h"
#include "buf.h"
#include "pgoutput.h"
#include "streamread.h"
#include "walencode.h"

#include <stdlib.h>

#define HDR "PGCS\t1\t7442718406132410263\t1\tapp_slot\t0/1A00000\tproducer=pg-walcat/0.1.0"
#define REL "RELATION\tpublic\tusers\t16385\td\t3\tid\t23\t-1\tk\tname\t25\t-1\t-\tbio\t25\t-1\t-"
#define BEGIN1 "BEGIN\t741\t0/1A01F20\t2026-11-30 14:03:07.123456+00"

static struct sr_record rec;

/* Parse len bytes (they may hold a NUL); true when accepted. */
static bool
parse(struct streamread *sr, const char *line, size_t len)
{
	return sr_parse(sr, line, len, &rec);
}

static bool
parsez(struct streamread *sr, const char *line)
{
	return parse(sr, line, strlen(line));
}

/*
 * streamread_fuzz: a one-byte field holding NUL passed strchr("KO", c),
 * which finds the string's terminator, so a DELETE, an UPDATE or a RELATION
 * with a NUL kind or identity was accepted (and applied).
 */
static void
test_nul_single_byte_fields(void)
{
	static const char del[] = "DELETE\tpublic\tusers\t\0\t2\t\\N\t\\N";
	static const char upd[] = "UPDATE\tpublic\tusers\t\0\t2\tx\ty";
	static const char rel[] = "RELATION\tpublic\tusers\t16385\t\0\t3\tid\t23\t-1\tk\tname\t25\t-1\t-\tbio\t25\t-1\t-";
	struct streamread *sr = sr_new();

	CHECK(parsez(sr, HDR) && parsez(sr, REL) && parsez(sr, BEGIN1));
	CHECK(!parse(sr, del, sizeof(del) - 1));
	CHECK(strstr(sr_error(sr), "malformed old-row kind in DELETE") != NULL);
	CHECK(!parse(sr, upd, sizeof(upd) - 1));
	CHECK(strstr(sr_error(sr), "malformed old-row kind in UPDATE") != NULL);
	CHECK(!parse(sr, rel, sizeof(rel) - 1));
	CHECK(strstr(sr_error(sr), "malformed replica identity in RELATION") != NULL);
	sr_free(sr);
}

/*
 * streamread_fuzz: the snapshot frame errors named a table by its unescaped
 * name, so a name holding a newline (written \n in the stream) broke the
 * one-line error in two. They name it as the stream writes it.
 */
static void
test_frame_error_names_one_line(void)
{
	struct streamread *sr = sr_new();

	CHECK(parsez(sr, "PGCS\t1\t1\t1\t-\t0/10") && parsez(sr, "SNAPSHOT\t0/10\tx\t1"));
	CHECK(parsez(sr, "COPY\t\\npublic\tt\\tab\t1\tid") && parsez(sr, "ROW\t1"));
	CHECK(!parsez(sr, "ENDCOPY\t2"));
	CHECK(strchr(sr_error(sr), '\n') == NULL && strchr(sr_error(sr), '\t') == NULL);
	CHECK(strstr(sr_error(sr), "ENDCOPY of \\npublic.t\\tab counts 2 rows, the frame has 1") != NULL);
	CHECK(!parsez(sr, "BEGIN\t1\t0/10\t2026-11-30 14:03:07.123456+00"));
	CHECK(strstr(sr_error(sr), "in the frame of \\npublic.t\\tab") != NULL);
	sr_free(sr);
}

/*
 * walstream_fuzz: OID 0 matched a free slot of walencode's OID maps (free
 * slots are marked by OID 0), so a change for relation 0 or a column of type
 * 0 found an empty description: memcpy from NULL, and a TRUNCATE naming no
 * table, which pg-apply rejects. No server sends OID 0, but the encoder must
 * not take it for a described relation.
 */
static void
test_oid_zero(void)
{
	struct walenc *e = walenc_new();
	struct pgo_msg *m = calloc(1, sizeof(*m));
	struct buf b = BUF_INIT;
	unsigned char relids[4] = {0, 0, 0, 0};
	char err[256] = "";

	walenc_header(e, &b, "7442718406132410263", 1, "app_slot", 0x1A00000, 150000, NULL);
	buf_reset(&b);
	/* Some type described, so that the type map has slots (free ones: OID 0). */
	m->type = PGO_TYPE;
	m->u.typ.typoid = 99999;
	m->u.typ.nspname.p = "public";
	m->u.typ.nspname.len = 6;
	m->u.typ.typname.p = "mood";
	m->u.typ.typname.len = 4;
	walenc_type(e, m);
	memset(m, 0, sizeof(*m));
	/* Relation 16385 with one column of type 0; no TYPE 0 was ever described. */
	m->type = PGO_RELATION;
	m->u.rel.relid = 16385;
	m->u.rel.nspname.p = "public";
	m->u.rel.nspname.len = 6;
	m->u.rel.relname.p = "users";
	m->u.rel.relname.len = 5;
	m->u.rel.replident = 'd';
	m->u.rel.natts = 1;
	m->attrs[0].name.p = "id";
	m->attrs[0].name.len = 2;
	m->attrs[0].typoid = 0;
	m->attrs[0].typmod = -1;
	m->attrs[0].flags = 1;
	walenc_relation(e, m);

	/* TRUNCATE of relation 0: never described, must be refused. */
	memset(m, 0, sizeof(*m));
	m->type = PGO_TRUNCATE;
	m->u.truncate.nrelids = 1;
	m->u.truncate.relids = relids;
	CHECK(!walenc_change(e, &b, m, err, sizeof(err)));
	CHECK(strstr(err, "relation 0") != NULL);

	/* INSERT into 16385: its RELATION comes first, with no empty TYPE line. */
	buf_reset(&b);
	memset(m, 0, sizeof(*m));
	m->type = PGO_INSERT;
	m->u.change.relid = 16385;
	m->newtup.ncols = 1;
	m->newtup.cols[0].kind = PGO_TEXT;
	m->newtup.cols[0].p = "1";
	m->newtup.cols[0].len = 1;
	CHECK(walenc_change(e, &b, m, err, sizeof(err)));
	CHECK(b.len > 9 && memcmp(b.data, "RELATION\t", 9) == 0);
	CHECK(b.len == 0 || memmem(b.data, b.len, "\n\n", 2) == NULL);

	buf_free(&b);
	free(m);
	walenc_free(e);
}

int
main(void)
{
	test_nul_single_byte_fields();
	test_frame_error_names_one_line();
	test_oid_zero();
	return unit_done("fuzz_regressions");
}
