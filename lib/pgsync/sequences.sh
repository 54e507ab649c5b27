# Sequences: the ones a job carries are those the replicated tables' columns
# own (serial, identity) or use in a default (nextval of any sequence, shared
# or in another schema), plus replication.sequences. Logical decoding does
# not replicate sequences, so pgsync copies their values itself: bootstrap
# sets them as they were at the snapshot; run moves the target's forward at
# every heartbeat interval, never backwards, plus safety.sequence_margin.
# Sourced by bin/pgsync. Reads the source only, never writes it.

# The carried sequences on the source, one row each: schema, name, the
# owning column (table as schema.table, column) when a configured table's
# column owns it, how it is carried (a serial, i identity, n default, c
# configured) and the CREATE SEQUENCE that makes it elsewhere. Partitions
# count with their tables. Input: :'tables', :'sequences'.
read -r -d '' SEQ_LIST_SQL <<'SQL'
WITH cfg AS (
  SELECT to_regclass(format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2))) AS rel
    FROM unnest(:'tables'::text[]) AS u(t)
), rels AS (
  -- pg_partition_tree lists nothing for a table that is not partitioned.
  SELECT rel FROM cfg WHERE rel IS NOT NULL
  UNION
  SELECT pt.relid FROM cfg CROSS JOIN LATERAL pg_partition_tree(cfg.rel) AS pt
), used AS (
  SELECT d.objid AS seq, d.deptype::text AS how, d.refobjid AS rel, d.refobjsubid AS att
    FROM pg_depend d JOIN rels ON d.refobjid = rels.rel
   WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
     AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0
  UNION ALL
  SELECT d.refobjid, 'n', NULL, NULL
    FROM pg_attrdef ad JOIN rels ON ad.adrelid = rels.rel
    JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass
  UNION ALL
  SELECT to_regclass(format('%I.%I', split_part(u.s, E'\t', 1), split_part(u.s, E'\t', 2))), 'c', NULL, NULL
    FROM unnest(:'sequences'::text[]) AS u(s)
), seqs AS (
  -- An owning column wins over a default's or the configuration's mention.
  SELECT DISTINCT ON (u.seq) u.seq, u.how, u.rel, u.att
    FROM used u JOIN pg_class c ON c.oid = u.seq AND c.relkind = 'S'
   ORDER BY u.seq, u.how IN ('a', 'i') DESC
), seqrow AS (
  SELECT s.*, n.nspname, c.relname, sq.*, tn.nspname AS tnsp, tc.relname AS trel, a.attname
    FROM seqs s JOIN pg_class c ON c.oid = s.seq JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_sequence sq ON sq.seqrelid = s.seq
    LEFT JOIN pg_class tc ON tc.oid = s.rel LEFT JOIN pg_namespace tn ON tn.oid = tc.relnamespace
    LEFT JOIN pg_attribute a ON a.attrelid = s.rel AND a.attnum = s.att
)
SELECT nspname, relname, CASE WHEN trel IS NOT NULL THEN format('%I.%I', tnsp, trel) ELSE '' END, coalesce(attname, ''), how,
       format('CREATE SCHEMA IF NOT EXISTS %I; CREATE SEQUENCE IF NOT EXISTS %I.%I AS %s INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %sCYCLE;',
              nspname, nspname, relname, format_type(seqtypid, NULL), seqincrement, seqmin, seqmax, seqstart, seqcache,
              CASE WHEN seqcycle THEN '' ELSE 'NO ' END)
  FROM seqrow ORDER BY nspname, relname
SQL

# The carried sequences' values on the source as one JSON array, read by a
# statement that SEQ_VALUES_SQL writes and psql runs (\gexec): a sequence's
# values are read with SELECT from it, which needs the SELECT privilege, and
# an unprivileged read fails rather than reading NULL as pg_sequences does.
read -r -d '' SEQ_VALUES_SQL <<SQL
WITH l(nsp, rel, owner, col, how, ddl) AS (
$SEQ_LIST_SQL
)
SELECT 'SELECT coalesce(jsonb_agg(x), ''[]'') FROM (' || string_agg(format(
         'SELECT %L AS s, %L AS q, %L AS t, %L AS c, %L AS how, %L AS ddl, last_value AS v, is_called AS i FROM %I.%I',
         nsp, rel, nullif(owner, ''), nullif(col, ''), how, ddl, nsp, rel), ' UNION ALL ') || ') x'
  FROM l
\gexec
SQL

