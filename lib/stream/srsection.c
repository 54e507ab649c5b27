/*
 * The stream parser's snapshot and chunk sections (formats/stream-v1.md,
 * "Snapshot frames" and "Chunk sections"): SNAPSHOT or CHUNKS opens one,
 * COPY .. ROW .. ENDCOPY is a frame of one table, CHUNK says which key range
 * the next frame is, TABLEDONE closes a table, SNAPSHOTDONE or CHUNKSDONE
 * the section. The counts are part of the grammar: ENDCOPY counts its
 * frame's rows, TABLEDONE the rows and bytes of all the table's frames, so
 * a reader that trusts a record trusts what it says was loaded.
 */
#include "srsection.h"
#include "common.h"
#include "escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
free_table(struct sr_key *e)
{
	struct sr_table *t = (struct sr_table *) e;

	free(t->schema);
	free(t->table);
	free(t->shown);
	free(t->cols);
	free(t);
}

void
sr_section_close(struct streamread *sr)
{
	sr->section = -1;
	sr->frame = NULL;
	sr->chunk = NULL;
	sr_names_clear(&sr->tables, free_table);
}

/* The table named by f[0], f[1] (schema, table): created on first use,
 * copied in key chunks or not as keyed says. */
static bool
table_of(struct streamread *sr, const struct field *f, bool keyed, struct sr_table **out)
{
	uint64_t h;
	struct sr_table *t = (struct sr_table *) sr_names_find(&sr->tables, &f[0], &f[1], &h);
	char *schema, *table;

	if (t == NULL)
	{
		schema = sr_name_dup(sr, &f[0]);
		table = schema ? sr_name_dup(sr, &f[1]) : NULL;
		if (table == NULL)
		{
			free(schema);
			return sr_fail(sr, "malformed schema or table name");
		}
		t = xcalloc(1, sizeof(*t));
		t->schema = schema;
		t->table = table;
		t->keyed = keyed;
		/* As the stream writes it: escaped, so one line whatever the name. */
		t->shown = xmalloc(64 + 1 + 64 + 1);
		snprintf(t->shown, 64 + 1 + 64 + 1, "%.*s.%.*s", (int) (f[0].n > 64 ? 64 : f[0].n), f[0].p,
				 (int) (f[1].n > 64 ? 64 : f[1].n), f[1].p);
		sr_names_add(&sr->tables, &t->k, &f[0], &f[1], h);
	}
	*out = t;
	return true;
}

/* SNAPSHOT and CHUNKS: a position, a snapshot name, a table count. */
static bool
open_section(struct streamread *sr, struct sr_record *rec, const char *name)
{
	struct field *f = sr->f;

	if (sr->in_txn)
		return sr_fail(sr, "%s inside transaction %llu", name, (unsigned long long) sr->xid);
	if (!sr_nfields(sr, rec->nf, 4, name) || !sr_get_lsn(sr, &f[1], name, &rec->lsn))
		return false;
	if (!copy_field_valid(f[2].p, f[2].n))
		return sr_fail(sr, "malformed snapshot name in %s", name);
	if (!sr_get_u64(sr, &f[3], name, "table count", UINT64_MAX, &rec->ntables))
		return false;
	/* The tables of the section before are no one's any more. */
	sr_section_close(sr);
	sr->section = rec->type;
	sr->section_lsn = rec->lsn;
	return true;
}

/* A SNAPSHOT's position is a promise: checked against the earlier ones
 * before anything else of the section. */
bool
sr_parse_snapshot(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	if (!sr->in_txn && rec->nf == 4 && field_lsn(&sr->f[1], &rec->lsn) &&
		!sr_not_below(sr, rec->lsn, "SNAPSHOT"))
		return false;
	if (!open_section(sr, rec, "SNAPSHOT"))
		return false;
	sr_promise(sr, rec->lsn, "SNAPSHOT");
	return true;
}

/* No promise: the stream goes on from the job's own position, below this
 * one (formats/stream-v1.md). */
bool
sr_parse_chunks(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	return open_section(sr, rec, "CHUNKS");
}

bool
sr_parse_copy(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	const char *cols;
	size_t colslen;
	uint64_t ncols;
	struct sr_table *t;

	if (rec->nf < 4 || !field_u64(&f[3], &ncols) || ncols > SR_MAX_COLS || ncols != rec->nf - 4)
		return sr_fail(sr, "malformed COPY record: expected schema, table, a column count and that many names");
	if (!table_of(sr, &f[1], false, &t))
		return false;
	if (t->done)
		return sr_fail(sr, "frame of %s after its TABLEDONE", t->shown);
	/* In a chunk section a table is copied either in key chunks, every
	 * frame after its CHUNK, or in one piece, no frame with a CHUNK. */
	if (sr->chunk && sr->chunk != t)
		return sr_fail(sr, "frame of %s after a CHUNK of another table", t->shown);
	if (sr->section == SR_CHUNKS && t->keyed && sr->chunk == NULL)
		return sr_fail(sr, "frame of %s without its CHUNK", t->shown);
	/* Every frame of a table names the same columns as its first. */
	cols = f[3].p;
	colslen = (size_t) (f[rec->nf - 1].p + f[rec->nf - 1].n - cols);
	if (t->cols == NULL)
	{
		for (uint64_t i = 0; i < ncols; i++)
		{
			char *name = sr_name_dup(sr, &f[4 + i]);

			if (name == NULL)
				return sr_fail(sr, "malformed column name in the frame of %s", t->shown);
			free(name);
		}
		t->cols = xmalloc(colslen + 1);
		memcpy(t->cols, cols, colslen);
		t->cols[colslen] = '\0';
		t->colslen = colslen;
		t->ncols = (int) ncols;
	}
	else if (colslen != t->colslen || memcmp(cols, t->cols, colslen) != 0)
		return sr_fail(sr, "frame of %s names other columns than its first frame", t->shown);
	sr->frame = t;
	sr->chunk = NULL;
	sr->frame_rows = sr->frame_bytes = 0;
	rec->table = t;
	rec->colnames = &f[4];
	return true;
}

