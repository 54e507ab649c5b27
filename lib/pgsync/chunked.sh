# pgsync bootstrap, resources.snapshot_mode = chunked: the copy in chunks,
# resumable, with no snapshot held longer than one chunk group. Sourced by
# lib/pgsync/bootstrap.sh; the design is doc/snapshot.md's "The chunked copy".
#
#  1. The job's slot, created without a snapshot at L0, and applied_lsn = L0:
#     the stream will start there. The slot is kept across interruptions.
#  2. Groups of chunks, one after another until every table is done: a
#     temporary slot exports a snapshot at its consistent point Li (exact,
#     as the job's slot's would be), the chunks already on the target go to
#     pg-snapshot-dump --done, and it copies the rest for about
#     resources.chunk_group_seconds; each chunk is committed on the target
#     with its pgsync.table_chunk row. The first group also creates the
#     tables (pre-data) at its snapshot.
#  3. The keys and the indexes that are not unique; the catch-up: the job's
#     slot from L0 to the largest Li through pg-apply, whose filter applies a
#     change only to the chunks copied before it; then the other unique and
#     exclusion constraints, which hold only once every table is at one point.
#
# Resuming is running bootstrap again: the job's slot, its row and the
# chunks on the target are what it continues from. A chunk in flight is all
# or nothing; a table copied in one piece that did not finish is truncated
# and copied again.

# shellcheck source=lib/pgsync/run.sh
source "$PGSYNC_LIBDIR/run.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/run.sh"

CH_SLOT_READY=0 CH_GROUP=0 CH_KEPT_NOTE=""

# chunk_totals: CH_TABLES_DONE, CH_TABLES, CH_CHUNKS, CH_ROWS, CH_BYTES and
# CH_MAX_LSN (the largest Li, "" before the first chunk) from the target.
chunk_totals() {
	local row
	row=$(sql tgt <<'SQL'
SELECT (SELECT count(*) FILTER (WHERE state = 'done') FROM pgsync.table_sync WHERE job = :'job'),
       (SELECT count(*) FROM pgsync.table_sync WHERE job = :'job'),
       count(*), coalesce(sum(rows), 0), coalesce(sum(bytes), 0), coalesce(max(lsn)::text, '')
  FROM pgsync.table_chunk WHERE job = :'job'
SQL
	) || return 1
	IFS=$'\x1f' read -r CH_TABLES_DONE CH_TABLES CH_CHUNKS CH_ROWS CH_BYTES CH_MAX_LSN <<<"$row"
}

# For bootstrap_fail: what an interrupted chunked copy keeps.
chunked_kept_note() {
	CH_KEPT_NOTE=""
	((CH_SLOT_READY)) || return 0
	if chunk_totals; then
		CH_KEPT_NOTE="; replication slot $SLOT and the $CH_CHUNKS chunks copied ($CH_TABLES_DONE of $CH_TABLES tables done) are kept"
	else
		CH_KEPT_NOTE="; replication slot $SLOT and the chunks copied are kept"
	fi
}

# Continue the job's interrupted chunked copy, or start afresh (bootstrap.sh's
# plan: an owned slot is dropped, the tables its copy touched truncated).
# Sets CH_RESUME.
chunked_plan() {
	local n
	CH_RESUME=0
	job_load
	slot_load || die $EX_RUNTIME "cannot read replication slots on the source ($SRC_DISPLAY): $(sql_error)"
	if ((JOB_EXISTS && !RESTART_SNAPSHOT)) && [[ $JOB_STATE == SNAPSHOTTING && $JOB_SLOT_OWNED == t &&
		$JOB_SLOT == "$SLOT" && -n $JOB_APPLIED ]]; then
		n=$(sql tgt <<<"SELECT count(*) FROM pgsync.table_chunk WHERE job = :'job'") ||
			die $EX_RUNTIME "cannot read the chunks of job $JOB: $(sql_error)"
		if ((n > 0 && !SLOT_EXISTS)); then
			log_warn "replication slot $SLOT of job $JOB is gone: the $n chunks copied cannot be continued without it; starting over"
		elif ((n > 0)) && [[ $SLOT_WAL_STATUS == lost || -n $SLOT_INVALID ]]; then
			log_warn "replication slot $SLOT of job $JOB was invalidated (${SLOT_INVALID:-wal_status lost}): the $n chunks copied cannot be continued without it; starting over"
		elif ((n > 0)); then
			prove_job_slot reuse
			CH_RESUME=1 CH_SLOT_READY=1 CONSISTENT_LSN=$JOB_CONSISTENT
			log_info "continuing the copy of job $JOB: $n chunks are on the target, replication slot $SLOT is kept (from $JOB_CONSISTENT)"
			return 0
		fi
	fi
	bootstrap_plan
}

