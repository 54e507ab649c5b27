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
 * is exactly the value fields. A rejected line comes with a one-line reason.
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

/* The model: what the harness knows from the records accepted so far. */
struct model {
	bool started, in_txn, have_last;
	uint64_t xid;
	lsn_t commit_lsn, last_commit_lsn;
	lsn_t promised;				/* the highest position the stream promised */
};

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
		"DELETE", "TRUNCATE", "MESSAGE", "POSITION", "END", "SNAPSHOT",
	};

	check((size_t) r->type < sizeof(names) / sizeof(names[0]), "known record type");
	check(r->nf >= 1 && field_eq(&r->f[0], names[r->type]), "type matches the record name");
	check(m->started || r->type == SR_HEADER, "a stream starts with a header");
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
		case SR_SNAPSHOT:
			check(!m->in_txn, "positions outside transactions");
			check_grows(m, r->lsn, true);
			break;
		case SR_TYPE:
			break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct streamread *sr;
	struct sr_record rec;
	struct model m = {0};
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
		if (rec.type == SR_SNAPSHOT)
			break;				/* snapshot frames are snapload's business */
		p = nl + 1;
	}
	sr_free(sr);
	free(copy);
	return 0;
}
