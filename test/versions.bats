#!/usr/bin/env bats
# The end-to-end core on every supported PostgreSQL major: type round trip,
# crash safety, resync detection, logical messages and streamed transactions,
# bootstrap under concurrent writes, idle slot advancement.
#
# Majors: PGSYNC_MAJORS (space-separated), else PGSYNC_MAJOR, else
# "14 16 17 18" (15, the default server, is what the rest of the suite runs
# on). One source/target pair per major, both of that major. A test for a
# major that is not selected is skipped.

load lib/cluster
load lib/slot

majors() {
	if [[ -n ${PGSYNC_MAJORS:-} ]]; then
		echo "$PGSYNC_MAJORS"
	elif [[ -n ${PGSYNC_MAJOR:-} ]]; then
		echo "$PGSYNC_MAJOR"
	else
		echo "14 16 17 18"
	fi
}

schema_sql() {
	cat <<'SQL'
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TYPE pair AS (a int, b text);
CREATE TABLE types_t (
  id int PRIMARY KEY,
  i2 smallint, i8 bigint, num numeric(20,5), numx numeric, f4 real, f8 double precision,
  t text, vc varchar(10), ch char(5), by bytea, bo boolean,
  d date, tm time, tmz timetz, ts timestamp, tsz timestamptz, iv interval,
  u uuid, js json, jb jsonb, ia int[], ta text[], m mood, dom posint, comp pair,
  ip inet, cid cidr, mac macaddr, bits bit(4), vb varbit, tsv tsvector, pt point,
  rng int4range, mr int4multirange, lsn pg_lsn, big text);
ALTER TABLE types_t ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE types_full (a int, b text, c jsonb);
ALTER TABLE types_full REPLICA IDENTITY FULL;
CREATE TABLE trunc_t (id int PRIMARY KEY, v text);
CREATE TABLE crash_t (id int PRIMARY KEY, v text);
CREATE TABLE crash_counter (id int PRIMARY KEY, n bigint NOT NULL);
CREATE TABLE stream_t (id int PRIMARY KEY, v text);
CREATE TABLE boot_t (id bigint PRIMARY KEY, v text, n int);
CREATE TABLE idle_t (id int PRIMARY KEY);
CREATE TABLE unpublished (v text);
CREATE PUBLICATION types_pub FOR TABLE types_t, types_full, trunc_t;
CREATE PUBLICATION crash_pub FOR TABLE crash_t, crash_counter;
CREATE PUBLICATION stream_pub FOR TABLE stream_t;
CREATE PUBLICATION boot_pub FOR TABLE boot_t;
CREATE PUBLICATION idle_pub FOR TABLE idle_t;
SQL
}

setup_file() {
	local m
	for m in $(majors); do
		cluster_start "src$m" --major "$m" --set logical_decoding_work_mem=64kB
		cluster_start "tgt$m" --major "$m"
		schema_sql | psql_at "src$m"
		schema_sql | grep -v '^CREATE PUBLICATION' | psql_at "tgt$m"
	done
	# pg-walcat's START_REPLICATION path without its preflight (test/repl-probe.c).
	local inc lib
	inc=$(pg_config --includedir) lib=$(pg_config --libdir)
	cd "$PGSYNC_ROOT"
	local incs=() d
	for d in lib/*/; do incs+=(-I "${d%/}"); done
	cc -std=c11 -D_GNU_SOURCE -O0 "${incs[@]}" -I "$inc" -o "$BATS_FILE_TMPDIR/repl-probe" test/repl-probe.c \
		lib/*/*.c -L "$lib" -lpq -lzstd -lpthread -lm
}

teardown_file() {
	cluster_stop_all
}

# on_major N FUNCTION: run FUNCTION with SRC/TGT set to that major's pair.
on_major() {
	local m=$1
	shift
	[[ " $(majors) " == *" $m "* ]] || skip "PostgreSQL $m is not in PGSYNC_MAJORS ($(majors))"
	MAJOR=$m SRC=src$m TGT=tgt$m
	SRC_URL=$(cluster_url "$SRC") TGT_URL=$(cluster_url "$TGT")
	"$@"
}

src() { psql_at "$SRC" "$@"; }
tgt() { psql_at "$TGT" "$@"; }

