#include "unit.h"
#include "identity.h"
#include "ownserver.h"

#include <string.h>

/* The job's server as the job last saw it. */
static struct sysident
server(const char *sysid, uint32_t timeline)
{
	struct sysident id;

	memset(&id, 0, sizeof(id));
	strcpy(id.sysid, sysid);
	id.timeline = timeline;
	return id;
}

static struct slotinfo
slot_at(lsn_t restart, lsn_t confirmed, lsn_t current)
{
	struct slotinfo s;

	memset(&s, 0, sizeof(s));
	strcpy(s.name, "app");
	strcpy(s.slot_type, "logical");
	s.restart_lsn = restart;
	s.confirmed_flush_lsn = confirmed;
	s.current_lsn = current;
	return s;
}

static const struct own_server job = {
	.sysid = "7442", .timeline = 1, .created = 0x1000000, .taken = 0x1A00000, .restart_floor = 0x1900000,
};

static void
identity(void)
{
	char msg[512];

	CHECK(identity_same("7442", "7442", msg, sizeof(msg)));
	/* What the job does not know yet is not compared. */
	CHECK(identity_same("", "9", msg, sizeof(msg)));
	CHECK(identity_same(NULL, "9", msg, sizeof(msg)));
	CHECK(!identity_same("7442", "9", msg, sizeof(msg)));
	CHECK_STR(msg, "the source is another server than the job's: system identifier 9, the job's is 7442");
	CHECK(strstr(msg, IDENTITY_OTHER_SERVER) != NULL);
}

static void
own_server(void)
{
	char msg[512];
	struct sysident id = server("7442", 1);
	struct slotinfo s = slot_at(0x1900000, 0x1A00000, 0x1B00000);
	struct own_server unknown = {0};

	CHECK(own_server_holds(&job, &id, &s, msg, sizeof(msg)));
	/* A slot that confirmed less than the job took: a restart or a crash
	 * may set the confirmed position back on the job's own server. */
	s.confirmed_flush_lsn = 0x1900000;
	CHECK(own_server_holds(&job, &id, &s, msg, sizeof(msg)));
	/* A missing slot is the caller's to report. */
	CHECK(own_server_holds(&job, &id, NULL, msg, sizeof(msg)));
	CHECK(own_server_holds(&unknown, &id, &s, msg, sizeof(msg)));

	/* WAL that ends before what the job took. */
	s = slot_at(0x1900000, 0x1900000, 0x19FFFFF);
	CHECK(!own_server_holds(&job, &id, &s, msg, sizeof(msg)));
	CHECK_STR(msg, "the source is another server than the job's: its WAL ends at 0/19FFFFF, before 0/1A00000 "
			  "that the job already took from the source (a copy restored from an older backup?)");
	s.current_lsn = 0x1A00000;
	CHECK(own_server_holds(&job, &id, &s, msg, sizeof(msg)));

	/* A younger slot of the same name. */
	s = slot_at(0x0F00000, 0x0FFFFFF, 0x1B00000);
	CHECK(!own_server_holds(&job, &id, &s, msg, sizeof(msg)));
	CHECK_STR(msg, "the source is another server than the job's: replication slot \"app\" confirmed 0/FFFFFF, "
			  "before 0/1000000 where the job's slot was created (another slot of the same name)");

	/* An older copy of the slot, whose WAL grew past the job's position. */
	s = slot_at(0x18FFFFF, 0x1000000, 0x2000000);
	CHECK(!own_server_holds(&job, &id, &s, msg, sizeof(msg)));
	CHECK_STR(msg, "the source is another server than the job's: replication slot \"app\" restarts at 0/18FFFFF, "
			  "before 0/1900000 where the job's slot already restarted (a copy restored from an older backup?)");

	/* On a later timeline (a promoted standby, which lineage_judge() has
	 * judged first) a synced slot may restart earlier than the old
	 * primary's did: not compared there. */
	id = server("7442", 2);
	CHECK(own_server_holds(&job, &id, &s, msg, sizeof(msg)));
	id = server("7442", 1);

	/* Identity first: another server is named as such, whatever its slot. */
	id = server("9", 1);
	CHECK(!own_server_holds(&job, &id, NULL, msg, sizeof(msg)));
	CHECK(strstr(msg, "system identifier 9, the job's is 7442") != NULL);
}

int
main(void)
{
	identity();
	own_server();
	return unit_done("ownserver");
}