# Set the target's sequences from :'seqs' (SEQ_VALUES_SQL's array). A
# sequence an owning column names is the one that column owns in the target
# (its name may differ there); others go by name. :'mode' exact sets the
# values as given; advance moves a sequence only forward in its own
# direction, :'margin' values beyond the source. One row a sequence:
# name, moved (t/f), or missing.
read -r -d '' SEQ_SET_SQL <<'SQL'
WITH src AS (
  SELECT x.*, CASE WHEN x.t IS NOT NULL AND EXISTS (
                     SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass(x.t) AND a.attname = x.c AND NOT a.attisdropped)
                   THEN pg_get_serial_sequence(x.t, x.c) END AS owned
    FROM jsonb_to_recordset((:'seqs')::jsonb) AS x(s text, q text, t text, c text, v bigint, i boolean)
), res AS (
  SELECT src.*, coalesce(to_regclass(src.owned), to_regclass(format('%I.%I', src.s, src.q))) AS rel FROM src
), cur AS (
  SELECT res.*, sq.seqincrement AS inc, sq.seqmin, sq.seqmax,
         ((xpath('/row/last_value/text()', x))[1]::text)::bigint AS tv,
         ((xpath('/row/is_called/text()', x))[1]::text)::boolean AS tc
    FROM res JOIN pg_sequence sq ON sq.seqrelid = res.rel
   CROSS JOIN LATERAL query_to_xml(format('SELECT last_value, is_called FROM %s', res.rel), false, true, '') AS x
), want AS (
  SELECT cur.*, CASE WHEN :'mode' = 'exact' THEN v
                     WHEN inc > 0 THEN least(v::numeric + (:'margin')::numeric, seqmax)::bigint
                     ELSE greatest(v::numeric - (:'margin')::numeric, seqmin)::bigint END AS wv
    FROM cur
), plan AS (
  -- Compared by the value each would hand out next, in the direction of
  -- the target sequence.
  SELECT want.*, CASE WHEN :'mode' = 'exact' THEN (wv, i) IS DISTINCT FROM (tv, tc)
                      ELSE sign(inc) * ((CASE WHEN i THEN wv::numeric + inc ELSE wv END)
                                        - (CASE WHEN tc THEN tv::numeric + inc ELSE tv END)) > 0 END AS move
    FROM want
)
SELECT format('%I.%I', s, q), CASE WHEN move THEN setval(rel, wv, i) IS NOT NULL ELSE false END FROM plan
UNION ALL
SELECT format('%I.%I', s, q), NULL FROM res WHERE rel IS NULL OR NOT EXISTS (SELECT 1 FROM pg_sequence WHERE seqrelid = res.rel)
SQL

SEQ_VALUES=""

# psql_set NAME VALUE: a psql \set line for a value too long for a command
# line (an argument is limited to 128 kB), read from the script instead.
psql_set() {
	local v=${2//\\/\\\\}
	v=${v//\'/\'\'}
	printf '\\set %s %s\n' "$1" "'$v'"
}

# sequences_read [at-snapshot]: the source's values into SEQ_VALUES (at the
# exported snapshot: in its transaction, as pg_dump reads them; a sequence
# is not transactional, so that is the value when read, never below one the
# copied rows hold).
sequences_read() {
	local out
	if [[ ${1:-} == at-snapshot ]]; then
		out=$(src_at_snapshot "$SEQ_VALUES_SQL" -v sequences="$(sql_array "${SEQUENCES[@]}")") || return 1
	else
		out=$(sql src -v sequences="$(sql_array "${SEQUENCES[@]}")" <<<"$SEQ_VALUES_SQL") || return 1
	fi
	SEQ_VALUES=${out:-[]}
}

# sequences_set MODE [MARGIN]: apply SEQ_VALUES to the target. Sets SEQ_MOVED
# (how many changed), SEQ_COUNT and SEQ_MISSING (names the target lacks).
sequences_set() {
	local mode=$1 margin=${2:-0} out name moved
	SEQ_MOVED=0 SEQ_COUNT=0 SEQ_MISSING=""
	out=$({ psql_set seqs "$SEQ_VALUES" && printf '%s\n' "$SEQ_SET_SQL"; } |
		sql tgt -v mode="$mode" -v margin="$margin") || return 1
	while IFS=$'\x1f' read -r name moved; do
		[[ -n $name ]] || continue
		SEQ_COUNT=$((SEQ_COUNT + 1))
		case $moved in
		t) SEQ_MOVED=$((SEQ_MOVED + 1)) ;;
		'') SEQ_MISSING+="${SEQ_MISSING:+ }$name" ;;
		esac
	done <<<"$out"
}

# bootstrap, before the table definitions: read the sequences at the
# snapshot and create those the target lacks that no table definition will
# bring (a default may use a sequence no configured column owns, maybe in
# another schema; an owned one comes with its table).
sequences_prepare() {
	BS_PHASE="reading sequences"
	sequences_read at-snapshot || bootstrap_fail $EX_RUNTIME "cannot read the sequences at the snapshot: $(sql_error)"
	{ psql_set seqs "$SEQ_VALUES" && cat <<'SQL'; } | sql tgt >/dev/null || bootstrap_fail $EX_RUNTIME "cannot create the sequences in the target: $(sql_error)"
SELECT x.ddl FROM jsonb_to_recordset((:'seqs')::jsonb) AS x(s text, q text, t text, how text, ddl text)
 WHERE x.how <> 'i' AND to_regclass(format('%I.%I', x.s, x.q)) IS NULL
   AND (x.t IS NULL OR to_regclass(x.t) IS NOT NULL)
 ORDER BY x.s, x.q \gexec
SQL
}

