# The progress of a bootstrap's copy: rows copied, the planner's estimate,
# the rate and the time left, from one place for both the live display of
# bootstrap and `pgsync status`, so that the two tell the same time left.
# Sourced by bin/pgsync.
#
# On a terminal (and text logs) bootstrap redraws one line every second:
#   copying [###########---------]  55%  1234567 of 2250000 rows  85310 rows/s  ETA 0:12
# Elsewhere (a file, the journal, --json) it logs a plain line every
# PGSYNC_PROGRESS_SECONDS (default 30):
#   copy progress: 55% (1234567 of 2250000 rows), 85310 rows/s, about 12 s left

# The chunks of a chunked copy as one JSON object, or null: done, rows,
# bytes, last_lsn (the largest consistent point), rows_per_sec (over the
# chunks of the last five minutes), rows_estimate (the planner's, of every
# table) and eta_seconds (the rows the planner estimated and the chunks do
# not have yet, at that rate; null unless chunks are being copied now).
# Variables: job, mode (resources.snapshot_mode).
read -r -d '' STATUS_CHUNKS_SQL <<'SQL'
WITH c AS (
  SELECT count(*) AS done, coalesce(sum(rows), 0) AS rows, coalesce(sum(bytes), 0) AS bytes, max(lsn)::text AS last_lsn,
         max(copied_at) AS last_at
    FROM pgsync.table_chunk WHERE job = :'job'
), w AS (
  SELECT sum(rows) AS rows, extract(epoch FROM max(copied_at) - min(copied_at)) AS span
    FROM pgsync.table_chunk WHERE job = :'job' AND copied_at > now() - interval '5 minutes'
), e AS (
  SELECT sum(rows_estimate) AS estimate FROM pgsync.table_sync WHERE job = :'job'
), r AS (
  SELECT CASE WHEN w.span > 0 THEN round(w.rows / w.span) END AS rate FROM w
)
SELECT CASE WHEN c.done = 0 AND :'mode' <> 'chunked' THEN 'null' ELSE jsonb_build_object(
  'done', c.done, 'rows', c.rows, 'bytes', c.bytes, 'last_lsn', c.last_lsn, 'rows_per_sec', r.rate,
  'rows_estimate', round(e.estimate),
  'eta_seconds', CASE WHEN r.rate > 0 AND e.estimate IS NOT NULL AND j.state = 'SNAPSHOTTING'
                      AND c.last_at > now() - interval '1 minute'
                      THEN round(greatest(e.estimate - c.rows, 0) / r.rate) END)::text END
  FROM c, r, e, pgsync.job j WHERE j.job = :'job'
SQL

