/*
 * The stream parser's core: the table of records and the dispatch through
 * it, and the records of the stream's own structure (header, transaction
 * bounds, messages, positions). Changes are in srchange.c, snapshot and
 * chunk sections in srsection.c, what all of them use in srtoken.c.
 */
#include "srchange.h"
#include "srsection.h"
#include "srtoken.h"
#include "streamread.h"
#include "common.h"
#include "escape.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct streamread *
sr_new(void)
{
	struct streamread *sr = xcalloc(1, sizeof(*sr));

	sr->f = xmalloc(sizeof(struct field) * (SR_MAX_FIELDS + 1));
	sr->section = -1;
	return sr;
}

void
sr_free(struct streamread *sr)
{
	if (sr == NULL)
		return;
	sr_rels_free(sr);
	sr_section_close(sr);
	free(sr->trunc);
	free(sr->f);
	buf_free(&sr->tmp);
	free(sr);
}

const char *
sr_error(const struct streamread *sr)
{
	return sr->err;
}

bool
sr_in_txn(const struct streamread *sr)
{
	return sr->in_txn;
}

uint64_t
sr_txn_xid(const struct streamread *sr)
{
	return sr->xid;
}

bool
sr_in_section(const struct streamread *sr)
{
	return sr->section >= 0;
}

void
sr_mark(const struct streamread *sr, struct sr_mark *m)
{
	m->have_last = sr->have_last;
	m->last_commit_lsn = sr->last_commit_lsn;
	m->promised = sr->promised;
	m->promised_by = sr->promised_by;
}

void
sr_rewind(struct streamread *sr, const struct sr_mark *m)
{
	sr->in_txn = false;
	sr->after_begin = false;
	sr->have_last = m->have_last;
	sr->last_commit_lsn = m->last_commit_lsn;
	sr->promised = m->promised;
	sr->promised_by = m->promised_by;
	sr_section_close(sr);
}

bool
sr_started(const struct streamread *sr)
{
	return sr->started;
}

const char *
sr_rel_name(const struct sr_rel *rel, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s", rel->schema, rel->table);
	return buf;
}

/* "YYYY-MM-DD HH:MM:SS.ffffff+00", as the spec writes times. */
static bool
get_time(struct streamread *sr, const struct field *f, const char *rec)
{
	static const char pat[] = "dddd-dd-dd dd:dd:dd.dddddd+00";

	if (f->n != sizeof(pat) - 1)
		return sr_fail(sr, "malformed time in %s", rec);
	for (size_t i = 0; i < f->n; i++)
		if (pat[i] == 'd' ? (f->p[i] < '0' || f->p[i] > '9') : f->p[i] != pat[i])
			return sr_fail(sr, "malformed time in %s", rec);
	return true;
}

lsn_t
sr_promised(const struct streamread *sr)
{
	return sr->promised;
}


/* One record type: its name, where it may stand, and its handler (which
 * finds the type in rec->type, so one handler may serve several). split is
 * false for a record whose fields are left unsplit (ROW: a COPY row). */
