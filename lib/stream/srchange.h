/*
 * srchange.h - the stream parser's handlers of table descriptions and
 * changes (RELATION, INSERT, UPDATE, DELETE, TRUNCATE), which the table in
 * streamread.c dispatches to.
 */
#ifndef PGSYNC_SRCHANGE_H
#define PGSYNC_SRCHANGE_H

#include "srtoken.h"

bool sr_parse_relation(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_insert(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_update_delete(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_truncate(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
void sr_rels_undefine(struct streamread *sr);
void sr_rels_free(struct streamread *sr);

#endif
