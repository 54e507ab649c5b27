/*
 * streamread_fuzz.c - libFuzzer target for the change-stream parser
 * (streamread.c) that pg-apply runs every input line through.
 *
 * The input is a stream; the harness splits it on LF and parses line by line
 * until the first rejected line (pg-apply stops there too). Besides memory
 * safety it checks, against a small model of the grammar in
 * formats/stream-v1.md, what the parser promises pg-apply: a record it
 * accepts is well-formed (values are valid COPY text, \U only in the new row
 * of an UPDATE and never in a key it must find the row by, field counts match
 * the RELATION), changes appear only inside BEGIN..COMMIT, COMMIT matches its
 * BEGIN, commit LSNs grow within a stream, positions never go backwards
 * within a stream (no BEGIN, POSITION, END or SNAPSHOT below the header's
 * start, an earlier COMMIT end or POSITION), a header inside a transaction is
 * reported as an interruption of that transaction, and an INSERT's COPY row
 * is exactly the value fields. Snapshot sections too: frames and the
 * records of a section stand only inside one and nothing else does, a ROW
 * only inside a frame and its COPY row is the line after its name, ENDCOPY
 * and TABLEDONE count exactly what the frames held, no frame follows its
 * table's TABLEDONE and every frame of a table names the columns of its
 * first, a table is one object for the whole section, and SNAPSHOTDONE
 * closes the section at the SNAPSHOT's position. Chunk sections likewise,
 * with CHUNKSDONE, promising nothing, and a table copied either in key
 * chunks (each frame right after its table's CHUNK, whose bounds are all
 * \N or none) or in one piece (no CHUNK). A rejected line comes with a
 * one-line reason.
 *
 * Input layout: byte 0 is reserved (seeds use 0); the rest is the stream.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "log.h"
#include "record.h"
#include "streamread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int cond, const char *what)
{
	if (!cond)
	{
		fprintf(stderr, "streamread_fuzz: invariant violated: %s\n", what);
		abort();
	}
}

static void
check_values(const struct field *v, int n, bool allow_unchanged, const struct sr_rel *rel,
			 bool key_needed)
{
	for (int i = 0; i < n; i++)
	{
		bool unchanged = field_is_unchanged(v[i].p, v[i].n);

		check(memchr(v[i].p, '\t', v[i].n) == NULL, "value holds no TAB");
		check(copy_field_valid(v[i].p, v[i].n), "accepted value is valid COPY text");
		check(!unchanged || allow_unchanged, "\\U only in an UPDATE's new row");
		check(!(unchanged && key_needed && rel->cols[i].key), "\\U never in a key used to find the row");
	}
}

/* A table of the open snapshot section, as the model saw it. */
struct mtable {
	char *key;					/* raw "schema TAB table" */
	size_t keylen;
	const struct sr_table *obj;	/* what the parser gave for it */
	char *cols;					/* raw fields from the column count on, of its first COPY */
	size_t colslen;
	uint64_t rows, bytes;
	bool done;
	bool keyed;					/* copied in key chunks */
};

/* The model: what the harness knows from the records accepted so far. */
struct model {
	bool started, in_txn, have_last;
	uint64_t xid;
	lsn_t commit_lsn, last_commit_lsn;
	lsn_t promised;				/* the highest position the stream promised */
	bool in_section;
	enum sr_type opener;		/* SR_SNAPSHOT or SR_CHUNKS */
	lsn_t section_lsn;
	long chunk;					/* index of the table of a CHUNK before its frame, or -1 */
	struct mtable *tables;
	size_t ntables;
	struct mtable *frame;		/* NULL outside a frame */
	uint64_t frame_rows, frame_bytes;
};

static void
forget_tables(struct model *m)
{
	for (size_t i = 0; i < m->ntables; i++)
	{
		free(m->tables[i].key);
		free(m->tables[i].cols);
	}
	free(m->tables);
	m->tables = NULL;
	m->ntables = 0;
	m->frame = NULL;
	m->chunk = -1;
}

/* The model's table of fields f[0], f[1]; each name is one parser object. */
static struct mtable *
mtable_of(struct model *m, const struct field *f, const struct sr_table *obj, bool keyed)
{
	size_t n = (size_t) (f[1].p + f[1].n - f[0].p);
	struct mtable *t;

	for (size_t i = 0; i < m->ntables; i++)
	{
		t = &m->tables[i];
		if (t->keylen == n && memcmp(t->key, f[0].p, n) == 0)
		{
			check(t->obj == obj, "one table object per name in a section");
			return t;
		}
		check(t->obj != obj, "tables of other names are other objects");
	}
	m->tables = realloc(m->tables, (m->ntables + 1) * sizeof(*m->tables));
	t = &m->tables[m->ntables++];
	memset(t, 0, sizeof(*t));
	t->key = malloc(n + 1);
	memcpy(t->key, f[0].p, n);
	t->keylen = n;
	t->obj = obj;
	t->keyed = keyed;
	return t;
}

