#!/usr/bin/env bats
# Passwords never leave the environment: with password-protected roles
# (scram-sha-256) on both servers, the guide's least-privilege source role
# and a target role that is no superuser, no output, log, state file,
# catalog row, command line or child environment of any pgsync command
# shows them.

load lib/cluster
load pgsync-helpers

readonly SRC_PW='s3cret-Src-Passw0rd'
readonly TGT_PW='s3cret-Tgt-Passw0rd'

# Put a scram-sha-256 line for ROLE in front of the cluster's trust rules.
require_password() {
	local dir=$1 role=$2
	{ echo "host all $role 127.0.0.1/32 scram-sha-256"; cat "$dir/data/pg_hba.conf"; } >"$dir/data/pg_hba.conf.new"
	mv "$dir/data/pg_hba.conf.new" "$dir/data/pg_hba.conf"
	chown postgres: "$dir/data/pg_hba.conf" 2>/dev/null || true
}

setup_file() {
	cluster_start src
	cluster_start tgt
	# The guide's least-privilege roles, with passwords. (In a subshell: the
	# helpers export SRC_URL and TGT_URL, which must not be exported here.)
	psql_at src -c "SET password_encryption = 'scram-sha-256'; CREATE ROLE app LOGIN REPLICATION PASSWORD '$SRC_PW';
		CREATE TABLE sec_t (id int PRIMARY KEY, v text); INSERT INTO sec_t SELECT g, 'v' FROM generate_series(1, 50) g;
		CREATE PUBLICATION sec_pub FOR TABLE sec_t"
	psql_at tgt -c "SET password_encryption = 'scram-sha-256'; CREATE ROLE tapp LOGIN PASSWORD '$TGT_PW'"
	(lp_source_role app sec_t && lp_target_role tapp)
	[ "$(psql_at tgt -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'tapp'")" = f ]
	require_password "$src_DIR" app
	require_password "$tgt_DIR" tapp
	psql_at src -c "SELECT pg_reload_conf()" >/dev/null
	psql_at tgt -c "SELECT pg_reload_conf()" >/dev/null
	echo "postgresql://app:$SRC_PW@127.0.0.1:$(cat "$src_DIR/port")/postgres" >"$BATS_FILE_TMPDIR/src.url"
	echo "postgresql://tapp:$TGT_PW@127.0.0.1:$(cat "$tgt_DIR/port")/postgres" >"$BATS_FILE_TMPDIR/tgt.url"
	job_conf sec sec_slot sec_pub public.sec_t >/dev/null
	mkdir -p "$BATS_FILE_TMPDIR/tmp" "$BATS_FILE_TMPDIR/out"
	printf '%s\n' "$SRC_PW" "$TGT_PW" >"$BATS_FILE_TMPDIR/passwords"
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

setup() {
	# Shell variables for pgs, not exported: only pgsync's own
	# PGSYNC_*_URL variables may carry the passwords into its environment.
	SRC_URL=$(<"$BATS_FILE_TMPDIR/src.url")
	TGT_URL=$(<"$BATS_FILE_TMPDIR/tgt.url")
	export TMPDIR=$BATS_FILE_TMPDIR/tmp
}

# The last command of a function, so that a match fails the test (a
# negated command on its own line never does).
# The patterns come from a file: a grep with the passwords in its own
# arguments would find itself in ps.
no_password_in() {
	! grep -r -l -F -f "$BATS_FILE_TMPDIR/passwords" "$@"
}

no_password_on_stdin() {
	! grep -q -F -f "$BATS_FILE_TMPDIR/passwords"
}

has_password() {
	grep -q -F -f "$BATS_FILE_TMPDIR/passwords" "$@"
}

# keep NAME: save the last run's output for the final sweep.
keep() {
	printf '%s\n' "$output" >"$BATS_FILE_TMPDIR/out/$1"
}

@test "the password roles really need their passwords" {
	run psql -X -w -d "postgresql://app:wrong@127.0.0.1:$(cat "$src_DIR/port")/postgres" -c "SELECT 1"
	[ "$status" -ne 0 ]
	[[ $output == *"password authentication failed"* ]]
	run psql -X -d "$SRC_URL" -Atc "SELECT current_user"
	[ "$output" = app ]
}

@test "check, bootstrap and status show connections without passwords" {
	run pgs sec check
	keep check
	[ "$status" -eq 0 ]
	[[ $output == *"source host=127.0.0.1 port=$(cat "$src_DIR/port") user=app dbname=postgres"* ]]
	run pgs sec --log debug bootstrap
	keep bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	run pgs sec status
	keep status
	echo "$output"
	[ "$status" -eq 0 ]
	run pgs sec status --json
	keep status.json
	echo "$output" | jq -e '.source.connection | startswith("host=127.0.0.1 ")'
	run pgs sec status --prometheus
	keep status.prom
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "no program pgsync starts, pgsync-config first, has a password in its environment" {
	command -v strace >/dev/null || skip "strace is not installed"
	local trace=$BATS_TEST_TMPDIR/trace cmd
	for cmd in check status; do
		# Every execve with its environment (-v); the admin URL too.
		run env PGSYNC_SOURCE_URL="$SRC_URL" PGSYNC_TARGET_URL="$TGT_URL" PGSYNC_SOURCE_ADMIN_URL="$SRC_URL" \
			strace -f -qq -v -s 65536 -e trace=execve -o "$trace" \
			pgsync -c "$BATS_FILE_TMPDIR/sec.conf" "$cmd"
		[ "$status" -eq 0 ]
		# pgsync's own environment holds them.
		grep -q 'execve("[^"]*/pgsync", .*PGSYNC_SOURCE_ADMIN_URL=' "$trace"
		grep 'execve("[^"]*/pgsync-config", ' "$trace" >"$trace.config"
		[ -s "$trace.config" ]
		# pgsync itself is the first process (env, then the bash its #! finds).
		local self
		self=$(awk '/execve\("[^"]*\/pgsync", / { print $1; exit }' "$trace")
		[ -n "$self" ]
		awk -v self="$self" '$1 != self' "$trace" >"$trace.children"
		[ "$(wc -l <"$trace.children")" -gt 5 ]
		rm -f "$trace"
		# Which programs, if any (never the values).
		grep -h -F -f "$BATS_FILE_TMPDIR/passwords" "$trace.config" "$trace.children" | cut -d, -f1-2 | cut -c1-120 >&2 || true
		no_password_in "$trace.config" "$trace.children"
	done
}

@test "while run streams: no password on any command line or in any child's environment" {
	start_run sec --json --log debug
	wait_until 20 state_is sec STREAMING
	psql_at src -c "INSERT INTO sec_t VALUES (100, 'streamed')"
	wait_until 20 same_tables sec_t
	# Every process of the job: pgsync and its children.
	pids="$RUN_PID $(ps -o pid= --ppid "$RUN_PID" | tr '\n' ' ')"
	for pid in $pids; do
		tr '\0' '\n' <"/proc/$pid/cmdline" | no_password_on_stdin
		if [[ $(cat "/proc/$pid/comm") == pg-* ]]; then
			tr '\0' '\n' <"/proc/$pid/environ" | no_password_on_stdin
		fi
	done
	ps -eo args | no_password_on_stdin
	# The service file the children use has no name: they read it through
	# pgsync's descriptor, and no file on disk holds a password.
	[ -z "$(find "$TMPDIR" -name pg_service.conf)" ]
	for pid in $pids; do
		if [[ $(cat "/proc/$pid/comm") == pg-* ]]; then
			tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "PGSERVICEFILE=/proc/$RUN_PID/fd/[0-9]*"
		fi
	done
	no_password_in "$TMPDIR"
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	# ... and gone once pgsync ended.
	[ -z "$(ls -A "$TMPDIR")" ]
}

@test "kill -9 of pgsync while it streams leaves no file with a password behind" {
	# The first run's log stays the one the final sweep looks at.
	mv "$BATS_FILE_TMPDIR/sec.run.log" "$BATS_FILE_TMPDIR/sec.run.log.first"
	start_run sec
	wait_until 20 state_is sec STREAMING
	local children
	children=$(ps -o pid= --ppid "$RUN_PID" | tr '\n' ' ')
	stop_run KILL
	# Its children follow it (they are signalled when it dies).
	wait_until 30 bash -c "for p in $children; do [[ \$(cat /proc/\$p/comm 2>/dev/null) != pg-* ]] || exit 1; done"
	[ -n "$(ls -A "$TMPDIR")" ]		# the scratch directory stays: nothing ran its trap
	cp "$BATS_FILE_TMPDIR/sec.run.log" "$BATS_FILE_TMPDIR/out/killed.run.log"
	mv "$BATS_FILE_TMPDIR/sec.run.log.first" "$BATS_FILE_TMPDIR/sec.run.log"
	no_password_in "$TMPDIR"
}

@test "a scratch directory left by a killed pgsync is removed by the next one" {
	# Pids stay below pid_max, which is at most 4194304: no process has this one.
	mkdir -m 700 "$TMPDIR/pgsync.4194304.leftover"
	cp "$BATS_FILE_TMPDIR/passwords" "$TMPDIR/pgsync.4194304.leftover/pg_service.conf"
	run pgs sec status
	[ "$status" -eq 0 ]
	[ ! -e "$TMPDIR/pgsync.4194304.leftover" ]
}

@test "a wrong password is reported without echoing it" {
	bad="postgresql://app:Wr0ng-Passw0rd-Value@127.0.0.1:$(cat "$src_DIR/port")/postgres"
	SRC_URL=$bad run pgs sec check
	[ "$status" -eq 3 ]
	[[ $output == *'password authentication failed for user "app"'* ]]
	[[ $output != *Wr0ng-Passw0rd-Value* ]]
	SRC_URL="host=127.0.0.1 password=Wr0ng-Passw0rd-Value junk" run pgs sec status
	[ "$status" -eq 2 ]
	[[ $output != *Wr0ng-Passw0rd-Value* ]]
}

@test "cleanup, and then nothing anywhere holds a password: outputs, logs, state, catalog" {
	run pgs sec cleanup --yes
	keep cleanup
	[ "$status" -eq 0 ]
	psql_at tgt -c "SELECT * FROM pgsync.job; SELECT * FROM pgsync.job_runtime; SELECT * FROM pgsync.table_sync" >"$BATS_FILE_TMPDIR/out/catalog"
	cp "$BATS_FILE_TMPDIR/sec.run.log" "$BATS_FILE_TMPDIR/out/"
	[ -s "$BATS_FILE_TMPDIR/out/sec.run.log" ]
	no_password_in "$BATS_FILE_TMPDIR/out" "$BATS_FILE_TMPDIR/sec.state" "$BATS_FILE_TMPDIR/tmp"
	# The sweep itself can fail: the password is where it should be.
	has_password "$BATS_FILE_TMPDIR/src.url"
}

@test "pg-apply --log debug never logs a target trigger's notice text, which may hold a row value" {
	local d=$BATS_TEST_TMPDIR url T='2026-12-01 00:00:00.000000+00'
	# A trigger that runs in the apply session too (ENABLE ALWAYS) and
	# prints the row in a NOTICE and a WARNING.
	psql_at tgt -c "CREATE DATABASE notices"
	url="$(cat "$tgt_DIR/conninfo") dbname=notices"
	psql -X -q -v ON_ERROR_STOP=1 -d "$url" -c 'CREATE TABLE nt (id int PRIMARY KEY, v text);
		CREATE FUNCTION nt_says() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN RAISE NOTICE $$row %$$, NEW.v; RAISE WARNING $$row %$$, NEW.v; RETURN NEW; END $f$;
		CREATE TRIGGER nt_says BEFORE INSERT ON nt FOR EACH ROW EXECUTE FUNCTION nt_says();
		ALTER TABLE nt ENABLE ALWAYS TRIGGER nt_says'
	printf '%s\n' "PGCS	1	7442718406132410263	1	-	0/1000	producer=hand" \
		"RELATION	public	nt	1	d	2	id	23	-1	k	v	25	-1	-" \
		"BEGIN	1	0/1000	$T" "INSERT	public	nt	1	Row-Value-4711" "COMMIT	1	0/1000	0/1010	$T" >"$d/s"
	pg-apply -d "$url" --job notices --log debug "$d/s" 2>"$d/err"
	[ "$(psql -X -qAt -d "$url" -c 'SELECT v FROM nt')" = Row-Value-4711 ]
	grep -q "server says: NOTICE, SQLSTATE 00000" "$d/err"
	grep -q "warning: server says: WARNING, SQLSTATE 01000" "$d/err"
	! grep -q Row-Value-4711 "$d/err" || { cat "$d/err"; return 1; }
}
