# Shared helpers for the bats tests: where the built programs are, and how to
# compare data between clusters. Load with `load lib/common` (lib/cluster
# loads it too). Sourcing it twice is harmless.

PGSYNC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
PGSYNC_BIN=$PGSYNC_ROOT/bin
PGSYNC_SCRIPTS=$PGSYNC_ROOT/scripts
export PGSYNC_ROOT PGSYNC_BIN PGSYNC_SCRIPTS

# The built programs (pg-walcat, pg-apply, ..., pgsync) and pg-cluster
# resolve to this checkout, never to an installed copy.
case ":$PATH:" in
*":$PGSYNC_BIN:$PGSYNC_SCRIPTS:"*) ;;
*) PATH=$PGSYNC_BIN:$PGSYNC_SCRIPTS:$PATH ;;
esac
export PATH

# table_checksum URL TABLE
# md5 of every row of TABLE as text in UTF-8, sorted bytewise, so that two
# tables hold the same rows exactly when their checksums match, also in
# databases of different encodings. TABLE is an identifier,
# optionally schema-qualified (schema.table); it is quoted, not spliced.
# ROW(x.*), not the bare alias: a column named like the alias would win.
# The session settings fix the text form of times, floats and bytea, so
# clusters configured differently still compare equal.
table_checksum() {
	if [[ $# -ne 2 ]]; then
		echo "usage: table_checksum URL TABLE" >&2
		return 2
	fi
	local url=$1 table=$2 schema=public
	if [[ $table == *.* ]]; then
		schema=${table%%.*}
		table=${table#*.}
	fi
	psql -X -v ON_ERROR_STOP=1 -qAt -d "$url" -v schema="$schema" -v table="$table" <<'SQL'
SET TIME ZONE 'UTC';
SET datestyle = 'ISO, MDY';
SET intervalstyle = 'postgres';
SET extra_float_digits = 3;
SET bytea_output = 'hex';
SELECT coalesce(md5(string_agg(r, '\x0a'::bytea ORDER BY r)), md5(''))
  FROM (SELECT convert_to(ROW(x.*)::text, 'UTF8') AS r FROM :"schema".:"table" x) s;
SQL
}

# kill_test_pids: SIGKILL every process the test listed, one pid a line, in
# $BATS_TEST_TMPDIR/pids (its pipeline, load, other sessions): for teardown,
# so that a failed test leaves nothing of its own running.
kill_test_pids() {
	[[ -f $BATS_TEST_TMPDIR/pids ]] || return 0
	# shellcheck disable=SC2046 # one argument a pid
	kill -9 $(<"$BATS_TEST_TMPDIR/pids") 2>/dev/null || true
}

# sql_is CLUSTER EXPECTED SQL: the query's result is EXPECTED. For
# wait_until, which runs it again each time; a "$(psql_at ...)" written
# into wait_until's own arguments is read once and never changes.
sql_is() {
	[ "$(psql_at "$1" -c "$3")" = "$2" ]
}

# wait_until SECONDS COMMAND...
# Run COMMAND every 0.1 s until it succeeds; fail after SECONDS times
# PGSYNC_TEST_WAIT_SCALE (a whole number, default 1): test/run-bats raises
# it when files run side by side, each then slower than alone. It only
# bounds a wait for what must happen: no test waits for something not to.
wait_until() {
	local deadline=$((SECONDS + $1 * ${PGSYNC_TEST_WAIT_SCALE:-1}))
	shift
	until "$@"; do
		if ((SECONDS >= deadline)); then
			echo "wait_until: timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.1
	done
}

# sanitized PROGRAM: true when bin/PROGRAM was built with AddressSanitizer
# (make sanitize). Its shadow memory inflates RSS, so memory bounds are only
# asserted on normal builds; everything else is checked the same.
sanitized() {
	grep -q __asan_init "$PGSYNC_BIN/$1" 2>/dev/null
}

# soak_only WHY: this test runs in make soak (PGSYNC_TEST_SOAK=1) only; WHY
# names the tests of make check that already take its path, so that make
# check stays within its ten minutes.
soak_only() {
	[[ ${PGSYNC_TEST_SOAK:-} == 1 ]] || skip "long tier (PGSYNC_TEST_SOAK=1, make soak); in make check: $1"
}

# The UTC time a log line other than an error begins with (lib/base/log.c,
# bin/pgsync's emit), as an extended regular expression.
LOG_TIME_RE='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z '

# untimed TEXT: TEXT without the time at the start of each of its lines.
untimed() {
	sed -E "s/^$LOG_TIME_RE//" <<<"$1"
}
