# pgsync check: every source and target prerequisite of a job, one line per
# finding, each failure with its fix. Sourced by bin/pgsync; bootstrap runs
# the same checks before it creates anything. Reads only: it must never
# create, alter or lock anything on the source or the target.

# shellcheck source=lib/pgsync/switchover.sh
source "$PGSYNC_LIBDIR/switchover.sh" || die $EX_RUNTIME "cannot load $PGSYNC_LIBDIR/switchover.sh"

declare -a FINDINGS=()
CHECK_FAILS=0 CHECK_WARNS=0

# finding LEVEL WHERE MESSAGE [FIX]   (LEVEL: ok, info, warn, fail)
finding() {
	local level=$1 where=$2 msg=$3 fix=${4:-}
	case $level in
	fail) CHECK_FAILS=$((CHECK_FAILS + 1)) ;;
	warn) CHECK_WARNS=$((CHECK_WARNS + 1)) ;;
	esac
	FINDINGS+=("$level"$'\x1f'"$where"$'\x1f'"$msg"$'\x1f'"$fix")
}

# The source side as SQL: one row per finding (level, message, fix). Names
# come in as psql variables and are quoted with %I or compared as text.
read -r -d '' CHECK_SOURCE_SQL <<'SQL'
WITH cfg AS (
  -- name: schema TAB table in the escaping of pg-snapshot-dump --list-tables
  -- (a configured name holds no control character: only \ is escaped)
  SELECT replace(u.t, '\', '\\') AS name, split_part(u.t, E'\t', 1) AS nsp, split_part(u.t, E'\t', 2) AS rel, u.ord
    FROM unnest(:'tables'::text[]) WITH ORDINALITY AS u(t, ord)
), tbl AS (
  SELECT cfg.*, n.oid AS nspoid, c.oid AS reloid, c.relkind, c.relreplident, c.relowner,
         format('%I.%I', cfg.nsp, cfg.rel) AS q,
         EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS has_pk,
         EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident) AS has_ri
    FROM cfg LEFT JOIN pg_namespace n ON n.nspname = cfg.nsp
             LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = cfg.rel
), me AS (
  SELECT rolname, rolcanlogin, rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user
), pub AS (
  SELECT u.name, u.ord, p.oid, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, p.puballtables, p.pubviaroot
    FROM unnest(string_to_array(:'pub', ',')) WITH ORDINALITY AS u(name, ord)
    LEFT JOIN pg_publication p ON p.pubname = u.name
), pubt AS (
  -- what the publications publish together, as pg-snapshot-dump --list-tables
  -- resolves it (lib/source/publication.c): schema, table, publications, filter, columns
  SELECT split_part(l, E'\t', 1) || E'\t' || split_part(l, E'\t', 2) AS name,
         format('%I.%I', split_part(l, E'\t', 1), split_part(l, E'\t', 2)) AS q,
         replace(split_part(l, E'\t', 3), ',', ', ') AS pubs, split_part(l, E'\t', 4) AS rowfilter,
         split_part(l, E'\t', 5) AS cols
    FROM unnest(string_to_array(:'resolved', E'\n')) AS l WHERE l <> ''
), parts AS (
  -- partitions of configured partitioned tables: a publication without
  -- publish_via_partition_root publishes these instead of the table
  SELECT t.name AS root, replace(n.nspname, '\', '\\') || E'\t' || replace(c.relname, '\', '\\') AS name
    FROM tbl t CROSS JOIN LATERAL pg_partition_tree(t.reloid) pt
    JOIN pg_class c ON c.oid = pt.relid JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE t.relkind = 'p' AND pt.level > 0
), byleaf AS (
  SELECT t.*, (SELECT string_agg(DISTINCT x.pubs, ', ') FROM pubt x JOIN parts ON parts.name = x.name
                WHERE parts.root = t.name) AS pubs
    FROM tbl t WHERE t.relkind = 'p' AND t.name NOT IN (SELECT name FROM pubt)
     AND EXISTS (SELECT 1 FROM parts WHERE parts.root = t.name AND parts.name IN (SELECT name FROM pubt))
), slots AS (
  SELECT count(*) AS used, count(*) FILTER (WHERE slot_name = :'slot') AS mine,
         count(*) FILTER (WHERE slot_name = :'slot' AND active) AS mine_active
    FROM pg_replication_slots
), senders AS (
  SELECT count(*) AS used FROM pg_stat_get_wal_senders()
), conf AS (
  SELECT current_setting('max_replication_slots')::int AS max_slots,
         current_setting('max_wal_senders')::int AS max_senders
), checks(ord, level, msg, fix) AS (
  SELECT 1, CASE WHEN current_setting('server_version_num')::int >= 140000 THEN 'ok' ELSE 'fail' END,
         'PostgreSQL ' || current_setting('server_version') || ', database ' || current_database(),
         'upgrade the source to PostgreSQL 14 or later'
  UNION ALL
  SELECT 2, CASE WHEN current_setting('wal_level') = 'logical' THEN 'ok' ELSE 'fail' END,
         'wal_level = ' || current_setting('wal_level') ||
           CASE WHEN current_setting('wal_level') = 'logical' THEN '' ELSE ', logical decoding needs logical' END,
         'set wal_level = logical in postgresql.conf and restart the source server (pgsync never changes it)'
  UNION ALL
  -- :'temp_slot' 1: a chunked bootstrap is ahead, with one temporary slot
  -- (and its WAL sender) at a time beside the job's
  SELECT 3, CASE WHEN s.used + (1 - s.mine) + :'temp_slot'::int <= c.max_slots THEN 'ok' ELSE 'fail' END,
         format('max_replication_slots = %s with %s in use%s%s', c.max_slots, s.used,
                CASE WHEN s.mine > 0 THEN ' (this job''s slot among them)' ELSE ', this job needs one more' END,
                CASE WHEN :'temp_slot' = '1' THEN ', and its chunked bootstrap one more at a time for the temporary slot of each chunk group' ELSE '' END),
         CASE WHEN :'temp_slot' = '1'
              THEN format('raise max_replication_slots to at least %s (server restart) or drop slots nothing uses', s.used + (1 - s.mine) + 1)
              ELSE 'raise max_replication_slots (server restart) or drop slots nothing uses' END
    FROM slots s, conf c
  UNION ALL
  SELECT 4, CASE WHEN w.used + (1 - s.mine_active) + 1 <= c.max_senders THEN 'ok' ELSE 'fail' END,
         format('max_wal_senders = %s with %s in use; this job needs one%s%s and check one while it probes',
                c.max_senders, w.used, CASE WHEN s.mine_active > 0 THEN ' (already connected)' ELSE '' END,
                CASE WHEN :'temp_slot' = '1' THEN ' (during its chunked bootstrap: the temporary slot''s)' ELSE '' END),
         CASE WHEN :'temp_slot' = '1'
              THEN format('raise max_wal_senders to at least %s (server restart): one sender per job, plus one for pgsync check', w.used + (1 - s.mine_active) + 1)
              ELSE 'raise max_wal_senders (server restart): one sender per job, plus one for pgsync check' END
    FROM senders w, slots s, conf c
  UNION ALL
  SELECT 5, CASE WHEN m.rolcanlogin THEN 'ok' ELSE 'fail' END,
         format('role %I %s LOGIN', m.rolname, CASE WHEN m.rolcanlogin THEN 'has' ELSE 'lacks' END),
         format('ALTER ROLE %I LOGIN', m.rolname)
    FROM me m
  UNION ALL
  SELECT 6, CASE WHEN m.rolreplication OR m.rolsuper THEN 'ok' ELSE 'fail' END,
         format('role %I %s REPLICATION', m.rolname, CASE WHEN m.rolreplication OR m.rolsuper THEN 'has' ELSE 'lacks' END),
         format('ALTER ROLE %I REPLICATION (as a superuser)', m.rolname)
    FROM me m
  UNION ALL
  SELECT 7, 'info', format('role %I is a superuser; pgsync needs only LOGIN and REPLICATION on the source', m.rolname), ''
    FROM me m WHERE m.rolsuper
  UNION ALL
  SELECT 8, CASE WHEN has_database_privilege(current_database(), 'CONNECT') THEN 'ok' ELSE 'fail' END,
         format('CONNECT on database %I', current_database()),
         format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), current_user)
  UNION ALL
  SELECT 10 + t.ord, 'fail', format('table %s does not exist', t.q),
         format('create it, or remove %s from replication.tables', replace(t.name, E'\t', '.'))
    FROM tbl t WHERE t.reloid IS NULL
  UNION ALL
  SELECT 10 + t.ord, 'fail', format('%s is not a table (relkind %s)', t.q, t.relkind),
         format('remove %s from replication.tables', replace(t.name, E'\t', '.'))
    FROM tbl t WHERE t.reloid IS NOT NULL AND t.relkind NOT IN ('r', 'p')
  UNION ALL
  SELECT 9.5 + t.ord, CASE WHEN has_schema_privilege(t.nspoid, 'USAGE') THEN 'ok' ELSE 'fail' END,
         format('USAGE on schema %I', t.nsp), format('GRANT USAGE ON SCHEMA %I TO %I', t.nsp, current_user)
    FROM tbl t WHERE t.reloid IS NOT NULL AND t.ord = (SELECT min(t2.ord) FROM tbl t2 WHERE t2.nsp = t.nsp)
  UNION ALL
  SELECT 10 + t.ord, CASE WHEN has_table_privilege(t.reloid, 'SELECT') THEN 'ok' ELSE 'fail' END,
         format('SELECT on %s', t.q), format('GRANT SELECT ON %s TO %I', t.q, current_user)
    FROM tbl t WHERE t.reloid IS NOT NULL AND t.relkind IN ('r', 'p')
  UNION ALL
  -- The copy reads a partitioned table through its root, but bootstrap's
  -- pg_dump locks each partition to read its definition, which takes
  -- SELECT on it: without, bootstrap fails where the target lacks the table.
  SELECT 10 + t.ord, 'warn',
         format('no SELECT on %s, a partition of %s: bootstrap cannot create the partitions the target lacks', pc.q, t.q),
         format('GRANT SELECT ON %s TO %I', pc.q, current_user)
    FROM tbl t CROSS JOIN LATERAL pg_partition_tree(t.reloid) pt
    CROSS JOIN LATERAL (SELECT format('%I.%I', n.nspname, c.relname) AS q
                          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = pt.relid) pc
   WHERE t.relkind = 'p' AND pt.level > 0 AND NOT has_table_privilege(pt.relid, 'SELECT')
  UNION ALL
  SELECT 10 + t.ord,
         CASE WHEN t.relreplident = 'f' THEN 'warn'
              WHEN (t.relreplident = 'd' AND t.has_pk) OR (t.relreplident = 'i' AND t.has_ri) THEN 'ok'
              ELSE 'fail' END,
         CASE WHEN t.relreplident = 'f' THEN format('%s has REPLICA IDENTITY FULL: updates and deletes are matched on every column, slow on large tables', t.q)
              WHEN t.relreplident = 'd' AND t.has_pk THEN format('%s has a primary key', t.q)
              WHEN t.relreplident = 'i' AND t.has_ri THEN format('%s has a replica identity index', t.q)
              WHEN t.relreplident = 'n' THEN format('%s has REPLICA IDENTITY NOTHING: its updates and deletes cannot be replicated', t.q)
              ELSE format('%s has no primary key or replica identity index: once published, the application''s own updates and deletes on it fail', t.q) END,
         format('add a primary key, or ALTER TABLE %s REPLICA IDENTITY USING INDEX <unique index on NOT NULL columns>', t.q)
    FROM tbl t WHERE t.reloid IS NOT NULL AND t.relkind IN ('r', 'p')
  UNION ALL
  SELECT 100, CASE WHEN :'autopub' = 'true' AND (SELECT count(*) FROM pub) = 1 THEN 'info' ELSE 'fail' END,
         format('publication %I does not exist', x.name) ||
           CASE WHEN :'autopub' = 'true' AND (SELECT count(*) FROM pub) = 1 THEN ': bootstrap creates it (safety.auto_create_publication)'
                WHEN :'autopub' = 'true' THEN ': safety.auto_create_publication creates only a single source.publication' ELSE '' END,
         format('CREATE PUBLICATION %I FOR TABLE %s', x.name, (SELECT string_agg(q, ', ' ORDER BY ord) FROM tbl))
    FROM pub x WHERE x.oid IS NULL
  UNION ALL
  SELECT 101, CASE WHEN has_database_privilege(current_database(), 'CREATE') THEN 'ok' ELSE 'fail' END,
         format('CREATE on database %I, to create publication %I', current_database(), :'pub'),
         format('GRANT CREATE ON DATABASE %I TO %I, or create the publication yourself', current_database(), current_user)
    WHERE :'autopub' = 'true' AND (SELECT count(*) FROM pub) = 1 AND EXISTS (SELECT 1 FROM pub WHERE oid IS NULL)
  UNION ALL
  SELECT 101, 'fail', format('role %I does not own %s, which CREATE PUBLICATION ... FOR TABLE needs', current_user, t.q),
         format('create the publication as the owner: CREATE PUBLICATION %I FOR TABLE %s', :'pub', (SELECT string_agg(q, ', ' ORDER BY ord) FROM tbl))
    FROM tbl t WHERE :'autopub' = 'true' AND (SELECT count(*) FROM pub) = 1 AND EXISTS (SELECT 1 FROM pub WHERE oid IS NULL)
      AND t.reloid IS NOT NULL AND NOT pg_has_role(t.relowner, 'MEMBER')
  UNION ALL
  -- publish = 'insert' and the like: the copy has the table, the stream only
  -- the published kinds of change, exactly as a subscription gets them
  SELECT 102, CASE WHEN p.pubinsert AND p.pubupdate AND p.pubdelete THEN 'ok' ELSE 'warn' END,
         format('publication %I publishes%s%s%s%s', p.name,
                CASE WHEN p.pubinsert THEN ' insert' ELSE '' END, CASE WHEN p.pubupdate THEN ' update' ELSE '' END,
                CASE WHEN p.pubdelete THEN ' delete' ELSE '' END, CASE WHEN p.pubtruncate THEN ' truncate' ELSE '' END) ||
           CASE WHEN p.pubinsert AND p.pubupdate AND p.pubdelete THEN ''
                ELSE ': the other changes to its tables are not replicated, as with a subscription' END,
         format('ALTER PUBLICATION %I SET (publish = ''insert, update, delete, truncate'')', p.name)
    FROM pub p WHERE p.oid IS NOT NULL
  UNION ALL
  SELECT 103, 'warn', format('publication %I does not publish truncate: a TRUNCATE on the source is not replicated', p.name),
         format('ALTER PUBLICATION %I SET (publish = ''insert, update, delete, truncate'')', p.name)
    FROM pub p WHERE p.oid IS NOT NULL AND NOT p.pubtruncate
  UNION ALL
  SELECT 104, 'fail', CASE WHEN (SELECT count(*) FROM pub) = 1 THEN format('publication %I does not contain %s', :'pub', t.q)
                            ELSE format('none of publications %s contains %s', replace(:'pub', ',', ', '), t.q) END,
         format('ALTER PUBLICATION %I ADD TABLE %s', (SELECT name FROM pub ORDER BY ord LIMIT 1), t.q)
    FROM tbl t WHERE :'resolved_ok' = 'true' AND t.name NOT IN (SELECT name FROM pubt)
     AND t.name NOT IN (SELECT name FROM byleaf)
  UNION ALL
  SELECT 104, 'fail', format('%s is partitioned, and publication %s publishes the changes of its partitions under their own names (publish_via_partition_root is off)', t.q, t.pubs),
         format('ALTER PUBLICATION %s SET (publish_via_partition_root = true)', t.pubs)
    FROM byleaf t WHERE :'resolved_ok' = 'true'
  UNION ALL
  SELECT 105, 'fail', format('publication %s also contains %s, which is not in replication.tables', x.pubs, x.q)
           || CASE WHEN k.keyless THEN ', and has no primary key or replica identity index: the application''s own updates and deletes on it fail on the source already, since the publication publishes them' ELSE '' END,
         CASE WHEN k.keyless THEN format('give %s a primary key (or ALTER TABLE %s REPLICA IDENTITY FULL) so that the application can change it; then ', x.q, x.q) ELSE '' END ||
         CASE WHEN EXISTS (SELECT 1 FROM pub p WHERE p.puballtables AND p.name = ANY (string_to_array(x.pubs, ', ')))
              THEN format('add %s to replication.tables, or use publications FOR TABLE rather than FOR ALL TABLES', replace(x.name, E'\t', '.'))
              WHEN EXISTS (SELECT 1 FROM pub p JOIN pg_publication_rel r ON r.prpubid = p.oid
                            WHERE p.name = x.pubs AND r.prrelid = to_regclass(x.q))
              THEN format('ALTER PUBLICATION %s DROP TABLE %s, or add %s to replication.tables', x.pubs, x.q, replace(x.name, E'\t', '.'))
              -- FOR TABLES IN SCHEMA: no table of the schema can be taken out alone
              ELSE format('add %s to replication.tables, or publish the tables of schema %I one by one: ALTER PUBLICATION %s DROP TABLES IN SCHEMA %I, then ADD TABLE each configured table of it',
                          replace(x.name, E'\t', '.'), split_part(x.name, E'\t', 1), x.pubs, split_part(x.name, E'\t', 1)) END
    FROM pubt x
    CROSS JOIN LATERAL (
      SELECT coalesce(bool_or(c.relreplident = 'n'
                              OR (c.relreplident = 'd' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
                              OR (c.relreplident = 'i' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))
               AND EXISTS (SELECT 1 FROM pub p WHERE p.name = ANY (string_to_array(x.pubs, ', ')) AND (p.pubupdate OR p.pubdelete)), false) AS keyless
        FROM pg_class c WHERE c.oid = to_regclass(x.q) AND c.relkind = 'r') k
   WHERE x.name NOT IN (SELECT name FROM cfg)
     AND x.name NOT IN (SELECT parts.name FROM parts JOIN byleaf b ON b.name = parts.root)
  UNION ALL
  SELECT 106, 'ok', format('%s is published by %s%s%s', x.q, x.pubs,
                           CASE WHEN x.rowfilter <> '' THEN format(', rows where %s', x.rowfilter) ELSE '' END,
                           CASE WHEN x.cols IS DISTINCT FROM a.cols THEN format(', columns %s', replace(x.cols, ',', ', ')) ELSE '' END), ''
    FROM pubt x JOIN cfg ON cfg.name = x.name
    LEFT JOIN pg_namespace n ON n.nspname = cfg.nsp
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = cfg.rel
    LEFT JOIN LATERAL (SELECT string_agg(attname, ',' ORDER BY attnum) AS cols FROM pg_attribute
                        WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped AND attgenerated = '') a ON true
  UNION ALL
  SELECT 107, 'ok', format(CASE WHEN (SELECT count(*) FROM pub) = 1 THEN 'publication %s contains exactly the %s configured tables'
                                 ELSE 'publications %s contain exactly the %s configured tables' END,
                            replace(:'pub', ',', ', '), (SELECT count(*) FROM cfg)), ''
    WHERE :'resolved_ok' = 'true' AND (SELECT count(*) FROM cfg WHERE name NOT IN (SELECT name FROM pubt)) = 0
      AND (SELECT count(*) FROM pubt WHERE name NOT IN (SELECT name FROM cfg)) = 0
  UNION ALL
  SELECT 110, CASE WHEN s.plugin = 'pgoutput' THEN 'slot' ELSE 'fail' END,
         CASE WHEN s.plugin = 'pgoutput' THEN coalesce(s.active::text, 'f')
              ELSE format('replication slot %s exists with plugin %s, not pgoutput', s.slot_name, coalesce(s.plugin, '(physical)')) END,
         'choose another source.slot'
    FROM pg_replication_slots s WHERE s.slot_name = :'slot'
)
SELECT level, msg, fix FROM checks ORDER BY ord;
SQL

