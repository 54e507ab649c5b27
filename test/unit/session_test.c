#include "unit.h"
#include "session.h"

/* The session settings' text forms. */
int
main(void)
{
	struct buf b = BUF_INIT;

	session_startup_options(&b);
	CHECK(strstr(buf_cstr(&b), "-c datestyle=ISO") == buf_cstr(&b));
	CHECK(strstr(buf_cstr(&b), "-c extra_float_digits=3") != NULL);
	CHECK(strstr(buf_cstr(&b), "-c statement_timeout=0") != NULL);
	/* Only settings every server knows go into the startup packet. */
	CHECK(strstr(buf_cstr(&b), "transaction_timeout") == NULL);
	CHECK(strstr(buf_cstr(&b), "idle_session_timeout") == NULL);
	CHECK_STR(session_client_encoding(), "UTF8");
	buf_free(&b);
	return unit_done("session");
}
