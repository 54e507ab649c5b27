/*
 * confbudget.h - what a job's programs can hold in memory at once, from its
 * resources.* settings, against resources.memory_budget_mb: a configuration
 * whose budget does not cover its buffers is refused, and an unset
 * resources.max_message_bytes is derived from what the budget leaves.
 */
#ifndef PGSYNC_CONFBUDGET_H
#define PGSYNC_CONFBUDGET_H

/* After conf_defaults(): check the budget, derive max_message_bytes. */
void conf_budget(void);

#endif
