#include "ownserver.h"
#include "identity.h"

#include <stdio.h>

bool
own_server_holds(const struct own_server *job, const struct sysident *id,
			  const struct slotinfo *slot, char *msg, size_t msglen)
{
	char a[LSN_BUFSZ], b[LSN_BUFSZ];

	/* Another timeline is lineage_judge()'s: the caller judged it already. */
	if (!identity_same(job->sysid, id->sysid, msg, msglen))
		return false;
	if (slot == NULL)
		return true;
	if (job->taken != LSN_INVALID && slot->current_lsn < job->taken)
	{
		identity_other(msg, msglen, "its WAL ends at %s, before %s that the job already took from the "
					   "source (a copy restored from an older backup?)",
					   lsn_format(slot->current_lsn, a), lsn_format(job->taken, b));
		return false;
	}
	if (job->created != LSN_INVALID && slot->confirmed_flush_lsn != LSN_INVALID &&
		slot->confirmed_flush_lsn < job->created)
	{
		identity_other(msg, msglen, "replication slot \"%s\" confirmed %s, before %s where the job's slot "
					   "was created (another slot of the same name)", slot->name,
					   lsn_format(slot->confirmed_flush_lsn, a), lsn_format(job->created, b));
		return false;
	}
	if (job->restart_floor != LSN_INVALID && slot->restart_lsn != LSN_INVALID &&
		(job->timeline == 0 || id->timeline == job->timeline) && slot->restart_lsn < job->restart_floor)
	{
		identity_other(msg, msglen, "replication slot \"%s\" restarts at %s, before %s where the job's slot "
					   "already restarted (a copy restored from an older backup?)", slot->name,
					   lsn_format(slot->restart_lsn, a), lsn_format(job->restart_floor, b));
		return false;
	}
	return true;
}