# The job's slot, without a snapshot: its consistent point L0 is where the
# stream starts, so the job row's applied_lsn is L0 until the catch-up.
create_job_slot() {
	local got lsn
	BS_PHASE="creating the replication slot"
	rm -f "$WORK/slot.line"
	failover_resolve
	spawn pg-slot - "$WORK/slot.line" pg-slot create -d "$SRC" --slot "$SLOT" "$FAILOVER_OPT" --log-level "$LOG_LEVEL_NAME"
	supervise "$BS_DEADLINE" "pg-slot:$SPAWN_PID"
	if [[ $SUP_RESULT == failed ]]; then
		# Maybe a slot of that name appeared meanwhile: that one is not ours.
		job_update "slot_owned = false" >/dev/null
	fi
	[[ $SUP_RESULT == ok ]] || step_failed "creating replication slot $SLOT"
	IFS=$'\t' read -r got lsn _ <"$WORK/slot.line"
	[[ $got == "$SLOT" && $lsn =~ ^[0-9A-F]+/[0-9A-F]+$ ]] || bootstrap_fail $EX_RUNTIME "unexpected output from pg-slot create"
	CH_SLOT_READY=1 CONSISTENT_LSN=$lsn
	job_update "state = 'SNAPSHOTTING', consistent_lsn = :'lsn', applied_lsn = :'lsn'" lsn="$lsn" ||
		bootstrap_fail $EX_RUNTIME "cannot record the slot's position: $(sql_error)"
	log_info "created replication slot $SLOT at $lsn: the stream starts there, the chunks are copied at their own snapshots"
}

