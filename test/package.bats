#!/usr/bin/env bats
# The Debian package, as an operator gets it: `make deb` builds it, lintian
# finds no error in it, dpkg installs it on this machine, the demo's flow
# (check, bootstrap under a pgbench workload, run, status, verify, the
# tables compared, cleanup) runs with the installed programs and a PATH
# without this checkout, the installed units pass systemd-analyze verify,
# and a purge leaves nothing behind.
#
# It builds a package and installs it system-wide: it runs only with
# PGSYNC_TEST_DEB=1 (the long tier), as root, on a machine where no pgsync
# package is installed already.

load lib/cluster
load pgsync-helpers

# The installed programs only: neither this checkout's bin/ nor scripts/,
# nor a `make install` under /usr/local.
readonly SYS_PATH=/usr/bin:/bin

setup_file() {
	[[ ${PGSYNC_TEST_DEB:-} == 1 ]] || return 0
	[[ $EUID -eq 0 ]] || return 0
	! dpkg-query -W -f='${db:Status-Status}' pgsync 2>/dev/null | grep -qx installed || return 0
	make -C "$PGSYNC_ROOT" --no-print-directory deb >"$BATS_FILE_TMPDIR/build.log" 2>&1 || {
		tail -n 30 "$BATS_FILE_TMPDIR/build.log" >&3
		return 1
	}
	DEB=$(ls "$PGSYNC_ROOT"/build/deb/pgsync_*.deb)
	export DEB
	cluster_start src
	cluster_start tgt
}

teardown_file() {
	[[ -s $BATS_FILE_TMPDIR/bench.pid ]] && kill "$(<"$BATS_FILE_TMPDIR/bench.pid")" 2>/dev/null
	if run_alive 2>/dev/null; then stop_run TERM; fi
	cluster_stop_all
	# Never leave the package installed, whatever failed.
	[[ -e $BATS_FILE_TMPDIR/installed ]] && dpkg --purge pgsync >/dev/null 2>&1
	true
}

setup() {
	[[ ${PGSYNC_TEST_DEB:-} == 1 ]] || skip "builds and installs a Debian package: set PGSYNC_TEST_DEB=1 (long tier)"
	[[ $EUID -eq 0 ]] || skip "dpkg -i needs root"
	[[ -n ${DEB:-} ]] || skip "a pgsync package is installed already: this test would replace and purge it"
}

# sys CMD...: CMD with the system's PATH only.
sys() {
	env PATH=$SYS_PATH "$@"
}

# ipgs JOB ARGS...: the installed pgsync for JOB, as pgs runs the checkout's.
ipgs() {
	local job=$1
	shift
	sys PGSYNC_SOURCE_URL="${SRC_URL:-$src_URL}" PGSYNC_TARGET_URL="${TGT_URL:-$tgt_URL}" TMPDIR="$(pgs_tmpdir)" \
		pgsync -c "$BATS_FILE_TMPDIR/$job.conf" "$@"
}

@test "make deb builds a package lintian finds no error in" {
	[ -f "$DEB" ]
	run lintian "$DEB"
	echo "$output"
	[ "$status" -eq 0 ]
	! grep -q '^E: ' <<<"$output"
	dpkg-deb -I "$DEB" | grep -q '^ Depends: .*postgresql-client'
}

@test "dpkg installs the programs in /usr/bin, the man pages, the units, the example configuration and the monitoring files" {
	run dpkg -i "$DEB"
	echo "$output"
	[ "$status" -eq 0 ]
	touch "$BATS_FILE_TMPDIR/installed"
	dpkg -L pgsync >"$BATS_FILE_TMPDIR/files"
	for p in pgsync pg-slot pg-snapshot-dump pg-walcat pg-apply pg-ack pgsync-config archive-segment; do
		[ -x "/usr/bin/$p" ]
		[ "$(sys which "$p")" = "/usr/bin/$p" ]
		sys man -w "$p" | grep -q "^/usr/share/man/man1/$p.1"
	done
	[[ $(sys pgsync --version) == *0.1.0* ]]
	[ -f /etc/pgsync/pgsync.conf.example ]
	grep -qx /etc/pgsync/pgsync.conf.example /var/lib/dpkg/info/pgsync.conffiles
	# The example configuration is valid as shipped.
	sys pgsync-config -c /etc/pgsync/pgsync.conf.example >/dev/null
	[ -f /usr/share/pgsync/monitoring/pgsync-alerts.yml ]
	[ -f /usr/share/pgsync/monitoring/pgsync-dashboard.json ]
	getent passwd pgsync
	# The units name /usr/bin, and systemd-analyze verify finds their
	# programs and man pages.
	grep -q '^ExecStart=/usr/bin/pgsync ' /lib/systemd/system/pgsync@.service
	if command -v systemd-analyze >/dev/null; then
		run systemd-analyze verify /lib/systemd/system/pgsync@.service /lib/systemd/system/pgsync-archive@.timer \
			/lib/systemd/system/pgsync-archive@.service /lib/systemd/system/pgsync-status@.timer /lib/systemd/system/pgsync-status@.service
		echo "$output"
		[ "$status" -eq 0 ]
		[ -z "$output" ]
	fi
}

