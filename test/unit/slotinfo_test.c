#include "unit.h"
#include "slotinfo.h"

#include <string.h>

static struct slotinfo
valid_slot(int server_version)
{
	struct slotinfo s;

	memset(&s, 0, sizeof(s));
	strcpy(s.name, "app");
	strcpy(s.slot_type, "logical");
	strcpy(s.plugin, "pgoutput");
	strcpy(s.database, "shop");
	s.restart_lsn = 0x1A00000;
	s.confirmed_flush_lsn = 0x1A00100;
	s.current_lsn = 0x1A03000;
	s.retained_bytes = 0x3000;
	s.server_version = server_version;
	s.has_wal_status = server_version >= 130000;
	strcpy(s.wal_status, "reserved");
	s.safe_wal_size_null = true;
	s.has_two_phase = server_version >= 140000;
	s.has_conflicting = server_version >= 160000;
	s.conflicting = s.has_conflicting ? 0 : -1;
	s.has_invalidation_reason = s.has_failover = server_version >= 170000;
	return s;
}

static void
names(void)
{
	char longest[SLOT_NAME_MAX + 2];

	CHECK(slot_name_valid("app_slot_1"));
	CHECK(!slot_name_valid(""));
	CHECK(!slot_name_valid("App"));
	CHECK(!slot_name_valid("a-b"));
	CHECK(!slot_name_valid("a b"));
	CHECK(!slot_name_valid("a\"b"));
	memset(longest, 'a', sizeof(longest));
	longest[SLOT_NAME_MAX] = '\0';
	CHECK(slot_name_valid(longest));
	longest[SLOT_NAME_MAX] = 'a';
	longest[SLOT_NAME_MAX + 1] = '\0';
	CHECK(!slot_name_valid(longest));
}

static void
invalidation(void)
{
	char why[128];
	struct slotinfo s = valid_slot(170000);

	CHECK(!slotinfo_invalidated(&s, why, sizeof(why)));
	strcpy(s.wal_status, "unreserved");		/* about to be lost, still usable */
	CHECK(!slotinfo_invalidated(&s, why, sizeof(why)));
	strcpy(s.wal_status, "lost");
	CHECK(slotinfo_invalidated(&s, why, sizeof(why)));
	CHECK_STR(why, "wal_status is lost");
	strcpy(s.invalidation_reason, "rows_removed");
	CHECK(slotinfo_invalidated(&s, why, sizeof(why)));
	CHECK_STR(why, "invalidation_reason is rows_removed");

	s = valid_slot(160000);
	s.conflicting = 1;
	CHECK(slotinfo_invalidated(&s, why, sizeof(why)));
	s = valid_slot(140000);
	s.restart_lsn = LSN_INVALID;
	CHECK(slotinfo_invalidated(&s, why, sizeof(why)));
	CHECK_STR(why, "its restart_lsn is gone");
}

static void
formats(void)
{
	struct buf b = BUF_INIT;
	struct slotinfo s = valid_slot(150000);

	slotinfo_format_text(&s, &b);
	CHECK_STR(buf_cstr(&b),
			  "slot\tapp\nslot_type\tlogical\nplugin\tpgoutput\ndatabase\tshop\n"
			  "temporary\tfalse\nactive\tfalse\nactive_pid\t-\n"
			  "restart_lsn\t0/1A00000\nconfirmed_flush_lsn\t0/1A00100\n"
			  "wal_status\treserved\nsafe_wal_size\t-\ntwo_phase\tfalse\n"
			  "current_lsn\t0/1A03000\nretained_bytes\t12288\n");

	buf_reset(&b);
	s = valid_slot(170000);
	s.active = true;
	s.active_pid = 4242;
	strcpy(s.database, "we\"ird\tdb");
	slotinfo_format_json(&s, &b);
	CHECK_STR(buf_cstr(&b),
			  "{\"slot\":\"app\",\"slot_type\":\"logical\",\"plugin\":\"pgoutput\","
			  "\"database\":\"we\\\"ird\\tdb\",\"temporary\":false,\"active\":true,\"active_pid\":4242,"
			  "\"restart_lsn\":\"0/1A00000\",\"confirmed_flush_lsn\":\"0/1A00100\","
			  "\"wal_status\":\"reserved\",\"safe_wal_size\":null,\"two_phase\":false,"
			  "\"conflicting\":false,\"invalidation_reason\":null,\"failover\":false,\"synced\":false,"
			  "\"current_lsn\":\"0/1A03000\",\"retained_bytes\":12288}\n");

	buf_reset(&b);
	buf_json_string(&b, "a\\b\x01");
	CHECK_STR(buf_cstr(&b), "\"a\\\\b\\u0001\"");
	buf_free(&b);
}

int
main(void)
{
	names();
	invalidation();
	formats();
	return unit_done("slotinfo");
}
