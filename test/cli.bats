#!/usr/bin/env bats
# The command-line contract every program shares, from one table: the
# common options (same names, same ranges, same messages), --help on stdout
# exit 0, --version, usage errors on stderr exit 2, and strict numbers that
# name the option they belong to. No server is needed: all of this happens
# before any connection (a value is accepted when the --help after it is
# reached).

load lib/common
bats_require_minimum_version 1.5.0

# program | arguments that make a command line valid | the common options
# beyond those every program takes (-h -V -q --log-level --json) | its own
# numeric options
PROGRAMS=(
	"pg-walcat|--slot cli_s --publication cli_p|dbname slot zstd max-message-bytes|--status-interval --heartbeat-interval"
	"pg-apply||dbname jobs max-message-bytes|--max-batch-bytes --max-batch-delay --heartbeat-interval --copy-threshold --max-retries"
	"pg-snapshot-dump|--own-snapshot --table public.cli_t|dbname slot jobs zstd max-message-bytes|--frame-size --split-rows --timeout --chunk-rows --group-seconds"
	"pg-slot|drop --slot cli_s|dbname slot|--wait --hold-timeout"
	"pg-ack|--slot cli_s --lsn 0/1|dbname slot|--wait"
	"pgsync-config|--catalog-sql||"
	"pg-verify|--source host=/nonexistent --target host=/nonexistent --source-snapshot 00000003-00000002-1 --target-snapshot 00000003-00000002-1 --tables /nonexistent|jobs|"
)
EVERYWHERE="help version quiet log-level json"
OPTIONAL="dbname slot jobs zstd max-message-bytes"

# option: the arguments it is given, each accepted, then those refused, each
# with the error every program gives for it ("" for the refusals: none).
accepted() {
	case $1 in
	help) printf '%s\n' -h --help ;;
	version) printf '%s\n' -V --version ;;
	quiet) printf '%s\n' -q --quiet ;;
	log-level) printf '%s\n' "--log-level debug" "--log-level=info" "--log-level warn" "--log-level error" ;;
	json) printf '%s\n' --json ;;
	dbname) printf '%s\n' "-d host=/nonexistent" "--dbname=postgresql:///cli" ;;
	slot) printf '%s\n' "--slot cli_other" ;;
	jobs) printf '%s\n' "--jobs 1" "-j 256" ;;
	zstd) printf '%s\n' -z --zstd --zstd=1 --zstd=19 ;;
	max-message-bytes) printf '%s\n' "--max-message-bytes 1kB" "--max-message-bytes 1024" "--max-message-bytes=1GB" ;;
	esac
}

refused() {
	case $1 in
	log-level) printf '%s\n' '--log-level loud|invalid --log-level "loud": expected debug, info, warn or error' ;;
	dbname) printf '%s\n' '-d nonsense|invalid connection string given to -d: expected KEY=VALUE pairs or a postgresql:// URL' ;;
	slot) printf '%s\n' '--slot Bad-Name|invalid slot name "Bad-Name": use 1 to 63 lower-case letters, digits and underscores' ;;
	jobs)
		printf '%s\n' '--jobs 0|invalid --jobs "0": expected a number from 1 to 256' \
			'--jobs 257|invalid --jobs "257": expected a number from 1 to 256' \
			'--jobs x|invalid --jobs "x": expected a number from 1 to 256'
		;;
	zstd)
		printf '%s\n' '--zstd=0|invalid --zstd level "0": expected 1 to 19' \
			'--zstd=20|invalid --zstd level "20": expected 1 to 19' \
			'--zstd=x|invalid --zstd level "x": expected 1 to 19'
		;;
	max-message-bytes)
		printf '%s\n' '--max-message-bytes 1023|invalid --max-message-bytes "1023": expected a size from 1kB to 1GB' \
			'--max-message-bytes 2GB|invalid --max-message-bytes "2GB": expected a size from 1kB to 1GB' \
			'--max-message-bytes 12QB|invalid --max-message-bytes "12QB": expected a size from 1kB to 1GB'
		;;
	esac
}

# for_each_program FUNCTION: FUNCTION PROG PREFIX COMMON NUMERIC for every row.
for_each_program() {
	local row prog prefix common numeric
	for row in "${PROGRAMS[@]}"; do
		IFS='|' read -r prog prefix common numeric <<<"$row"
		[ -x "$PGSYNC_BIN/$prog" ] || {
			echo "$prog is not built" >&2
			return 1
		}
		"$1" "$prog" "$prefix" "$EVERYWHERE $common" "$numeric" || {
			echo "failed for $prog" >&2
			return 1
		}
	done
}

fail_with() {
	echo "$*: exit $status, stdout: $output, stderr: $stderr" >&2
	return 1
}

check_help() {
	local opt
	for opt in -h --help; do
		run --separate-stderr "$1" "$opt"
		[ "$status" -eq 0 ] && [[ ${lines[0]} == "usage: $1 "* ]] && [ "$stderr" = "" ] || { fail_with "$1 $opt"; return 1; }
		# The help names the options every program takes.
		[[ $output == *"-h, --help"* && $output == *"-V, --version"* && $output == *"-q, --quiet"* &&
			$output == *"--log-level"* && $output == *"--json"* ]] || { fail_with "$1 $opt lacks a common option"; return 1; }
	done
}

