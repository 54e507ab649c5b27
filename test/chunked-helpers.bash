# Helpers of the chunked-copy tests (pgsync-chunked.bats,
# pgsync-chunked-keys.bats): slowing chunks down, killing a program of a
# background bootstrap, and counting what a resumed bootstrap inserts.
# The test file sets CK_JOB, CK_SLOT (its job and the job's slot),
# CK_TABLES, CK_NTABLES (the job's tables, for same_tables, and how many)
# and NO_INSERTS (its tables the load never inserts into: what the resumed
# copy inserts in them is exactly what the chunks done before did not hold).

# Each chunk takes 50 ms on the target, so that a copy of a few MB lasts
# long enough to be interrupted in the middle on any machine.
slow_chunks() {
	psql_at tgt <<-'SQL'
		CREATE OR REPLACE FUNCTION pgsync.slow_chunk() RETURNS trigger LANGUAGE plpgsql AS
		  $$ BEGIN PERFORM pg_sleep(0.05); RETURN NEW; END $$;
		DROP TRIGGER IF EXISTS slow_chunk ON pgsync.table_chunk;
		CREATE TRIGGER slow_chunk AFTER INSERT ON pgsync.table_chunk FOR EACH ROW EXECUTE FUNCTION pgsync.slow_chunk();
		ALTER TABLE pgsync.table_chunk ENABLE ALWAYS TRIGGER slow_chunk;
	SQL
}

# The target's pgsync schema, as the target role's first bootstrap makes it.
catalog_ready() {
	[[ $(psql_at tgt -c "SELECT to_regclass('pgsync.table_chunk') IS NOT NULL") == t ]] ||
		pgsync-config --catalog-sql | psql -X -q -v ON_ERROR_STOP=1 -1 -d "$TGT_URL" >/dev/null
}

chunks_done() {
	psql_at tgt -c "SELECT count(*) FROM pgsync.table_chunk WHERE job = '$CK_JOB'" 2>/dev/null || echo 0
}

chunks_at_least() {
	(($(chunks_done) >= $1))
}

# PROGRAM's pid among the background pgsync's descendants (the newest).
child_pid() {
	local p
	for p in $(descendants "$BG_PID"); do
		# (comm holds 15 characters of the name)
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == "${1:0:15}" ]] && echo "$p"
	done | tail -n 1
}

child_running() {
	[[ -n $(child_pid "$1") ]]
}

# kill_child PROGRAM [PID]: kill -9 of PROGRAM as soon as it runs (within
# 60 s), of one other than PID if given; prints its pid.
kill_child() {
	local pid i
	for ((i = 0; i < 1200; i++)); do
		pid=$(child_pid "$1")
		if [[ -n $pid && $pid != "${2:-}" ]] && kill -KILL "$pid" 2>/dev/null; then
			echo "$pid"
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# Per table of NO_INSERTS, "table rows" of the chunks on the target.
done_rows() {
	local t
	for t in $NO_INSERTS; do
		printf '%s %s\n' "$t" "$(psql_at tgt -c "SELECT coalesce(sum(rows), 0) FROM pgsync.table_chunk
			WHERE job = '$CK_JOB' AND schema_name || '.' || table_name = '$t'")"
	done
}

# The target's n_tup_ins of TABLE.
inserted() {
	psql_at tgt -c "SELECT pg_stat_clear_snapshot(); SELECT coalesce((SELECT n_tup_ins FROM pg_stat_user_tables
		WHERE schemaname || '.' || relname = '$1'), 0)" | tail -n 1
}

reset_counters() {
	local t
	for t in $NO_INSERTS; do
		psql_at tgt -c "SELECT pg_stat_reset_single_table_counters('$t'::regclass)" >/dev/null
	done
}

counters_zero() {
	local t
	for t in $NO_INSERTS; do
		[[ $(inserted "$t") == 0 ]] || return 1
	done
}

no_apply_sessions() {
	[ "$(psql_at tgt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-apply'")" = 0 ]
}

inserted_is() {
	[[ $(inserted "$1") == "$2" ]]
}

# Before a resume: the chunks done, and every n_tup_ins at zero.
before_resume() {
	wait_until 60 no_apply_sessions
	done_rows >"$BATS_TEST_TMPDIR/done"
	reset_counters
	wait_until 30 counters_zero
}

# After a resume: each table of NO_INSERTS got exactly its rows minus those
# of the chunks done before.
resumed_inserted_only_the_rest() {
	local t rows total
	while read -r t rows; do
		total=$(psql_at tgt -c "SELECT count(*) FROM $t")
		echo "# $t: $total rows, $rows in chunks done before the resume" >&3
		wait_until 30 inserted_is "$t" $((total - rows)) || {
			echo "$t: the resumed bootstrap inserted $(inserted "$t") rows, expected $total - $rows" >&2
			return 1
		}
	done <"$BATS_TEST_TMPDIR/done"
}

# Stop the load the test file started (its pgbench pids in load*.pid).
stop_load() {
	local f
	for f in "$BATS_FILE_TMPDIR"/load*.pid; do
		[[ -f $f ]] || continue
		kill -TERM "$(<"$f")" 2>/dev/null || true
		rm -f "$f"
	done
	wait_until 30 no_load
}

no_load() {
	[ "$(psql_at src -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ]
}

# Stream until the target has everything the source wrote, then compare.
all_identical() {
	start_run "$CK_JOB"
	wait_until 60 grep -q "streaming slot" "$(current_run_log)" || { run_log "$CK_JOB"; return 1; }
	wait_until 120 applied_reaches "$CK_JOB" || { run_log "$CK_JOB"; return 1; }
	# (stop_run's minute is short for a loaded machine here)
	kill -TERM "$(<"$(current_run_log).pid")"
	bg_wait "$(current_run_log)" 180 || { run_log "$CK_JOB"; return 1; }
	[ "$BG_STATUS" -eq 0 ]
	# shellcheck disable=SC2086
	same_tables $CK_TABLES
}

# resume: bootstrap again, which continues the copy with the kept slot.
resume() {
	local l0
	l0=$(job_field "$CK_JOB" consistent_lsn)
	run pgs "$CK_JOB" bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"continuing the copy of job $CK_JOB: "*" chunks are on the target, replication slot $CK_SLOT is kept (from $l0)"* ]]
	[[ $output == *"bootstrap of job $CK_JOB complete: $CK_NTABLES tables, "*"; state CATCHING_UP"* ]]
	[ "$(job_field "$CK_JOB" consistent_lsn)" = "$l0" ]
	[ "$(job_state "$CK_JOB")" = CATCHING_UP ]
}