# progress_figures: PG_ROWS PG_ESTIMATE PG_RATE PG_ETA of the copy going on
# ("" where unknown). A chunked copy: STATUS_CHUNKS_SQL's, as status shows
# them. A copy at one snapshot: pg-snapshot-dump's progress file, the rate
# over the whole copy.
progress_figures() {
	PG_ROWS="" PG_ESTIMATE="" PG_RATE="" PG_ETA=""
	if [[ ${CFG[resources.snapshot_mode]:-single} == chunked ]]; then
		local row
		row=$(sql tgt -v mode=chunked <<<"SELECT j ->> 'rows', j ->> 'rows_estimate', j ->> 'rows_per_sec', j ->> 'eta_seconds'
			FROM ($STATUS_CHUNKS_SQL) s(t), LATERAL (SELECT t::jsonb) AS x(j)") || return 1
		IFS=$'\x1f' read -r PG_ROWS PG_ESTIMATE PG_RATE PG_ETA <<<"$row"
		return 0
	fi
	local f=$STATE_DIR/snapshot.progress json elapsed
	[[ -r $f ]] || return 1
	json=$(<"$f")
	# The copy's totals come before its tables' in the file.
	PG_ROWS=$(progress_field rows_copied "$json")
	PG_ESTIMATE=$(progress_field rows_estimate "$json")
	elapsed=$(progress_field elapsed_ms "$json")
	[[ $PG_ROWS =~ ^[0-9]+$ && $elapsed =~ ^[0-9]+$ ]] || return 1
	((elapsed > 0 && PG_ROWS > 0)) && PG_RATE=$((PG_ROWS * 1000 / elapsed))
	PG_ESTIMATE=${PG_ESTIMATE%.*}
	if [[ $PG_ESTIMATE =~ ^[0-9]+$ && -n $PG_RATE ]] && ((PG_RATE > 0)); then
		PG_ETA=$(((PG_ESTIMATE > PG_ROWS ? PG_ESTIMATE - PG_ROWS : 0) / PG_RATE))
	fi
}

# progress_field NAME JSON: the first number named NAME in JSON.
progress_field() {
	[[ $2 =~ \"$1\":([0-9.]+) ]] && printf '%s' "${BASH_REMATCH[1]}"
}

# progress_start: the display of the copy about to start. progress_tick
# (supervise() calls it about every second) shows it, progress_end ends it.
progress_start() {
	PROGRESS_ON=1 PROGRESS_LAST_MS=0 PROGRESS_DRAWN=0
	PROGRESS_BAR=0
	((STDERR_TTY && !LOG_JSON && !LOG_PRIO)) && PROGRESS_BAR=1
	PROGRESS_EVERY_MS=$((${PGSYNC_PROGRESS_SECONDS:-30} * 1000))
	((PROGRESS_BAR)) && PROGRESS_EVERY_MS=1000
	PROGRESS_T0=$(now_ms)
}

progress_tick() {
	((${PROGRESS_ON:-0})) || return 0
	local now
	now=$(now_ms)
	((now - PROGRESS_LAST_MS >= PROGRESS_EVERY_MS)) || return 0
	# A plain line only once the copy has run a whole interval.
	((PROGRESS_BAR || now - PROGRESS_T0 >= PROGRESS_EVERY_MS)) || return 0
	PROGRESS_LAST_MS=$now
	progress_figures || return 0
	[[ -n $PG_ROWS ]] || return 0
	local pct="" eta_text="--:--" left=""
	if [[ $PG_ESTIMATE =~ ^[0-9]+$ ]] && ((PG_ESTIMATE > 0)); then
		pct=$((PG_ROWS * 100 / PG_ESTIMATE))
		((pct <= 100)) || pct=100
	fi
	if [[ $PG_ETA =~ ^[0-9]+$ ]]; then
		printf -v eta_text '%d:%02d' $((PG_ETA / 60)) $((PG_ETA % 60))
		((PG_ETA < 3600)) || printf -v eta_text '%d:%02d:%02d' $((PG_ETA / 3600)) $((PG_ETA % 3600 / 60)) $((PG_ETA % 60))
		left=", about $PG_ETA s left"
	fi
	if ((PROGRESS_BAR)); then
		local width=20 fill=0 bar
		[[ -n $pct ]] && fill=$((pct * width / 100))
		printf -v bar '%*s' "$fill" ''
		bar=${bar// /#}
		printf -v bar '%s%*s' "$bar" $((width - fill)) ''
		bar=${bar// /-}
		printf '\r\033[Kcopying [%s] %4s  %s%s rows  %s rows/s  ETA %s' "$bar" "${pct:+$pct%}" "$PG_ROWS" \
			"${PG_ESTIMATE:+ of $PG_ESTIMATE}" "${PG_RATE:-?}" "$eta_text" >&2
		PROGRESS_DRAWN=1
	else
		log_info "copy progress: ${pct:+$pct% (}$PG_ROWS${PG_ESTIMATE:+ of $PG_ESTIMATE} rows${pct:+)}, ${PG_RATE:-?} rows/s$left"
	fi
}

progress_end() {
	((${PROGRESS_DRAWN:-0})) && printf '\r\033[K' >&2
	PROGRESS_ON=0 PROGRESS_DRAWN=0
}