same_table() {
	local a b
	a=$(table_checksum "$SRC_URL" "$1")
	b=$(table_checksum "$TGT_URL" "$1")
	if [[ $a != "$b" ]]; then
		echo "table $1 differs on PostgreSQL $MAJOR: source $(src -c "SELECT count(*) FROM $1") rows, target $(tgt -c "SELECT count(*) FROM $1") rows"
		return 1
	fi
}

# Stream everything up to now from slot $1 (publication $2) into the target.
catch_up() {
	pg-walcat -d "$SRC_URL" --slot "$1" --publication "$2" --endpos now --ack-file "$BATS_TEST_TMPDIR/$1.lsn" |
		pg-apply -d "$TGT_URL" --checkpoint "$BATS_TEST_TMPDIR/$1.lsn"
	local codes=("${PIPESTATUS[@]}")
	[[ ${codes[0]} == 0 && ${codes[1]} == 0 ]] || {
		echo "pg-walcat exited ${codes[0]}, pg-apply ${codes[1]} on PostgreSQL $MAJOR"
		return 1
	}
}

# start_pipe SLOT PUBLICATION ACKFILE [pg-walcat options...]: the pipeline in
# the background, joined by a named pipe so that each side has its own pid
# (WPID, APID) and exit status.
start_pipe() {
	local slot=$1 pub=$2 ack=$3
	shift 3
	mkfifo "$BATS_TEST_TMPDIR/$slot.fifo"
	pg-walcat -d "$SRC_URL" --slot "$slot" --publication "$pub" --ack-file "$ack" "$@" \
		>"$BATS_TEST_TMPDIR/$slot.fifo" 2>"$BATS_TEST_TMPDIR/walcat.log" &
	WPID=$!
	pg-apply -d "$TGT_URL" --checkpoint "$ack" --max-batch-delay 10ms --max-batch-bytes 64kB \
		<"$BATS_TEST_TMPDIR/$slot.fifo" 2>"$BATS_TEST_TMPDIR/apply.log" &
	APID=$!
}

# --- the checks -----------------------------------------------------------------

check_types() {
	new_slot types_slot "$SRC"
	src <<'SQL'
INSERT INTO types_t VALUES
 (1, 1, 9223372036854775807, 12345.67891, 1e-30, 1.5, 2.718281828459045,
  'plain', 'varchar', 'ab', '\xdeadbeef', true,
  '2026-11-30', '14:03:07.123456', '14:03:07+05:30', '2026-11-30 14:03:07.123456', '2026-11-30 14:03:07.123456+00', '1 year 2 mons 3 days 04:05:06.789',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.5, null], "b": "\u00e9"}', '{"k": {"n": [true, false]}}',
  '{1,NULL,-3}', '{"a\"b","",NULL,"tab\there"}', 'happy', 7, '(1,"x y")',
  '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', B'1010', B'10101', 'a fat cat:1 sat:2', '(1.5,-2)',
  '[1,10)', '{[1,3), [5,7)}', '16/B374D848',
  (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 100) i)),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (3, -32768, -9223372036854775808, -0.00001, 'NaN', '-Infinity', 'Infinity',
  E'\\N', '', '', '\x', false,
  'infinity', '24:00:00', '00:00:00-12', '-infinity', 'epoch', '-178000000 years',
  '00000000-0000-0000-0000-000000000000', '""', '[]', '{}', '{}', 'sad', 1, '(,)',
  '::1', '::/0', '00:00:00:00:00:00', B'0000', B'', '', '(0,0)',
  'empty', '{}', '0/0', E'tab\there\nnewline\\backslash\r\u00e9\u20ac'),
 (4, 0, 0, 0, '123456789012345678901234567890.123456789', 'NaN', 5e-324,
  E'\\U', E'\\\\N', 'x', '\x00ff5c0a09', NULL,
  '0001-01-01 BC', '00:00:00', '23:59:59.999999+14', '4713-01-01 00:00:00 BC', '294276-12-31 23:59:59.999999+00', '-1 days',
  'ffffffff-ffff-ffff-ffff-ffffffffffff', '{"x":"\\n\\t\\\\"}', '{"\\u0000x": 1}', '{{1,2},{3,4}}', '{"\\\\N","NULL"}', 'ok', 2147483647, '("2","(\\"quoted\\")")',
  '2001:db8::1', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', B'1111', B'1', '''quoted'' word', '(1e300,-1e-300)',
  '(,)', '{(,5)}', 'FFFFFFFF/FFFFFFFF', repeat('x', 5000));