/* Not split: with its leading field cut off, a ROW is a COPY text row,
 * which the loader passes on as it is. A table of no columns has rows of
 * no values: a bare ROW. */
bool
sr_parse_row(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct sr_table *t = sr->frame;
	size_t skip = len == 3 ? 3 : 4;

	if ((len == 3) != (t->ncols == 0))
		return sr_fail(sr, "expected ROW or ENDCOPY in the frame of %s", t->shown);
	rec->table = t;
	rec->copy_row = line + skip;
	rec->copy_len = len - skip;
	sr->frame_rows++;
	sr->frame_bytes += len - skip + 1;
	return true;
}

bool
sr_parse_endcopy(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct sr_table *t = sr->frame;
	uint64_t n;

	if (rec->nf != 2 || !field_u64(&sr->f[1], &n))
		return sr_fail(sr, "malformed ENDCOPY record in the frame of %s", t->shown);
	if (n != sr->frame_rows)
		return sr_fail(sr, "ENDCOPY of %s counts %llu rows, the frame has %llu", t->shown,
					   (unsigned long long) n, (unsigned long long) sr->frame_rows);
	t->rows += sr->frame_rows;
	t->bytes += sr->frame_bytes;
	rec->table = t;
	rec->nrows = sr->frame_rows;
	rec->nbytes = sr->frame_bytes;
	sr->frame = NULL;
	return true;
}

/* A table with no rows gets no frame: a TABLEDONE may name a new table. In
 * a chunk section such a table had all its key chunks copied by earlier
 * sections (one copied in one piece always has a frame, if empty). */
bool
sr_parse_tabledone(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	struct sr_table *t;

	if (rec->nf != 5 || !field_u64(&f[3], &rec->nrows) || !field_u64(&f[4], &rec->nbytes))
		return sr_fail(sr, "malformed TABLEDONE record: expected schema, table, rows and bytes");
	if (!table_of(sr, &f[1], sr->section == SR_CHUNKS, &t))
		return false;
	if (t->done)
		return sr_fail(sr, "second TABLEDONE for %s", t->shown);
	if (rec->nrows != t->rows || rec->nbytes != t->bytes)
		return sr_fail(sr, "TABLEDONE of %s counts %llu rows and %llu bytes, its frames had %llu and %llu",
					   t->shown, (unsigned long long) rec->nrows,
					   (unsigned long long) rec->nbytes, (unsigned long long) t->rows,
					   (unsigned long long) t->bytes);
	t->done = true;
	rec->table = t;
	return true;
}

/*
 * SNAPSHOTDONE and CHUNKSDONE close the section their opener named, at its
 * position. The section's tables stay until the next section opens: a
 * loader still names them while it finishes.
 */
bool
sr_parse_section_end(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	bool chunks = rec->type == SR_CHUNKSDONE;
	const char *name = chunks ? REC_CHUNKSDONE : REC_SNAPSHOTDONE;
	enum sr_type opener = chunks ? SR_CHUNKS : SR_SNAPSHOT;

	if (sr->section != (int) opener)
		return sr_fail(sr, "unexpected %s record inside the snapshot section", name);
	if (rec->nf != 2 || !field_lsn(&sr->f[1], &rec->lsn))
		return sr_fail(sr, "malformed %s record: expected a position", name);
	if (rec->lsn != sr->section_lsn)
		return sr_fail(sr, "%s position differs from its %s", name, chunks ? REC_CHUNKS : REC_SNAPSHOT);
	if (sr->chunk)
		return sr_fail(sr, "%s after a CHUNK: expected its frame", name);
	sr->section = -1;
	return true;
}

/* CHUNK: the next frame is the whole of key range (lo, hi] of a table. */
bool
sr_parse_chunk(struct streamread *sr, struct sr_record *rec, const char *line, size_t len)
{
	struct field *f = sr->f;
	struct sr_table *t;
	int nkey;

	if (sr->section != SR_CHUNKS)
		return sr_fail(sr, "CHUNK outside a chunk section");
	nkey = rec->nf < 4 ? SR_CHUNK_LAYOUT : sr_chunk_fields(&f[3], rec->nf - 3, false);
	if (nkey == SR_CHUNK_LAYOUT)
		return sr_fail(sr, "malformed CHUNK record: expected schema, table, a key column count, "
					   "the key columns, the lo and the hi values");
	if (sr->chunk)
		return sr_fail(sr, "CHUNK after a CHUNK: expected its frame");
	if (!table_of(sr, &f[1], true, &t))
		return false;
	if (!t->keyed)
		return sr_fail(sr, "CHUNK of %s, which this section copies in one piece", t->shown);
	if (t->done)
		return sr_fail(sr, "CHUNK of %s after its TABLEDONE", t->shown);
	if (nkey == SR_CHUNK_VALUES)
		return sr_fail(sr, "malformed CHUNK of %s: a bad value, or a bound with some but not all values \\N",
					   t->shown);
	sr->chunk = t;
	rec->table = t;
	rec->nkey = (int) nkey;
	rec->key_cols = &f[4];
	rec->lo = &f[4 + nkey];
	rec->hi = &f[4 + 2 * nkey];
	return true;
}
