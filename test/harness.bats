#!/usr/bin/env bats
# The test harness itself: scripts/pg-cluster and test/lib/cluster.bash.
# Every other test file relies on what these check.
# shellcheck disable=SC2154 # NAME_URL and NAME_DIR come from cluster_start

load lib/cluster

setup_file() {
	cluster_start a
	cluster_start b
}

teardown_file() {
	cluster_stop_all
}

# Pids of processes whose working directory is under $1 (a server's
# postmaster and children work in its data directory).
procs_under() {
	local p
	for p in /proc/[0-9]*; do
		case $(readlink "$p/cwd" 2>/dev/null) in
		"$1"/*) echo "${p#/proc/}" ;;
		esac
	done
}

@test "cluster starts with wal_level=logical and the promised settings" {
	run psql_at a -c "SELECT current_setting('wal_level'), current_setting('max_replication_slots'),
		current_setting('max_wal_senders'), current_setting('fsync'), current_setting('listen_addresses')"
	[ "$status" -eq 0 ]
	[ "$output" = "logical|32|32|off|127.0.0.1" ]
}

@test "pg-cluster start prints exactly the conninfo line, also kept in DIR/conninfo" {
	run pg-cluster start "$a_DIR"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$output" = "$a_URL" ]
	[ "$(cat "$a_DIR/conninfo")" = "$a_URL" ]
	[[ $a_URL =~ ^host=$a_DIR/sock\ port=[0-9]+\ user=postgres\ dbname=postgres$ ]]
	[ "$(cat "$a_DIR/major")" = "$(psql_at a -c 'SHOW server_version_num' | cut -c1-2)" ]
	[ -x "$(cat "$a_DIR/bindir")/postgres" ]
}

@test "pgoutput slot is created over a TCP replication connection" {
	local port
	port=$(cat "$a_DIR/port")
	run psql -X -qAt -d "host=127.0.0.1 port=$port user=postgres dbname=postgres replication=database" \
		-c "CREATE_REPLICATION_SLOT harness_slot LOGICAL pgoutput"
	[ "$status" -eq 0 ]
	[[ $output == harness_slot\|* ]]
	[ "$(psql_at a -c "SELECT plugin FROM pg_replication_slots WHERE slot_name = 'harness_slot'")" = pgoutput ]
	psql_at a -c "SELECT pg_drop_replication_slot('harness_slot')" >/dev/null
}

@test "restart keeps the port, the conninfo and the data" {
	local url_before=$a_URL
	psql_at a -c "CREATE TABLE restart_probe AS SELECT 42 AS v"
	cluster_restart a
	[ "$(pg-cluster info "$a_DIR")" = "$url_before" ]
	[ "$(psql_at a -c 'SELECT v FROM restart_probe')" = 42 ]
}

@test "two clusters run side by side with their own ports and system identifiers" {
	[ "$(cat "$a_DIR/port")" != "$(cat "$b_DIR/port")" ]
	local ida idb
	ida=$(psql_at a -c 'SELECT system_identifier FROM pg_control_system()')
	idb=$(psql_at b -c 'SELECT system_identifier FROM pg_control_system()')
	[ -n "$ida" ]
	[ "$ida" != "$idb" ]
	psql_at a -c "CREATE TABLE only_on_a (id int)"
	run psql_at b -c "SELECT to_regclass('only_on_a') IS NULL"
	[ "$output" = t ]
}

@test "set writes a setting that a reload applies and a restart keeps" {
	cluster_set a work_mem=12MB
	[ "$(psql_at a -c 'SHOW work_mem')" = 12MB ]
	cluster_restart a
	[ "$(psql_at a -c 'SHOW work_mem')" = 12MB ]
}

@test "stop twice is fine, info fails while stopped, start brings it back" {
	cluster_stop b
	cluster_stop b --mode immediate
	run pg-cluster info "$b_DIR"
	[ "$status" -eq 1 ]
	[[ $output == "pg-cluster: error: "* ]]
	cluster_start b
	[ "$(psql_at b -c 'SELECT 1')" = 1 ]
}

# postmaster_gone PID: no process PID, or only its zombie.
postmaster_gone() {
	! _cluster_alive "$1"
}

@test "start recovers a cluster whose postmaster was killed with SIGKILL" {
	psql_at b -c "CREATE TABLE crash_probe AS SELECT 7 AS v"
	local pid
	pid=$(head -n 1 "$b_DIR/data/postmaster.pid")
	kill -KILL "$pid"
	# kill returns once the signal is sent: on a busy machine the
	# postmaster may still be there a moment later.
	wait_until 10 postmaster_gone "$pid"
	run pg-cluster info "$b_DIR"
	[ "$status" -eq 1 ]
	cluster_start b
	[ "$(psql_at b -c 'SELECT v FROM crash_probe')" = 7 ]
}

@test "a server started from a test inherits none of bats' descriptors" {
	local pid mine theirs
	pid=$(head -n 1 "$b_DIR/data/postmaster.pid")
	mine=$(for fd in "/proc/$$/fd/"*; do readlink "$fd"; done | grep -E '^(pipe|/tmp/bats)' | sort -u)
	theirs=$(for fd in "/proc/$pid/fd/"*; do readlink "$fd"; done | sort -u)
	[ -n "$mine" ]
	[ -z "$(comm -12 <(echo "$mine") <(echo "$theirs"))" ]
}

@test "pg-cluster: usage errors exit 2, runtime errors exit 1 with one error line" {
	run pg-cluster frobnicate
	[ "$status" -eq 2 ]
	run pg-cluster start "$BATS_TEST_TMPDIR/x" --port notaport
	[ "$status" -eq 2 ]
	run pg-cluster stop "$a_DIR" --mode gentle
	[ "$status" -eq 2 ]
	run pg-cluster info "$BATS_TEST_TMPDIR/nonexistent"
	[ "$status" -eq 1 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ $output == "pg-cluster: error: "* ]]
	run pg-cluster destroy "$PGSYNC_ROOT"
	[ "$status" -eq 1 ]
	[ -d "$PGSYNC_ROOT/test" ]
}

@test "table_checksum matches for equal rows in any order and tells NULL, '' and \\N apart" {
	local sql="CREATE TABLE ck (id int PRIMARY KEY, v text, t timestamptz)"
	psql_at a -c "$sql"
	psql_at b -c "$sql"
	psql_at a -c "INSERT INTO ck VALUES (1, NULL, '2024-01-01 00:00+00'), (2, '', NULL), (3, E'\\\\N', '2024-06-01 12:00+02')"
	psql_at b -c "INSERT INTO ck VALUES (3, E'\\\\N', '2024-06-01 10:00+00'), (2, '', NULL), (1, NULL, '2024-01-01 00:00+00')"
	[ "$(psql_at b -c 'SELECT v FROM ck WHERE id = 3')" = '\N' ]
	[ "$(table_checksum "$a_URL" ck)" = "$(table_checksum "$b_URL" public.ck)" ]
	psql_at b -c "UPDATE ck SET v = '' WHERE id = 1"
	[ "$(table_checksum "$a_URL" ck)" != "$(table_checksum "$b_URL" ck)" ]
	psql_at b -c "UPDATE ck SET v = NULL WHERE id = 1; UPDATE ck SET v = NULL WHERE id = 3"
	[ "$(table_checksum "$a_URL" ck)" != "$(table_checksum "$b_URL" ck)" ]
	psql_at a -c "TRUNCATE ck"
	[ "$(table_checksum "$a_URL" ck)" = "$(psql_at a -c "SELECT md5('')")" ]
}

@test "table_checksum matches for the same rows in databases of different encodings" {
	psql_at b -c "CREATE DATABASE latin ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	local latin="$b_URL dbname=latin" sql="CREATE TABLE enc (id int PRIMARY KEY, v text);
		INSERT INTO enc VALUES (1, 'caf' || chr(233)), (2, 'cafe'), (3, chr(233) || 't' || chr(233))"
	psql_at a -c "$sql"
	psql -X -q -v ON_ERROR_STOP=1 -d "$latin" -c "$sql"
	[ "$(table_checksum "$a_URL" enc)" = "$(table_checksum "$latin" enc)" ]
	psql -X -q -v ON_ERROR_STOP=1 -d "$latin" -c "UPDATE enc SET v = 'caf' WHERE id = 1"
	[ "$(table_checksum "$a_URL" enc)" != "$(table_checksum "$latin" enc)" ]
}

# A test file of its own, run by a nested bats: one cluster from setup_file,
# one from inside a failing test. Prints each cluster directory to $1.
# (The @ is spliced in: bats would take a literal one for a test of this file.)
write_nested_file() {
	local at=@
	cat >"$BATS_TEST_TMPDIR/nested.bats" <<EOF
load "$PGSYNC_ROOT/test/lib/cluster"
setup_file() { cluster_start early; echo "\$early_DIR" >>"$1"; }
teardown_file() { cluster_stop_all; }
${at}test "starts a cluster, then fails" {
	cluster_start late
	echo "\$late_DIR" >>"$1"
	${2:-false}
}
EOF
}

# bats in a clean environment: the outer run's BATS_* variables, and its
# libexec directory first in PATH, would confuse it.
nested_bats() {
	local path="" dir v
	local IFS=:
	for dir in $PATH; do
		[[ $dir == *bats-core* ]] || path+=${path:+:}$dir
	done
	unset IFS
	local -a envs=("PATH=$path" "HOME=$HOME")
	for v in TMPDIR PGSYNC_PG_MAJOR PGSYNC_CACHE PGSYNC_TEST_TMPDIR PGSYNC_PORT_MIN PGSYNC_PORT_MAX; do
		[[ -z ${!v:-} ]] || envs+=("$v=${!v}")
	done
	env -i "${envs[@]}" bats "$@"
}

@test "cluster_stop_all removes every cluster of a file, even after a failed test" {
	local dirs=$BATS_TEST_TMPDIR/dirs
	write_nested_file "$dirs"
	run nested_bats "$BATS_TEST_TMPDIR/nested.bats"
	[ "$status" -eq 1 ]
	[ "$(wc -l <"$dirs")" -eq 2 ]
	local d
	while read -r d; do
		[ ! -e "$d" ]
		[ ! -e "$(dirname "$d")" ]
		[ -z "$(procs_under "$d")" ]
	done <"$dirs"
}

@test "the watchdog destroys a file's clusters when bats is killed with SIGKILL" {
	local dirs=$BATS_TEST_TMPDIR/dirs
	write_nested_file "$dirs" "sleep 60"
	setsid bash -c "$(declare -f nested_bats); nested_bats \"\$1\"" _ "$BATS_TEST_TMPDIR/nested.bats" \
		</dev/null >/dev/null 2>&1 3>&- &
	local leader=$!
	# (Two initdb and server starts: slow on a busy machine.)
	wait_until 120 test -s "$dirs"
	# shellcheck disable=SC2016 # expanded by eval, on each try
	wait_until 120 eval '[ "$(wc -l <"$dirs")" -eq 2 ]'
	kill -KILL -- "-$leader"
	local d
	while read -r d; do
		wait_until 20 test ! -e "$d"
		[ -z "$(procs_under "$d")" ]
	done <"$dirs"
}