check_version() {
	local opt
	for opt in -V --version; do
		run --separate-stderr "$1" "$opt"
		[ "$status" -eq 0 ] && [ "$output" = "$1 (pgsync) 0.1.0" ] && [ "$stderr" = "" ] || { fail_with "$1 $opt"; return 1; }
	done
}

# Every common option a program takes accepts the same values and refuses
# the same ones with the same message; one it does not take is unknown.
check_common() {
	local prog=$1 prefix=$2 takes=" $3 " opt arg pair
	for opt in $EVERYWHERE $OPTIONAL; do
		if [[ $takes != *" $opt "* ]]; then
			arg=$(accepted "$opt" | head -n 1)
			run --separate-stderr "$prog" $prefix $arg
			[ "$status" -eq 2 ] && [[ $stderr == "$prog: error: unknown option ${arg%% *}"$'\n'"usage: $prog "* ]] ||
				{ fail_with "$prog takes $arg, which its row does not list"; return 1; }
			continue
		fi
		while IFS= read -r arg; do
			run --separate-stderr "$prog" $prefix $arg --help
			[ "$status" -eq 0 ] && [ "$stderr" = "" ] || { fail_with "$prog $arg"; return 1; }
		done < <(accepted "$opt")
		while IFS= read -r pair; do
			[ -n "$pair" ] || continue
			run --separate-stderr "$prog" $prefix ${pair%%|*} --help
			[ "$status" -eq 2 ] && [ "$output" = "" ] &&
				[[ $stderr == "$prog: error: ${pair#*|}"$'\n'"usage: $prog "* ]] || { fail_with "$prog ${pair%%|*}"; return 1; }
		done < <(refused "$opt")
	done
}

check_unknown_option() {
	local opt
	for opt in --no-such-option -Y; do
		run --separate-stderr "$1" $2 "$opt"
		[ "$status" -eq 2 ] && [ "$output" = "" ] &&
			[[ $stderr == "$1: error: unknown option $opt"$'\n'"usage: $1 "* ]] || { fail_with "$1 $opt"; return 1; }
	done
}

check_bad_numbers() {
	local opt value
	for opt in $4; do
		for value in abc 12x -5 ''; do
			run --separate-stderr "$1" $2 "$opt" "$value"
			[ "$status" -eq 2 ] && [[ $stderr == "$1: error: "*"$opt"*"usage: $1 "* ]] && [ -z "$output" ] ||
				{ fail_with "$1 $opt '$value'"; return 1; }
		done
	done
}

@test "every program prints its usage and the common options for -h and --help on stdout, exit 0" {
	for_each_program check_help
}

@test "every program prints '<program> (pgsync) 0.1.0' for -V and --version" {
	for_each_program check_version
}

@test "every program takes the common options it shares with the same values, ranges and messages" {
	for_each_program check_common
}

@test "every program rejects an unknown option with a usage line on stderr, exit 2" {
	for_each_program check_unknown_option
}

@test "every program rejects a bad number for its own numeric options, naming the option, exit 2" {
	for_each_program check_bad_numbers
}

@test "pg-walcat still takes --log, the old spelling of --log-level" {
	run --separate-stderr pg-walcat --slot cli_s --publication cli_p --log warn --help
	[ "$status" -eq 0 ]
	run --separate-stderr pg-walcat --slot cli_s --publication cli_p --log loud
	[ "$status" -eq 2 ]
	[[ $stderr == 'pg-walcat: error: invalid --log-level "loud": expected debug, info, warn or error'$'\n'* ]]
}

@test "pgsync takes -V as the programs do, and COMMAND --help prints that command's help" {
	local opt cmd
	for opt in -V --version; do
		run --separate-stderr pgsync "$opt"
		[ "$status" -eq 0 ] && [ "$output" = "pgsync (pgsync) 0.1.0" ] && [ "$stderr" = "" ] || fail_with "pgsync $opt"
	done
	for cmd in check bootstrap run status verify switchover cleanup; do
		for opt in -h --help; do
			run --separate-stderr pgsync "$cmd" "$opt"
			[ "$status" -eq 0 ] && [ "$stderr" = "" ] || fail_with "pgsync $cmd $opt"
			# Its own synopsis only, its description, the common options.
			[[ ${lines[0]} == "usage: pgsync "*"] $cmd"* ]] || fail_with "pgsync $cmd $opt: synopsis"
			[ "$(grep -c '^usage: ' <<<"$output")" -eq 1 ] || fail_with "pgsync $cmd $opt: one usage"
			[ -z "$(grep -F '[--log LEVEL] ' <<<"$output" | grep -vE "\[--log LEVEL\] $cmd( |\$)")" ] ||
				fail_with "pgsync $cmd $opt: another command's synopsis"
			[[ $output == *$'\n'"$cmd "* && $output == *"-V, --version"* && $output == *"--log LEVEL"* ]] ||
				fail_with "pgsync $cmd $opt: description or options"
			[[ $output != *"Commands:"* ]] || fail_with "pgsync $cmd $opt: the whole usage"
		done
	done
	# A usage error still wins over help.
	run --separate-stderr pgsync check --bogus --help
	[ "$status" -eq 2 ]
}