INSERT INTO types_full VALUES (1, 'a', '{"x": 1}'), (2, NULL, NULL), (3, E'\\N', '[]');
INSERT INTO trunc_t SELECT g, 'row ' || g FROM generate_series(1, 50) g;
UPDATE types_t SET t = 'updated', jb = jb || '{"u": 1}' WHERE id = 1;   -- big unchanged: TOAST not sent
UPDATE types_t SET id = 10 WHERE id = 3;                                -- key change
UPDATE types_t SET big = repeat('y', 4000), i2 = 2 WHERE id = 4;
DELETE FROM types_t WHERE id = 2;
UPDATE types_full SET b = 'changed' WHERE a = 1;
DELETE FROM types_full WHERE a = 2;
TRUNCATE trunc_t;
INSERT INTO trunc_t VALUES (1, 'after truncate');
SQL
	catch_up types_slot types_pub
	same_table types_t
	same_table types_full
	same_table trunc_t
	[ "$(tgt -c 'SELECT count(*) FROM types_t')" = 3 ]
	[ "$(tgt -c "SELECT t FROM types_t WHERE id = 4")" = '\U' ]
	[ "$(tgt -c "SELECT length(big) FROM types_t WHERE id = 1")" = 3200 ]
}

check_crash() {
	local i total=120 rows=400 n=0 c a
	new_slot crash_slot "$SRC"
	src -c "INSERT INTO crash_counter VALUES (1, 0)"
	# Many transactions, each also bumping a counter: one applied twice or
	# lost shows in the counter even when the rows look right.
	for ((i = 0; i < total; i++)); do
		echo "BEGIN; INSERT INTO crash_t SELECT g, md5(g::text) FROM generate_series($((i * rows + 1)), $(((i + 1) * rows))) g;"
		echo "UPDATE crash_counter SET n = n + 1 WHERE id = 1; DELETE FROM crash_t WHERE id = $((i * rows + 1)); COMMIT;"
	done | src
	local ack=$BATS_TEST_TMPDIR/crash.lsn
	start_pipe crash_slot crash_pub "$ack" --status-interval 100ms
	# Kill everything in the pipeline as soon as part of it has been applied.
	for ((i = 0; i < 300; i++)); do
		n=$(tgt -c "SELECT coalesce(max(n), 0) FROM crash_counter")
		((n >= 10)) && break
		sleep 0.02
	done
	kill -KILL "$WPID" "$APID"
	wait "$WPID" "$APID" || true
	echo "killed after $n of $total transactions"
	((n >= 10 && n < total))
	c=$(src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'crash_slot'")
	a=$(tgt -c "SELECT applied_lsn FROM pgsync.job WHERE job = 'crash_slot'")
	echo "confirmed $c, applied $a"
	(($(lsn_num "$c") <= $(lsn_num "$a")))
	catch_up crash_slot crash_pub
	same_table crash_t
	same_table crash_counter
	[ "$(tgt -c 'SELECT n FROM crash_counter')" = "$total" ]
}

check_slot_dropped() {
	new_slot gone_slot "$SRC"
	src -c "SELECT pg_drop_replication_slot('gone_slot')"
	run pg-walcat -d "$SRC_URL" --slot gone_slot --publication idle_pub --endpos now
	echo "$output"
	[ "$status" -eq 4 ]
	[[ $output == *'replication slot "gone_slot" does not exist'* ]]
	run "$BATS_FILE_TMPDIR/repl-probe" "$SRC_URL" gone_slot idle_pub
	echo "$output"
	[[ $output == "4 "*'"gone_slot" does not exist'* ]]
}

check_slot_invalidated() {
	local expect reason
	case $MAJOR in
	13 | 14 | 15) expect='cannot read from logical replication slot "lost_slot"' ;;
	16 | 17) expect='can no longer get changes from replication slot "lost_slot"' ;;
	*) expect='can no longer access replication slot "lost_slot"' ;;
	esac
	new_slot lost_slot "$SRC"
	src -c "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" -c "SELECT pg_reload_conf()" >/dev/null
	local i
	for ((i = 0; i < 10; i++)); do
		src -c "INSERT INTO unpublished SELECT repeat('w', 1000) FROM generate_series(1, 1500)" \
			-c "SELECT pg_switch_wal()" -c "CHECKPOINT" >/dev/null
		[[ $(src -c "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lost_slot'") == lost ]] && break
	done
	src -c "ALTER SYSTEM RESET max_slot_wal_keep_size" -c "SELECT pg_reload_conf()" >/dev/null
	[ "$(src -c "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lost_slot'")" = lost ]
	if ((MAJOR >= 17)); then
		[ "$(src -c "SELECT invalidation_reason FROM pg_replication_slots WHERE slot_name = 'lost_slot'")" = wal_removed ]
		reason='invalidation_reason is wal_removed'
	else
		reason='wal_status is lost'
	fi
	run pg-walcat -d "$SRC_URL" --slot lost_slot --publication idle_pub --endpos now
	echo "$output"
	[ "$status" -eq 4 ]
	[[ $output == *"replication slot \"lost_slot\" is invalidated ($reason)"* ]]
	# Invalidated between pg-walcat's preflight and its START_REPLICATION:
	# the server's own words for this version must also mean exit 4.
	run "$BATS_FILE_TMPDIR/repl-probe" "$SRC_URL" lost_slot idle_pub
	echo "$output"
	[[ $output == "4 $expect"* ]]
	src -c "SELECT pg_drop_replication_slot('lost_slot')"
}

