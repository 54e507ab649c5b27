#include "unit.h"
#include "applyerr.h"
#include "session.h"

/* The one value-stripping rule, and the session settings' text forms. */
static void
redacts(const char *state, const char *msg, const char *want)
{
	char out[256];

	applyerr_redact(state, msg, out, sizeof(out));
	CHECK_STR(out, want);
}

int
main(void)
{
	struct buf b = BUF_INIT;

	redacts("22P05", "character with byte sequence 0xe2 0x82 0xac in encoding \"UTF8\" has no equivalent in encoding \"LATIN1\"",
			"character with byte sequence ... in encoding \"UTF8\" has no equivalent in encoding \"LATIN1\"");
	redacts("22021", "invalid byte sequence for encoding \"UTF8\": 0xe6 0x97",
			"invalid byte sequence for encoding \"UTF8\": ...");
	redacts("22021", "invalid byte sequence for encoding \"EUC_JP\": 0x8f",
			"invalid byte sequence for encoding \"EUC_JP\": ...");
	redacts("22P02", "invalid input syntax for type integer: \"secret\"",
			"invalid input syntax for type integer: \"...\"");
	redacts("22003", "value \"99999999999\" is out of range for type integer",
			"value \"...\" is out of range for type integer");
	/* An unterminated quote hides the rest. */
	redacts("22P02", "malformed array literal: \"{1,2", "malformed array literal: \"...\"");
	/* Not values: COPY format errors quote column names, other classes keep all. */
	redacts("22P04", "missing data for column \"v\"", "missing data for column \"v\"");
	redacts("23505", "duplicate key value violates unique constraint \"t_pkey\"",
			"duplicate key value violates unique constraint \"t_pkey\"");
	redacts("42703", "column \"x\"\nof relation", "column \"x\" of relation");
	/* A hex word that is not a byte run stays. */
	redacts("22023", "value 0xzz and x0x1", "value 0xzz and x0x1");
	/* A small buffer truncates, never overflows. */
	{
		char small[8];

		applyerr_redact("22P02", "abcdefghijklmnop", small, sizeof(small));
		CHECK(strlen(small) < sizeof(small));
	}

	session_startup_options(&b);
	CHECK(strstr(buf_cstr(&b), "-c datestyle=ISO") == buf_cstr(&b));
	CHECK(strstr(buf_cstr(&b), "-c extra_float_digits=3") != NULL);
	CHECK(strstr(buf_cstr(&b), "-c statement_timeout=0") != NULL);
	/* Only settings every server knows go into the startup packet. */
	CHECK(strstr(buf_cstr(&b), "transaction_timeout") == NULL);
	CHECK(strstr(buf_cstr(&b), "idle_session_timeout") == NULL);
	CHECK_STR(session_client_encoding(), "UTF8");
	buf_free(&b);
	return unit_done("applyerr");
}
