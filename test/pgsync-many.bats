#!/usr/bin/env bats
# A job of a thousand tables with long names, as multi-tenant schemas have
# them: the lists pgsync hands psql (the tables, their text columns and
# collations, their estimates) are larger than one command-line argument may
# be (128 kB), and go through files instead. Bootstrap (chunked, the
# default), run and verify, with the guide's least-privilege source role.

load lib/cluster
load pgsync-helpers

readonly MANY_SCHEMAS=200

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -q <<-SQL
		DO \$\$ BEGIN
		  FOR s IN 1..$MANY_SCHEMAS LOOP
		    EXECUTE format('CREATE SCHEMA %I', 'tenant_with_a_rather_long_schema_name_' || s);
		    FOR t IN 1..5 LOOP
		      EXECUTE format('CREATE TABLE %I.%I (id serial PRIMARY KEY, note text, code varchar(20))',
		        'tenant_with_a_rather_long_schema_name_' || s, 'orders_with_a_long_descriptive_name_' || t);
		      EXECUTE format('INSERT INTO %I.%I (note, code) SELECT %L || g, g::text FROM generate_series(1, 10) g',
		        'tenant_with_a_rather_long_schema_name_' || s, 'orders_with_a_long_descriptive_name_' || t, 'n' || s || '.' || t);
		    END LOOP;
		  END LOOP;
		END \$\$;
		CREATE PUBLICATION many_pub FOR ALL TABLES;
	SQL
	local tables
	# One table a line: a list goes on while a line ends in a comma.
	tables=$(psql_at src -c "SELECT string_agg(format('%s.%s', schemaname, tablename), E',\n  ' ORDER BY 1)
		FROM pg_tables WHERE schemaname LIKE 'tenant%'")
	# The source role as the guide has it: no superuser.
	psql_at src -q <<-SQL
		CREATE ROLE many_src LOGIN REPLICATION;
		DO \$\$ BEGIN
		  FOR s IN 1..$MANY_SCHEMAS LOOP
		    EXECUTE format('GRANT USAGE ON SCHEMA %I TO many_src', 'tenant_with_a_rather_long_schema_name_' || s);
		    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO many_src', 'tenant_with_a_rather_long_schema_name_' || s);
		    EXECUTE format('GRANT SELECT ON ALL SEQUENCES IN SCHEMA %I TO many_src', 'tenant_with_a_rather_long_schema_name_' || s);
		  END LOOP;
		END \$\$;
	SQL
	job_conf many many_slot many_pub "$tables" resources.snapshot_mode=chunked >/dev/null
	export SRC_URL=${src_URL/user=postgres/user=many_src}
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

@test "a thousand tables with long names: the lists exceed one argument's 128 kB; bootstrap, run and verify work" {
	# More than an argument holds: the key columns' collations alone.
	(($(wc -c <"$BATS_FILE_TMPDIR/many.conf") > 75000))
	run pgs many bootstrap
	echo "$output" | tail -n 5
	[ "$status" -eq 0 ]
	[[ $output == *"bootstrap of job many complete: 1000 tables"* ]]
	[ "$(psql_at tgt -c "SELECT sum(n_live_tup) FROM pg_stat_user_tables WHERE schemaname LIKE 'tenant%'")" -ge 0 ]
	start_run many
	wait_until 60 state_is many STREAMING
	psql_at src -c "INSERT INTO tenant_with_a_rather_long_schema_name_200.orders_with_a_long_descriptive_name_5 (note) VALUES ('late')"
	wait_until 30 sql_is tgt 11 "SELECT count(*) FROM tenant_with_a_rather_long_schema_name_200.orders_with_a_long_descriptive_name_5"
	run pgs many verify
	echo "$output" | tail -n 3
	[ "$status" -eq 0 ]
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}
