#!/usr/bin/env bats
# The systemd units of scripts/systemd as `make install` installs them: they
# pass systemd-analyze verify (which also checks that their programs and man
# pages exist), restart on failure only, and the command lines they run
# work as written against real servers: the archive timer's service writes a
# segment and the status timer's publishes the job's Prometheus series.

load lib/cluster
load pgsync-helpers

setup_file() {
	# An installed tree: the units name the programs by their installed path.
	export INST=$BATS_FILE_TMPDIR/inst
	make -C "$PGSYNC_ROOT" --no-print-directory -s install PREFIX="$INST/usr" SYSTEMDDIR="$INST/units" >/dev/null
	cluster_start src
	cluster_start tgt
}

need_analyze() {
	command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed (package systemd)"
}

units() {
	ls "$INST"/units/*.service "$INST"/units/*.timer
}

# unit_value UNIT KEY: the value of the unit file's KEY= line.
unit_value() {
	sed -n "s/^$2=//p" "$INST/units/$1"
}

# unit_command UNIT KEY ENVFILE: the unit's command line (the program and its
# arguments, one a line) with %i as "t", ${STATE_DIRECTORY} as
# $BATS_FILE_TMPDIR/state and the other ${VAR} from ENVFILE, as systemd
# expands them (a ${VAR} is one argument).
unit_command() {
	local -A env=([STATE_DIRECTORY]=$BATS_FILE_TMPDIR/state)
	local k v w
	while IFS='=' read -r k v; do
		[[ -n $k ]] && env[$k]=$v
	done <"$3"
	for w in $(unit_value "$1" "$2" | sed 's/%i/t/g; s/^[+-]//'); do
		if [[ $w =~ ^\$\{([A-Z_]+)\}$ ]]; then
			printf '%s\n' "${env[${BASH_REMATCH[1]}]}"
		else
			printf '%s\n' "$w"
		fi
	done
}

@test "make install installs every unit with the installed programs' paths" {
	[ "$(units | wc -l)" -eq 5 ]
	for u in pgsync@.service pgsync-archive@.service pgsync-archive@.timer pgsync-status@.service pgsync-status@.timer; do
		[ -f "$INST/units/$u" ]
	done
	[ "$(unit_value pgsync@.service ExecStart | cut -d' ' -f1)" = "$INST/usr/bin/pgsync" ]
	[ "$(unit_value pgsync-archive@.service ExecStart | cut -d' ' -f1)" = "$INST/usr/bin/archive-segment" ]
	[ "$(unit_value pgsync-status@.service ExecStart | cut -d' ' -f1)" = "$INST/usr/bin/pgsync" ]
	! grep -n /usr/local/bin "$INST"/units/*
}

@test "systemd-analyze verify passes every unit, and fails one whose program is missing" {
	need_analyze
	run env MANPATH="$INST/usr/share/man" systemd-analyze verify $(units)
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	# verify is not blind: without the program, the unit fails it.
	mv "$INST/usr/bin/archive-segment" "$BATS_FILE_TMPDIR/archive-segment"
	run env MANPATH="$INST/usr/share/man" systemd-analyze verify "$INST/units/pgsync-archive@.service"
	mv "$BATS_FILE_TMPDIR/archive-segment" "$INST/usr/bin/archive-segment"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ $output == *"archive-segment is not executable"* ]]
}

@test "the long-running services restart after a runtime failure only, never after an exit that needs an operator" {
	[ "$(unit_value pgsync@.service Restart)" = on-failure ]
	[ "$(unit_value pgsync@.service RestartPreventExitStatus)" = "2 3 4 5" ]
	[ "$(unit_value pgsync-archive@.service Restart)" = on-failure ]
	[ "$(unit_value pgsync-archive@.service RestartPreventExitStatus)" = "2 3 4" ]
	# The timers start their own template's instance, and survive a reboot.
	[ -z "$(unit_value pgsync-archive@.timer Unit)" ]
	[ "$(unit_value pgsync-archive@.timer Persistent)" = true ]
	[ "$(unit_value pgsync-archive@.timer WantedBy)" = timers.target ]
	[ "$(unit_value pgsync-status@.timer WantedBy)" = timers.target ]
}

@test "the archive service's command, as the unit writes it, archives a segment and confirms it" {
	psql_at src -c 'CREATE TABLE "ArcT" (id serial PRIMARY KEY, v text); CREATE PUBLICATION arc_pub FOR TABLE "ArcT"'
	lp_source_role arc_src ArcT
	cat >"$BATS_FILE_TMPDIR/archive-t.env" <<EOF
PGSYNC_SOURCE_URL=$SRC_URL
ARCHIVE_SLOT=arc_slot
ARCHIVE_PUBLICATION=arc_pub
EOF
	mkdir -p "$BATS_FILE_TMPDIR/state"
	PGSYNC_SOURCE_URL=$SRC_URL "$INST/usr/bin/archive-segment" --init --slot arc_slot --publication arc_pub "$BATS_FILE_TMPDIR/state"
	psql_at src -c 'INSERT INTO "ArcT" (v) SELECT $$v$$ || g FROM generate_series(1, 50) g'
	mapfile -t cmd < <(unit_command pgsync-archive@.service ExecStart "$BATS_FILE_TMPDIR/archive-t.env")
	[ "${cmd[*]}" = "$INST/usr/bin/archive-segment --slot arc_slot --publication arc_pub $BATS_FILE_TMPDIR/state" ]
	# As systemd runs it: the environment file's variables, nothing else.
	mapfile -t vars <"$BATS_FILE_TMPDIR/archive-t.env"
	run timeout 60 env -i PATH=/usr/bin:/bin "${vars[@]}" "${cmd[@]}"
	echo "$output"
	[ "$status" -eq 0 ]
	ls "$BATS_FILE_TMPDIR"/state/seg-*.pgcs.zst
	[ "$(zstdcat "$BATS_FILE_TMPDIR"/state/seg-*.pgcs.zst | grep -c '^INSERT')" -ge 50 ]
	# Confirmed on the slot: exactly the segment's END.
	local end
	end=$(zstdcat "$BATS_FILE_TMPDIR"/state/seg-*.pgcs.zst | tail -n 1 | cut -f2)
	[ "$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'arc_slot'")" = "$end" ]
}

@test "the status service's command, as the unit writes it, publishes the job's Prometheus series" {
	psql_at src -c 'CREATE TABLE "StT" (id serial PRIMARY KEY, v text); INSERT INTO "StT" (v) VALUES ($$a$$);
		CREATE PUBLICATION st_pub FOR TABLE "StT"'
	lp_source_role st_src StT
	lp_target_role st_tgt
	job_conf t st_slot st_pub public.StT >/dev/null
	pgs t bootstrap
	printf 'PGSYNC_SOURCE_URL=%s\nPGSYNC_TARGET_URL=%s\n' "$SRC_URL" "$TGT_URL" >"$BATS_FILE_TMPDIR/t.env"
	mapfile -t cmd < <(unit_command pgsync-status@.service ExecStart "$BATS_FILE_TMPDIR/t.env")
	[ "${cmd[*]}" = "$INST/usr/bin/pgsync -c /etc/pgsync/t.conf --state-dir /var/lib/pgsync/t status --prometheus" ]
	# The unit's paths, moved to this test's directory.
	local out post
	out=$(unit_value pgsync-status@.service StandardOutput | sed 's/%i/t/g; s/^truncate://')
	[ "$out" = /var/lib/prometheus/node-exporter/pgsync_t.prom.tmp ]
	mapfile -t post < <(unit_command pgsync-status@.service ExecStartPost "$BATS_FILE_TMPDIR/t.env")
	[ "${post[*]}" = "/bin/mv -f /var/lib/prometheus/node-exporter/pgsync_t.prom.tmp /var/lib/prometheus/node-exporter/pgsync_t.prom" ]
	local d=$BATS_FILE_TMPDIR
	cmd[2]=$d/t.conf
	cmd[4]=$d/t.state
	mapfile -t vars <"$d/t.env"
	timeout 60 env -i PATH=/usr/bin:/bin TMPDIR="$(pgs_tmpdir)" "${vars[@]}" "${cmd[@]}" >"$d/pgsync_t.prom.tmp"
	"${post[0]}" "${post[1]}" "$d/pgsync_t.prom.tmp" "$d/pgsync_t.prom"
	grep -qx 'pgsync_state{pgsync_job="t",state="CATCHING_UP"} 1' "$d/pgsync_t.prom"
	grep -qx 'pgsync_snapshot_tables_done{pgsync_job="t"} 1' "$d/pgsync_t.prom"
}

teardown_file() {
	cluster_stop_all
}

@test "under systemd each line reaches the journal with its level: a syslog priority prefix only when stderr is the journal's stream" {
	local d=$BATS_FILE_TMPDIR log
	log=$d/journal.log
	: >"$log"
	# The journal's stream is a socket whose device:inode systemd passes as
	# JOURNAL_STREAM; a file stands in for it here.
	psql_at src -c 'CREATE TABLE "JrT" (id serial PRIMARY KEY, v text); INSERT INTO "JrT" (v) VALUES ($$a$$);
		CREATE PUBLICATION jr_pub FOR TABLE "JrT"'
	# The roles of the job before (the target's pgsync schema is theirs).
	lp_source_role st_src JrT
	lp_target_role st_tgt
	job_conf j jr_slot jr_pub public.JrT >/dev/null
	JOURNAL_STREAM=$(stat -L -c '%d:%i' "$log") pgs j --log debug bootstrap 2>>"$log" || {
		cat "$log"
		return 1
	}
	JOURNAL_STREAM=$(stat -L -c '%d:%i' "$log") pgsync -c "$d/missing.conf" check 2>>"$log" || true
	cat "$log"
	# pgsync's own lines, its children's (relayed), and pgsync-config's
	# (which writes to the journal itself), at their levels.
	grep -q '^<6>pgsync: bootstrap of job j complete' "$log"
	grep -q '^<6>pg-snapshot-dump: copied public.JrT' "$log"
	grep -q '^<7>pg-[a-z-]*: debug: ' "$log"
	grep -q '^<3>pgsync: error: ' "$log"
	! grep -v '^<[3467]>' "$log"
	# The variable inherited, stderr elsewhere: plain lines.
	run env JOURNAL_STREAM="$(stat -L -c '%d:%i' "$log")" pgsync -c "$d/missing.conf" check
	[[ ${lines[0]} == "pgsync: error: "* ]]
}
