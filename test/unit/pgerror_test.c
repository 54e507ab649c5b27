#include "unit.h"
#include "common.h"
#include "pgerror.h"

/* The classification table, the one form of the line, the value-stripping
 * rule. */

static struct pgerr
err_of(const char *state, const char *msg)
{
	struct pgerr e;

	snprintf(e.sqlstate, sizeof(e.sqlstate), "%s", state);
	snprintf(e.msg, sizeof(e.msg), "%s", msg);
	e.retryable = pgerr_retryable(state);
	return e;
}

static void
redacts(const char *state, const char *msg, const char *want)
{
	struct pgerr e = err_of(state, msg);

	pgerr_redact(&e);
	CHECK_STR(e.msg, want);
	CHECK_STR(e.sqlstate, state);
}

static void
classified(const char *state, int code, bool retry)
{
	if (pgerr_exit_code(state) != code || pgerr_retryable(state) != retry)
	{
		fprintf(stderr, "%s: exit %d retry %d, want exit %d retry %d\n", state ? state : "(null)",
				pgerr_exit_code(state), pgerr_retryable(state), code, retry);
		unit_failed++;
	}
	else
		unit_passed++;
}

int
main(void)
{
	char text[PGERR_TEXT_MAX];
	struct pgerr e;
	struct apply_err ae;

	/* A new session may help: exit 1, retried. */
	classified("08006", EXIT_RUNTIME, true);
	classified("08P01", EXIT_RUNTIME, true);
	classified("57P01", EXIT_RUNTIME, true);
	classified("57P02", EXIT_RUNTIME, true);
	classified("57P03", EXIT_RUNTIME, true);
	classified("53300", EXIT_RUNTIME, true);
	classified("40001", EXIT_RUNTIME, true);
	classified("40P01", EXIT_RUNTIME, true);
	classified("55006", EXIT_RUNTIME, true);
	/* Runtime, not retried in the session: the ones both paths once
	 * disagreed on first. */
	classified("55P03", EXIT_RUNTIME, false);
	classified("25P02", EXIT_RUNTIME, false);
	classified("25006", EXIT_RUNTIME, false);
	classified("53100", EXIT_RUNTIME, false);
	classified("53200", EXIT_RUNTIME, false);
	classified("57014", EXIT_RUNTIME, false);
	classified("58030", EXIT_RUNTIME, false);
	classified("XX000", EXIT_RUNTIME, false);
	classified("XX001", EXIT_RUNTIME, false);
	classified("26000", EXIT_RUNTIME, false);
	classified("40002", EXIT_RUNTIME, false);
	classified("55P02", EXIT_RUNTIME, false);
	/* The change cannot be applied as it is: exit 5. */
	classified("0A000", EXIT_UNSUPPORTED, false);
	classified("22001", EXIT_UNSUPPORTED, false);
	classified("22P05", EXIT_UNSUPPORTED, false);
	classified("23505", EXIT_UNSUPPORTED, false);
	classified("23502", EXIT_UNSUPPORTED, false);
	classified("42703", EXIT_UNSUPPORTED, false);
	classified("42P01", EXIT_UNSUPPORTED, false);
	classified("3F000", EXIT_UNSUPPORTED, false);
	classified("54000", EXIT_UNSUPPORTED, false);
	classified("55000", EXIT_UNSUPPORTED, false);
	classified("21000", EXIT_UNSUPPORTED, false);
	classified("44000", EXIT_UNSUPPORTED, false);
	classified("P0001", EXIT_UNSUPPORTED, false);
	classified("09000", EXIT_UNSUPPORTED, false);
	classified("39P01", EXIT_UNSUPPORTED, false);
	/* A missing privilege is a prerequisite, not a class 42 schema error. */
	classified("42501", EXIT_PREFLIGHT, false);
	/* No SQLSTATE, or not one: runtime, not retried by the table. */
	classified("", EXIT_RUNTIME, false);
	classified(NULL, EXIT_RUNTIME, false);
	classified("42", EXIT_RUNTIME, false);
	classified("220010", EXIT_RUNTIME, false);

	/* err->retryable (a lost connection) wins over the class. */
	e = err_of("22001", "value too long");
	CHECK(pgerr_exit(&e) == EXIT_UNSUPPORTED);
	e.retryable = true;
	CHECK(pgerr_exit(&e) == EXIT_RUNTIME);
	e = err_of("42501", "permission denied for table t");
	CHECK(pgerr_exit(&e) == EXIT_PREFLIGHT);
	/* Bookkeeping statements: only the privilege is a prerequisite. */
	CHECK(pgerr_exit_code_setup("42501") == EXIT_PREFLIGHT);
	CHECK(pgerr_exit_code_setup("42P01") == EXIT_RUNTIME);
	CHECK(pgerr_exit_code_setup("22001") == EXIT_RUNTIME);
	CHECK(pgerr_exit_code_setup("") == EXIT_RUNTIME);

	/* The one form of the line. */
	e = err_of("55P03", "canceling statement due to lock timeout");
	CHECK_STR(pgerr_text(&e, NULL, text, sizeof(text)), "canceling statement due to lock timeout (SQLSTATE 55P03)");
	e = err_of("22001", "value too long for type character varying(3)");
	CHECK_STR(pgerr_text(&e, "v", text, sizeof(text)),
			  "value too long for type character varying(3) (column \"v\", SQLSTATE 22001)");
	pgerr_printf(&e, true, "server closed the connection unexpectedly");
	CHECK(e.sqlstate[0] == '\0' && e.retryable);
	CHECK_STR(pgerr_text(&e, "v", text, sizeof(text)), "server closed the connection unexpectedly");
	{
		char small[12];

		e = err_of("22001", "value too long");
		CHECK_STR(pgerr_text(&e, NULL, small, sizeof(small)), "value too l");
	}
	/* An error on its way to the user: WHAT, the line, and retry from pe. */
	e = err_of("40P01", "deadlock detected");
	apply_err_pg(&ae, EXIT_RUNTIME, &e, "cannot read the columns of %s on the target", "public.t");
	CHECK_STR(ae.msg, "cannot read the columns of public.t on the target: deadlock detected (SQLSTATE 40P01)");
	CHECK(ae.code == EXIT_RUNTIME && ae.retry);
	apply_err_set(&ae, EXIT_UNSUPPORTED, "x");
	CHECK(!ae.retry && ae.code == EXIT_UNSUPPORTED);

	pgerr_one_line(text, sizeof(text), "ERROR:  relation \"t\" does not exist\nLINE 1: x\n");
	CHECK_STR(text, "ERROR:  relation \"t\" does not exist LINE 1: x");
	pgerr_one_line(text, sizeof(text), "connection closed.\n");
	CHECK_STR(text, "connection closed");

	/* The one value-stripping rule. */
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
	redacts("", "no sqlstate \"kept\"", "no sqlstate \"kept\"");
	/* A hex word that is not a byte run stays. */
	redacts("22023", "value 0xzz and x0x1", "value 0xzz and x0x1");
	/* Eliding may lengthen a message ("a" becomes "..."): it is cut, never
	 * overflows, and no value survives. */
	{
		char many[sizeof(e.msg)];
		size_t n = 0;

		while (n + 4 < sizeof(many))
		{
			memcpy(many + n, "\"s\" ", 4);
			n += 4;
		}
		many[n] = '\0';
		e = err_of("22P02", many);
		pgerr_redact(&e);
		CHECK(strlen(e.msg) < sizeof(e.msg));
		CHECK(strstr(e.msg, "\"s\"") == NULL);
	}
	return unit_done("pgerror");
}
