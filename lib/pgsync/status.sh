# pgsync status: one read of the target catalog and, when reachable, of the
# source slot, rendered as text, as the documented JSON document (--json)
# or as node_exporter text (--prometheus). Sourced by bin/pgsync. Reads
# only: it never changes the job's state, even when it sees a problem.

# The document is built in SQL on the target (jsonb keeps the shape exact);
# facts from the source come in as psql variables. Field meanings are
# documented in doc/operations.md, "status --json"; keep both in step.
read -r -d '' STATUS_SQL <<'SQL'
WITH j AS (
  SELECT * FROM pgsync.job WHERE job = :'job'
), r AS (
  SELECT rt.*, extract(epoch FROM now() - rt.heartbeat_at) AS age,
         coalesce(rt.heartbeat_interval_s, :'hb_s'::numeric) AS interval_s,
         -- The process's target sessions that wait on a lock (it writes no
         -- heartbeat meanwhile): the pids of the sessions they wait for.
         (SELECT array_agg(DISTINCT b ORDER BY b) FROM pg_stat_activity a, unnest(pg_blocking_pids(a.pid)) b
           WHERE a.application_name = 'pg-apply' AND a.usename = current_user AND a.wait_event_type = 'Lock'
             AND a.backend_start >= rt.started_at - interval '5 s' AND rt.stopped_at IS NULL) AS blocked_by
    FROM pgsync.job_runtime rt WHERE rt.job = :'job'
), rl AS (
  -- Alive: by the process where status runs on its host (process_alive),
  -- by its waiting target session, else by the age of its heartbeat.
  SELECT r.*, (r.stopped_at IS NULL AND r.heartbeat_at IS NOT NULL AND CASE
           WHEN :'process_alive' <> '' THEN :'process_alive' = 't'
           ELSE r.age <= 3 * r.interval_s OR r.blocked_by IS NOT NULL END) AS hb_live
    FROM r
), run AS (
  -- Whether the job's bootstrap or run goes on (between its programs too):
  -- its lock where status runs on its host (job_alive), else its process
  -- or a heartbeat of the last three intervals.
  SELECT CASE WHEN :'job_alive' <> '' THEN :'job_alive' = 't'
              ELSE coalesce((SELECT rl.hb_live OR (rl.age <= 3 * rl.interval_s AND j.state IN ('INITIALIZING', 'SNAPSHOTTING'))
                               FROM rl, j), false) END AS alive
), rr AS (
  -- Stale: no stop recorded, and nothing of the job lives. Live: the
  -- process, or the bootstrap or run it belongs to (no action needed).
  SELECT rl.*, (rl.stopped_at IS NULL AND rl.heartbeat_at IS NOT NULL AND NOT rl.hb_live
                AND NOT (SELECT alive FROM run)) AS stale,
         rl.hb_live OR (SELECT alive FROM run) AS live FROM rl
), t AS (
  SELECT count(*) AS total, count(*) FILTER (WHERE state = 'done') AS done,
         coalesce(sum(rows_copied), 0) AS rows, coalesce(sum(bytes_copied), 0) AS bytes,
         coalesce(jsonb_agg(jsonb_build_object(
           'table', schema_name || '.' || table_name,
           -- pending again after a copy started, or copying with no
           -- bootstrap going on: an attempt was interrupted
           'state', CASE WHEN state = 'pending' AND started_at IS NOT NULL THEN 'interrupted'
                         WHEN state = 'copying' AND NOT (SELECT alive FROM run) THEN 'interrupted' ELSE state END,
           'rows', rows_copied,
           'bytes', bytes_copied, 'rows_estimate', rows_estimate,
           'started_at', started_at, 'finished_at', finished_at) ORDER BY schema_name, table_name), '[]') AS tables
    FROM pgsync.table_sync WHERE job = :'job'
), src AS (
  SELECT :'src_reachable' = 't' AS reachable, nullif(:'src_error', '') AS error,
         nullif(:'src_sysid', '') AS sysid, nullif(:'src_current', '')::pg_lsn AS current_lsn,
         :'slot_exists' = '1' AS slot_exists
), live_resync AS (
  -- Continuity problems visible now, before run has noticed them.
  SELECT CASE
    WHEN NOT s.reachable OR j.state IN ('INITIALIZING', 'SNAPSHOTTING') THEN NULL
    WHEN :'lineage_why' <> '' THEN :'lineage_why'
    WHEN NOT s.slot_exists THEN format('replication slot %s no longer exists on the source', j.slot)
    WHEN :'slot_wal_status' = 'lost' OR :'slot_invalid' <> ''
      THEN format('replication slot %s was invalidated', j.slot)
    WHEN nullif(:'slot_confirmed', '')::pg_lsn > coalesce(j.applied_lsn, j.consistent_lsn)
      THEN format('replication slot %s confirmed %s, beyond the applied position %s', j.slot, :'slot_confirmed',
                  coalesce(j.applied_lsn, j.consistent_lsn))
  END AS reason
    FROM j, src s
), d AS (
  SELECT j.state AS jstate, j.slot AS jslot, j.slot_owned, j.applied_lsn AS japplied, j.consistent_lsn,
         j.applied_commit_time, j.snapshot_done_at, j.last_error AS jerror, j.source_sysid,
         j.source_timeline, j.created_at, j.updated_at,
         -- a catalog from before verify or switchover lacks these: read through jsonb
         to_jsonb(j) ->> 'verified_at' AS verified_at, to_jsonb(j) ->> 'verified_lsn' AS verified_lsn,
         to_jsonb(j) ->> 'verify_outcome' AS verify_outcome,
         to_jsonb(j) ->> 'switchover_lsn' AS switchover_lsn, to_jsonb(j) ->> 'switched_over_at' AS switched_over_at,
         rr.pid, rr.host, rr.version, rr.state AS rstate, rr.connection_state, rr.source_version,
         rr.received_lsn, rr.applied_lsn AS rapplied, rr.lag_bytes, rr.transactions, rr.changes,
         rr.transactions_per_sec, rr.rows_per_sec, rr.reconnects, rr.rss_bytes, rr.last_apply_at,
         rr.last_commit_time, rr.interval_s, rr.heartbeat_at, rr.age, rr.started_at, rr.stopped_at, rr.stale,
         rr.hb_live, rr.blocked_by, (SELECT alive FROM run) AS job_alive,
         t.total, t.done, t.rows, t.bytes, t.tables,
         s.reachable AS src_reachable, s.error AS src_error, s.sysid AS src_sysid,
         s.current_lsn AS src_current_lsn, s.slot_exists, l.reason AS live_reason,
         -- Marked only because another server answered, and the job's
         -- own server answers now: run continues it.
         (:'wrong_server' = 't' AND s.reachable AND :'lineage_why' = '') AS healed,
         (:'wrong_server' = 't' OR (s.reachable AND :'lineage_why' <> '')) AS wrong_server,
         ((j.state = 'RESYNC_REQUIRED' AND NOT (:'wrong_server' = 't' AND s.reachable AND :'lineage_why' = ''))
          OR l.reason IS NOT NULL) AS resync_required,
         coalesce(rr.live, false) AS is_live
    FROM j CROSS JOIN t CROSS JOIN src s CROSS JOIN live_resync l LEFT JOIN rr ON true
), doc AS (
  SELECT jsonb_build_object(
    'format_version', 1,
    'job', :'job',
    'state', d.jstate,
    'resync_required', d.resync_required,
    'resync_reason', CASE WHEN d.jstate = 'RESYNC_REQUIRED' THEN d.jerror ELSE d.live_reason END,
    'action', CASE
        WHEN d.jstate = 'SWITCHED_OVER' THEN 'point the application at the target; pgsync switchover --undo-fence lifts the source''s fence'
            || CASE WHEN :'fenced_roles' = '' THEN ' (none recorded)' ELSE '' END
            -- nothing consumes the slot any more: it only holds WAL
            || CASE WHEN d.slot_exists AND d.slot_owned THEN format('; pgsync cleanup --yes drops replication slot %s, which retains %s bytes of WAL on the source',
                                                 d.jslot, coalesce(nullif(:'slot_retained', ''), '?')) ELSE '' END
        WHEN :'fenced_roles' <> '' THEN 'pgsync switchover --undo-fence (an interrupted switchover left the source''s roles fenced)'
        WHEN d.resync_required AND d.wrong_server
          THEN format('point PGSYNC_SOURCE_URL at the job''s server (system identifier %s), then pgsync run', d.source_sysid)
        WHEN d.healed THEN 'pgsync run'
        WHEN d.resync_required THEN 'pgsync cleanup --yes && pgsync bootstrap --restart-snapshot'
        WHEN d.jstate = 'INITIALIZING' AND NOT d.is_live THEN 'pgsync bootstrap'
        -- a chunked copy continues where it stopped
        WHEN d.jstate = 'SNAPSHOTTING' AND d.jerror IS NOT NULL AND :'mode' = 'chunked' AND NOT d.is_live THEN 'pgsync bootstrap'
        WHEN d.jstate = 'SNAPSHOTTING' AND d.jerror IS NOT NULL AND :'mode' <> 'chunked' THEN 'pgsync bootstrap --restart-snapshot'
        WHEN d.jstate = 'SNAPSHOTTING' AND NOT d.is_live THEN 'pgsync bootstrap'
        WHEN d.jstate IN ('CATCHING_UP', 'STREAMING') AND NOT d.is_live THEN 'pgsync run'
        WHEN d.jstate = 'PAUSED' THEN 'raise safety.wal_retention_alarm_bytes or set safety.wal_retention_action = warn, then pgsync run'
        WHEN d.jstate = 'ERROR' AND d.jerror LIKE '%resources.max_message_bytes%'
          THEN 'raise resources.max_message_bytes, then pgsync run'
        WHEN d.jstate = 'ERROR' THEN 'pgsync run'
      END,
    'last_error', d.jerror,
    'connection_state', CASE WHEN d.hb_live THEN coalesce(d.connection_state, 'unknown') ELSE 'disconnected' END,
    'positions', jsonb_build_object(
      'consistent_lsn', d.consistent_lsn, 'applied_lsn', d.japplied,
      'received_lsn', d.received_lsn, 'source_current_lsn', d.src_current_lsn),
    'lag', jsonb_build_object(
      'bytes', CASE WHEN d.src_current_lsn IS NOT NULL AND d.japplied IS NOT NULL
                    THEN greatest(pg_wal_lsn_diff(d.src_current_lsn, d.japplied), 0)::bigint
                    ELSE d.lag_bytes END,
      -- Unknown (nothing applied yet) is null, never 0: greatest() skips nulls.
      'seconds', CASE WHEN d.applied_commit_time IS NOT NULL
                      THEN round(greatest(extract(epoch FROM now() - d.applied_commit_time), 0)::numeric, 3) END,
      'last_applied_commit_time', d.applied_commit_time),
    'snapshot', jsonb_build_object(
      'consistent_lsn', d.consistent_lsn, 'done_at', d.snapshot_done_at,
      'tables_total', d.total, 'tables_done', d.done, 'rows', d.rows, 'bytes', d.bytes,
      'tables', d.tables, 'mode', :'mode',
      -- no time left to tell when no bootstrap goes on
      'chunks', CASE WHEN jsonb_typeof((:'chunks')::jsonb) = 'object' AND NOT d.job_alive
                     THEN (:'chunks')::jsonb || jsonb_build_object('eta_seconds', NULL) ELSE (:'chunks')::jsonb END),
    'slot', jsonb_build_object(
      'name', d.jslot, 'owned', d.slot_owned, 'exists', CASE WHEN d.src_reachable THEN d.slot_exists END,
      'active', nullif(:'slot_active', '')::boolean, 'active_pid', nullif(:'slot_active_pid', '')::int,
      'restart_lsn', nullif(:'slot_restart', ''), 'confirmed_flush_lsn', nullif(:'slot_confirmed', ''),
      'wal_status', nullif(:'slot_wal_status', ''), 'invalidation_reason', nullif(:'slot_invalid', ''),
      'retained_bytes', nullif(:'slot_retained', '')::bigint, 'lag_bytes', nullif(:'slot_lag', '')::bigint),
    'wal_retention', jsonb_build_object(
      'alarm_bytes', :'alarm'::bigint, 'action', :'alarm_action',
      'alarm', coalesce(nullif(:'slot_retained', '')::bigint > :'alarm'::bigint, false)),
    'source', jsonb_build_object(
      'reachable', d.src_reachable, 'connection', nullif(:'src_display', ''), 'error', d.src_error,
      'system_identifier', d.src_sysid, 'job_system_identifier', d.source_sysid,
      'timeline', d.source_timeline),
    'verification', CASE WHEN d.verified_at IS NOT NULL THEN jsonb_build_object(
      'verified_at', d.verified_at::timestamptz, 'verified_lsn', d.verified_lsn, 'outcome', d.verify_outcome) END,
    'switchover', jsonb_build_object(
      'final_lsn', d.switchover_lsn, 'switched_over_at', d.switched_over_at::timestamptz,
      'fenced_roles', to_jsonb(string_to_array(nullif(:'fenced_roles', ''), ','))),
    'heartbeat', CASE WHEN d.heartbeat_at IS NULL AND d.pid IS NULL THEN NULL ELSE jsonb_build_object(
      'pid', d.pid, 'host', d.host, 'version', d.version, 'state', d.rstate,
      'connection_state', d.connection_state, 'source_version', d.source_version,
      'received_lsn', d.received_lsn, 'applied_lsn', d.rapplied, 'lag_bytes', d.lag_bytes,
      'transactions', d.transactions, 'changes', d.changes,
      'transactions_per_sec', d.transactions_per_sec, 'rows_per_sec', d.rows_per_sec,
      'reconnects', d.reconnects, 'rss_bytes', d.rss_bytes, 'last_apply_at', d.last_apply_at,
      'last_commit_time', d.last_commit_time, 'interval_s', d.interval_s,
      'heartbeat_at', d.heartbeat_at, 'age_seconds', round(d.age::numeric, 3),
      'started_at', d.started_at, 'stopped_at', d.stopped_at, 'stale', coalesce(d.stale, false),
      'alive', coalesce(d.hb_live, false), 'blocked_by', to_jsonb(d.blocked_by)) END,
    'created_at', d.created_at,
    'updated_at', d.updated_at) AS v
    FROM d
)
SELECT CASE :'format'
  WHEN 'json' THEN jsonb_pretty(v)
  WHEN 'text' THEN concat_ws(E'\n',
    'job:             ' || (v ->> 'job'),
    'state:           ' || (v ->> 'state') || CASE WHEN (v ->> 'resync_required')::boolean THEN ' (resync required: ' || (v ->> 'resync_reason') || ')' ELSE '' END,
    'action:          ' || coalesce(v ->> 'action', '-'),
    'last error:      ' || coalesce(v ->> 'last_error', '-'),
    CASE WHEN v #>> '{switchover,final_lsn}' IS NOT NULL THEN
      format('switched over:   at %s, final position %s', v #>> '{switchover,switched_over_at}', v #>> '{switchover,final_lsn}') END,
    CASE WHEN jsonb_typeof(v #> '{switchover,fenced_roles}') = 'array' THEN
      'fenced roles:    ' || (SELECT string_agg(r, ', ') FROM jsonb_array_elements_text(v #> '{switchover,fenced_roles}') r) END,
    'connection:      ' || (v ->> 'connection_state') || coalesce(format(' (pid %s on %s, heartbeat %s s ago%s)',
        v #>> '{heartbeat,pid}', v #>> '{heartbeat,host}', v #>> '{heartbeat,age_seconds}',
        CASE WHEN (v #>> '{heartbeat,stale}')::boolean AND :'process_alive' = 'f' THEN ', STALE: the process is gone'
             WHEN (v #>> '{heartbeat,stale}')::boolean THEN ', STALE: the process is probably gone'
             WHEN v #>> '{heartbeat,stopped_at}' IS NULL AND NOT (v #>> '{heartbeat,alive}')::boolean THEN
               ', the process ended; pgsync goes on with the job (between its programs, or retrying)'
             WHEN v #>> '{heartbeat,stopped_at}' IS NOT NULL THEN ', stopped at ' || (v #>> '{heartbeat,stopped_at}')
             WHEN jsonb_typeof(v #> '{heartbeat,blocked_by}') = 'array' THEN
               ', alive: waiting on a lock held by pid ' || (SELECT string_agg(p, ', ') FROM jsonb_array_elements_text(v #> '{heartbeat,blocked_by}') p)
             WHEN (v #>> '{heartbeat,age_seconds}')::numeric > 3 * (v #>> '{heartbeat,interval_s}')::numeric THEN
               ', alive: busy or waiting for the target'
             ELSE '' END), ''),
    'applied:         ' || coalesce(v #>> '{positions,applied_lsn}', '-') ||
        coalesce(' (lag ' || (v #>> '{lag,bytes}') || ' bytes', ' (lag unknown') ||
        coalesce(', ' || (v #>> '{lag,seconds}') || ' s since the last applied commit)', ')'),
    'snapshot:        ' || format('%s/%s tables, %s rows, %s bytes at %s%s', v #>> '{snapshot,tables_done}',
        v #>> '{snapshot,tables_total}', v #>> '{snapshot,rows}', v #>> '{snapshot,bytes}',
        coalesce(v #>> '{snapshot,consistent_lsn}', '-'),
        coalesce(', done ' || (v #>> '{snapshot,done_at}'), '')),
    CASE WHEN jsonb_typeof(v #> '{snapshot,chunks}') = 'object' THEN
      'chunks:          ' || format('%s done, %s rows, %s bytes, last at %s%s', v #>> '{snapshot,chunks,done}',
        v #>> '{snapshot,chunks,rows}', v #>> '{snapshot,chunks,bytes}', coalesce(v #>> '{snapshot,chunks,last_lsn}', '-'),
        CASE WHEN v #>> '{snapshot,chunks,eta_seconds}' IS NOT NULL
             THEN format('; about %s s left at %s rows/s', v #>> '{snapshot,chunks,eta_seconds}',
                         v #>> '{snapshot,chunks,rows_per_sec}') ELSE '' END) END,
    'slot:            ' || (v #>> '{slot,name}') ||
        CASE WHEN NOT (v #>> '{source,reachable}')::boolean THEN ' (source unreachable: ' || coalesce(v #>> '{source,error}', 'not configured') || ')'
             WHEN NOT (v #>> '{slot,exists}')::boolean THEN ' (missing)'
             ELSE format(' (%s, %s, wal_status %s): retains %s bytes of WAL, lag %s bytes%s',
                    CASE WHEN (v #>> '{slot,owned}')::boolean THEN 'owned' ELSE 'not owned' END,
                    CASE WHEN (v #>> '{slot,active}')::boolean THEN 'active' ELSE 'inactive' END,
                    coalesce(v #>> '{slot,wal_status}', '-'), coalesce(v #>> '{slot,retained_bytes}', '?'),
                    coalesce(v #>> '{slot,lag_bytes}', '?'),
                    CASE WHEN (v #>> '{wal_retention,alarm}')::boolean THEN ' -- ABOVE the alarm of ' || (v #>> '{wal_retention,alarm_bytes}') ELSE '' END) END,
    'verified:        ' || CASE WHEN jsonb_typeof(v -> 'verification') = 'object'
        THEN format('%s at %s (consistent point %s)', v #>> '{verification,outcome}',
                    v #>> '{verification,verified_at}', v #>> '{verification,verified_lsn}')
        ELSE 'never (pgsync verify)' END)
  ELSE (
    -- Base units (_seconds, _bytes), counters end in _total. The label is
    -- pgsync_job, not job: Prometheus sets job to the scrape job's name and
    -- would rename ours to exported_job.
    WITH m(name, help, type, value) AS (VALUES
      ('pgsync_state', 'Job state: 1 for the current state, 0 for the others.', 'gauge', NULL),
      ('pgsync_resync_required', 'Whether the job needs a resync (cleanup and bootstrap).', 'gauge', ((v ->> 'resync_required')::boolean)::int::numeric),
      ('pgsync_connected', 'Whether the running process reports a live source connection.', 'gauge', ((v ->> 'connection_state') = 'connected')::int::numeric),
      ('pgsync_heartbeat_stale', 'Whether the process is gone without a recorded stop (on its host by its pid and the job''s lock, elsewhere after three intervals without a heartbeat).', 'gauge', coalesce((v #>> '{heartbeat,stale}')::boolean, false)::int::numeric),
      ('pgsync_heartbeat_age_seconds', 'Seconds since the last heartbeat.', 'gauge', (v #>> '{heartbeat,age_seconds}')::numeric),
      ('pgsync_applied_lsn_bytes', 'Applied source position as a byte offset.', 'gauge', pg_wal_lsn_diff((v #>> '{positions,applied_lsn}')::pg_lsn, '0/0')),
      ('pgsync_lag_bytes', 'Bytes of source WAL not yet applied.', 'gauge', (v #>> '{lag,bytes}')::numeric),
      ('pgsync_lag_seconds', 'Seconds since the commit time of the last applied source transaction.', 'gauge', (v #>> '{lag,seconds}')::numeric),
      ('pgsync_snapshot_tables', 'Tables in the snapshot.', 'gauge', (v #>> '{snapshot,tables_total}')::numeric),
      ('pgsync_snapshot_tables_done', 'Tables copied completely.', 'gauge', (v #>> '{snapshot,tables_done}')::numeric),
      ('pgsync_snapshot_rows', 'Rows copied by the snapshot so far.', 'gauge', (v #>> '{snapshot,rows}')::numeric),
      ('pgsync_snapshot_bytes', 'Bytes copied by the snapshot so far.', 'gauge', (v #>> '{snapshot,bytes}')::numeric),
      ('pgsync_snapshot_chunks_done', 'Chunks of a chunked copy on the target.', 'gauge', (v #>> '{snapshot,chunks,done}')::numeric),
      ('pgsync_snapshot_eta_seconds', 'Estimated seconds until a chunked copy has copied every table.', 'gauge', (v #>> '{snapshot,chunks,eta_seconds}')::numeric),
      ('pgsync_source_up', 'Whether the source answered this status query.', 'gauge', ((v #>> '{source,reachable}')::boolean)::int::numeric),
      ('pgsync_slot_exists', 'Whether the replication slot exists on the source.', 'gauge', ((v #>> '{slot,exists}')::boolean)::int::numeric),
      ('pgsync_slot_active', 'Whether a consumer is connected to the slot.', 'gauge', ((v #>> '{slot,active}')::boolean)::int::numeric),
      ('pgsync_slot_retained_bytes', 'WAL the slot retains on the source (current position - restart_lsn).', 'gauge', (v #>> '{slot,retained_bytes}')::numeric),
      ('pgsync_slot_lag_bytes', 'WAL not yet confirmed on the slot (current position - confirmed_flush_lsn).', 'gauge', (v #>> '{slot,lag_bytes}')::numeric),
      ('pgsync_wal_retention_alarm', 'Whether retained WAL is above safety.wal_retention_alarm_bytes.', 'gauge', ((v #>> '{wal_retention,alarm}')::boolean)::int::numeric),
      ('pgsync_wal_retention_alarm_bytes', 'The configured alarm threshold.', 'gauge', (v #>> '{wal_retention,alarm_bytes}')::numeric),
      ('pgsync_transactions_total', 'Transactions applied by the running process.', 'counter', (v #>> '{heartbeat,transactions}')::numeric),
      ('pgsync_changes_total', 'Changes applied by the running process.', 'counter', (v #>> '{heartbeat,changes}')::numeric),
      ('pgsync_reconnects_total', 'Source reconnections of the running process.', 'counter', (v #>> '{heartbeat,reconnects}')::numeric),
      ('pgsync_transactions_per_second', 'Transactions per second over the last heartbeat interval.', 'gauge', (v #>> '{heartbeat,transactions_per_sec}')::numeric),
      ('pgsync_rows_per_second', 'Rows per second over the last heartbeat interval.', 'gauge', (v #>> '{heartbeat,rows_per_sec}')::numeric),
      ('pgsync_rss_bytes', 'Resident memory of the applying process.', 'gauge', (v #>> '{heartbeat,rss_bytes}')::numeric)
    ), states(s) AS (VALUES ('INITIALIZING'), ('SNAPSHOTTING'), ('CATCHING_UP'), ('STREAMING'), ('PAUSED'), ('ERROR'), ('RESYNC_REQUIRED'), ('SWITCHED_OVER'))
    SELECT string_agg(block, E'\n' ORDER BY ord) FROM (
      SELECT row_number() OVER () AS ord, concat_ws(E'\n',
        format('# HELP %s %s', m.name, m.help), format('# TYPE %s %s', m.name, m.type),
        CASE WHEN m.name = 'pgsync_state' THEN
          (SELECT string_agg(format('pgsync_state{pgsync_job="%s",state="%s"} %s', v ->> 'job', st.s,
                  (st.s = v ->> 'state')::int), E'\n') FROM states st)
        WHEN m.value IS NOT NULL THEN format('%s{pgsync_job="%s"} %s', m.name, v ->> 'job', m.value) END) AS block
        FROM m
    ) b)
END
FROM doc;
SQL

# STATUS_CHUNKS_SQL: lib/pgsync/progress.sh, which bootstrap's display reads too.

# job_liveness: where status runs on the host of the job's process (the
# heartbeat's host), the process itself says whether it lives, however old
# its heartbeat: one that waits on a lock or rides out a target outage
# writes none, one killed with -9 recorded no stop. PROCESS_ALIVE (t or f):
# the heartbeat's pid runs and is one of ours. JOB_ALIVE (t or f): a
# bootstrap, run or cleanup of the job holds its lock (lock_job), between
# its programs too. Both are "" elsewhere: status then goes by the
# heartbeat's age and the target sessions.
job_liveness() {
	local row pid host fd comm
	PROCESS_ALIVE="" JOB_ALIVE=""
	row=$(sql tgt <<<"SELECT pid, host FROM pgsync.job_runtime WHERE job = :'job'") || return 0
	IFS=$'\x1f' read -r pid host <<<"$row"
	[[ -n $host && $host == "$HOSTNAME" ]] || return 0
	PROCESS_ALIVE=f
	if [[ $pid =~ ^[0-9]+$ ]] && pid_running "$pid" && comm=$(<"/proc/$pid/comm") && [[ $comm == pg-* ]]; then
		PROCESS_ALIVE=t
	fi
	# A shared lock is granted only while no pgsync of the job holds it.
	if [[ -f $STATE_DIR/lock ]] && exec {fd}<"$STATE_DIR/lock"; then
		if flock -n -s "$fd"; then
			JOB_ALIVE=f PROCESS_ALIVE=f
		else
			JOB_ALIVE=t
		fi
		exec {fd}<&-
	fi
} 2>/dev/null

cmd_status() {
	setup_connections no
	catalog_exists || die $EX_PREFLIGHT "the target ($TGT_DISPLAY) has no pgsync schema: job $JOB was never bootstrapped (pgsync bootstrap)"
	job_load
	((JOB_EXISTS)) || die $EX_PREFLIGHT "job $JOB does not exist in the target ($TGT_DISPLAY): pgsync bootstrap creates it"
	job_liveness

	local reachable=f src_error="" sysid="" lineage_why="" rc=1
	SLOT_EXISTS=0
	if ((HAVE_SOURCE)); then
		# Which server is this: the rule run follows (source_lineage).
		if slot_load; then
			source_lineage "${JOB_APPLIED:-$JOB_CONSISTENT}"
			rc=$?
		fi
		if ((rc != 1)); then
			reachable=t sysid=$SOURCE_SYSID lineage_why=$LINEAGE_WHY
		else
			src_error=$(sql_error)
			SLOT_EXISTS=0 SLOT_ACTIVE="" SLOT_ACTIVE_PID="" SLOT_RESTART="" SLOT_CONFIRMED=""
			SLOT_WAL_STATUS="" SLOT_INVALID="" SLOT_RETAINED="" SLOT_LAG="" SLOT_CURRENT=""
		fi
	else
		src_error="PGSYNC_SOURCE_URL is not set"
	fi
	local fenced=""
	if catalog_exists fence; then
		fenced=$(sql tgt <<<"SELECT string_agg(role_name, ',' ORDER BY role_name) FROM pgsync.fence WHERE job = :'job'") ||
			die $EX_RUNTIME "cannot read the job's fence from the target: $(sql_error)"
	fi
	local chunks=null mode=${CFG[resources.snapshot_mode]:-single}
	if catalog_exists table_chunk; then
		chunks=$(sql tgt -v mode="$mode" <<<"$STATUS_CHUNKS_SQL") ||
			die $EX_RUNTIME "cannot read the chunks of job $JOB from the target: $(sql_error)"
	fi
	local format=text
	((STATUS_JSON)) && format=json
	((PROMETHEUS)) && format=prom
	local wrong=f
	[[ $JOB_STATE == RESYNC_REQUIRED ]] && wrong_server_cause "$JOB_LAST_ERROR" && wrong=t
	sql tgt -v format="$format" -v mode="$mode" -v chunks="${chunks:-null}" -v hb_s="$(ms_to_s "$HEARTBEAT_MS")" -v wrong_server="$wrong" -v fenced_roles="$fenced" \
		-v src_reachable="$reachable" -v src_error="$src_error" -v src_sysid="$sysid" -v lineage_why="$lineage_why" \
		-v src_current="${SLOT_CURRENT:-}" -v src_display="$SRC_DISPLAY" -v slot_exists="$SLOT_EXISTS" \
		-v slot_active="${SLOT_ACTIVE:-}" -v slot_active_pid="${SLOT_ACTIVE_PID:-}" \
		-v slot_restart="${SLOT_RESTART:-}" -v slot_confirmed="${SLOT_CONFIRMED:-}" \
		-v slot_wal_status="${SLOT_WAL_STATUS:-}" -v slot_invalid="${SLOT_INVALID:-}" \
		-v slot_retained="${SLOT_RETAINED:-}" -v slot_lag="${SLOT_LAG:-}" \
		-v alarm="${CFG[safety.wal_retention_alarm_bytes]}" -v alarm_action="${CFG[safety.wal_retention_action]}" \
		-v process_alive="$PROCESS_ALIVE" -v job_alive="$JOB_ALIVE" \
		<<<"$STATUS_SQL" | ha_status "$format" || die $EX_RUNTIME "cannot read the status of job $JOB from the target: $(sql_error)"
}
