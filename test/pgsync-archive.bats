#!/usr/bin/env bats
# The archive recipe end to end (scripts/archive-segment): a base snapshot
# and change segments named in LSN order, each made durable before pg-ack
# releases exactly its END position; a fresh target rebuilt from the archive
# with pg-apply is identical to the source.

load lib/cluster
load lib/slot
load pgsync-helpers

# The tables, for the source and for the rebuilt target (pg_dump cannot read
# a server newer than itself, so the test does not depend on it).
readonly TABLES_DDL="CREATE TABLE ar_a (id int PRIMARY KEY, v text, n numeric);
	CREATE TABLE ar_b (k text PRIMARY KEY, t timestamptz);"

setup_file() {
	cluster_start src
	cluster_start tgt
	psql_at src -c "$TABLES_DDL
		INSERT INTO ar_a SELECT g, 'v' || g, g / 3.0 FROM generate_series(1, 2000) g;
		INSERT INTO ar_b SELECT 'k' || g, '2026-01-01'::timestamptz + g * interval '1 min' FROM generate_series(1, 100) g;
		CREATE PUBLICATION ar_pub FOR TABLE ar_a, ar_b"
	# The archiver connects as the guide's least-privilege source role.
	lp_source_role ar_src ar_a ar_b
	ARCHIVE=$BATS_FILE_TMPDIR/archive
	export ARCHIVE
}

teardown_file() {
	cluster_stop_all
}

archive() {
	PGSYNC_SOURCE_URL=$SRC_URL archive-segment --slot ar_slot --publication ar_pub "$@" "$ARCHIVE"
}

# The END position a segment file ends with.
segment_end() {
	zstdcat "$1" | tail -n 1 | cut -f 2
}

@test "--init creates the slot and a durable base snapshot named by its LSN" {
	run archive --init
	[ "$status" -eq 0 ]
	base=$(ls "$ARCHIVE"/base-*.pgcs.zst)
	lsn=$(confirmed ar_slot)
	hi=${lsn%/*} lo=${lsn#*/}
	[ "$(basename "$base")" = "$(printf 'base-%08X%08X.pgcs.zst' "$((16#$hi))" "$((16#$lo))")" ]
	[ "$(stat -c %a "$base")" = 600 ]
	zstdcat "$base" | grep -q "^SNAPSHOTDONE"$'\t'"$lsn\$"
	[ -z "$(ls "$ARCHIVE" | grep tmp)" ]
}

@test "each run archives the changes up to now, then confirms exactly the segment's END" {
	psql_at src -c "INSERT INTO ar_a SELECT g, 'new', g FROM generate_series(2001, 2500) g"
	run archive
	[ "$status" -eq 0 ]
	psql_at src -c "UPDATE ar_a SET v = 'updated' WHERE id % 10 = 0; DELETE FROM ar_b WHERE k LIKE 'k1%'"
	psql_at src -c "BEGIN; INSERT INTO ar_b VALUES ('tx', now()); UPDATE ar_a SET n = NULL WHERE id < 5; COMMIT"
	run archive
	[ "$status" -eq 0 ]
	psql_at src -c "TRUNCATE ar_b; INSERT INTO ar_b VALUES ('after truncate', NULL)"
	run archive
	[ "$status" -eq 0 ]
	mapfile -t segs < <(ls "$ARCHIVE"/seg-*.pgcs.zst)
	[ "${#segs[@]}" -eq 3 ]
	# Names sort in LSN order and chain: each starts where the last ended.
	prev_end=""
	for s in "${segs[@]}"; do
		name=$(basename "$s" .pgcs.zst)
		start=${name#seg-}
		start=${start%-*}
		[ -z "$prev_end" ] || [ "$start" = "$prev_end" ]
		prev_end=${name##*-}
	done
	# The slot is confirmed exactly at the last segment's END, no further.
	[ "$(confirmed ar_slot)" = "$(segment_end "${segs[2]}")" ]
}

@test "a fresh target rebuilt from the base snapshot and the segments with pg-apply is identical" {
	psql_at tgt -c "CREATE DATABASE rebuilt"
	rebuilt="${tgt_URL/dbname=postgres/dbname=rebuilt}"
	psql -X -q -v ON_ERROR_STOP=1 -d "$rebuilt" -c "$TABLES_DDL"
	run pg-apply -d "$rebuilt" "$ARCHIVE"/*.pgcs.zst
	[ "$status" -eq 0 ]
	[ "$(table_checksum "$src_URL" ar_a)" = "$(table_checksum "$rebuilt" ar_a)" ]
	[ "$(table_checksum "$src_URL" ar_b)" = "$(table_checksum "$rebuilt" ar_b)" ]
	# Replaying the segments again changes nothing: every transaction is
	# below the recorded position.
	run pg-apply -d "$rebuilt" "$ARCHIVE"/seg-*.pgcs.zst
	[ "$status" -eq 0 ]
	[[ $output == *"applied 0 transactions, skipped 4 already applied"* ]]
	[ "$(table_checksum "$src_URL" ar_a)" = "$(table_checksum "$rebuilt" ar_a)" ]
}

@test "nothing is written or confirmed when the slot is missing" {
	before=$(ls "$ARCHIVE" | wc -l)
	PGSYNC_SOURCE_URL=$SRC_URL run archive-segment --slot ar_missing --publication ar_pub "$ARCHIVE"
	[ "$status" -eq 4 ]
	[[ $output == *"archive-segment: error: pg-walcat exited with status 4: nothing archived, nothing confirmed"* ]]
	[ "$(ls "$ARCHIVE" | wc -l)" -eq "$before" ]
}

@test "archive-segment usage errors are exit 2" {
	run archive-segment --slot ar_slot "$ARCHIVE"
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "archive-segment: error: --publication is required" ]
	run archive-segment --slot ar_slot --publication p --level 40 "$ARCHIVE"
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'archive-segment: error: invalid --level "40": 1 to 19' ]
	run archive-segment --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: archive-segment "* ]]
}