struct sr_kind {
	const char *name;
	size_t namelen;
	enum sr_type type;
	unsigned where;
	bool split;
	bool (*parse)(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
};

/* --- records ----------------------------------------------------------- */

static bool
parse_header(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	uint64_t v;
	char *slot;

	if (rec->nf < 6)
		return sr_fail(sr, "PGCS has %zu fields, expected at least 6", rec->nf);
	if (!field_eq(&f[1], "1"))
		return sr_fail(sr, "unsupported stream format version \"%.*s\"",
					(int) (f[1].n > 16 ? 16 : f[1].n), f[1].p);
	if (!field_u64(&f[2], &v) || f[2].n >= sizeof(rec->sysid))
		return sr_fail(sr, "malformed system identifier in PGCS");
	memcpy(rec->sysid, f[2].p, f[2].n);
	rec->sysid[f[2].n] = '\0';
	if (!sr_get_u64(sr, &f[3], "PGCS", "timeline", UINT32_MAX, &v))
		return false;
	if (v == 0)
		return sr_fail(sr, "malformed timeline in PGCS");
	rec->timeline = (uint32_t) v;
	if ((slot = sr_name_dup(sr, &f[4])) == NULL || slot[0] == '\0' ||
		strlen(slot) >= sizeof(rec->slot) || strpbrk(slot, "\n\r") != NULL)
	{
		free(slot);
		return sr_fail(sr, "malformed slot name in PGCS");
	}
	strcpy(rec->slot, slot);
	free(slot);
	if (!sr_get_lsn(sr, &f[5], "PGCS", &rec->lsn))
		return false;
	for (size_t i = 6; i < rec->nf; i++)
	{
		if (!sr_value_ok(&f[i], false))
			return sr_fail(sr, "malformed feature %zu in PGCS", i - 5);
		if (f[i].n >= 7 && memcmp(f[i].p, "server=", 7) == 0)
			rec->server = (struct field) {f[i].p + 7, f[i].n - 7};
		if (f[i].n >= 8 && memcmp(f[i].p, "history=", 8) == 0)
			rec->history = (struct field) {f[i].p + 8, f[i].n - 8};
		/* A "!" feature changes the meaning of the stream: never guess. */
		if (f[i].n > 0 && f[i].p[0] == '!')
		{
			const char *eq = memchr(f[i].p, '=', f[i].n);
			size_t n = eq ? (size_t) (eq - f[i].p) : f[i].n;

			return sr_fail(sr, "unsupported stream feature \"%.*s\"", (int) (n > 64 ? 64 : n), f[i].p);
		}
	}

	rec->interrupted = sr->in_txn;
	rec->open_xid = sr->in_txn ? sr->xid : 0;
	sr->started = true;
	sr->in_txn = false;
	sr->after_begin = false;
	sr->have_last = false;
	sr->promised = rec->lsn;
	sr->promised_by = "header start";
	/* A new stream describes its tables again before using them. */
	sr_rels_undefine(sr);
	return true;
}

static bool
parse_begin(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;

	if (sr->in_txn)
		return sr_fail(sr, "BEGIN inside transaction %llu", (unsigned long long) sr->xid);
	if (!sr_nfields(sr, rec->nf, 4, "BEGIN") ||
		!sr_get_u64(sr, &f[1], "BEGIN", "xid", UINT64_MAX, &rec->xid) ||
		!sr_get_lsn(sr, &f[2], "BEGIN", &rec->lsn) ||
		!get_time(sr, &f[3], "BEGIN"))
		return false;
	if (sr->have_last && rec->lsn <= sr->last_commit_lsn)
	{
		char a[LSN_BUFSZ], b[LSN_BUFSZ];

		return sr_fail(sr, "commit LSN %s of transaction %llu is not after the previous one (%s)",
					lsn_format(rec->lsn, a), (unsigned long long) rec->xid,
					lsn_format(sr->last_commit_lsn, b));
	}
	if (rec->lsn < sr->promised)
	{
		char what[64];

		snprintf(what, sizeof(what), "BEGIN of transaction %llu at", (unsigned long long) rec->xid);
		return sr_not_below(sr, rec->lsn, what);
	}
	rec->time = f[3];
	sr->in_txn = true;
	sr->after_begin = true;
	sr->xid = rec->xid;
	sr->commit_lsn = rec->lsn;
	return true;
}

static bool
parse_commit(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;

	if (!sr->in_txn)
		return sr_fail(sr, "COMMIT outside a transaction");
	if (!sr_nfields(sr, rec->nf, 5, "COMMIT") ||
		!sr_get_u64(sr, &f[1], "COMMIT", "xid", UINT64_MAX, &rec->xid) ||
		!sr_get_lsn(sr, &f[2], "COMMIT", &rec->lsn) ||
		!sr_get_lsn(sr, &f[3], "COMMIT", &rec->end_lsn) ||
		!get_time(sr, &f[4], "COMMIT"))
		return false;
	if (rec->xid != sr->xid)
		return sr_fail(sr, "COMMIT of transaction %llu inside transaction %llu",
					(unsigned long long) rec->xid, (unsigned long long) sr->xid);
	if (rec->lsn != sr->commit_lsn)
		return sr_fail(sr, "COMMIT LSN of transaction %llu differs from its BEGIN",
					(unsigned long long) rec->xid);
	if (rec->end_lsn <= rec->lsn)
		return sr_fail(sr, "end LSN of transaction %llu is not after its commit LSN",
					(unsigned long long) rec->xid);
	rec->time = f[4];
	sr->in_txn = false;
	sr->after_begin = false;
	sr->last_commit_lsn = rec->lsn;
	sr->have_last = true;
	sr_promise(sr, rec->end_lsn, "COMMIT end");
	return true;
}

static bool
parse_message(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;

	if (!sr_nfields(sr, rec->nf, 5, "MESSAGE"))
		return false;
	if (field_eq(&f[1], "t"))
		rec->transactional = true;
	else if (field_eq(&f[1], "n"))
		rec->transactional = false;
	else
		return sr_fail(sr, "malformed kind in MESSAGE");
	if (rec->transactional && !sr->in_txn)
		return sr_fail(sr, "transactional MESSAGE outside a transaction");
	if (!rec->transactional && sr->in_txn)
		return sr_fail(sr, "non-transactional MESSAGE inside transaction %llu",
					(unsigned long long) sr->xid);
	if (!sr_get_lsn(sr, &f[2], "MESSAGE", &rec->lsn))
		return false;
	if (!sr_value_ok(&f[3], false) || field_is_null(f[3].p, f[3].n))
		return sr_fail(sr, "malformed prefix in MESSAGE");
	if (f[4].n % 2 != 0)
		return sr_fail(sr, "malformed content in MESSAGE");
	for (size_t i = 0; i < f[4].n; i++)
		if (!((f[4].p[i] >= '0' && f[4].p[i] <= '9') || (f[4].p[i] >= 'a' && f[4].p[i] <= 'f')))
			return sr_fail(sr, "malformed content in MESSAGE");
	return true;
}

/* POSITION and END: a position outside transactions, and a promise. */
static bool
parse_position(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	bool end = rec->type == SR_END;
	const char *name = end ? "END" : "POSITION";
	struct field *f = sr->f;

	if (sr->in_txn)
		return sr_fail(sr, "%s inside transaction %llu", name, (unsigned long long) sr->xid);
	if (!sr_nfields(sr, rec->nf, end ? 2 : 3, name) ||
		!sr_get_lsn(sr, &f[1], name, &rec->lsn))
		return false;
	if (!end)
	{
		if (!get_time(sr, &f[2], name))
			return false;
		rec->time = f[2];
	}
	if (!sr_not_below(sr, rec->lsn, name))
		return false;
	sr_promise(sr, rec->lsn, name);
	return true;
}

static bool
parse_type(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	uint64_t oid;

	if (!sr_nfields(sr, rec->nf, 4, "TYPE") ||
		!sr_get_u64(sr, &f[1], "TYPE", "type oid", UINT32_MAX, &oid))
		return false;
	if (!sr_value_ok(&f[2], false) || !sr_value_ok(&f[3], false))
		return sr_fail(sr, "malformed name in TYPE");
	return true;
}

static bool
parse_origin(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;

	if (!sr->origin_allowed)
		return sr_fail(sr, "ORIGIN not right after a BEGIN");
	if (!sr_nfields(sr, rec->nf, 3, "ORIGIN") || !sr_get_lsn(sr, &f[1], "ORIGIN", &rec->lsn))
		return false;
	if (!sr_value_ok(&f[2], false))
		return sr_fail(sr, "malformed origin name in ORIGIN");
	return true;
}

/* --- the grammar ------------------------------------------------------- */

/*
 * Every record of the format: its name, where it may stand, whether its
 * fields are split, its handler. sr_parse() finds the entry by name and
 * rejects a record in a place its entry does not name; the handler checks
 * the fields and the order within that place. The most frequent records
 * come first: the rows of a snapshot frame, then the changes.
 */
static const struct sr_kind kinds[] = {
	{REC_ROW, sizeof(REC_ROW) - 1, SR_ROW, SR_AT_FRAME, false, sr_parse_row},
	{REC_INSERT, sizeof(REC_INSERT) - 1, SR_INSERT, SR_AT_STREAM, true, sr_parse_insert},
	{REC_UPDATE, sizeof(REC_UPDATE) - 1, SR_UPDATE, SR_AT_STREAM, true, sr_parse_update_delete},
	{REC_DELETE, sizeof(REC_DELETE) - 1, SR_DELETE, SR_AT_STREAM, true, sr_parse_update_delete},
	{REC_BEGIN, sizeof(REC_BEGIN) - 1, SR_BEGIN, SR_AT_STREAM, true, parse_begin},
	{REC_COMMIT, sizeof(REC_COMMIT) - 1, SR_COMMIT, SR_AT_STREAM, true, parse_commit},
	{REC_HEADER, sizeof(REC_HEADER) - 1, SR_HEADER, SR_AT_STREAM, true, parse_header},
	{REC_RELATION, sizeof(REC_RELATION) - 1, SR_RELATION, SR_AT_STREAM, true, sr_parse_relation},
	{REC_TYPE, sizeof(REC_TYPE) - 1, SR_TYPE, SR_AT_STREAM, true, parse_type},
	{REC_ORIGIN, sizeof(REC_ORIGIN) - 1, SR_ORIGIN, SR_AT_STREAM, true, parse_origin},
	{REC_TRUNCATE, sizeof(REC_TRUNCATE) - 1, SR_TRUNCATE, SR_AT_STREAM, true, sr_parse_truncate},
	{REC_MESSAGE, sizeof(REC_MESSAGE) - 1, SR_MESSAGE, SR_AT_STREAM, true, parse_message},
	{REC_POSITION, sizeof(REC_POSITION) - 1, SR_POSITION, SR_AT_STREAM, true, parse_position},
	{REC_END, sizeof(REC_END) - 1, SR_END, SR_AT_STREAM, true, parse_position},
	{REC_SNAPSHOT, sizeof(REC_SNAPSHOT) - 1, SR_SNAPSHOT, SR_AT_STREAM, true, sr_parse_snapshot},
	{REC_COPY, sizeof(REC_COPY) - 1, SR_COPY, SR_AT_SECTION, true, sr_parse_copy},
	{REC_ENDCOPY, sizeof(REC_ENDCOPY) - 1, SR_ENDCOPY, SR_AT_FRAME, true, sr_parse_endcopy},
	{REC_TABLEDONE, sizeof(REC_TABLEDONE) - 1, SR_TABLEDONE, SR_AT_SECTION, true, sr_parse_tabledone},
	{REC_SNAPSHOTDONE, sizeof(REC_SNAPSHOTDONE) - 1, SR_SNAPSHOTDONE, SR_AT_SECTION, true, sr_parse_section_end},
	{REC_CHUNKS, sizeof(REC_CHUNKS) - 1, SR_CHUNKS, SR_AT_STREAM, true, sr_parse_chunks},
	{REC_CHUNK, sizeof(REC_CHUNK) - 1, SR_CHUNK, SR_AT_SECTION, true, sr_parse_chunk},
	{REC_CHUNKSDONE, sizeof(REC_CHUNKSDONE) - 1, SR_CHUNKSDONE, SR_AT_SECTION, true, sr_parse_section_end},
};

#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* The record name of a line: the bytes before its first TAB. */
static struct field
line_name(const char *line, size_t len)
{
	const char *tab = memchr(line, '\t', len);

	return (struct field) {line, tab ? (size_t) (tab - line) : len};
}

static const struct sr_kind *
kind_named(const struct field *name)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].namelen == name->n && memcmp(kinds[i].name, name->p, name->n) == 0)
			return &kinds[i];
	return NULL;
}

