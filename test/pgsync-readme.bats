#!/usr/bin/env bats
# The README's command examples, extracted from README.md and run exactly as
# written against real servers: the live pipe, and an archive made with
# scripts/archive-segment that rebuilds a new target (whose roles differ from
# the source's) identical to the source.

load lib/cluster
load pgsync-helpers

setup_file() {
	cluster_start src
	cluster_start tgt
	# Owned by, and granted to, roles the targets do not have.
	psql_at src -c "CREATE ROLE rd_owner; CREATE ROLE rd_reader;
		CREATE TABLE rd_t (id int PRIMARY KEY, v text); ALTER TABLE rd_t OWNER TO rd_owner;
		GRANT SELECT ON rd_t TO rd_reader;
		INSERT INTO rd_t SELECT g, 'v' || g FROM generate_series(1, 300) g;
		CREATE PUBLICATION p FOR TABLE rd_t"
	psql_at tgt -c "CREATE TABLE rd_t (id int PRIMARY KEY, v text)" -c "CREATE DATABASE rebuilt"
}

teardown_file() {
	[[ ! -s $BATS_FILE_TMPDIR/pipe.pid ]] || kill -TERM -- "-$(<"$BATS_FILE_TMPDIR/pipe.pid")" 2>/dev/null || true
	cluster_stop_all
}

# readme_block N: the Nth indented block of the README's section on how the
# programs compose, without its indentation.
readme_block() {
	awk -v want="$1" '
		/^They compose/ { on = 1 }
		/^## / && on && !/^## The programs/ { on = 0 }
		on && /^    / { if (!inb) { n++; inb = 1 } if (n == want) print substr($0, 5); next }
		on && $0 != "" { inb = 0 }
	' "$PGSYNC_ROOT/README.md"
}

# A working directory where the README's relative paths resolve.
workdir() {
	mkdir -p "$BATS_FILE_TMPDIR/w"
	ln -sfn "$PGSYNC_ROOT/scripts" "$BATS_FILE_TMPDIR/w/scripts"
	echo "$BATS_FILE_TMPDIR/w"
}

@test "README: the live pipe pg-walcat | pg-apply, as written, keeps the target identical" {
	block=$(readme_block 1)
	[[ $block == *"pg-walcat -d \"\$SRC\""*"| pg-apply -d \"\$TGT\" --checkpoint st/applied.lsn"* ]]
	psql_at tgt -c "TRUNCATE rd_t"
	# The pipe streams changes made after its slot exists: the target starts
	# with the rows the source has now.
	psql_at src -c "COPY rd_t TO STDOUT" | psql_at tgt -c "COPY rd_t FROM STDIN"
	cd "$(workdir)"
	SRC=$src_URL TGT=$tgt_URL setsid bash -c "$block" >"$BATS_FILE_TMPDIR/pipe.log" 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/pipe.pid"
	wait_until 20 slot_exists s
	psql_at src -c "INSERT INTO rd_t SELECT g, 'live ' || g FROM generate_series(301, 400) g;
		UPDATE rd_t SET v = 'changed' WHERE id % 7 = 0; DELETE FROM rd_t WHERE id % 11 = 0"
	wait_until 30 same_tables rd_t
	kill -TERM -- "-$(<"$BATS_FILE_TMPDIR/pipe.pid")"
	rm -f "$BATS_FILE_TMPDIR/pipe.pid"
	wait_until 20 eval '[[ $(psql_at src -c "SELECT active FROM pg_replication_slots WHERE slot_name = '"'s'"'") == f ]]'
	psql_at src -c "SELECT pg_drop_replication_slot('s')" >/dev/null
}

@test "README: the archive, as written, rebuilds a new target whose roles differ from the source's" {
	block=$(readme_block 2)
	[[ $block == *"scripts/archive-segment --init"*"--no-owner --no-privileges"*"pg-apply -d \"\$TGT\" archive/*.pgcs.zst"* ]]
	cd "$(workdir)"
	rebuilt=${tgt_URL/dbname=postgres/dbname=rebuilt}
	run env SRC="$src_URL" TGT="$rebuilt" bash -e -c "$block"
	echo "$output"
	[ "$status" -eq 0 ]
	ls archive/base-*.pgcs.zst archive/seg-*.pgcs.zst
	[[ $(table_checksum "$rebuilt" rd_t) == $(table_checksum "$src_URL" rd_t) ]]
}
