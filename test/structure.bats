#!/usr/bin/env bats
# Rules about the source tree itself, checked by reading it: no server, no
# build needed (make check-fast runs them).

load lib/common

# The session settings that fix the text form of values are set in one place
# (lib/base/session.c); test/encoding.bats shows what they do on the wire.
@test "every connection is opened by the session module, and no other file sets a session setting" {
	cd "$PGSYNC_ROOT"
	run grep -rlE 'conn_connect\(|PQconnectdb|PQconnectStart|PQsetdbLogin' bin lib --include=*.c
	[ "$(sort <<<"$output" | tr '\n' ' ')" = "lib/base/conn.c lib/base/session.c " ]
	run grep -rIE "(^|[\"'; ])SET +(LOCAL +)?(client_encoding|datestyle|intervalstyle|extra_float_digits|bytea_output|timezone|statement_timeout|lock_timeout|idle_in_transaction_session_timeout|idle_session_timeout|transaction_timeout|session_replication_role)\b" bin lib
	[ "$(grep -v '^lib/base/session\.[ch]:' <<<"$output")" = "" ]
}

# A helper of test/lib/ has one definition: a test file that wrote its own
# copy would drift from it (there were four of lsn_num, new_slot and
# slot_active).
@test "no test file redefines a helper of test/lib" {
	cd "$PGSYNC_ROOT/test"
	local fn files=() dups=$BATS_TEST_TMPDIR/dups
	# Every test file, in subfolders too (test/lib itself aside), and
	# test/chaos, a script without a suffix.
	mapfile -t files < <(find . -path ./lib -prune -o -type f \( -name '*.bats' -o -name '*.bash' \) -print)
	files+=(chaos)
	[ "${#files[@]}" -gt 40 ]
	for fn in $(sed -n -E 's/^([a-z_][a-z0-9_]*)\(\) *\{.*/\1/p' lib/*.bash); do
		grep -lE "^[[:space:]]*$fn\(\) *\{" "${files[@]}" | sed "s|^|$fn: |"
	done >"$dups"
	cat "$dups"
	[ ! -s "$dups" ]
}
