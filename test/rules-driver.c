/*
 * rules-driver - the C side of the rules test/rules.bats compares with
 * bin/pgsync's copies, one line of output per case, no server:
 *
 *   rules-driver lsn STR...            per STR: "DECIMAL HEX" (lsn_parse,
 *                                      then lsn_format), or "bad"
 *   rules-driver lsn-ge A B [A B]...   per pair: 0 when A >= B, 1 when
 *                                      not, 2 when either is malformed
 *                                      (the exit status of pgsync's lsn_ge)
 *   rules-driver pgerr SQLSTATE PRIMARY  pgerr_one_line(PRIMARY), then
 *                                      pgerr_text: "message (SQLSTATE x)";
 *                                      SQLSTATE "" for none
 *   rules-driver log PROG text|json LEVEL MSG  one log_msg line on stderr
 *
 * Built by test/rules.bats from lib/base's sources, so it tests the code
 * as it is in the tree, not an archive built before an edit.
 */
#include <stddef.h>			/* before lsn.h, which uses size_t */

#include "log.h"
#include "lsn.h"
#include "pgerror.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "lsn") == 0)
	{
		for (int i = 2; i < argc; i++)
		{
			lsn_t v;
			char buf[LSN_BUFSZ];

			if (lsn_parse(argv[i], &v))
				printf("%" PRIu64 " %s\n", v, lsn_format(v, buf));
			else
				printf("bad\n");
		}
		return 0;
	}
	if (argc >= 2 && argc % 2 == 0 && strcmp(argv[1], "lsn-ge") == 0)
	{
		for (int i = 2; i + 1 < argc; i += 2)
		{
			lsn_t a, b;

			if (!lsn_parse(argv[i], &a) || !lsn_parse(argv[i + 1], &b))
				printf("2\n");
			else
				printf("%d\n", a >= b ? 0 : 1);
		}
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "pgerr") == 0)
	{
		struct pgerr err = {0};
		char text[PGERR_TEXT_MAX];

		snprintf(err.sqlstate, sizeof(err.sqlstate), "%s", argv[2]);
		pgerr_one_line(err.msg, sizeof(err.msg), argv[3]);
		if (err.msg[0] == '\0')
			snprintf(err.msg, sizeof(err.msg), "unknown error");
		printf("%s\n", pgerr_text(&err, NULL, text, sizeof(text)));
		return 0;
	}
	if (argc == 6 && strcmp(argv[1], "log") == 0)
	{
		enum log_level level;

		log_init(argv[2]);
		log_set_json(strcmp(argv[3], "json") == 0);
		log_set_level(LOG_DEBUG);
		if (!log_parse_level(argv[4], &level))
			return 2;
		log_msg(level, "%s", argv[5]);
		return 0;
	}
	fprintf(stderr, "usage: rules-driver lsn STR... | lsn-ge A B... | pgerr SQLSTATE PRIMARY | log PROG text|json LEVEL MSG\n");
	return 2;
}
