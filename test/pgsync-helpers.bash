# Helpers for the pgsync orchestrator tests (test/pgsync-*.bats): job
# configuration files, running pgsync against the file's src and tgt
# clusters, and waiting for job states. Load after lib/cluster.

# job_conf JOB SLOT PUBLICATION TABLES [key=value...]: write
# $BATS_FILE_TMPDIR/JOB.conf (state in $BATS_FILE_TMPDIR/JOB.state) with a
# one-second heartbeat; prints its path. Unless a key=value sets it, the
# job's resources.snapshot_mode is PGSYNC_TEST_SNAPSHOT_MODE, by default
# single: the tests written for the copy at one snapshot keep testing it, and
# test/pgsync-chunked.bats tests the chunked copy
# (PGSYNC_TEST_SNAPSHOT_MODE=chunked runs the others with it too).
job_conf() {
	local job=$1 slot=$2 pub=$3 tables=$4 kv mode=${PGSYNC_TEST_SNAPSHOT_MODE:-single}
	shift 4
	local conf=$BATS_FILE_TMPDIR/$job.conf
	{
		echo "job.name = $job"
		echo "job.state_dir = $BATS_FILE_TMPDIR/$job.state"
		echo "source.slot = $slot"
		echo "source.publication = $pub"
		echo "replication.tables = $tables"
		echo "safety.heartbeat_interval = 1s"
		for kv in "$@"; do
			[[ ${kv%%=*} != resources.snapshot_mode ]] || mode=""
			echo "${kv%%=*} = ${kv#*=}"
		done
		[[ -z $mode ]] || echo "resources.snapshot_mode = $mode"
	} >"$conf"
	echo "$conf"
}

# pgsync's scratch directory: inside bats' own, so that what a killed
# pgsync leaves behind goes away with the test file.
pgs_tmpdir() {
	if [[ -n ${TMPDIR:-} && $TMPDIR != /tmp ]]; then
		printf '%s\n' "$TMPDIR"
	else
		printf '%s\n' "$BATS_FILE_TMPDIR"
	fi
}

# pgs JOB [pgsync arguments...]: pgsync for JOB's configuration, source src
# and target tgt (override with SRC_URL / TGT_URL).
pgs() {
	local job=$1
	shift
	PGSYNC_SOURCE_URL=${SRC_URL:-$src_URL} PGSYNC_TARGET_URL=${TGT_URL:-$tgt_URL} TMPDIR=$(pgs_tmpdir) \
		pgsync -c "$BATS_FILE_TMPDIR/$job.conf" "$@"
}

# job_field JOB COLUMN: one column of the job's pgsync.job row.
job_field() {
	psql_at tgt -c "SELECT $2 FROM pgsync.job WHERE job = '$1'"
}

job_state() {
	job_field "$1" state
}

