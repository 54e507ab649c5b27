/*
 * srsection.h - the stream parser's handlers of snapshot and chunk
 * sections and their frames, which the table in streamread.c dispatches to.
 */
#ifndef PGSYNC_SRSECTION_H
#define PGSYNC_SRSECTION_H

#include "srtoken.h"

bool sr_parse_snapshot(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_copy(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_row(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_endcopy(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_tabledone(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_section_end(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_chunks(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
bool sr_parse_chunk(struct streamread *sr, struct sr_record *rec, const char *line, size_t len);
/* Close the section, forgetting its tables. */
void sr_section_close(struct streamread *sr);

#endif