# Source columns of the configured tables, as JSON {"schema.table": [names]},
# so the target side can see which columns it lacks.
read -r -d '' CHECK_SOURCE_COLUMNS_SQL <<'SQL'
SELECT coalesce(jsonb_object_agg(u.t, cols), '{}')
  FROM unnest(:'tables'::text[]) AS u(t)
  JOIN pg_namespace n ON n.nspname = split_part(u.t, E'\t', 1)
  JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = split_part(u.t, E'\t', 2)
  CROSS JOIN LATERAL (SELECT jsonb_agg(a.attname ORDER BY a.attnum) AS cols FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) x;
SQL

# User-defined types the configured tables' columns use (the element type of
# an array), as JSON {"schema.table": [{"type": "s.t", "ext": extension}]}:
# bootstrap creates tables, never their types.
read -r -d '' CHECK_SOURCE_TYPES_SQL <<'SQL'
SELECT coalesce(jsonb_object_agg(x.t, x.types), '{}') FROM (
  SELECT u.t, jsonb_agg(DISTINCT jsonb_build_object('type', format('%I.%I', tn.nspname, ty.typname), 'ext', e.extname)) AS types
    FROM unnest(:'tables'::text[]) AS u(t)
    JOIN pg_namespace n ON n.nspname = split_part(u.t, E'\t', 1)
    JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = split_part(u.t, E'\t', 2)
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    JOIN pg_type at ON at.oid = a.atttypid
    JOIN pg_type ty ON ty.oid = CASE WHEN at.typcategory = 'A' AND at.typelem <> 0 THEN at.typelem ELSE at.oid END
    JOIN pg_namespace tn ON tn.oid = ty.typnamespace
    LEFT JOIN pg_depend d ON d.classid = 'pg_type'::regclass AND d.objid = ty.oid AND d.deptype = 'e'
    LEFT JOIN pg_extension e ON e.oid = d.refobjid
   WHERE tn.nspname NOT IN ('pg_catalog', 'information_schema')
   GROUP BY u.t) x;