# bootstrap, once the tables exist: the values of the snapshot.
sequences_bootstrap() {
	BS_PHASE="setting sequences"
	sequences_set exact || bootstrap_fail $EX_RUNTIME "cannot set the sequences in the target: $(sql_error)"
	[[ -z $SEQ_MISSING ]] || bootstrap_fail $EX_PREFLIGHT "the target has no sequence $SEQ_MISSING for the source's: create it (or the column's identity) in the target"
	((SEQ_COUNT == 0)) || log_info "set $SEQ_COUNT sequences in the target to their values at the snapshot"
}

# run, every heartbeat interval and once more after the stream stopped: the
# source's values at least, plus the margin. The source's value when read
# is past every value in a row already applied, so after the last one an
# insert on the target with a default key cannot collide.
sequences_follow() {
	sequences_read && sequences_set advance "${CFG[safety.sequence_margin]}" || {
		log_warn "cannot carry the sequences to the target: $(sql_error)"
		return 0
	}
	[[ -z $SEQ_MISSING ]] || log_warn "the target has no sequence $SEQ_MISSING: its values are not carried"
	((SEQ_MOVED == 0)) || log_debug "moved $SEQ_MOVED of $SEQ_COUNT sequences forward in the target"
}

# has_sequence_privilege() with two privileges asks for either.
read -r -d '' SEQ_TARGET_CHECK_SQL <<'SQL'
SELECT 'fail', format('SELECT, UPDATE on sequence %s, which pgsync sets', n),
       format('GRANT SELECT, UPDATE ON SEQUENCE %s TO %I', n, current_user)
  FROM jsonb_array_elements_text((:'names')::jsonb) AS u(n)
 WHERE to_regclass(n) IS NOT NULL
   AND NOT (has_sequence_privilege(n, 'SELECT') AND has_sequence_privilege(n, 'UPDATE'))
SQL

# check: SELECT on every carried sequence for the source role, the
# configured ones exist, and the target role may set those the target has.
# Findings via check.sh's finding().
sequences_check() {
	local rows level msg fix
	rows=$(sql src -v sequences="$(sql_array "${SEQUENCES[@]}")" <<SQL
WITH l(nsp, rel, owner, col, how, ddl) AS (
$SEQ_LIST_SQL
)
SELECT 'fail', format('sequence %s in replication.sequences does not exist', replace(u.s, E'\t', '.')),
       format('create it, or remove %s from replication.sequences', replace(u.s, E'\t', '.'))
  FROM unnest(:'sequences'::text[]) AS u(s)
 WHERE to_regclass(format('%I.%I', split_part(u.s, E'\t', 1), split_part(u.s, E'\t', 2))) IS NULL
    OR (SELECT relkind FROM pg_class WHERE oid = to_regclass(format('%I.%I', split_part(u.s, E'\t', 1), split_part(u.s, E'\t', 2)))) <> 'S'
UNION ALL
SELECT 'fail', format('SELECT on sequence %I.%I, which pgsync reads to carry its value', nsp, rel),
       format('GRANT SELECT ON SEQUENCE %I.%I TO %I', nsp, rel, current_user)
  FROM l WHERE NOT has_sequence_privilege(format('%I.%I', nsp, rel), 'SELECT')
UNION ALL
SELECT 'ok', format('SELECT on the %s sequences the job carries', count(*)), '' FROM l
HAVING count(*) > 0 AND bool_and(has_sequence_privilege(format('%I.%I', nsp, rel), 'SELECT'))
SQL
	) || {
		finding fail source "cannot read the sequences the tables use: $(sql_error)"
		return 0
	}
	while IFS=$'\x1f' read -r level msg fix; do
		[[ -n $level ]] && finding "$level" source "$msg" "$fix"
	done <<<"$rows"
	# The target's existing ones must take setval (UPDATE); those bootstrap
	# creates are the target role's own. An unreachable target is reported
	# by the target's own checks.
	local names
	names=$(sql src -v sequences="$(sql_array "${SEQUENCES[@]}")" <<SQL
WITH l(nsp, rel, owner, col, how, ddl) AS (
$SEQ_LIST_SQL
)
SELECT coalesce(jsonb_agg(format('%I.%I', nsp, rel)), '[]') FROM l
SQL
	) || return 0
	rows=$({ psql_set names "$names" && printf '%s\n' "$SEQ_TARGET_CHECK_SQL"; } | sql tgt) || return 0
	while IFS=$'\x1f' read -r level msg fix; do
		[[ -n $level ]] && finding "$level" target "$msg" "$fix"
	done <<<"$rows"
}