@test "the demo's flow with the installed programs: check, bootstrap under a workload, run, status, verify, identical tables, cleanup" {
	[ -e "$BATS_FILE_TMPDIR/installed" ]
	local t
	sys pgbench -i -q -s 1 -d "$src_URL" >/dev/null 2>&1
	# The demo's tables, and one with a serial key and capitals.
	psql_at src -c 'CREATE TABLE "DemoOrders" (id serial PRIMARY KEY, item text);
		INSERT INTO "DemoOrders" (item) SELECT $$item $$ || g FROM generate_series(1, 500) g;
		CREATE PUBLICATION demo_pub FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, "DemoOrders"'
	lp_source_role demo_src pgbench_accounts pgbench_branches pgbench_tellers DemoOrders
	lp_target_role demo_tgt
	job_conf demo demo_slot demo_pub public.pgbench_accounts,public.pgbench_branches,public.pgbench_tellers,public.DemoOrders >/dev/null
	# env execs pgbench: $! is pgbench itself, to stop it.
	env PATH=$SYS_PATH pgbench -n -c 2 -j 1 -R 100 -T 300 -d "$src_URL" >"$BATS_FILE_TMPDIR/bench.log" 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/bench.pid"
	run ipgs demo check
	echo "$output"
	[ "$status" -eq 0 ]
	run ipgs demo bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	PATH=$SYS_PATH start_run demo
	wait_until 60 state_is demo STREAMING
	# pgsync and every process below it are installed programs.
	tr '\0' ' ' <"/proc/$RUN_PID/cmdline" | grep -q '/usr/bin/pgsync -c '
	local pid exe seen=""
	for pid in $(descendants "$RUN_PID"); do
		exe=$(readlink "/proc/$pid/exe") || continue
		case $exe in
		/usr/bin/* | /usr/lib/postgresql/*) seen+=" ${exe##*/}" ;;
		*) echo "not an installed program: $exe"; return 1 ;;
		esac
	done
	echo "processes:$seen"
	[[ $seen == *pg-walcat* && $seen == *pg-apply* ]]
	psql_at src -c 'INSERT INTO "DemoOrders" (item) SELECT $$late $$ || g FROM generate_series(1, 100) g'
	run ipgs demo status
	echo "$output"
	[ "$status" -eq 0 ]
	[[ ${lines[1]} == "state:           STREAMING" ]]
	# The workload ends (its last commits too), the target catches up.
	kill "$(<"$BATS_FILE_TMPDIR/bench.pid")"
	wait "$(<"$BATS_FILE_TMPDIR/bench.pid")" || true
	rm -f "$BATS_FILE_TMPDIR/bench.pid"
	wait_until 60 applied_reaches demo
	run ipgs demo verify
	echo "$output"
	[ "$status" -eq 0 ]
	for t in pgbench_accounts pgbench_branches pgbench_tellers DemoOrders; do
		[ "$(table_checksum "$tgt_URL" "$t")" = "$(table_checksum "$src_URL" "$t")" ]
	done
	[ "$(psql_at src -c 'SELECT count(*) > 0 FROM pgbench_history')" = t ]
	[ "$(psql_at tgt -c 'SELECT count(*) FROM "DemoOrders"')" = 600 ]
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
	run ipgs demo cleanup --yes
	[ "$status" -eq 0 ]
	[ "$(psql_at src -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'demo_slot'")" = 0 ]
}

@test "dpkg --purge removes every file of the package, the example configuration, the state directory and the user" {
	[ -e "$BATS_FILE_TMPDIR/installed" ]
	run dpkg --purge pgsync
	echo "$output"
	[ "$status" -eq 0 ]
	rm -f "$BATS_FILE_TMPDIR/installed"
	! dpkg-query -W pgsync 2>/dev/null | grep -q .
	local f left=""
	while IFS= read -r f; do
		# Directories the package shares with others stay.
		[[ -d $f ]] && [[ $f == /. || $f == /etc || $f == /lib* || $f == /usr* && $f != */pgsync* ]] && continue
		[[ -e $f ]] && left+=" $f"
	done <"$BATS_FILE_TMPDIR/files"
	[ -z "$left" ] || {
		echo "left behind:$left"
		return 1
	}
	[ ! -e /etc/pgsync ]
	[ ! -e /var/lib/pgsync ]
	[ ! -e /usr/lib/pgsync ]
	[ ! -e /usr/share/pgsync ]
	! getent passwd pgsync
	! getent group pgsync
	[ -z "$(PATH=$SYS_PATH command -v pgsync)" ]
}