SQL

read -r -d '' CHECK_TARGET_SQL <<'SQL'
WITH cfg AS (
  SELECT u.t AS name, split_part(u.t, E'\t', 1) AS nsp, split_part(u.t, E'\t', 2) AS rel, u.ord
    FROM unnest(:'tables'::text[]) WITH ORDINALITY AS u(t, ord)
), tbl AS (
  SELECT cfg.*, n.oid AS nspoid, c.oid AS reloid, format('%I.%I', cfg.nsp, cfg.rel) AS q
    FROM cfg LEFT JOIN pg_namespace n ON n.nspname = cfg.nsp
             LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = cfg.rel AND c.relkind IN ('r', 'p')
), me AS (
  SELECT rolname, rolsuper FROM pg_roles WHERE rolname = current_user
), cat AS (
  SELECT n.oid AS nspoid FROM pg_namespace n WHERE n.nspname = 'pgsync'
), checks(ord, level, msg, fix) AS (
  SELECT 1, 'ok', 'PostgreSQL ' || current_setting('server_version') || ', database ' || current_database(), ''
  UNION ALL
  SELECT 2, 'info',
         CASE WHEN m.rolsuper THEN format('role %I is a superuser: apply sets session_replication_role = replica, so triggers and foreign keys do not fire', m.rolname)
              ELSE format('role %I is not a superuser: triggers fire on the target and foreign key order matters', m.rolname) END, ''
    FROM me m
  UNION ALL
  SELECT 3, CASE WHEN has_database_privilege(current_database(), 'CREATE') THEN 'ok' ELSE 'fail' END,
         format('CREATE on database %I, to create schema pgsync', current_database()),
         format('GRANT CREATE ON DATABASE %I TO %I', current_database(), current_user)
    WHERE NOT EXISTS (SELECT 1 FROM cat)
  UNION ALL
  SELECT 3, CASE WHEN has_schema_privilege(c.nspoid, 'USAGE') THEN 'ok' ELSE 'fail' END,
         'USAGE on schema pgsync', format('GRANT USAGE, CREATE ON SCHEMA pgsync TO %I', current_user)
    FROM cat c
  UNION ALL
  SELECT 4, CASE WHEN has_table_privilege(r.oid, 'SELECT, INSERT, UPDATE, DELETE') THEN 'ok' ELSE 'fail' END,
         format('SELECT, INSERT, UPDATE, DELETE on pgsync.%I', r.relname),
         format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgsync.%I TO %I', r.relname, current_user)
    FROM cat c JOIN pg_class r ON r.relnamespace = c.nspoid AND r.relkind = 'r'
     AND r.relname IN ('job', 'table_sync', 'job_runtime', 'pending_definitions')
  UNION ALL
  SELECT 4, CASE WHEN has_schema_privilege(c.nspoid, 'CREATE') THEN 'ok' ELSE 'fail' END,
         'CREATE on schema pgsync, to create the catalog tables', format('GRANT CREATE ON SCHEMA pgsync TO %I', current_user)
    FROM cat c WHERE to_regclass('pgsync.pending_definitions') IS NULL
  UNION ALL
  -- A chunked copy's catch-up places keys the target orders (text,
  -- numeric, timestamp ...) with a temporary table of chunk bounds.
  SELECT 5, 'warn',
         format('no TEMPORARY on database %I: a chunked copy''s catch-up fails on a table cut by a text, numeric, date or timestamp key', current_database()),
         format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), current_user)
    WHERE :'temp_slot' = '1' AND NOT has_database_privilege(current_database(), 'TEMPORARY')
  UNION ALL
  SELECT 10 + t.ord, CASE WHEN has_table_privilege(t.reloid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
                          AND has_schema_privilege(t.nspoid, 'USAGE') THEN 'ok' ELSE 'fail' END,
         format('%s exists; SELECT, INSERT, UPDATE, DELETE, TRUNCATE on it', t.q),
         format('GRANT USAGE ON SCHEMA %I TO %I; GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON %s TO %I',
                t.nsp, current_user, t.q, current_user)
    FROM tbl t WHERE t.reloid IS NOT NULL
  UNION ALL
  SELECT 10 + t.ord, CASE WHEN has_schema_privilege(t.nspoid, 'CREATE') THEN 'ok' ELSE 'fail' END,
         format('%s does not exist yet: bootstrap creates it in schema %I', t.q, t.nsp),
         format('GRANT CREATE ON SCHEMA %I TO %I', t.nsp, current_user)
    FROM tbl t WHERE t.reloid IS NULL AND t.nspoid IS NOT NULL
  UNION ALL
  SELECT 10 + t.ord, CASE WHEN has_database_privilege(current_database(), 'CREATE') THEN 'ok' ELSE 'fail' END,
         format('%s does not exist yet: bootstrap creates it and schema %I', t.q, t.nsp),
         format('GRANT CREATE ON DATABASE %I TO %I', current_database(), current_user)
    FROM tbl t WHERE t.nspoid IS NULL
  UNION ALL
  SELECT 10 + t.ord, 'warn',
         format('%s has no primary key or unique index: each update and delete applied to it scans the table', t.q),
         format('create the source''s primary key on %s in the target, or drop the table so bootstrap creates it with its keys', t.q)
    FROM tbl t WHERE t.reloid IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = t.reloid AND i.indisunique)
  UNION ALL
  SELECT 10 + t.ord, 'fail', format('%s has no column %I, which the source table has', t.q, sc.col),
         format('ALTER TABLE %s ADD COLUMN %I <type> on the target, or drop the target table so bootstrap creates it', t.q, sc.col)
    FROM tbl t CROSS JOIN LATERAL jsonb_array_elements_text(coalesce((:'srccols')::jsonb -> t.name, '[]')) AS sc(col)
   WHERE t.reloid IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.reloid AND a.attname = sc.col AND NOT a.attisdropped)
  UNION ALL
  SELECT 10 + t.ord, 'fail',
         format('%s uses type %s, which the target does not have: bootstrap creates tables, not types', t.q, ut.ty ->> 'type'),
         CASE WHEN ut.ty ->> 'ext' IS NOT NULL THEN format('CREATE EXTENSION %I on the target', ut.ty ->> 'ext')
              ELSE format('create type %s on the target as the source has it', ut.ty ->> 'type') END
    FROM tbl t CROSS JOIN LATERAL jsonb_array_elements(coalesce((:'srctypes')::jsonb -> t.name, '[]')) AS ut(ty)
   WHERE t.reloid IS NULL AND to_regtype(ut.ty ->> 'type') IS NULL
  UNION ALL
  -- The retry of an interrupted bootstrap builds these tables' keys and
  -- indexes (and sets their autovacuum): that takes their owner.
  SELECT 10 + t.ord, CASE WHEN pg_has_role(c.relowner, 'USAGE') THEN 'ok' ELSE 'fail' END,
         format('%s is owed its keys and indexes by an interrupted bootstrap, which builds them as the table''s owner', t.q),
         format('ALTER TABLE %s OWNER TO %I on the target, or run bootstrap as its owner', t.q, current_user)
    FROM tbl t JOIN pg_class c ON c.oid = t.reloid
   WHERE t.name = ANY ((:'owed')::text[])
)
SELECT level, msg, fix FROM checks ORDER BY ord;
SQL

