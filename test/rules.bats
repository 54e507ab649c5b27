#!/usr/bin/env bats
# The rules the orchestrator (bash) and the programs (C) must both follow,
# where two copies must remain because neither side can call the other on
# every line: the exit codes and the JSON string escaping. Each is read
# from both sides and compared; no server needed.

load lib/common
bats_require_minimum_version 1.5.0

@test "the orchestrator's exit codes are the programs' (lib/base/common.h)" {
	local c b name
	# "NAME=N" from the C enum and from bin/pgsync's readonly line, with
	# the two names that differ mapped onto one.
	c=$(sed -n 's/^[[:space:]]*EXIT_\([A-Z_]*\) = \([0-9]*\),.*/\1=\2/p' "$PGSYNC_ROOT/lib/base/common.h" |
		sed 's/^DONE=/OK=/; s/^CONTINUITY=/RESYNC=/' | sort)
	b=$(grep -m 1 '^readonly EX_' "$PGSYNC_BIN/pgsync" | tr ' ' '\n' | sed -n 's/^EX_//p' | sort)
	[ -n "$c" ]
	[ "$(wc -l <<<"$c")" -ge 6 ]
	[ "$c" = "$b" ] || { diff <(echo "$c") <(echo "$b"); return 1; }
}

@test "the orchestrator's JSON string escaper writes what the programs' does (json_str and json_escape)" {
	local s want got
	eval "$(sed -n '/^json_str() {/,/^}/p' "$PGSYNC_BIN/pgsync")"
	# A file name the programs name in a --json error line: every character
	# the rule treats apart (quote, backslash, tab, CR, other control
	# characters) and UTF-8. (A newline never reaches the escaper: both
	# sides make a message one line first.)
	s=$(printf 'a"b\\c\td\re\001f\037g h\xc3\xa9')
	run --separate-stderr pg-apply --json -d "dbname=unused" "$s"
	[ "$status" -eq 2 ]
	want=$(sed -n 's/.*"msg":"cannot open \\"\(.*\)\\": No such file or directory".*/\1/p' <<<"$stderr")
	[ -n "$want" ]
	got=$(json_str "$s")
	[ "$got" = "$want" ] || { echo "bash: $got"; echo "C:    $want"; return 1; }
}
