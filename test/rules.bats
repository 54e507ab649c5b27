#!/usr/bin/env bats
# The rules the orchestrator (bash) and the programs (C) must both follow,
# where two copies must remain because neither side can call the other on
# every line: the exit codes, the JSON string escaping, the LSN's text form,
# the "message (SQLSTATE x)" form and the log line. Each is read from both
# sides and compared; C is the reference. No server needed: the C side is
# lib/base itself, through test/rules-driver.c, built here from the sources
# (not from an archive an edit may have left behind).

load lib/common
bats_require_minimum_version 1.5.0

setup_file() {
	local src=$PGSYNC_ROOT/lib/base
	cc -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror -Wno-unused-parameter \
		-I "$src" -I "$(pg_config --includedir)" -o "$BATS_FILE_TMPDIR/rules-driver" \
		"$PGSYNC_ROOT/test/rules-driver.c" "$src/lsn.c" "$src/pgerror.c" "$src/log.c" \
		"$src/json.c" "$src/common.c" -L "$(pg_config --libdir)" -lpq
}

# pgsync_functions NAME...: define bin/pgsync's functions NAME here.
pgsync_functions() {
	local fn
	for fn in "$@"; do
		eval "$(sed -n "/^$fn() {/,/^}/p" "$PGSYNC_BIN/pgsync")"
		declare -F "$fn" >/dev/null || { echo "no function $fn in bin/pgsync"; return 1; }
	done
}

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

# One list for both sides: well-formed positions (PostgreSQL writes
# upper-case hex without leading zeros; both read any case and up to eight
# digits a half) and malformed ones, which neither reads as 0/0.
LSN_CASES=(0/0 0/1 1/0 FFFFFFFF/FFFFFFFF ffffffff/ffffffff 7FFFFFFF/FFFFFFFF 80000000/0
	abCD/12eF 16/B374D848 00000001/0000000A 0000/00 0/00000000
	"" 0 / 0/ /0 1/2/3 0//1 x/0 0/g 0x1/0 +1/0 -1/0 123456789/0 0/123456789 000000001/0
	" 0/1" "0/1 " "0 /1" "0/ 1" $'0/1\n' "F/F F/F" "１/0")