/* A CHUNK's values: valid, the key columns never \N, a bound all \N or none. */
static void
check_chunk_values(const struct field *f, int n, bool bound)
{
	int nulls = 0;

	for (int i = 0; i < n; i++)
	{
		check(copy_field_valid(f[i].p, f[i].n) && !field_is_unchanged(f[i].p, f[i].n),
			  "CHUNK values are valid COPY text");
		nulls += field_is_null(f[i].p, f[i].n);
	}
	check(bound ? nulls == 0 || nulls == n : nulls == 0, "CHUNK bounds all \\N or none");
}

static void
check_section_record(struct model *m, const struct sr_record *r, const char *line, size_t len)
{
	struct mtable *t;
	uint64_t n, b;

	switch (r->type)
	{
		case SR_COPY:
			check(m->in_section && m->frame == NULL, "COPY inside a section, between frames");
			check(r->nf >= 4 && field_u64(&r->f[3], &n) && n == r->nf - 4, "COPY column count");
			check(r->table && r->table->ncols == (int) n && r->colnames == &r->f[4], "COPY columns");
			t = mtable_of(m, &r->f[1], r->table, false);
			check(!t->done, "no frame after the table's TABLEDONE");
			if (m->chunk >= 0)
				check(t == &m->tables[m->chunk], "the frame after a CHUNK is of its table");
			else
				check(m->opener != SR_CHUNKS || !t->keyed, "every frame of a keyed table follows its CHUNK");
			check(r->table->keyed == t->keyed, "keyed as first named");
			m->chunk = -1;
			b = (size_t) (line + len - r->f[3].p);
			if (t->cols == NULL)
			{
				t->cols = malloc(b + 1);
				memcpy(t->cols, r->f[3].p, b);
				t->colslen = b;
			}
			else
				check(t->colslen == b && memcmp(t->cols, r->f[3].p, b) == 0,
					  "every frame names the columns of the table's first");
			for (size_t i = 4; i < r->nf; i++)
				check(copy_field_valid(r->f[i].p, r->f[i].n) && !field_is_null(r->f[i].p, r->f[i].n),
					  "column names are values");
			m->frame = t;
			m->frame_rows = m->frame_bytes = 0;
			break;
		case SR_ROW:
		{
			size_t skip = len == 3 ? 3 : 4;

			check(m->frame != NULL && r->table == m->frame->obj, "ROW inside a frame of its table");
			check(len >= 3 && memcmp(line, "ROW", 3) == 0 && (len == 3 || line[3] == '\t'), "ROW name");
			check((len == 3) == (r->table->ncols == 0), "a bare ROW only for a table of no columns");
			check(r->copy_row == line + skip && r->copy_len == len - skip, "ROW COPY row is the line after ROW");
			m->frame_rows++;
			m->frame_bytes += len - skip + 1;
			break;
		}
		case SR_ENDCOPY:
			check(m->frame != NULL && r->table == m->frame->obj, "ENDCOPY closes a frame of its table");
			check(r->nf == 2 && field_u64(&r->f[1], &n) && n == m->frame_rows, "ENDCOPY counts the rows");
			check(r->nrows == m->frame_rows && r->nbytes == m->frame_bytes, "ENDCOPY reports the frame");
			m->frame->rows += m->frame_rows;
			m->frame->bytes += m->frame_bytes;
			m->frame = NULL;
			break;
		case SR_TABLEDONE:
			check(m->in_section && m->frame == NULL, "TABLEDONE inside a section, between frames");
			t = mtable_of(m, &r->f[1], r->table, m->opener == SR_CHUNKS);
			check(!t->done, "one TABLEDONE a table");
			check(r->nf == 5 && field_u64(&r->f[3], &n) && field_u64(&r->f[4], &b) &&
				  n == t->rows && b == t->bytes && r->nrows == n && r->nbytes == b,
				  "TABLEDONE counts the rows and bytes of the table's frames");
			check(r->table->done, "the table is done");
			t->done = true;
			break;
		case SR_SNAPSHOTDONE:
		case SR_CHUNKSDONE:
			check(m->in_section && m->frame == NULL, "a section's end inside a section, between frames");
			check(m->opener == (r->type == SR_CHUNKSDONE ? SR_CHUNKS : SR_SNAPSHOT), "a section ends as it began");
			check(m->chunk < 0, "no section end between a CHUNK and its frame");
			check(r->lsn == m->section_lsn, "a section ends at its position");
			m->in_section = false;
			break;
		case SR_CHUNK:
			check(m->in_section && m->opener == SR_CHUNKS && m->frame == NULL, "CHUNK in a chunk section, between frames");
			check(m->chunk < 0, "one CHUNK a frame");
			check(r->nf >= 4 && field_u64(&r->f[3], &n) && n >= 1 && n <= 32 && r->nf == 4 + 3 * n &&
				  r->nkey == (int) n, "CHUNK shape");
			t = mtable_of(m, &r->f[1], r->table, true);
			check(t->keyed && r->table->keyed && !t->done, "CHUNK of a keyed table not done");
			check(r->key_cols == &r->f[4] && r->lo == &r->f[4 + n] && r->hi == &r->f[4 + 2 * n], "CHUNK fields");
			check_chunk_values(r->key_cols, r->nkey, false);
			check_chunk_values(r->lo, r->nkey, true);
			check_chunk_values(r->hi, r->nkey, true);
			m->chunk = (long) (t - m->tables);
			break;
		default:
			check(!m->in_section, "no stream record inside a section");
			break;
	}
}