const char *
sr_type_name(enum sr_type type)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].type == type)
			return kinds[i].name;
	return "?";
}

bool
sr_line_is(const char *line, size_t len, enum sr_type type)
{
	struct field name = line_name(line, len);
	const struct sr_kind *k = kind_named(&name);

	return k != NULL && k->type == type && name.n < len;
}

bool
sr_line_has_position(const char *line, size_t len)
{
	return sr_line_is(line, len, SR_BEGIN) || sr_line_is(line, len, SR_POSITION) ||
		sr_line_is(line, len, SR_END);
}

/* A record (k, NULL when unknown) where its entry does not allow it. */
static bool
misplaced(struct streamread *sr, const struct sr_kind *k, const struct field *name, unsigned at)
{
	if (at == SR_AT_FRAME)
		return sr_fail(sr, "expected ROW or ENDCOPY in the frame of %s", sr->frame->shown);
	if (!field_is_name(name))
		return sr_fail(sr, at == SR_AT_SECTION ? "malformed record inside the snapshot section"
					   : "malformed record name");
	if (at == SR_AT_SECTION)
		return sr_fail(sr, "unexpected %.*s record inside the snapshot section",
					   (int) (name->n > 16 ? 16 : name->n), name->p);
	if (k)
		return sr_fail(sr, "%s outside a snapshot section", k->name);
	return sr_fail(sr, "unknown record \"%.*s\"", (int) (name->n > 32 ? 32 : name->n), name->p);
}