# copy_text EXPR: the SQL expression of EXPR's text with COPY text escaping,
# as the files pg-snapshot-dump and pg-apply read are written.
read -r -d '' COPY_TEXT_SQL <<'SQL'
replace(replace(replace(replace(@, '\', '\\'), E'\t', '\t'), E'\n', '\n'), E'\r', '\r')
SQL
copy_text() {
	local expr=$1
	printf '%s' "${COPY_TEXT_SQL//@/"$expr"}"
}

# chunk_done_file FILE: the chunks on the target, one a line as
# pg-snapshot-dump --done reads them: schema, table, the number of key
# columns, the key columns, the lo values, the hi values (\N for an
# unbounded side), TAB between fields, each with COPY text escaping. A
# table copied in one piece is its schema, its name and 0.
read -r -d '' CHUNK_DONE_SQL <<'SQL'
SELECT (SELECT string_agg(coalesce(@ESC@, '\N'), E'\t' ORDER BY f.i)
          FROM unnest(ARRAY[c.schema_name, c.table_name, c.n::text] || coalesce(c.key_columns, '{}')
                      || coalesce(c.lo, array_fill(NULL::text, ARRAY[c.n])) || coalesce(c.hi, array_fill(NULL::text, ARRAY[c.n])))
               WITH ORDINALITY AS f(x, i))
  FROM (SELECT t.*, coalesce(cardinality(t.key_columns), 0) AS n FROM pgsync.table_chunk t WHERE t.job = :'job') c
 ORDER BY c.schema_name, c.table_name, c.lo NULLS FIRST
SQL
CHUNK_DONE_SQL=${CHUNK_DONE_SQL//@ESC@/"$(copy_text f.x)"}
chunk_done_file() {
	sql tgt <<<"$CHUNK_DONE_SQL" >"$1" || bootstrap_fail $EX_RUNTIME "cannot read the chunks on the target: $(sql_error)"
}

# The key collations file (lib/stream/keyorder.h): for each collatable
# column of the job's tables and their partitions (a root is cut by its own
# key), the target collation that orders it exactly as the source column's
# collation does, or why there is none. pgsync alone sees both servers, so the proof is made here, before
# each group plans and before the catch-up, and both programs read its
# verdict. A collation is described the same way on both sides (COLL_DESC:
# provider, locale, version, deterministic, of collation co in database d;
# the default collation is the database's); they match when the databases'
# encodings and every part are equal, and the version is known (or the
# locale is C, POSIX or C.*, which PostgreSQL gives no version: byte order).
read -r -d '' COLL_DESC <<'SQL'
CASE WHEN co.oid = 100 THEN coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') ELSE co.collprovider::text END AS p,
CASE WHEN co.oid = 100 THEN
       CASE coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') WHEN 'c' THEN d.datcollate || '/' || d.datctype
            ELSE coalesce(to_jsonb(d) ->> 'datlocale', to_jsonb(d) ->> 'daticulocale') END
       || coalesce('/' || (to_jsonb(d) ->> 'daticurules'), '')
     ELSE CASE co.collprovider WHEN 'c' THEN co.collcollate || '/' || co.collctype
            ELSE coalesce(to_jsonb(co) ->> 'colllocale', to_jsonb(co) ->> 'colliculocale', co.collcollate) END
       || coalesce('/' || (to_jsonb(co) ->> 'collicurules'), '')
END AS l,
CASE WHEN co.oid = 100 THEN to_jsonb(d) ->> 'datcollversion' ELSE pg_collation_actual_version(co.oid) END AS v,
coalesce((to_jsonb(co) ->> 'collisdeterministic')::bool, true) AS det
SQL
read -r -d '' KEYCOLL_SRC_SQL <<SQL
SELECT coalesce(json_agg(json_build_object('s', n.nspname, 't', l.relname, 'c', a.attname,
         'coll', format('%I.%I', cn.nspname, co.collname), 'p', x.p, 'l', x.l, 'v', x.v, 'det', x.det,
         'enc', pg_encoding_to_char(d.encoding))), '[]')
  FROM unnest(:'tables'::text[]) AS u(t)
  JOIN pg_class c ON c.relname = split_part(u.t, E'\t', 2)
  JOIN pg_namespace tn ON tn.oid = c.relnamespace AND tn.nspname = split_part(u.t, E'\t', 1)
 CROSS JOIN LATERAL (SELECT c.oid AS relid UNION SELECT p.relid FROM pg_partition_tree(c.oid) AS p) AS pt
  JOIN pg_class l ON l.oid = pt.relid AND l.relkind IN ('r', 'p')
  JOIN pg_namespace n ON n.oid = l.relnamespace
  JOIN pg_attribute a ON a.attrelid = l.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_collation co ON co.oid = a.attcollation
  JOIN pg_namespace cn ON cn.oid = co.collnamespace
  JOIN pg_database d ON d.datname = current_database()
 CROSS JOIN LATERAL (SELECT $COLL_DESC) AS x
SQL
read -r -d '' KEYCOLL_TGT_SQL <<SQL
SELECT concat_ws(E'\t', $(copy_text s.s), $(copy_text s.t), $(copy_text s.c),
         coalesce($(copy_text m.coll), '\N'), coalesce($(copy_text w.why), '\N'))
  FROM json_to_recordset(:'src'::json) AS s(s text, t text, c text, coll text, p text, l text, v text, det bool, enc text)
  JOIN pg_database d ON d.datname = current_database()
 CROSS JOIN LATERAL (SELECT s.v IS NOT NULL OR (s.p = 'c' AND (split_part(s.l, '/', 1) IN ('C', 'POSIX')
        OR split_part(s.l, '/', 1) ILIKE 'C.%')) AS known) AS k
  LEFT JOIN LATERAL (
        SELECT format('%I.%I', cn.nspname, co.collname) AS coll
          FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace
         CROSS JOIN LATERAL (SELECT $COLL_DESC) AS x
         WHERE co.collencoding IN (-1, d.encoding) AND x.det AND x.p = s.p AND x.l = s.l
           AND x.v IS NOT DISTINCT FROM s.v
         ORDER BY co.oid LIMIT 1) AS m
    ON s.enc = pg_encoding_to_char(d.encoding) AND s.det AND k.known
 CROSS JOIN LATERAL (SELECT CASE
        WHEN s.enc <> pg_encoding_to_char(d.encoding) THEN
             format('the source database''s encoding is %s, the target''s %s', s.enc, pg_encoding_to_char(d.encoding))
        WHEN NOT s.det THEN format('its collation %s is nondeterministic', s.coll)
        WHEN NOT k.known THEN
             format('the version of its collation %s (provider %s, locale %s) is unknown on the source', s.coll, s.p, s.l)
        WHEN m.coll IS NULL THEN
             format('no collation on the target has provider %s, locale %s and version %s, as its collation %s on the source',
                    s.p, s.l, coalesce(s.v, 'none'), s.coll)
        END AS why) AS w
 ORDER BY s.s, s.t, s.c
SQL

# key_collations FILE: write the key collations file.
key_collations() {
	local src
	src=$(sql src <<<"$KEYCOLL_SRC_SQL") || bootstrap_fail $EX_RUNTIME "cannot read the collations of the source's key columns: $(sql_error)"
	sql tgt -v src="$src" <<<"$KEYCOLL_TGT_SQL" >"$1" ||
		bootstrap_fail $EX_RUNTIME "cannot find the target's collations for the source's key columns: $(sql_error)"
}

# A table copied in one piece is done in one transaction at the end of its
# copy: one that is not done, and has no chunk, holds only what an
# interrupted attempt left. Emptied before it is copied again (one
# statement a table for \gexec, which runs every field it gets, printing
# the table's name).
truncate_unfinished() {
	local out
	out=$(sql tgt <<'SQL'
SELECT format('TRUNCATE %I.%I; SELECT %L', s.schema_name, s.table_name, format('%I.%I', s.schema_name, s.table_name))
  FROM pgsync.table_sync s
 WHERE s.job = :'job' AND s.state <> 'done'
   AND NOT EXISTS (SELECT 1 FROM pgsync.table_chunk c WHERE c.job = s.job AND c.schema_name = s.schema_name AND c.table_name = s.table_name)
   AND to_regclass(format('%I.%I', s.schema_name, s.table_name)) IS NOT NULL
   AND (xpath('/row/n/text()', query_to_xml(format('SELECT EXISTS (SELECT 1 FROM %I.%I) AS n',
        s.schema_name, s.table_name), false, true, '')))[1]::text = 'true'
 ORDER BY 1 \gexec
SQL
	) || bootstrap_fail $EX_RUNTIME "cannot empty the tables an interrupted copy left unfinished: $(sql_error)"
	[[ -z $out ]] || log_info "emptied the tables whose copy in one piece an earlier attempt did not finish, to copy them again"
}

# chunk_group FIRST: one group of chunks at one temporary slot's snapshot.
# FIRST (1): also the table definitions, the sequences and the estimates.
# Sets CH_COPIED when anything new was done.
chunk_group() {
	local first=$1 chunks_before=$CH_CHUNKS done_before=$CH_TABLES_DONE lsn
	CH_GROUP=$((CH_GROUP + 1))
	BS_PHASE="creating the snapshot of chunk group $CH_GROUP"
	if ! open_snapshot_slot "pgsync_copy_$$_$CH_GROUP" --temporary; then
		step_failed "creating a temporary replication slot for chunk group $CH_GROUP"
		bootstrap_fail $EX_RUNTIME "pg-slot ended without creating a temporary slot for chunk group $CH_GROUP"
	fi
	lsn=$SNAP_LSN
	if ((first)); then
		sequences_prepare
		create_target_tables
		sequences_bootstrap
		((${#DEF_MISSING[@]} + ${#DEF_PENDING[@]} == 0)) ||
			suspend_autovacuum "${DEF_MISSING[@]}" "${DEF_PENDING[@]}" "${PARTS_MISSING[@]}" "${PARTS_PENDING[@]}"
		record_estimates
	fi
	if ((CH_TABLES_DONE < CH_TABLES)); then
		# A failure here is named by this phase, not the step before.
		BS_PHASE="preparing chunk group $CH_GROUP"
		chunk_done_file "$WORK/chunks.done"
		key_collations "$WORK/key-collations"
		truncate_unfinished
		BS_PHASE="copying chunk group $CH_GROUP"
		copy_pipeline "copying chunk group $CH_GROUP" --chunked --position "$lsn" --done "$WORK/chunks.done" \
			--key-collations "$WORK/key-collations" \
			--frame-size "${CFG[resources.chunk_bytes]}" --chunk-rows "${CFG[resources.chunk_rows]}" \
			--group-seconds "${CFG[resources.chunk_group_seconds]}"
	fi
	BS_PHASE="releasing the snapshot of chunk group $CH_GROUP"
	release_snapshot
	chunk_totals || bootstrap_fail $EX_RUNTIME "cannot read the copy's progress: $(sql_error)"
	CH_COPIED=0
	((CH_CHUNKS > chunks_before || CH_TABLES_DONE > done_before)) && CH_COPIED=1
	slot_load || SLOT_RETAINED=""
	log_info "chunk group $CH_GROUP at $lsn: $((CH_CHUNKS - chunks_before)) chunks copied; $CH_TABLES_DONE of $CH_TABLES tables done, $CH_CHUNKS chunks, $CH_ROWS rows, $CH_BYTES bytes in all; replication slot $SLOT retains ${SLOT_RETAINED:-?} bytes of WAL"
}

# The stream from the job's slot, from the applied position (L0, or where
# an interrupted catch-up got to) to the largest Li: pg-apply applies each
# change only where the copy does not have it yet.
chunked_catch_up() {
	local applied
	job_load
	applied=$(applied_position)
	if [[ -z $CH_MAX_LSN ]] || lsn_ge "$applied" "$CH_MAX_LSN"; then
		log_info "nothing to catch up: the target applied $applied, the last chunk was copied at ${CH_MAX_LSN:-$applied}"
		return 0
	fi
	BS_PHASE="catching up from $applied to $CH_MAX_LSN"
	log_info "catching up: replication slot $SLOT from $applied to $CH_MAX_LSN, the position of the last chunk group"
	write_checkpoint
	key_collations "$WORK/key-collations"
	APPLY_ARGS=(--key-collations "$WORK/key-collations")
	start_stream --endpos "$CH_MAX_LSN"
	APPLY_ARGS=()
	supervise "$BS_DEADLINE" "pg-walcat:$WALCAT_PID" "pg-apply:$APPLY_PID"
	[[ $SUP_RESULT == ok ]] || step_failed "catching up to $CH_MAX_LSN"
	WALCAT_PID="" APPLY_PID=""
}

chunked_bootstrap() {
	local empty=0
	catalog_exists table_chunk ||
		die $EX_PREFLIGHT "the target's pgsync schema has no table_chunk: resources.snapshot_mode = chunked needs the catalog of this pgsync version"
	chunked_plan
	if ((!CH_RESUME)); then
		[[ ${CFG[safety.auto_create_publication]} != true ]] || create_publication
		reset_job_row
	fi
	BS_DEADLINE=$(($(now_ms) + ${CFG[resources.snapshot_timeout]%ms}))
	((CH_RESUME)) || create_job_slot
	chunk_totals || bootstrap_fail $EX_RUNTIME "cannot read the copy's progress: $(sql_error)"
	chunk_group 1
	while ((CH_TABLES_DONE < CH_TABLES)); do
		# A group always finishes the chunks it started: one that got
		# nothing done means the copy cannot progress.
		if ((CH_COPIED)); then
			empty=0
		elif ((++empty >= 3)); then
			bootstrap_fail $EX_RUNTIME "$empty chunk groups in a row copied nothing ($CH_TABLES_DONE of $CH_TABLES tables done)"
		fi
		chunk_group 0
	done
	restore_post_data early
	chunked_catch_up
	restore_post_data late
	BS_PHASE="setting sequences"
	sequences_follow
	job_update "state = 'CATCHING_UP', snapshot_done_at = now(), last_error = NULL" ||
		die $EX_RUNTIME "cannot record the end of the bootstrap of job $JOB: $(sql_error)"
	log_info "bootstrap of job $JOB complete: ${#TABLES[@]} tables, $CH_CHUNKS chunks, $CH_ROWS rows, $CH_BYTES bytes copied from $CONSISTENT_LSN to ${CH_MAX_LSN:-$CONSISTENT_LSN}; state CATCHING_UP, continue with pgsync run"
	return $EX_OK
}