# Tables that exist in the target and hold rows, one a line: the configured
# "schema.table", US, the name as the server quotes it (for messages).
target_nonempty_tables() {
	sql tgt <<'SQL'
SELECT u.t, format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2))
  FROM unnest(:'tables'::text[]) WITH ORDINALITY AS u(t, ord)
 WHERE to_regclass(format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2))) IS NOT NULL
   AND has_table_privilege(format('%I.%I', split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2)), 'SELECT')
   AND (xpath('/row/n/text()', query_to_xml(format('SELECT EXISTS (SELECT 1 FROM %I.%I) AS n',
        split_part(u.t, E'\t', 1), split_part(u.t, E'\t', 2)), false, true, '')))[1]::text = 'true'
 ORDER BY u.ord
SQL
}

# published_generated_check RESOLVED: a generated column the publications
# publish (PostgreSQL 18: publish_generated_columns or a column list) must
# be a plain column in the target, as for a subscription; bootstrap would
# create it generated, and no generated column takes a value.
published_generated_check() {
	local schema table gen state q
	# (TAB is whitespace to read: empty fields would collapse)
	while IFS=$'\x1f' read -r schema table _ _ _ gen; do
		[[ -n $gen ]] || continue
		state=$(sql tgt -v s="$schema" -v t="$table" -v cols="$gen" <<'SQL'
SELECT format('%I.%I', :'s', :'t'),
       CASE WHEN to_regclass(format('%I.%I', :'s', :'t')) IS NULL THEN '-'
       ELSE coalesce((SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_attribute a
                       WHERE a.attrelid = to_regclass(format('%I.%I', :'s', :'t')) AND a.attgenerated <> ''
                         AND a.attname = ANY (string_to_array(:'cols', ','))), '') END
SQL
		) || continue
		IFS=$'\x1f' read -r q state <<<"$state"
		if [[ $state == - ]]; then
			finding fail target "$q is published with its generated column(s) ${gen//,/, }: bootstrap would create them generated, and a generated column cannot take the published values" \
				"create $q in the target first with them as plain columns, or publish it without them (publish_generated_columns = none, a column list without them)"
		elif [[ -n $state ]]; then
			finding fail target "$q has generated column(s) $state in the target, which the publications publish: they cannot take the published values" \
				"ALTER TABLE $q ALTER COLUMN ... DROP EXPRESSION in the target, or publish it without them"
		fi
	done < <(tr '\t' '\037' <<<"$1")
}

