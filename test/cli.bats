#!/usr/bin/env bats
# The command-line contract every program shares: --help on stdout exit 0,
# --version, usage errors on stderr exit 2, and strict numbers that name the
# option they belong to. No server is needed: all of this happens before
# any connection.

load lib/common
bats_require_minimum_version 1.5.0

# A program not built yet is skipped, not failed.
need() {
	[ -x "$PGSYNC_BIN/$1" ] || skip "not built"
}

# Arguments that make a command line valid except for the option under
# test, and the numeric options each program takes.
prefix_for() {
	case $1 in
	pg-slot) echo "drop --slot cli_s" ;;
	pg-ack) echo "--slot cli_s --lsn 0/1" ;;
	pg-walcat) echo "--slot cli_s --publication cli_p" ;;
	pg-apply) echo "" ;;
	pg-snapshot-dump) echo "--own-snapshot --table public.cli_t" ;;
	esac
}

numeric_options_for() {
	case $1 in
	pg-slot) echo "--wait" ;;
	pg-ack) echo "--wait" ;;
	pg-walcat) echo "--status-interval --max-message-bytes" ;;
	pg-apply) echo "--jobs --max-batch-bytes --max-batch-delay" ;;
	pg-snapshot-dump) echo "--jobs --frame-size --split-rows" ;;
	esac
}

check_help() {
	need "$1"
	run --separate-stderr "$1" --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: $1 "* ]]
	[ "$stderr" = "" ]
	# The synopsis names every long option the help goes on to describe.
	[[ $output == *"--help"* && $output == *"--version"* ]]
}

check_version() {
	need "$1"
	run --separate-stderr "$1" --version
	[ "$status" -eq 0 ]
	[ "$output" = "$1 (pgsync) 0.1.0" ]
	[ "$stderr" = "" ]
}

check_unknown_option() {
	need "$1"
	local opt
	for opt in --no-such-option -Y; do
		run --separate-stderr "$1" $(prefix_for "$1") "$opt"
		[ "$status" -eq 2 ]
		[ "$output" = "" ]
		[[ $stderr == "$1: error: unknown option $opt"$'\n'"usage: $1 "* ]]
	done
}

check_bad_numbers() {
	need "$1"
	local opt value
	[ -n "$(numeric_options_for "$1")" ]
	for opt in $(numeric_options_for "$1"); do
		for value in abc 12x -5 ''; do
			run --separate-stderr "$1" $(prefix_for "$1") "$opt" "$value"
			if [ "$status" -ne 2 ] || [[ $stderr != "$1: error: "*"$opt"*"usage: $1 "* ]] || [ -n "$output" ]; then
				echo "$1 $opt '$value': exit $status, stderr: $stderr" >&2
				return 1
			fi
		done
	done
}

@test "pg-slot --help prints usage on stdout and exits 0" { check_help pg-slot; }
@test "pg-slot --version prints 'pg-slot (pgsync) 0.1.0'" { check_version pg-slot; }
@test "pg-slot rejects an unknown option with a usage line on stderr, exit 2" { check_unknown_option pg-slot; }
@test "pg-slot rejects a bad number for a numeric option, naming it, exit 2" { check_bad_numbers pg-slot; }

@test "pg-ack --help prints usage on stdout and exits 0" { check_help pg-ack; }
@test "pg-ack --version prints 'pg-ack (pgsync) 0.1.0'" { check_version pg-ack; }
@test "pg-ack rejects an unknown option with a usage line on stderr, exit 2" { check_unknown_option pg-ack; }
@test "pg-ack rejects a bad number for a numeric option, naming it, exit 2" { check_bad_numbers pg-ack; }

@test "pg-walcat --help prints usage on stdout and exits 0" { check_help pg-walcat; }
@test "pg-walcat --version prints 'pg-walcat (pgsync) 0.1.0'" { check_version pg-walcat; }
@test "pg-walcat rejects an unknown option with a usage line on stderr, exit 2" { check_unknown_option pg-walcat; }
@test "pg-walcat rejects a bad number for a numeric option, naming it, exit 2" { check_bad_numbers pg-walcat; }

@test "pg-apply --help prints usage on stdout and exits 0" { check_help pg-apply; }
@test "pg-apply --version prints 'pg-apply (pgsync) 0.1.0'" { check_version pg-apply; }
@test "pg-apply rejects an unknown option with a usage line on stderr, exit 2" { check_unknown_option pg-apply; }
@test "pg-apply rejects a bad number for a numeric option, naming it, exit 2" { check_bad_numbers pg-apply; }

@test "pg-snapshot-dump --help prints usage on stdout and exits 0" { check_help pg-snapshot-dump; }
@test "pg-snapshot-dump --version prints 'pg-snapshot-dump (pgsync) 0.1.0'" { check_version pg-snapshot-dump; }
@test "pg-snapshot-dump rejects an unknown option with a usage line on stderr, exit 2" { check_unknown_option pg-snapshot-dump; }
@test "pg-snapshot-dump rejects a bad number for a numeric option, naming it, exit 2" { check_bad_numbers pg-snapshot-dump; }
