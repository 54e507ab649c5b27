#include "catalog.h"

const char catalog_ddl[] =
	"SELECT pg_advisory_xact_lock(7442718406132410263);\n"
	"CREATE SCHEMA IF NOT EXISTS pgsync;\n"
	"COMMENT ON SCHEMA pgsync IS 'pgsync replication state, catalog version 1';\n"
	/* One row per job. pg-apply owns the source_* and applied_* columns,
	 * the orchestrator the rest. applied_lsn follows the stream's position
	 * convention: every source transaction whose commit LSN is below it has
	 * been applied, in the same transaction that moved it. */
	"CREATE TABLE IF NOT EXISTS pgsync.job (\n"
	"  job text PRIMARY KEY,\n"
	"  state text NOT NULL DEFAULT 'INITIALIZING' CHECK (state IN\n"
	"    ('INITIALIZING','SNAPSHOTTING','CATCHING_UP','STREAMING','PAUSED','ERROR','RESYNC_REQUIRED',\n"
	"     'SWITCHED_OVER')),\n"
	"  slot text,\n"
	"  slot_owned boolean NOT NULL DEFAULT false,\n"
	"  publication text,\n"
	"  source_sysid text,\n"
	"  source_timeline integer,\n"
	"  consistent_lsn pg_lsn,\n"
	"  applied_lsn pg_lsn,\n"
	"  applied_commit_time timestamptz,\n"
	"  snapshot_done_at timestamptz,\n"
	"  last_error text,\n"
	"  created_at timestamptz NOT NULL DEFAULT now(),\n"
	"  updated_at timestamptz NOT NULL DEFAULT now()\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS pgsync.table_sync (\n"
	"  job text NOT NULL REFERENCES pgsync.job ON DELETE CASCADE,\n"
	"  schema_name text NOT NULL,\n"
	"  table_name text NOT NULL,\n"
	"  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','copying','done')),\n"
	"  rows_copied bigint NOT NULL DEFAULT 0,\n"
	"  bytes_copied bigint NOT NULL DEFAULT 0,\n"
	"  rows_estimate bigint,\n"
	"  started_at timestamptz,\n"
	"  finished_at timestamptz,\n"
	"  PRIMARY KEY (job, schema_name, table_name)\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS pgsync.job_runtime (\n"
	"  job text PRIMARY KEY REFERENCES pgsync.job ON DELETE CASCADE,\n"
	"  pid integer,\n"
	"  host text,\n"
	"  version text,\n"
	"  state text,\n"
	"  connection_state text,\n"
	"  source_version text,\n"
	"  received_lsn pg_lsn,\n"
	"  applied_lsn pg_lsn,\n"
	"  lag_bytes bigint,\n"
	"  transactions bigint NOT NULL DEFAULT 0,\n"
	"  changes bigint NOT NULL DEFAULT 0,\n"
	"  transactions_per_sec double precision,\n"
	"  rows_per_sec double precision,\n"
	"  reconnects integer NOT NULL DEFAULT 0,\n"
	"  rss_bytes bigint,\n"
	"  last_apply_at timestamptz,\n"
	"  last_commit_time timestamptz,\n"
	"  heartbeat_interval_s integer,\n"
	"  heartbeat_at timestamptz,\n"
	"  started_at timestamptz,\n"
	"  stopped_at timestamptz\n"
	");\n"
	/* Tables whose definitions a bootstrap created and whose keys and
	 * indexes it has not built yet. Written before the tables are created
	 * and deleted in the transaction after their indexes, so that a bootstrap
	 * that stops in between (an error, a signal, kill -9) leaves the mark and
	 * the next one builds them, although the tables exist by then. Not tied
	 * to a job row: cleanup, which drops the job, must not forget it. */
	"CREATE TABLE IF NOT EXISTS pgsync.pending_definitions (\n"
	"  schema_name text NOT NULL,\n"
	"  table_name text NOT NULL,\n"
	"  job text NOT NULL,\n"
	"  created_at timestamptz NOT NULL DEFAULT now(),\n"
	"  PRIMARY KEY (schema_name, table_name)\n"
	");\n"
	/* The last pgsync verify of the job: when, at which consistent point,
	 * and its outcome (identical, different, error). */
	"ALTER TABLE pgsync.job ADD COLUMN IF NOT EXISTS verified_at timestamptz,\n"
	"  ADD COLUMN IF NOT EXISTS verified_lsn pg_lsn,\n"
	"  ADD COLUMN IF NOT EXISTS verify_outcome text;\n"
	/* pgsync switchover: the state SWITCHED_OVER (a catalog from before it
	 * gets the wider check), the final position and when. */
	"ALTER TABLE pgsync.job DROP CONSTRAINT IF EXISTS job_state_check;\n"
	"ALTER TABLE pgsync.job ADD CONSTRAINT job_state_check CHECK (state IN\n"
	"    ('INITIALIZING','SNAPSHOTTING','CATCHING_UP','STREAMING','PAUSED','ERROR','RESYNC_REQUIRED',\n"
	"     'SWITCHED_OVER'));\n"
	"ALTER TABLE pgsync.job ADD COLUMN IF NOT EXISTS switchover_lsn pg_lsn,\n"
	"  ADD COLUMN IF NOT EXISTS switched_over_at timestamptz;\n"
	/* pgsync run: the highest restart_lsn it saw on the job's slot, which
	 * the job's own server never goes below (source/lineage.h). */
	"ALTER TABLE pgsync.job ADD COLUMN IF NOT EXISTS slot_restart_lsn pg_lsn;\n"
	/* The roles a switchover fenced on the source and the setting each had
	 * before (previous NULL: none), written before the fence and deleted
	 * when it is undone, so that an interrupted switchover's fence can
	 * always be put back exactly. Not tied to the job row: cleanup must not
	 * forget a fence. */
	"CREATE TABLE IF NOT EXISTS pgsync.fence (\n"
	"  job text NOT NULL,\n"
	"  role_name text NOT NULL,\n"
	"  database_name text NOT NULL,\n"
	"  previous text,\n"
	"  fenced_at timestamptz NOT NULL DEFAULT now(),\n"
	"  PRIMARY KEY (job, role_name)\n"
	");\n"
	/* The chunks of a chunked copy that are on the target: key range
	 * (lo, hi] of the key columns (NULL bounds: unbounded; key_columns NULL:
	 * a table copied in one piece), copied at the snapshot whose consistent
	 * point is lsn. Written in the transaction of the chunk's rows, so that
	 * a chunk is recorded exactly when its rows are there; pg-apply filters
	 * the change stream by it. Created last: the fast path looks for it. */
	"CREATE TABLE IF NOT EXISTS pgsync.table_chunk (\n"
	"  job text NOT NULL REFERENCES pgsync.job ON DELETE CASCADE,\n"
	"  schema_name text NOT NULL,\n"
	"  table_name text NOT NULL,\n"
	"  key_columns text[],\n"
	"  lo text[],\n"
	"  hi text[],\n"
	"  lsn pg_lsn NOT NULL,\n"
	"  rows bigint NOT NULL,\n"
	"  bytes bigint NOT NULL,\n"
	"  copied_at timestamptz NOT NULL DEFAULT now()\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS table_chunk_table ON pgsync.table_chunk (job, schema_name, table_name);\n"
	/* No key: a target that publishes all its tables (to a replica of its
	 * own) must still let cleanup and a restart delete the chunks. */
	"ALTER TABLE pgsync.table_chunk REPLICA IDENTITY FULL;\n";

bool
catalog_ensure(PGconn *conn, struct pgerr *err)
{
	PGresult *res;
	bool ok;

	/* Fast path: already there (the common case, and needs no CREATE right).
	 * What the DDL creates last is looked for, so that a catalog from
	 * before it was added gets it. */
	res = PQexec(conn, "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
				 "ON n.oid = c.relnamespace WHERE n.nspname = 'pgsync' AND c.relname = 'table_chunk'");
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
	{
		PQclear(res);
		return true;
	}
	PQclear(res);
	if (!conn_command(conn, "BEGIN", 0, NULL, err))
		return false;
	ok = conn_command(conn, catalog_ddl, 0, NULL, err);
	if (!ok)
	{
		PQclear(PQexec(conn, "ROLLBACK"));
		return false;
	}
	return conn_command(conn, "COMMIT", 0, NULL, err);
}