slot_exists() {
	[[ $(psql_at src -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$1'") == 1 ]]
}

# (A negated command never fails a bats test: errexit ignores "!".)
slot_gone() {
	! slot_exists "$1"
}

state_is() {
	[[ $(job_state "$1") == "$2" ]]
}

# pgs_bg LOG JOB [pgsync arguments...]: pgsync in the background, output in
# LOG. BG_PID is pgsync's own pid; its exit status lands in LOG.status
# (bats runs each test in its own process, so a run can outlive the test
# that started it). SIGINT is not ignored, as it otherwise is in a script's
# background jobs, and bats' own output descriptor is not inherited.
pgs_bg() {
	local log=$1 job=$2
	shift 2
	rm -f "$log.pid" "$log.status"
	(
		export PGSYNC_SOURCE_URL=${SRC_URL:-$src_URL} PGSYNC_TARGET_URL=${TGT_URL:-$tgt_URL}
		TMPDIR=$(pgs_tmpdir)
		export TMPDIR
		env --default-signal=INT pgsync -c "$BATS_FILE_TMPDIR/$job.conf" "$@" >"$log" 2>&1 &
		echo $! >"$log.pid"
		status=0
		wait $! || status=$?
		echo "$status" >"$log.status"
	) 3>&- &
	wait_until 10 test -s "$log.pid"
	BG_PID=$(<"$log.pid")
}

# descendants PID: every process below PID, parents before children.
descendants() {
	local p
	for p in $(ps -o pid= --ppid "$1"); do
		echo "$p"
		descendants "$p"
	done
}

# bg_wait LOG SECONDS: wait for the background pgsync writing LOG to end;
# BG_STATUS is its exit status.
bg_wait() {
	wait_until "$2" test -s "$1.status" || return
	BG_STATUS=$(<"$1.status")
}

# start_run JOB [pgsync options]: pgsync run in the background, output in
# $BATS_FILE_TMPDIR/JOB.run.log; RUN_PID is its pid.
start_run() {
	local job=$1
	shift
	pgs_bg "$BATS_FILE_TMPDIR/$job.run.log" "$job" "$@" run
	echo "$BATS_FILE_TMPDIR/$job.run.log" >"$BATS_FILE_TMPDIR/current_run"
	RUN_PID=$BG_PID
}

current_run_log() {
	cat "$BATS_FILE_TMPDIR/current_run"
}

# run_alive: the last started run is still running.
run_alive() {
	local log
	[[ -f $BATS_FILE_TMPDIR/current_run ]] || return 1
	log=$(current_run_log)
	[[ ! -s $log.status ]] && kill -0 "$(<"$log.pid")" 2>/dev/null
}

# stop_run [SIGNAL]: signal the last started run and wait for it; RUN_STATUS
# is its exit status.
# A pgsync run that let a first SIGTERM go unheeded (bash stayed blocked in
# a `wait -n` with the trap deferred, about once in fifty stops, until
# wait_any stopped using it) is sent the signal again after 30 s, saying so
# on the test's output, so that one lost signal cannot leave a run behind
# that breaks every later test of the file. STOP_STRICT=1: no second signal.
stop_run() {
	local log pid
	log=$(current_run_log)
	pid=$(<"$log.pid")
	kill -"${1:-TERM}" "$pid" 2>/dev/null || true
	if [[ ${STOP_STRICT:-} != 1 ]] && ! wait_until 30 test -s "$log.status"; then
		echo "# pgsync run (pid $pid) did not stop within 30 s of SIG${1:-TERM}: sent again" >&3
		kill -"${1:-TERM}" "$pid" 2>/dev/null || true
	fi
	bg_wait "$log" 60
	RUN_STATUS=$BG_STATUS
}

# wait_run SECONDS: wait for the last started run to end on its own.
wait_run() {
	bg_wait "$(current_run_log)" "$1"
	RUN_STATUS=$BG_STATUS
}

run_log() {
	cat "$BATS_FILE_TMPDIR/$1.run.log"
}

# pg_dump_reads CLUSTER: an installed pg_dump can read CLUSTER's server (it
# is not older); bootstrap needs one to create partitioned tables.
pg_dump_reads() {
	local cand major server
	server=$(psql_at "$1" -c "SHOW server_version_num")
	for cand in /usr/lib/postgresql/*/bin/pg_dump "$(command -v pg_dump)"; do
		[[ -x $cand ]] || continue
		major=$("$cand" --version | sed 's/[^0-9]*\([0-9]*\).*/\1/')
		((server < (major + 1) * 10000)) && return 0
	done
	return 1
}

# applied_reaches JOB: the target applied everything the source has written.
applied_reaches() {
	local lsn
	lsn=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	[[ $(psql_at tgt -c "SELECT applied_lsn >= '$lsn' FROM pgsync.job WHERE job = '$1'") == t ]]
}

# --- the roles an operator is told to use ---------------------------------------

# lp_source_role ROLE TABLE...: on src, a role with exactly the privileges
# the operations guide lists for the source: LOGIN, REPLICATION, CONNECT on
# the database, USAGE on the tables' schemas, SELECT on the tables (which
# must exist) and on the sequences they own or use in a default (the ones
# the job carries). No DML, no DDL. Exports SRC_URL (read by pgs)
# connecting as ROLE.
lp_source_role() {
	local role=$1 t schemas="" tables=""
	shift
	for t in "$@"; do
		[[ $t == *.* ]] || t=public.$t
		tables+="${tables:+, }\"${t%%.*}\".\"${t#*.}\""
		[[ " $schemas " == *" ${t%%.*} "* ]] || schemas+=" ${t%%.*}"
	done
	local sql="GRANT CONNECT ON DATABASE postgres TO $role; GRANT SELECT ON $tables TO $role;"
	[[ $(psql_at src -c "SELECT count(*) FROM pg_roles WHERE rolname = '$role'") == 1 ]] ||
		sql="CREATE ROLE $role LOGIN REPLICATION; $sql"
	for t in $schemas; do sql+=" GRANT USAGE ON SCHEMA \"$t\" TO $role;"; done
	psql_at src -c "$sql" >/dev/null
	psql_at src -v role="$role" -v tables="$tables" >/dev/null <<'SQL'
SELECT format('GRANT SELECT ON SEQUENCE %s TO %I', d.seq::regclass, :'role')
  FROM (SELECT d.objid AS seq FROM pg_depend d
         WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
           AND d.refobjid = ANY (string_to_array(:'tables', ', ')::regclass[])
        UNION
        SELECT d.refobjid FROM pg_attrdef ad
          JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                          AND d.refclassid = 'pg_class'::regclass
         WHERE ad.adrelid = ANY (string_to_array(:'tables', ', ')::regclass[])) d
  JOIN pg_class c ON c.oid = d.seq AND c.relkind = 'S'
\gexec
SQL
	export SRC_URL=${src_URL/user=postgres/user=$role}
}

# lp_target_role ROLE [DATABASE]: on tgt, a role that is not a superuser and
# may only create schemas (the pgsync schema, the tables' schemas) and tables
# in public of DATABASE (default postgres, which tgt_URL must then name), as
# the guide says is enough. Exports TGT_URL connecting as ROLE.
lp_target_role() {
	local role=$1 sql="GRANT CREATE ON DATABASE ${2:-postgres} TO $1; GRANT CREATE ON SCHEMA public TO $1"
	# An existing role (one with a password, say) gets the same grants.
	[[ $(psql_at tgt -c "SELECT count(*) FROM pg_roles WHERE rolname = '$role'") == 1 ]] ||
		sql="CREATE ROLE $role LOGIN; $sql"
	psql_at tgt -c "$sql" >/dev/null
	export TGT_URL=${tgt_URL/user=postgres/user=$role}
}

# lp_source_role_for_tests CLUSTER ROLE: on CLUSTER (a source), ROLE with the
# guide's source privileges on what the superuser creates there later
# (default privileges: USAGE on schemas, SELECT on tables and sequences; no
# DML, DDL or superuser). Prints nothing; CLUSTER's URL as ROLE is
# ${CLUSTER_URL/user=postgres/user=ROLE}.
lp_source_role_for_tests() {
	psql_at "$1" -c "CREATE ROLE $2 LOGIN REPLICATION; GRANT CONNECT ON DATABASE postgres TO $2;
		ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO $2;
		ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO $2;
		ALTER DEFAULT PRIVILEGES GRANT SELECT ON SEQUENCES TO $2" >/dev/null
}

# lp_roles_for_tests SRC_ROLE TGT_ROLE: the same two roles for a test file
# that creates its tables as it goes: the source role gets USAGE and SELECT
# on what the tests create later (default privileges, still no DML, DDL or
# superuser), the target role reaches tables the tests create on the target
# themselves. Exports SRC_URL and TGT_URL.
lp_roles_for_tests() {
	local src=$1 tgt=$2
	lp_source_role_for_tests src "$src"
	lp_target_role "$tgt"
	psql_at tgt -c "ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO $tgt;
		ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLES TO $tgt;
		ALTER DEFAULT PRIVILEGES GRANT SELECT, UPDATE ON SEQUENCES TO $tgt" >/dev/null
	export SRC_URL=${src_URL/user=postgres/user=$src}
}