@test "the orchestrator reads an LSN as the programs do (lsn_num and lsn_parse)" {
	local s c b
	pgsync_functions lsn_num
	# C: "DECIMAL HEX" or "bad"; bash: the decimal, or a failure.
	c=$("$BATS_FILE_TMPDIR/rules-driver" lsn "${LSN_CASES[@]}" | cut -d ' ' -f 1)
	b=$(for s in "${LSN_CASES[@]}"; do
		if n=$(lsn_num "$s" 2>&1); then echo "$n"; else echo "bad${n:+ $n}"; fi
	done)
	[ "$(wc -l <<<"$c")" -eq ${#LSN_CASES[@]} ]
	[ "$c" = "$b" ] || { paste <(printf '%q\n' "${LSN_CASES[@]}") <(echo "$c") <(echo "$b"); return 1; }
	# What the programs write back is PostgreSQL's form.
	run "$BATS_FILE_TMPDIR/rules-driver" lsn 0/0 00000001/0000000A ffffffff/ffffffff
	[ "$output" = $'0 0/0\n4294967306 1/A\n18446744073709551615 FFFFFFFF/FFFFFFFF' ]
}

@test "the orchestrator orders LSNs as the programs do (lsn_ge), also past the sign bit" {
	local a b pairs=() want got
	pgsync_functions lsn_num lsn_ge
	for a in 0/0 0/1 1/0 FFFFFFFF/0 FFFFFFFF/FFFFFFFF 7FFFFFFF/FFFFFFFF 80000000/0 9/0 10/0 A/0 x 0/; do
		for b in 0/0 1/0 FFFFFFFF/FFFFFFFF 80000000/0 7FFFFFFF/FFFFFFFF A/0 9/FFFFFFFF ""; do
			pairs+=("$a" "$b")
		done
	done
	want=$("$BATS_FILE_TMPDIR/rules-driver" lsn-ge "${pairs[@]}")
	got=$(for ((i = 0; i < ${#pairs[@]}; i += 2)); do
		lsn_ge "${pairs[i]}" "${pairs[i + 1]}" 2>&1
		echo $?
	done)
	[ "$got" = "$want" ] || { paste <(printf '%q %q\n' "${pairs[@]}") <(echo "$want") <(echo "$got"); return 1; }
}

# pgerr_case SQLSTATE PRIMARY PSQL-STDERR: the programs' text for an error
# with this SQLSTATE ("" for none) and primary message is what psql_error
# reads from what psql (pgsync runs it with VERBOSITY=verbose) prints for it.
pgerr_case() {
	local want got
	printf '%s' "$3" >"$BATS_TEST_TMPDIR/psql.err"
	want=$("$BATS_FILE_TMPDIR/rules-driver" pgerr "$1" "$2")
	got=$(psql_error "$BATS_TEST_TMPDIR/psql.err")
	[ "$got" = "$want" ] && return 0
	printf 'psql wrote:\n%s\nbash: %s\nC:    %s\n' "$3" "$got" "$want"
	return 1
}

@test "the orchestrator writes a server error as the programs do: \"message (SQLSTATE x)\" (psql_error and pgerr_text)" {
	pgsync_functions psql_error
	# One line, a statement's position and the server's source after it.
	pgerr_case 42P01 'relation "nope" does not exist' 'psql:<stdin>:1: ERROR:  42P01: relation "nope" does not exist
LINE 1: SELECT * FROM nope
                      ^
LOCATION:  parserOpenTable, parse_relation.c:1392
'
	# A DETAIL (and the fields verbose adds): not part of the message.
	pgerr_case 23505 'duplicate key value violates unique constraint "t_pkey"' 'psql:<stdin>:3: ERROR:  23505: duplicate key value violates unique constraint "t_pkey"
DETAIL:  Key (id)=(1) already exists.
SCHEMA NAME:  public
TABLE NAME:  t
CONSTRAINT NAME:  t_pkey
LOCATION:  _bt_check_unique, nbtinsert.c:666
'
	# A message of several lines, the last ending in a dot, then a HINT
	# and a CONTEXT.
	pgerr_case P0001 $'row 1 is bad:\nsee the log.' 'psql:<stdin>:1: ERROR:  P0001: row 1 is bad:
see the log.
HINT:  Fix the row.
CONTEXT:  PL/pgSQL function inline_code_block line 1 at RAISE
LOCATION:  exec_stmt_raise, pl_exec.c:3908
'
	# A notice first, and the error ending the session.
	pgerr_case 57P01 'terminating connection due to administrator command' 'psql:<stdin>:1: NOTICE:  00000: table "x" does not exist, skipping
LOCATION:  DropErrorMsgNonExistent, tablecmds.c:1296
psql:<stdin>:2: FATAL:  57P01: terminating connection due to administrator command
LOCATION:  ProcessInterrupts, postgres.c:3290
server closed the connection unexpectedly
	This probably means the server terminated abnormally
	before or while processing the request.
psql:<stdin>:2: error: connection to server was lost
'
	# Without a SQLSTATE: the message alone (psql without verbose; libpq's
	# own messages, over several lines, the next ones indented by a tab).
	pgerr_case "" 'relation "nope" does not exist' 'psql:<stdin>:1: ERROR:  relation "nope" does not exist
LINE 1: SELECT * FROM nope
                      ^
'
	pgerr_case "" $'connection to server on socket "/run/x/.s.PGSQL.5432" failed: No such file or directory\n\tIs the server running locally and accepting connections on that Unix domain socket?\n' \
		$'psql: error: connection to server on socket "/run/x/.s.PGSQL.5432" failed: No such file or directory\n\tIs the server running locally and accepting connections on that Unix domain socket?\n'
	pgerr_case "" $'connection to server at "db" (10.0.0.1), port 5432 failed: FATAL:  password authentication failed for user "app"\n' \
		$'psql: error: connection to server at "db" (10.0.0.1), port 5432 failed: FATAL:  password authentication failed for user "app"\n'
	# Nothing at all.
	pgerr_case "" "" ""
}

# log_lines FORM JOURNAL LEVEL MSG: the line each side writes for it, on
# two lines (C, then bash), the time and pid replaced by TIME and PID once
# their form is checked. JOURNAL 1: stderr is the journal's stream.
log_lines() {
	local form=$1 journal=$2 level=$3 msg=$4 f side line js=""
	for side in c bash; do
		f=$BATS_TEST_TMPDIR/$side.log
		: >"$f"
		((journal)) && js=$(stat -L -c '%d:%i' "$f")
		if [[ $side == c ]]; then
			JOURNAL_STREAM=$js "$BATS_FILE_TMPDIR/rules-driver" log pgsync "$form" "$level" "$msg" 2>>"$f"
		else
			JOURNAL_STREAM=$js bash -c 'source "$1"; LOG_JSON=$2 LOG_LEVEL=0 LINE_CLEAR=""; emit pgsync "$3" "$4"' \
				_ "$BATS_FILE_TMPDIR/emit.bash" "$([[ $form == json ]] && echo 1 || echo 0)" "$level" "$msg" 2>>"$f"
		fi
		[ "$(wc -l <"$f")" -eq 1 ] || { echo "$side wrote:"; cat "$f"; return 1; }
		line=$(<"$f")
		if [[ $form == json ]]; then
			[[ $line =~ \"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\" ]] || { echo "$side time: $line"; return 1; }
			[[ $line =~ \"pid\":[1-9][0-9]*, ]] || { echo "$side pid: $line"; return 1; }
			line=$(sed -E 's/"time":"[^"]*"/"time":TIME/; s/"pid":[0-9]+/"pid":PID/' <<<"$line")
		else
			line=$(sed -E 's/^(<[0-7]>)?[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z /\1TIME /' <<<"$line")
		fi
		echo "$line"
	done
}

@test "the orchestrator's log line is the programs' (emit and log_msg): text and JSON, each level, on and off the journal" {
	local form journal level msg out n=0
	# bin/pgsync's logging as it is: its functions and its journal test,
	# which reads the stderr of the shell that runs it.
	{
		sed -n '/^log_prio() {/,/^}/p; /^level_num() {/,/^}/p; /^json_str() {/,/^}/p; /^emit() {/,/^}/p' "$PGSYNC_BIN/pgsync"
		sed -n '/^LOG_PRIO=0$/,/^fi$/p' "$PGSYNC_BIN/pgsync"
	} >"$BATS_FILE_TMPDIR/emit.bash"
	grep -q '^[[:space:]]*LOG_PRIO=1$' "$BATS_FILE_TMPDIR/emit.bash"
	for form in text json; do
		for journal in 0 1; do
			for level in debug info warn error; do
				for msg in 'copied 3 tables' 'ends in a dot.' $'two\nlines\n' $'dots and newlines.\n.\n' 'a "quoted" \ tab\there'; do
					out=$(log_lines "$form" "$journal" "$level" "$msg") || { echo "$out"; return 1; }
					[ "$(sed -n 1p <<<"$out")" = "$(sed -n 2p <<<"$out")" ] ||
						{ echo "$form, journal $journal, $level, $(printf %q "$msg"):"; echo "$out"; return 1; }
					n=$((n + 1))
				done
			done
		done
	done
	[ "$n" -eq 80 ]
	# The form itself: the journal's priority, the time only off the
	# journal and not on errors, the level's name.
	run log_lines text 1 warn x
	[ "${lines[0]}" = "<4>pgsync: warning: x" ]
	run log_lines text 0 info x
	[ "${lines[0]}" = "TIME pgsync: x" ]
	run log_lines text 0 error x
	[ "${lines[0]}" = "pgsync: error: x" ]
	run log_lines json 1 debug x
	[ "${lines[0]}" = '<7>{"time":TIME,"program":"pgsync","pid":PID,"level":"debug","msg":"x"}' ]
}
