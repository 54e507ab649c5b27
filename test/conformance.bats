#!/usr/bin/env bats
# Conformance with PostgreSQL's own logical replication: for every case of
# test/conformance-cases.sql, a built-in subscription to the case's
# publications and pgsync (snapshot, then stream) replicate the same source
# and workload into two databases, which must then be identical table by
# table (test/lib/conformance.bash). Majors: PGSYNC_MAJORS, else PGSYNC_MAJOR,
# else 15 and 18; every case runs on each major it is valid on.

# One of the longest files: started first (test/run-bats).
# run-bats: slow 2

load lib/cluster
load lib/conformance
load pgsync-helpers

setup_file() {
	local m pids=() status=0
	for m in $(conf_majors); do
		conf_clusters "$m"
	done
	# The majors' phases are independent: one background job each.
	for m in $(conf_majors); do
		(conf_phases "$m") >"$BATS_FILE_TMPDIR/conf$m.log" 2>&1 &
		pids+=($!)
	done
	for m in "${pids[@]}"; do wait "$m" || status=1; done
	grep -h ' took ' "$BATS_FILE_TMPDIR"/conf*.log | sed 's/^/# /' >&3
	if ((status)); then
		cat "$BATS_FILE_TMPDIR"/conf*.log >&2
		return 1
	fi
}

teardown_file() {
	cluster_stop_all
}

# conf_test ID: the case on every selected major it is valid on.
conf_test() {
	local m ran=""
	for m in $(conf_majors); do
		conf_applies "$1" "$m" || continue
		conf_check "$1" "$m"
		ran+=" $m"
	done
	[[ -n $ran ]] || skip "valid on PostgreSQL $(conf_header "$1" range)+ only, not $(conf_majors)"
}

@test "case 01: Two FOR TABLE publications with different tables: the union is copied" { conf_test 01; }
@test "case 02: A table both publications publish is copied and streamed once" { conf_test 02; }
@test "case 03: publish = 'insert': the copy has the table, the stream only its inserts" { conf_test 03; }
@test "case 04: TRUNCATE of several tables at once, only some published with truncate" { conf_test 04; }
@test "case 05: Inheritance: a parent published with its children (each under its own name) and a parent published ONLY" { conf_test 05; }
@test "case 06: A stored generated column is not published by default: the target computes it" { conf_test 06; }
@test "case 07: publish_via_partition_root on the root and a publication naming a leaf: the leaf's rows once, under the root" { conf_test 07; }
@test "case 08: Two row filters on one table are OR-ed; updates move rows in and out" { conf_test 08; }
@test "case 09: A row filter in one publication and none in the other: every row" { conf_test 09; }
@test "case 10: FOR ALL TABLES (no filter) overrides another publication's filter; it covers a table created after it, before the snapshot" { conf_test 10; }
@test "case 11: FOR TABLES IN SCHEMA has no filter and overrides a filter on a table in that schema; a filtered table outside the schema keeps its filter" { conf_test 11; }
@test "case 12: A partitioned table without publish_via_partition_root, with row filters on its partitions: each partition's own filter; rows move between partitions" { conf_test 12; }
@test "case 13: A row filter on the root published via the root, and another on a leaf a second publication names: the root's filter alone, under the root (15 is case 07's double copy)" { conf_test 13; }
@test "case 14: FOR TABLES IN SCHEMA with publish_via_partition_root: a partitioned table of the schema whose partitions are in another schema is published whole" { conf_test 14; }
@test "case 15: FOR TABLES IN SCHEMA without publish_via_partition_root: the partitions in the schema under their own names, not one in another schema" { conf_test 15; }
@test "case 16: The same column list in two publications" { conf_test 16; }
@test "case 17: A column list in one publication, another table in the other: only the listed columns are copied and streamed" { conf_test 17; }
@test "case 18: A column list and a row filter on one table" { conf_test 18; }
@test "case 19: Different column lists for one table: refused, as CREATE SUBSCRIPTION refuses them" { conf_test 19; }
@test "case 20: A dropped column: a column list naming every live column and a publication without a list are different lists on 15 (its initial sync and pgoutput refuse them) and the same from 16" { conf_test 20; }
@test "case 21: TOAST values in the filter column (replica identity FULL): updates of other columns leave them unchanged, others move rows in and out" { conf_test 21; }
@test "case 22: Replica identity FULL without a key, with a row filter" { conf_test 22; }
@test "case 23: Key changes through a row filter on the key: rows leave and enter it" { conf_test 23; }
@test "case 24: Three publications, one of each kind (schema, row filters, column list), tables with capitals and serial keys" { conf_test 24; }
@test "case 25: FOR ALL TABLES with publish_via_partition_root: partitioned tables whole, plain tables, one created after the publication" { conf_test 25; }
@test "case 26: A row filter on a root published via the root, the leaf named without a filter by another publication: the root's publication decides" { conf_test 26; }
@test "case 27: Without publish_via_partition_root: a publication of the root (which may have no filter) and one naming a leaf with a filter leave that leaf unfiltered; leaves named with and without a filter" { conf_test 27; }
@test "case 28: Capitals, spaces and serial keys in the names" { conf_test 28; }
@test "case 29: Row filters per kind of change: one publication publishes inserts of some rows, the other updates and deletes of others" { conf_test 29; }
@test "case 30: TRUNCATE of a partitioned table published via the root, and of one of its leaves, which pgoutput leaves out (it publishes the root only)" { conf_test 30; }
@test "case 31: publish_generated_columns = stored: the generated column is copied and streamed (into a plain column on the target)" { conf_test 31; }
@test "case 32: A generated column named in a column list (18) is published" { conf_test 32; }
@test "case 33: Dropped columns, with a column list and without one, on two tables" { conf_test 33; }
@test "case 34: Three levels of partitions, published via the root at two levels and a leaf by name: everything once, under the topmost published ancestor" { conf_test 34; }
@test "case 35: GENERATED ALWAYS identity columns on the target, which an UPDATE can only set to DEFAULT: as the key, beside another key column, outside the key, under replica identity full, and an update whose only other value is unchanged TOAST" { conf_test 35; }

@test "pgsync bootstrap + run of three publications (FOR TABLES IN SCHEMA, row filters, a column list) with a least-privilege source role equals a subscription to them" {
	local m ran=""
	for m in $(conf_majors); do
		((m >= 15)) || continue
		conf_bootstrap_job "$m"
		ran+=" $m"
	done
	[[ -n $ran ]] || skip "FOR TABLES IN SCHEMA, row filters and column lists need PostgreSQL 15"
}