check_messages_streaming() {
	new_slot stream_slot "$SRC"
	src <<'SQL'
SELECT pg_logical_emit_message(false, 'app', 'outside');
BEGIN;
SELECT pg_logical_emit_message(true, 'app', 'inside');
INSERT INTO stream_t SELECT g, repeat('s', 50) FROM generate_series(1, 20000) g;
SAVEPOINT sp;
INSERT INTO stream_t SELECT g, 'rolled back' FROM generate_series(20001, 25000) g;
ROLLBACK TO sp;
UPDATE stream_t SET v = 'updated' WHERE id % 1000 = 0;
COMMIT;
BEGIN;
INSERT INTO stream_t SELECT g, 'aborted' FROM generate_series(30001, 40000) g;
ROLLBACK;
SQL
	local out=$BATS_TEST_TMPDIR/stream.pgcs
	pg-walcat -d "$SRC_URL" --slot stream_slot --publication stream_pub --endpos now \
		>"$out" 2>"$BATS_TEST_TMPDIR/walcat.log"
	cat "$BATS_TEST_TMPDIR/walcat.log"
	grep -q '(1 streamed, ' "$BATS_TEST_TMPDIR/walcat.log"
	[ "$(grep -c "^MESSAGE	n	[0-9A-F]*/[0-9A-F]*	app	$(printf outside | xxd -p)\$" "$out")" = 1 ]
	[ "$(grep -c "^MESSAGE	t	[0-9A-F]*/[0-9A-F]*	app	$(printf inside | xxd -p)\$" "$out")" = 1 ]
	[ "$(grep -c '^BEGIN	' "$out")" = 1 ]
	[ "$(grep -c '^INSERT	public	stream_t	' "$out")" = 20000 ]
	run grep -c 'rolled back\|aborted' "$out"
	[ "$output" = 0 ]
	pg-apply -d "$TGT_URL" <"$out"
	same_table stream_t
}

check_bootstrap() {
	src -c "INSERT INTO boot_t SELECT g, md5(g::text), 0 FROM generate_series(1, 30000) g"
	cat >"$BATS_TEST_TMPDIR/writes.sql" <<'SQL'
\set k random(1, 40000)
INSERT INTO boot_t VALUES (:k, 'new', 1) ON CONFLICT (id) DO UPDATE SET n = boot_t.n + 1, v = 'bumped';
DELETE FROM boot_t WHERE id = :k + 7;
SQL
	pgbench -n -c 2 -T 4 -R 300 -f "$BATS_TEST_TMPDIR/writes.sql" "$SRC_URL" >"$BATS_TEST_TMPDIR/pgbench.log" 2>&1 &
	local writer=$! slot consistent snapshot
	sleep 0.5
	mkfifo "$BATS_TEST_TMPDIR/hold"
	pg-slot create -d "$SRC_URL" --slot boot_slot --export-snapshot <"$BATS_TEST_TMPDIR/hold" >"$BATS_TEST_TMPDIR/slot.out" &
	local holder=$!
	exec 7>"$BATS_TEST_TMPDIR/hold"
	wait_until 20 test -s "$BATS_TEST_TMPDIR/slot.out"
	IFS=$'\t' read -r slot consistent snapshot <"$BATS_TEST_TMPDIR/slot.out"
	[ "$slot" = boot_slot ]
	pg-snapshot-dump -d "$SRC_URL" --snapshot "$snapshot" --position "$consistent" --slot boot_slot \
		--publication boot_pub --jobs 2 --split-rows 5000 -q |
		pg-apply -d "$TGT_URL" --checkpoint "$BATS_TEST_TMPDIR/boot_slot.lsn"
	local codes=("${PIPESTATUS[@]}")
	exec 7>&-
	wait "$holder"
	[ "${codes[0]}" -eq 0 ]
	[ "${codes[1]}" -eq 0 ]
	[ "$(tgt -c "SELECT applied_lsn FROM pgsync.job WHERE job = 'boot_slot'")" = "$consistent" ]
	wait "$writer"
	grep -q 'number of transactions actually processed: [1-9]' "$BATS_TEST_TMPDIR/pgbench.log"
	catch_up boot_slot boot_pub
	same_table boot_t
}

