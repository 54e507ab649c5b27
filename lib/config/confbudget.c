/*
 * confbudget.c - the memory budget of a job (confbudget.h).
 */
#include "confbudget.h"

#include "confkeys.h"

#include <string.h>

#define BASELINE_BYTES (10 * MIB)		/* runtime baseline of the budget */
#define MESSAGE_CAP (32 * MIB)			/* derived max_message_bytes cap */
#define MESSAGE_FLOOR MIB				/* a derived limit below this is useless */
/*
 * How many times the largest message can be in memory at once, measured:
 * pg-walcat holds libpq's receive buffer (it grows by doubling to hold a
 * whole message, before anyone can look at its size), the copy libpq
 * returns and the encoded record, about 3 x; pg-apply the line, its
 * statement parameters and libpq's send buffer, about 3 x.
 */
#define MESSAGE_COPIES 6

void
conf_budget(void)
{
	struct key *msg = conf_key("resources.max_message_bytes");
	struct key *budget = conf_key("resources.memory_budget_mb");
	uint64_t fixed, total;
	int blame = 0;

	/* The copy's frames: a chunked copy's are its chunks. */
	bool chunked = strcmp(conf_key("resources.snapshot_mode")->text, "chunked") == 0;
	const char *frame = chunked ? "chunk_bytes" : "buffer_size_kb";
	uint64_t frame_bytes = chunked ? conf_num("resources.chunk_bytes") : conf_num("resources.buffer_size_kb") * 1024;

	/* A batch's updates held to be merged, and the stream read since the
	 * last target commit, kept to apply it again (at most two batches).
	 * Not resources.max_inflight_bytes: what is in flight between the
	 * programs is a pipe and what pg-apply read ahead into its input
	 * buffer, the buffer of one line that MESSAGE_COPIES counts. */
	fixed = 3 * conf_num("resources.max_batch_bytes") +
		conf_num("resources.max_parallel_copies") * 2 * frame_bytes + BASELINE_BYTES;
	total = budget->num * MIB;
	/* The line to blame: the budget when it is set, else the last setting
	 * that made the sum grow past the default budget. */
	if (budget->line)
		blame = budget->line;
	else
		for (size_t i = 0; i < conf_nkeys; i++)
			if (strncmp(conf_keys[i].name, "resources.", 10) == 0 && conf_keys[i].line > blame)
				blame = conf_keys[i].line;

	if (msg->line == 0)
	{
		uint64_t room = total > fixed ? (total - fixed) / MESSAGE_COPIES : 0;

		if (room < MESSAGE_FLOOR)
		{
			conf_error(blame, "resources.memory_budget_mb = %llu does not cover 3 x max_batch_bytes + max_parallel_copies x 2 x %s + %d x 1 MiB (smallest derived max_message_bytes) + 10 MiB = %llu MiB",
					  (unsigned long long) budget->num, frame, MESSAGE_COPIES,
					  (unsigned long long) ((fixed + MESSAGE_COPIES * MESSAGE_FLOOR + MIB - 1) / MIB));
			return;
		}
		msg->num = room < MESSAGE_CAP ? room : MESSAGE_CAP;
		conf_set_num(msg, msg->num, "");
		return;
	}
	if (fixed + MESSAGE_COPIES * msg->num > total)
		conf_error(blame ? blame : msg->line,
				  "resources.memory_budget_mb = %llu does not cover 3 x max_batch_bytes + max_parallel_copies x 2 x %s + %d x max_message_bytes + 10 MiB = %llu MiB",
				  (unsigned long long) budget->num, frame, MESSAGE_COPIES,
				  (unsigned long long) ((fixed + MESSAGE_COPIES * msg->num + MIB - 1) / MIB));
}
