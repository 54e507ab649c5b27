#!/usr/bin/env bats
# Recovery paths as the operations guide's least-privilege roles take them:
# a source role with LOGIN, REPLICATION, CONNECT, USAGE and SELECT on the
# published tables only (nothing on their sequences) and a target role that
# is not a superuser. An interrupted bootstrap is retried by the same roles
# with no privilege the first attempt did not need.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "CREATE TABLE pv_orders (id bigserial PRIMARY KEY, note text, created timestamptz DEFAULT now());
		CREATE INDEX pv_orders_note ON pv_orders (note);
		INSERT INTO pv_orders (note) SELECT 'order ' || g FROM generate_series(1, 2000) g;
		CREATE TABLE pv_lock (id int PRIMARY KEY, name text);
		INSERT INTO pv_lock SELECT g, 'l' || g FROM generate_series(1, 10) g;
		CREATE PUBLICATION pv_pub FOR TABLE pv_orders, pv_lock"
	lp_source_role pv_src pv_orders pv_lock
	lp_target_role pv_tgt
}

teardown_file() {
	cluster_stop_all
}

# pv_lock exists, empty, in the target with a trigger that holds its load,
# so that the copy is still running when the bootstrap is interrupted, after
# pv_orders was created by it.
hold_copy() {
	psql_at tgt -c "CREATE TABLE pv_lock (id int PRIMARY KEY, name text);
		GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON pv_lock TO pv_tgt;
		CREATE FUNCTION pv_slow() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN PERFORM pg_sleep(120); RETURN NULL; END';
		CREATE TRIGGER pv_slow BEFORE INSERT ON pv_lock FOR EACH STATEMENT EXECUTE FUNCTION pv_slow();
		ALTER TABLE pv_lock ENABLE ALWAYS TRIGGER pv_slow"
}

release_copy() {
	psql_at tgt -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'" \
		-c "DROP TRIGGER pv_slow ON pv_lock" >/dev/null
}

@test "a bootstrap of a bigserial table interrupted by snapshot_timeout is retried by the least-privilege role: no sequence data is read" {
	hold_copy
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock resources.snapshot_timeout=3s >/dev/null
	run pgs pv check
	[ "$status" -eq 0 ]
	run pgs pv bootstrap
	release_copy
	[ "$status" -eq 1 ]
	[[ $output == *"resources.snapshot_timeout (3.000 s) expired"* ]]
	# The interrupted attempt created pv_orders and still owes its keys.
	[ "$(psql_at tgt -c "SELECT string_agg(table_name, ' ') FROM pgsync.pending_definitions")" = pv_orders ]
	job_conf pv pv_slot pv_pub public.pv_orders,public.pv_lock >/dev/null
	run pgs pv bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"permission denied"* ]]
	same_tables pv_orders pv_lock
	[ "$(psql_at tgt -c "SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'pv_orders'")" = "pv_orders_note pv_orders_pkey" ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM pgsync.pending_definitions")" = 0 ]
	[ "$(job_state pv)" = CATCHING_UP ]
}

@test "bootstrap --restart-snapshot by the least-privilege role copies again" {
	psql_at src -c "INSERT INTO pv_orders (note) VALUES ('after the first copy')"
	run pgs pv bootstrap --restart-snapshot
	[ "$status" -eq 0 ]
	same_tables pv_orders pv_lock
}
