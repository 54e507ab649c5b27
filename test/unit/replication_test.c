/* replication_test - the START_REPLICATION command and its quoting, options
 * by server version, parsing the server's 'w' and 'k' messages, and which
 * server errors mean continuity is lost. */
#include "unit.h"
#include "common.h"
#include "replication.h"

static void
test_options(void)
{
	struct repl_options o;

	repl_options_for(130011, &o);
	CHECK(o.proto_version == 1 && !o.messages && !o.streaming);
	repl_options_for(140000, &o);
	CHECK(o.proto_version == 2 && o.messages && o.streaming);
	repl_options_for(180004, &o);
	CHECK(o.proto_version == 2 && o.messages && o.streaming);
}

static void
test_command(void)
{
	struct buf b = BUF_INIT;
	struct repl_options o13, o15;
	const char *pubs[] = {"app", "we\"ird", "it's"};

	repl_options_for(130000, &o13);
	repl_options_for(150000, &o15);
	repl_start_command(&b, "s1", 0x16B3748, &o13, pubs, 1);
	CHECK_STR(buf_cstr(&b), "START_REPLICATION SLOT \"s1\" LOGICAL 0/16B3748 (proto_version '1', publication_names '\"app\"')");
	buf_reset(&b);
	repl_start_command(&b, "s1", 0, &o15, pubs, 3);
	CHECK_STR(buf_cstr(&b), "START_REPLICATION SLOT \"s1\" LOGICAL 0/0 (proto_version '2', "
			  "publication_names '\"app\",\"we\"\"ird\",\"it''s\"', messages 'true', streaming 'on')");
	buf_free(&b);
}

static void
test_parse(void)
{
	unsigned char w[30] = {'w',
		0, 0, 0, 0, 0, 0, 1, 0,		/* data start */
		0, 0, 0, 0, 0, 0, 0, 2,		/* WAL end */
		0, 0, 0, 0, 0, 0, 0, 3,		/* send time */
		'B', 'x', 'y', 'z', '!'};
	unsigned char k[18] = {'k', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 1};
	struct repl_msg m;
	char err[128];

	CHECK(repl_parse((const char *) w, sizeof(w), &m, err, sizeof(err)));
	CHECK(m.kind == 'w' && m.data_start == 0x100 && m.wal_end == 2 && m.send_time == 3);
	CHECK(m.len == 5 && m.data[0] == 'B');
	CHECK(repl_parse((const char *) w, 25, &m, err, sizeof(err)) && m.len == 0);
	CHECK(!repl_parse((const char *) w, 24, &m, err, sizeof(err)));
	CHECK(strstr(err, "too small") != NULL);
	CHECK(repl_parse((const char *) k, sizeof(k), &m, err, sizeof(err)));
	CHECK(m.kind == 'k' && m.wal_end == 0x100000000ULL && m.send_time == 7 && m.reply_requested);
	CHECK(!repl_parse((const char *) k, 17, &m, err, sizeof(err)));
	CHECK(!repl_parse("x", 1, &m, err, sizeof(err)));
	CHECK(strstr(err, "unrecognized streaming header") != NULL);
	CHECK(!repl_parse("", 0, &m, err, sizeof(err)));
}

static int
classify(const char *msg)
{
	struct pgerr e;

	pgerr_printf(&e, false, "%s", msg);
	return repl_error_exit(&e);
}

static void
test_errors(void)
{
	CHECK(classify("replication slot \"s\" does not exist") == EXIT_CONTINUITY);
	CHECK(classify("cannot read from logical replication slot \"s\"") == EXIT_CONTINUITY);
	CHECK(classify("can no longer get changes from replication slot \"s\"") == EXIT_CONTINUITY);
	CHECK(classify("can no longer access replication slot \"s\"") == EXIT_CONTINUITY);
	CHECK(classify("requested WAL segment 000000010000000000000003 has already been removed") == EXIT_CONTINUITY);
	CHECK(classify("publication \"p\" does not exist") == EXIT_PREFLIGHT);
	CHECK(classify("logical decoding requires wal_level >= logical") == EXIT_PREFLIGHT);
	CHECK(classify("logical decoding requires \"wal_level\" >= \"logical\"") == EXIT_PREFLIGHT);
	CHECK(classify("replication slot \"s\" is active for PID 42") == EXIT_RUNTIME);
	CHECK(classify("terminating connection due to administrator command") == EXIT_RUNTIME);
}

int
main(void)
{
	test_options();
	test_command();
	test_parse();
	test_errors();
	return unit_done("replication");
}