# preflight [check|bootstrap]: run every check, filling FINDINGS. Sets
# CHECK_SOURCE_OK and CHECK_TARGET_OK (could connect), SLOT_FOUND (0/1).
# bootstrap leaves out the findings about the slot and the job's state,
# which it resolves itself.

# connect_fix source|target DISPLAY MESSAGE: the fix for a connection the
# server refused, by what refused it (DISPLAY: "host=H port=P user=U dbname=D").
connect_fix() {
	local which=$1 display=$2 msg=$3 var=PGSYNC_SOURCE_URL kv host="" port="" user="" db=""
	[[ $which == target ]] && var=PGSYNC_TARGET_URL
	for kv in $display; do
		case $kv in
		host=*) host=${kv#host=} ;; port=*) port=${kv#port=} ;;
		user=*) user=${kv#user=} ;; dbname=*) db=${kv#dbname=} ;;
		esac
	done
	case $msg in
	*"CONNECT privilege"* | *"permission denied for database"*)
		printf 'GRANT CONNECT ON DATABASE %s TO %s (as the owner of the database)' "$(sql_ident "$db")" "$(sql_ident "$user")" ;;
	*"password authentication failed"* | *"no password supplied"* | *"password is required"*)
		printf 'correct the password of role %s in %s' "$user" "$var" ;;
	*"no pg_hba.conf entry"* | *"pg_hba.conf rejects"*)
		printf 'let pg_hba.conf on the %s allow user %s to database %s from this host (a reject line or an earlier line that matches wins), then reload it: SELECT pg_reload_conf()' "$which" "$user" "$db" ;;
	*"is not permitted to log in"*)
		printf 'ALTER ROLE %s LOGIN' "$(sql_ident "$user")" ;;
	*"role \""*"\" does not exist"*)
		printf 'create role %s on the %s, or correct the user in %s' "$user" "$which" "$var" ;;
	*"database \""*"\" does not exist"*)
		printf 'correct the database in %s: the %s has no database %s' "$var" "$which" "$db" ;;
	*)
		printf 'check %s, and that the %s server runs and accepts connections at host %s port %s' "$var" "$which" "$host" "$port" ;;
	esac
}