/* A position the reader accepted may not lie below an earlier promise;
 * each but a BEGIN's is a promise itself. */
static void
check_grows(struct model *m, lsn_t lsn, bool promises)
{
	check(lsn >= m->promised, "positions never go backwards within a stream");
	if (promises && lsn > m->promised)
		m->promised = lsn;
}

static void
check_record(struct model *m, const struct streamread *sr, const struct sr_record *r,
			 const char *line, size_t len)
{
	static const char *const names[] = {
		"PGCS", "RELATION", "TYPE", "BEGIN", "ORIGIN", "COMMIT", "INSERT", "UPDATE",
		"DELETE", "TRUNCATE", "MESSAGE", "POSITION", "END", "SNAPSHOT", "COPY", "ROW",
		"ENDCOPY", "TABLEDONE", "SNAPSHOTDONE", "CHUNKS", "CHUNK", "CHUNKSDONE",
	};

	check((size_t) r->type < sizeof(names) / sizeof(names[0]), "known record type");
	check(r->nf >= 1 && field_eq(&r->f[0], names[r->type]), "type matches the record name");
	check(strcmp(sr_type_name(r->type), names[r->type]) == 0, "sr_type_name");
	check(m->started || r->type == SR_HEADER, "a stream starts with a header");
	check_section_record(m, r, line, len);
	switch (r->type)
	{
		case SR_HEADER:
			check(r->interrupted == m->in_txn, "a header inside a transaction interrupts it");
			check(!r->interrupted || r->open_xid == m->xid, "interrupted xid");
			check(r->timeline > 0 && r->slot[0] != '\0' && r->sysid[0] != '\0', "header identity");
			m->started = true;
			m->in_txn = false;
			m->have_last = false;
			m->promised = r->lsn;
			check(sr_promised(sr) == r->lsn, "a header starts the promise at its start");
			break;
		case SR_RELATION:
			check(r->rel && r->rel->defined && r->rel->ncols >= 0 && r->rel->ncols <= SR_MAX_COLS,
				  "relation defined");
			check(r->nf == 6 + 4 * (size_t) r->rel->ncols, "relation field count");
			check(strchr("dfin", r->rel->identity) && r->rel->identity, "relation identity");
			for (int i = 0; i < r->rel->ncols; i++)
				check(r->rel->cols[i].name != NULL, "column name");
			break;
		case SR_BEGIN:
			check(!m->in_txn, "BEGIN outside a transaction");
			check(!m->have_last || r->lsn > m->last_commit_lsn, "commit LSNs grow");
			check_grows(m, r->lsn, false);
			m->in_txn = true;
			m->xid = r->xid;
			m->commit_lsn = r->lsn;
			break;
		case SR_ORIGIN:
			check(m->in_txn, "ORIGIN inside a transaction");
			break;
		case SR_COMMIT:
			check(m->in_txn && r->xid == m->xid && r->lsn == m->commit_lsn, "COMMIT matches BEGIN");
			check(r->end_lsn > r->lsn, "end LSN after commit LSN");
			m->in_txn = false;
			m->have_last = true;
			m->last_commit_lsn = r->lsn;
			check_grows(m, r->end_lsn, true);
			break;
		case SR_INSERT:
			check(m->in_txn, "INSERT inside a transaction");
			check(r->rel && r->rel->defined && r->nf == 3 + (size_t) r->rel->ncols, "INSERT shape");
			check_values(r->newv, r->rel->ncols, false, r->rel, false);
			/* The COPY row is everything after the third field. */
			if (r->rel->ncols > 0)
				check(r->copy_row == r->newv[0].p && r->copy_row + r->copy_len == line + len,
					  "INSERT COPY row is the value fields");
			else
				check(r->copy_len == 0, "INSERT of no columns has an empty COPY row");
			break;
		case SR_UPDATE:
		case SR_DELETE:
			check(m->in_txn, "change inside a transaction");
			check(r->rel && r->rel->defined, "change names a defined relation");
			if (r->type == SR_DELETE)
				check(r->kind == 'K' || r->kind == 'O', "DELETE kind");
			else
				check(r->kind == 'N' || r->kind == 'K' || r->kind == 'O', "UPDATE kind");
			check((r->kind == 'N') == (r->oldv == NULL), "old row present unless N");
			if (r->oldv)
				check_values(r->oldv, r->rel->ncols, false, r->rel, false);
			if (r->type == SR_UPDATE)
			{
				check(r->newv != NULL, "UPDATE has a new row");
				check_values(r->newv, r->rel->ncols, true, r->rel, r->kind == 'N');
				check(r->nf == 4 + (size_t) r->rel->ncols * (r->kind == 'N' ? 1 : 2), "UPDATE shape");
			}
			else
				check(r->nf == 4 + (size_t) r->rel->ncols, "DELETE shape");
			break;
		case SR_TRUNCATE:
			check(m->in_txn, "TRUNCATE inside a transaction");
			check(r->ntrunc >= 1 && r->ntrunc == (r->nf - 2) / 2, "TRUNCATE tables");
			for (size_t i = 0; i < r->ntrunc; i++)
				check(r->trunc_rels[i] && r->trunc_rels[i]->defined, "TRUNCATE names defined tables");
			break;
		case SR_MESSAGE:
			check(r->transactional == m->in_txn, "MESSAGE kind matches the transaction state");
			break;
		case SR_POSITION:
		case SR_END:
			check(!m->in_txn, "positions outside transactions");
			check_grows(m, r->lsn, true);
			break;
		case SR_SNAPSHOT:
			check(!m->in_txn, "positions outside transactions");
			check_grows(m, r->lsn, true);
			forget_tables(m);
			m->in_section = true;
			m->opener = SR_SNAPSHOT;
			m->section_lsn = r->lsn;
			break;
		case SR_CHUNKS:
			/* No promise: the job's position stays below it. */
			check(!m->in_txn, "sections outside transactions");
			forget_tables(m);
			m->in_section = true;
			m->opener = SR_CHUNKS;
			m->section_lsn = r->lsn;
			break;
		case SR_TYPE:
		case SR_COPY:
		case SR_ROW:
		case SR_ENDCOPY:
		case SR_TABLEDONE:
		case SR_SNAPSHOTDONE:
		case SR_CHUNK:
		case SR_CHUNKSDONE:
			break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct streamread *sr;
	struct sr_record rec;
	struct model m = {.chunk = -1};
	const char *p, *end, *nl;
	char *copy;

	if (size < 1)
		return 0;
	/* A private copy: the parser may be handed lines it can NUL-terminate. */
	copy = malloc(size);
	memcpy(copy, data + 1, size - 1);
	p = copy;
	end = copy + size - 1;
	sr = sr_new();
	while (p < end && (nl = memchr(p, '\n', (size_t) (end - p))) != NULL)
	{
		size_t len = (size_t) (nl - p);

		if (!sr_parse(sr, p, len, &rec))
		{
			const char *e = sr_error(sr);

			check(e && e[0] && strchr(e, '\n') == NULL, "rejection has a one-line reason");
			break;
		}
		check_record(&m, sr, &rec, p, len);
		check(sr_promised(sr) == m.promised, "sr_promised agrees");
		check(sr_in_txn(sr) == m.in_txn, "sr_in_txn agrees");
		check(sr_started(sr), "started after a record");
		check(sr_in_section(sr) == m.in_section, "sr_in_section agrees");
		p = nl + 1;
	}
	forget_tables(&m);
	sr_free(sr);
	free(copy);
	return 0;
}
