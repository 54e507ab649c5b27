#include "keyorder.h"
#include "buf.h"
#include "common.h"
#include "escape.h"
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Collation-free types, whose btree order is fixed by the value alone (no
 * locale, no setting; the sessions of every program also share DateStyle,
 * TimeZone and bytea_output, so values print and parse the same on both
 * sides), and the collatable ones. A type not listed is copied in one
 * piece: floats and interval (no key of theirs seen to need it), money
 * (lc_monetary), domains and extension types (their oids differ).
 */
static const struct key_type types[] = {
	{16, "pg_catalog.bool", KO_SERVER},
	{17, "pg_catalog.bytea", KO_SERVER},
	{20, "pg_catalog.int8", KO_INT},
	{21, "pg_catalog.int2", KO_INT},
	{23, "pg_catalog.int4", KO_INT},
	{25, "pg_catalog.text", KO_COLLATED},
	{26, "pg_catalog.oid", KO_SERVER},
	{1042, "pg_catalog.bpchar", KO_COLLATED},
	{1043, "pg_catalog.varchar", KO_COLLATED},
	{1082, "pg_catalog.date", KO_SERVER},
	{1083, "pg_catalog.time", KO_SERVER},
	{1114, "pg_catalog.timestamp", KO_SERVER},
	{1184, "pg_catalog.timestamptz", KO_SERVER},
	{1700, "pg_catalog.numeric", KO_SERVER},
	{2950, "pg_catalog.uuid", KO_UUID},
};

const struct key_type *
key_type_of(unsigned oid)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].oid == oid)
			return &types[i];
	return NULL;
}

static char *
take(const struct field *f, struct buf *tmp, bool *ok)
{
	bool is_null;

	buf_reset(tmp);
	if (!copy_unescape(f->p, f->n, tmp, &is_null))
	{
		*ok = false;
		return NULL;
	}
	return is_null ? NULL : xstrdup(buf_cstr(tmp));
}

/* What the reader of a key collations file keeps between its lines. */
struct kc_read {
	struct key_colls *kc;
	size_t cap;
	const char *path;
	struct buf tmp;
};

static bool
keycolls_line(void *ctx, struct field *fields, size_t nf, unsigned long lineno, char *err, size_t errlen)
{
	struct kc_read *r = ctx;
	struct key_colls *kc = r->kc;
	struct key_coll *c;
	bool ok = true;

	if (kc->n == r->cap)
	{
		r->cap = r->cap ? 2 * r->cap : 32;
		kc->c = xrealloc(kc->c, r->cap * sizeof(*kc->c));
	}
	c = &kc->c[kc->n++];
	memset(c, 0, sizeof(*c));
	if (nf != 5)
		ok = false;
	else
	{
		c->schema = take(&fields[0], &r->tmp, &ok);
		c->table = take(&fields[1], &r->tmp, &ok);
		c->column = take(&fields[2], &r->tmp, &ok);
		c->coll = take(&fields[3], &r->tmp, &ok);
		c->why = take(&fields[4], &r->tmp, &ok);
	}
	if (!ok || !c->schema || !c->table || !c->column || (!c->coll && !c->why))
	{
		snprintf(err, errlen, "--key-collations file \"%s\" line %lu: expected schema, table, column, "
				 "a collation or \\N, and why not", r->path, lineno);
		return false;
	}
	return true;
}

bool
keycolls_read(const char *path, struct key_colls *kc, char *err, size_t errlen)
{
	struct kc_read r = {.kc = kc, .path = path, .tmp = BUF_INIT};
	struct field fields[6];
	bool ok;

	memset(kc, 0, sizeof(*kc));
	ok = rec_file_read(path, "--key-collations", fields, 5, keycolls_line, &r, err, errlen);
	buf_free(&r.tmp);
	if (!ok)
		keycolls_free(kc);
	return ok;
}

void
keycolls_free(struct key_colls *kc)
{
	for (size_t i = 0; i < kc->n; i++)
	{
		free(kc->c[i].schema);
		free(kc->c[i].table);
		free(kc->c[i].column);
		free(kc->c[i].coll);
		free(kc->c[i].why);
	}
	free(kc->c);
	memset(kc, 0, sizeof(*kc));
}

const struct key_coll *
keycolls_find(const struct key_colls *kc, const char *schema, const char *table, const char *column)
{
	for (size_t i = 0; kc && i < kc->n; i++)
		if (strcmp(kc->c[i].schema, schema) == 0 && strcmp(kc->c[i].table, table) == 0 &&
			strcmp(kc->c[i].column, column) == 0)
			return &kc->c[i];
	return NULL;
}