# sql_ident NAME: NAME as an SQL identifier (quoted unless plain lowercase).
sql_ident() {
	if [[ $1 =~ ^[a-z_][a-z0-9_]*$ ]]; then
		printf '%s' "$1"
	else
		printf '"%s"' "${1//\"/\"\"}"
	fi
}

preflight() {
	local mode=${1:-check} rows row level msg fix srccols srctypes
	FINDINGS=() CHECK_FAILS=0 CHECK_WARNS=0 SLOT_FOUND=0 SLOT_FOUND_ACTIVE=f
	CHECK_SOURCE_OK=0 CHECK_TARGET_OK=0 srccols='{}' srctypes='{}'

	# The publications' tables as the copy resolves them, in one place.
	local resolved resolved_ok=true
	if ! resolved=$(pg-snapshot-dump -d "$SRC" --publication "$PUB" --list-tables --log-level error 2>"$WORK/resolve.err"); then
		resolved="" resolved_ok=false
		msg=$(sed -n '$s/^pg-snapshot-dump: error: //p' "$WORK/resolve.err")
		# A missing publication, and a connection the source refuses,
		# are findings of their own below.
		[[ $msg == *"does not exist in database"* || $msg == *"cannot connect to "* ]] ||
			finding fail source "cannot resolve the tables of publication $PUB: ${msg:-pg-snapshot-dump failed}" \
				"change the publications so that PostgreSQL's own subscription to them would be accepted"
	fi
	# A chunked bootstrap still to come (or to continue) takes a temporary slot.
	local temp_slot=0
	if [[ ${CFG[resources.snapshot_mode]:-single} == chunked ]]; then
		job_read 2>/dev/null || JOB_EXISTS=0
		((JOB_EXISTS)) && [[ $JOB_STATE != INITIALIZING && $JOB_STATE != SNAPSHOTTING ]] || temp_slot=1
	fi
	if rows=$(sql src -v autopub="${CFG[safety.auto_create_publication]}" -v resolved="$resolved" \
		-v resolved_ok="$resolved_ok" -v temp_slot="$temp_slot" <<<"$CHECK_SOURCE_SQL"); then
		CHECK_SOURCE_OK=1
		while IFS=$'\x1f' read -r level msg fix; do
			[[ -n $level ]] || continue
			if [[ $level == slot ]]; then
				SLOT_FOUND=1 SLOT_FOUND_ACTIVE=$msg
				continue
			fi
			finding "$level" source "$msg" "$fix"
		done <<<"$rows"
		srccols=$(sql src <<<"$CHECK_SOURCE_COLUMNS_SQL") || srccols='{}'
		srctypes=$(sql src <<<"$CHECK_SOURCE_TYPES_SQL") || srctypes='{}'
		sequences_check
		ha_check "$mode"
		# The fence matters only to switchover: bootstrap does not need it.
		[[ $mode != check ]] || fence_check
	else
		msg=$(sql_error)
		finding fail source "cannot connect to the source ($SRC_DISPLAY): $msg" "$(connect_fix source "$SRC_DISPLAY" "$msg")"
	fi

	# The replication connection: logical replication uses the database's
	# own pg_hba.conf entry, and needs a free WAL sender.
	if ((CHECK_SOURCE_OK)); then
		local ident
		if ident=$(source_sysid); then
			finding ok source "replication connection (IDENTIFY_SYSTEM): system identifier $ident"
		else
			finding fail source "replication connection refused: $(sql_error)" \
				"allow the role in pg_hba.conf for the database (logical replication uses the database's entry), grant REPLICATION, and keep a WAL sender free"
		fi
	fi

	# Tables an interrupted bootstrap still owes keys and indexes.
	local owed={}
	if [[ $(sql tgt <<<"SELECT to_regclass('pgsync.pending_definitions') IS NOT NULL" 2>/dev/null) == t ]]; then
		owed=$(sql tgt <<<"SELECT coalesce(array_agg(schema_name || E'\\t' || table_name), '{}') FROM pgsync.pending_definitions") || owed={}
	fi
	if rows=$(sql tgt -v srccols="$srccols" -v srctypes="$srctypes" -v owed="$owed" -v temp_slot="$temp_slot" <<<"$CHECK_TARGET_SQL"); then
		CHECK_TARGET_OK=1
		while IFS=$'\x1f' read -r level msg fix; do
			[[ -n $level ]] && finding "$level" target "$msg" "$fix"
		done <<<"$rows"
		published_generated_check "$resolved"
	else
		msg=$(sql_error)
		finding fail target "cannot connect to the target ($TGT_DISPLAY): $msg" "$(connect_fix target "$TGT_DISPLAY" "$msg")"
	fi
	((CHECK_SOURCE_OK && CHECK_TARGET_OK)) || return 0
	[[ $mode == check ]] || return 0

	# The slot: only the job that created it may use or drop it.
	job_load
	if ((SLOT_FOUND)); then
		if ((JOB_EXISTS)) && [[ $JOB_SLOT_OWNED == t && $JOB_SLOT == "$SLOT" ]]; then
			finding ok source "replication slot $SLOT exists and belongs to job $JOB (state $JOB_STATE)"
		else
			finding fail source "replication slot $SLOT already exists and job $JOB did not create it: pgsync never touches it" \
				"choose another source.slot, or drop the slot yourself if nothing uses it: SELECT pg_drop_replication_slot('$SLOT')"
		fi
	elif ((JOB_EXISTS)) && [[ $JOB_STATE != INITIALIZING && $JOB_STATE != SNAPSHOTTING ]]; then
		finding fail source "replication slot $SLOT of job $JOB (state $JOB_STATE) is missing: the job needs a resync" \
			"pgsync cleanup --yes && pgsync bootstrap --restart-snapshot"
	else
		finding ok source "replication slot $SLOT does not exist yet: bootstrap creates it"
	fi
	if ((JOB_EXISTS)); then
		case $JOB_STATE in
		RESYNC_REQUIRED) finding fail target "job $JOB is RESYNC_REQUIRED: ${JOB_LAST_ERROR:-continuity lost}" "pgsync cleanup --yes && pgsync bootstrap --restart-snapshot" ;;
		*) finding info target "job $JOB is $JOB_STATE" ;;
		esac
	else
		local t q
		while IFS=$'\x1f' read -r t q; do
			[[ -n $t ]] && finding warn target "$q already has rows: bootstrap refuses to copy into it" \
				"empty it, or use pgsync bootstrap --restart-snapshot, which truncates it"
		done < <(target_nonempty_tables)
	fi
}

print_findings() {
	local f level where msg fix tag
	for f in "${FINDINGS[@]}"; do
		IFS=$'\x1f' read -r level where msg fix <<<"$f"
		case $level in
		ok) tag="ok  " ;; info) tag="info" ;; warn) tag="warn" ;; *) tag="FAIL" ;;
		esac
		if [[ $level == fail || $level == warn ]] && [[ -n $fix ]]; then
			printf '%s  %s: %s; fix: %s\n' "$tag" "$where" "$msg" "$fix"
		else
			printf '%s  %s: %s\n' "$tag" "$where" "$msg"
		fi
	done
}

cmd_check() {
	setup_connections yes
	log_info "checking job $JOB: source $SRC_DISPLAY, target $TGT_DISPLAY"
	preflight check
	print_findings
	if ((CHECK_FAILS)); then
		log_error "check failed: $CHECK_FAILS problem(s), $CHECK_WARNS warning(s)"
		return $EX_PREFLIGHT
	fi
	log_info "check passed with $CHECK_WARNS warning(s)"
	return $EX_OK
}
