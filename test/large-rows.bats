#!/usr/bin/env bats
# Rows larger than a snapshot frame: a frame grows for one such row (one at
# a time, so memory stays within the budget), up to max_message_bytes, the
# same limit pg-apply puts on a line; a longer row is refused with a message
# that names the limit the operator sets.

load lib/cluster
load pgsync-helpers
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src
	cluster_start tgt
	# Six rows of 3.2 MB (3,200,000 characters of hex) among small ones.
	psql_at src <<'SQL'
CREATE TABLE "Docs" (id serial PRIMARY KEY, "Body" text);
INSERT INTO "Docs" ("Body") SELECT 'small ' || g FROM generate_series(1, 2000) g;
INSERT INTO "Docs" ("Body") SELECT (SELECT string_agg(md5((g * 100000 + i)::text), '') FROM generate_series(1, 100000) i)
	FROM generate_series(1, 6) g;
INSERT INTO "Docs" ("Body") SELECT 'small ' || g FROM generate_series(2001, 3000) g;
CREATE PUBLICATION docs_pub FOR TABLE "Docs";
SQL
}

teardown_file() {
	cluster_stop_all
}

# new_target DB: a target database with an empty "Docs".
new_target() {
	psql_at tgt -c "CREATE DATABASE $1"
	psql -X -q -v ON_ERROR_STOP=1 -d "$(tgt_db "$1")" -c 'CREATE TABLE "Docs" (id int PRIMARY KEY, "Body" text)'
}

@test "3.2 MB rows copy through pg-snapshot-dump | pg-apply in 1 MB frames, several workers at once" {
	new_target dump
	run --separate-stderr bash -c 'pg-snapshot-dump -d "$1" --own-snapshot -t "public.\"Docs\"" --jobs 3 --split-rows 500 \
		--frame-size 1MB | pg-apply -d "$2" --job docs -j 3' _ "$src_URL" "$(tgt_db dump)"
	echo "$stderr"
	[ "$status" -eq 0 ]
	[ "$(table_checksum "$src_URL" Docs)" = "$(table_checksum "$(tgt_db dump)" Docs)" ]
	[ "$(psql -X -qAt -d "$(tgt_db dump)" -c 'SELECT count(*) FROM "Docs" WHERE length("Body") = 3200000')" = 6 ]
}

@test "a row longer than --max-message-bytes stops pg-snapshot-dump with exit 5 naming the limit" {
	run --separate-stderr pg-snapshot-dump -d "$src_URL" --own-snapshot -t 'public."Docs"' --frame-size 1MB \
		--max-message-bytes 3MB
	[ "$status" -eq 5 ]
	[[ $stderr == *'pg-snapshot-dump: error: cannot copy public.Docs: a row of 32000'[0-9][0-9]' bytes is longer than --max-message-bytes (3145728 bytes)'* ]]
	run --separate-stderr pg-snapshot-dump -d "$src_URL" --own-snapshot -t 'public."Docs"' --max-message-bytes 12XB
	[ "$status" -eq 2 ]
	[[ $stderr == *'invalid --max-message-bytes "12XB"'* ]]
}

@test "pgsync bootstrap copies 3.2 MB rows with the default configuration" {
	job_conf big big_slot docs_pub 'public.Docs' >/dev/null
	TGT_URL=$(tgt_db postgres) run pgs big bootstrap
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(table_checksum "$src_URL" Docs)" = "$(table_checksum "$tgt_URL" Docs)" ]
	pgs big cleanup --yes >/dev/null 2>&1
}

@test "under pgsync a row longer than the limit names resources.max_message_bytes, not a program's flag" {
	psql_at tgt -c "CREATE DATABASE small"
	job_conf small small_slot docs_pub 'public.Docs' resources.max_message_bytes=3MB >/dev/null
	TGT_URL=$(tgt_db small) run pgs small bootstrap
	echo "$output"
	[ "$status" -ne 0 ]
	[[ $output == *"a row of 32000"[0-9][0-9]" bytes is longer than resources.max_message_bytes (3145728 bytes)"* ]]
	[[ $output != *"--max-message-bytes"* ]]
	[[ $(psql -X -qAt -d "$(tgt_db small)" -c "SELECT last_error FROM pgsync.job WHERE job = 'small'") == *"resources.max_message_bytes"* ]]
}