check_idle() {
	local ack=$BATS_TEST_TMPDIR/idle.lsn start target
	new_slot idle_slot "$SRC"
	start=$(src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'idle_slot'")
	start_pipe idle_slot idle_pub "$ack" --status-interval 200ms --heartbeat-interval 500ms
	# Writes the publication does not carry: the slot must still move past them.
	src -c "INSERT INTO unpublished SELECT 'x' FROM generate_series(1, 1000)"
	target=$(src -c "SELECT pg_current_wal_lsn()")
	local moved=0 i c
	for ((i = 0; i < 150; i++)); do
		c=$(src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'idle_slot'")
		if (($(lsn_num "$c") >= $(lsn_num "$target"))); then
			moved=1
			break
		fi
		sleep 0.1
	done
	# SIGTERM: pg-walcat stops between transactions, pg-apply at its EOF.
	kill -TERM "$WPID"
	local wrc=0 arc=0
	wait "$WPID" || wrc=$?
	wait "$APID" || arc=$?
	cat "$BATS_TEST_TMPDIR/walcat.log" "$BATS_TEST_TMPDIR/apply.log"
	echo "slot at $c (started at $start), wanted $target; pg-walcat exited $wrc, pg-apply $arc"
	[ "$moved" = 1 ]
	[ "$wrc" -eq 0 ]
	[ "$arc" -eq 0 ]
	a=$(tgt -c "SELECT applied_lsn FROM pgsync.job WHERE job = 'idle_slot'")
	(($(lsn_num "$c") <= $(lsn_num "$a")))
}

# --- one test per check and major ---------------------------------------------------

@test "PostgreSQL 14: every column type (arrays, enum, domain, composite, ranges, json, edge values) round-trips through pg-walcat | pg-apply" { on_major 14 check_types; }
@test "PostgreSQL 15: every column type (arrays, enum, domain, composite, ranges, json, edge values) round-trips through pg-walcat | pg-apply" { on_major 15 check_types; }
@test "PostgreSQL 16: every column type (arrays, enum, domain, composite, ranges, json, edge values) round-trips through pg-walcat | pg-apply" { on_major 16 check_types; }
@test "PostgreSQL 17: every column type (arrays, enum, domain, composite, ranges, json, edge values) round-trips through pg-walcat | pg-apply" { on_major 17 check_types; }
@test "PostgreSQL 18: every column type (arrays, enum, domain, composite, ranges, json, edge values) round-trips through pg-walcat | pg-apply" { on_major 18 check_types; }

@test "PostgreSQL 14: kill -9 of the pipeline mid-stream acknowledges nothing unapplied, and a rerun applies every transaction exactly once" { on_major 14 check_crash; }
@test "PostgreSQL 15: kill -9 of the pipeline mid-stream acknowledges nothing unapplied, and a rerun applies every transaction exactly once" { on_major 15 check_crash; }
@test "PostgreSQL 16: kill -9 of the pipeline mid-stream acknowledges nothing unapplied, and a rerun applies every transaction exactly once" { on_major 16 check_crash; }
@test "PostgreSQL 17: kill -9 of the pipeline mid-stream acknowledges nothing unapplied, and a rerun applies every transaction exactly once" { on_major 17 check_crash; }
@test "PostgreSQL 18: kill -9 of the pipeline mid-stream acknowledges nothing unapplied, and a rerun applies every transaction exactly once" { on_major 18 check_crash; }

@test "PostgreSQL 14: a dropped slot stops pg-walcat with exit 4, at preflight and at START_REPLICATION" { on_major 14 check_slot_dropped; }
@test "PostgreSQL 15: a dropped slot stops pg-walcat with exit 4, at preflight and at START_REPLICATION" { on_major 15 check_slot_dropped; }
@test "PostgreSQL 16: a dropped slot stops pg-walcat with exit 4, at preflight and at START_REPLICATION" { on_major 16 check_slot_dropped; }
@test "PostgreSQL 17: a dropped slot stops pg-walcat with exit 4, at preflight and at START_REPLICATION" { on_major 17 check_slot_dropped; }
@test "PostgreSQL 18: a dropped slot stops pg-walcat with exit 4, at preflight and at START_REPLICATION" { on_major 18 check_slot_dropped; }

@test "PostgreSQL 14: a slot invalidated by max_slot_wal_keep_size stops pg-walcat with exit 4 (wal_status lost; server says \"cannot read from logical replication slot\")" { on_major 14 check_slot_invalidated; }
@test "PostgreSQL 15: a slot invalidated by max_slot_wal_keep_size stops pg-walcat with exit 4 (wal_status lost; server says \"cannot read from logical replication slot\")" { on_major 15 check_slot_invalidated; }
@test "PostgreSQL 16: a slot invalidated by max_slot_wal_keep_size stops pg-walcat with exit 4 (wal_status lost; server says \"can no longer get changes from replication slot\")" { on_major 16 check_slot_invalidated; }
@test "PostgreSQL 17: a slot invalidated by max_slot_wal_keep_size stops pg-walcat with exit 4 (invalidation_reason wal_removed; server says \"can no longer get changes from replication slot\")" { on_major 17 check_slot_invalidated; }
@test "PostgreSQL 18: a slot invalidated by max_slot_wal_keep_size stops pg-walcat with exit 4 (invalidation_reason wal_removed; server says \"can no longer access replication slot\")" { on_major 18 check_slot_invalidated; }

@test "PostgreSQL 14: logical messages become MESSAGE records and a streamed large transaction applies whole, without its aborted subtransaction" { on_major 14 check_messages_streaming; }
@test "PostgreSQL 15: logical messages become MESSAGE records and a streamed large transaction applies whole, without its aborted subtransaction" { on_major 15 check_messages_streaming; }
@test "PostgreSQL 16: logical messages become MESSAGE records and a streamed large transaction applies whole, without its aborted subtransaction" { on_major 16 check_messages_streaming; }
@test "PostgreSQL 17: logical messages become MESSAGE records and a streamed large transaction applies whole, without its aborted subtransaction" { on_major 17 check_messages_streaming; }
@test "PostgreSQL 18: logical messages become MESSAGE records and a streamed large transaction applies whole, without its aborted subtransaction" { on_major 18 check_messages_streaming; }

@test "PostgreSQL 14: bootstrap at an exported snapshot under concurrent writes, then streaming from the slot, leaves the target identical" { on_major 14 check_bootstrap; }
@test "PostgreSQL 15: bootstrap at an exported snapshot under concurrent writes, then streaming from the slot, leaves the target identical" { on_major 15 check_bootstrap; }
@test "PostgreSQL 16: bootstrap at an exported snapshot under concurrent writes, then streaming from the slot, leaves the target identical" { on_major 16 check_bootstrap; }
@test "PostgreSQL 17: bootstrap at an exported snapshot under concurrent writes, then streaming from the slot, leaves the target identical" { on_major 17 check_bootstrap; }
@test "PostgreSQL 18: bootstrap at an exported snapshot under concurrent writes, then streaming from the slot, leaves the target identical" { on_major 18 check_bootstrap; }

@test "PostgreSQL 14: writes only to unpublished tables still move the slot's confirmed position, never past the target" { on_major 14 check_idle; }
@test "PostgreSQL 15: writes only to unpublished tables still move the slot's confirmed position, never past the target" { on_major 15 check_idle; }
@test "PostgreSQL 16: writes only to unpublished tables still move the slot's confirmed position, never past the target" { on_major 16 check_idle; }
@test "PostgreSQL 17: writes only to unpublished tables still move the slot's confirmed position, never past the target" { on_major 17 check_idle; }
@test "PostgreSQL 18: writes only to unpublished tables still move the slot's confirmed position, never past the target" { on_major 18 check_idle; }