bool
sr_parse(struct streamread *sr, const char *line, size_t len, struct sr_record *rec)
{
	struct field name;
	const struct sr_kind *k;
	unsigned at = sr->frame ? SR_AT_FRAME : sr->section >= 0 ? SR_AT_SECTION : SR_AT_STREAM;

	/*
	 * A ROW inside a frame is nearly every line of a copy: it is taken
	 * without the name lookup and without clearing the whole record (a ROW
	 * sets type, nf, table, copy_row and copy_len, and nothing else is read
	 * of it). This halves what the parser costs a snapshot row.
	 */
	if (sr->frame != NULL && len >= 3 && memcmp(line, REC_ROW, 3) == 0 && (len == 3 || line[3] == '\t'))
	{
		sr->err[0] = '\0';
		sr->origin_allowed = sr->after_begin = false;
		sr->f[0] = (struct field) {line, 3};
		rec->f = sr->f;
		rec->nf = 1;
		rec->type = SR_ROW;
		return sr_parse_row(sr, rec, line, len);
	}
	name = line_name(line, len);
	k = kind_named(&name);
	memset(rec, 0, sizeof(*rec));
	sr->err[0] = '\0';
	sr->origin_allowed = sr->after_begin;
	sr->after_begin = false;
	rec->f = sr->f;
	if (k == NULL || (k->where & at) == 0)
		return misplaced(sr, k, &name, at);
	rec->type = k->type;
	if (k->split)
	{
		rec->nf = rec_split(line, len, sr->f, SR_MAX_FIELDS);
		if (rec->nf > SR_MAX_FIELDS)
			return sr_fail(sr, "too many fields (more than %d)", SR_MAX_FIELDS);
	}
	else
	{
		sr->f[0] = name;
		rec->nf = 1;
	}
	if (!sr->started && rec->type != SR_HEADER)
		return sr_fail(sr, "stream does not start with a PGCS header");
	return k->parse(sr, rec, line, len);
}
