#!/usr/bin/env bats
# pg-apply never commits part of a source transaction: whatever error ends
# it (a damaged compressed frame, a malformed line, a truncated stream, a
# signal), the target holds whole transactions only, none of them past the
# position recorded in pgsync.job. The streams are written by hand (awk), so
# where a frame ends and where the error comes is exact.
#
# The target is a LATIN1 database owned by a role that is not a superuser,
# as pg-apply runs against most targets.

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start pg
	psql_at pg -c "CREATE ROLE applier LOGIN"
	psql_at pg -c "CREATE DATABASE tgt OWNER applier ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	export tgt_URL="$pg_URL dbname=tgt user=applier"
	psql -X -q -v ON_ERROR_STOP=1 -d "$tgt_URL" -c 'CREATE TABLE "Items" (id int PRIMARY KEY, v text)'
}

teardown() {
	kill_test_pids
}

teardown_file() {
	cluster_stop_all
}

q() {
	psql -X -v ON_ERROR_STOP=1 -qAt -d "$tgt_URL" -c "$1"
}

# gen_stream OUT SPEC...: a stream of transactions. SPEC is XID:ROWS:WIDTH,
# each transaction inserting ROWS rows of WIDTH characters into "Items",
# ids counting on from FIRST_ID (1), transaction XID committing at XID*0x1000 and ending
# 0x10 after. XID:ROWS:WIDTH:AT puts a line end exactly at decoded offset
# AT in that transaction (one row padded to reach it). Prints, one line per
# transaction, "XID END_LSN FIRST_ID LAST_ID".
gen_stream() {
	local out=$1
	shift
	awk -v specs="$*" -v out="$out" -v id0="${FIRST_ID:-1}" '
	function emit(s) { printf "%s\n", s >out; off += length(s) + 1 }
	function row(id, w,   v) { v = sprintf("%0" w "d", id); gsub(/0/, "x", v); return "INSERT\tpublic\tItems\t" id "\t" v }
	BEGIN {
		T = "2026-12-01 00:00:00.000000+00"
		emit("PGCS\t1\t7442718406132410263\t1\t-\t0/1000\tproducer=hand")
		emit("RELATION\tpublic\tItems\t1\td\t2\tid\t23\t-1\tk\tv\t25\t-1\t-")
		n = split(specs, sp, " "); id = id0 - 1
		for (i = 1; i <= n; i++) {
			split(sp[i], f, ":"); xid = f[1]; rows = f[2]; w = f[3]; at = f[4] + 0
			lsn = sprintf("0/%X", xid * 4096); end = sprintf("0/%X", xid * 4096 + 16)
			emit("BEGIN\t" xid "\t" lsn "\t" T)
			first = id + 1
			for (r = 0; r < rows; r++) {
				id++
				line = row(id, w)
				if (at > 0 && off + length(line) + 1 + 40 > at && off < at) {
					# this row ends exactly at "at"
					line = row(id, w + (at - off - 1 - length(line)))
					at = 0
				}
				emit(line)
			}
			emit("COMMIT\t" xid "\t" lsn "\t" end "\t" T)
			print xid, end, first, id
		}
	}'
}

# wait_done_or_check XIDS_FILE: the target holds exactly the transactions
# of XIDS_FILE (from gen_stream) up to one of them, and that one is the last
# the recorded position covers: whole transactions, none past the record.
whole_transactions_only() {
	local list=$1 job=$2 got applied want_rows=0 xid end first last covered=""
	{
		read -r got
		read -r applied
	} < <(q "SELECT count(*) || ' ' || coalesce(max(id), 0) FROM \"Items\"; SELECT coalesce((SELECT applied_lsn::text FROM pgsync.job WHERE job = '$job'), '')")
	while read -r xid end first last; do
		if [[ -n $applied ]] && (($(lsn_num "$end") <= $(lsn_num "$applied"))); then
			want_rows=$last covered=$xid
		fi
	done <"$list"
	[[ $got == "$want_rows $want_rows" ]] ||
		{ echo "rows (count max) $got, but the recorded position ${applied:-none} covers transactions up to ${covered:-none}: $want_rows rows"; return 1; }
}

# The next run starts a new job on an empty table (pgsync's schema exists
# after the first run).
reset_target() {
	q 'TRUNCATE "Items"; DO $$ BEGIN IF to_regclass($r$pgsync.job$r$) IS NOT NULL THEN DELETE FROM pgsync.job; DELETE FROM pgsync.job_runtime; END IF; END $$' >/dev/null
}

@test "a batch due while its zstd frame is unverified never commits in the middle of the next transaction where the frame checks out" {
	local d=$BATS_TEST_TMPDIR size last runs=0
	# Frame 1: transaction 1 (more than --max-batch-bytes: the batch is due
	# at its COMMIT) and transaction 2, one of whose lines ends exactly where
	# the reader's first decoded piece of the frame ends (128 kB,
	# ZSTD_DStreamOutSize()), so the frame checks out while transaction 2 is
	# half read. Transaction 1's size moves that place through transaction
	# 2. Frame 2: transaction 3, its checksum damaged.
	local n1 last_id
	for n1 in 95 120 150 175; do
		reset_target
		last_id=$((n1 + 150))
		gen_stream "$d/f1" 1:$n1:700 2:150:700:131072 >"$d/list"
		FIRST_ID=$((last_id + 1)) gen_stream "$d/f2" 3:10:50 >>"$d/list"
		sed -i '1,2d' "$d/f2"
		zstd -q --check -c "$d/f1" >"$d/s.zst"
		zstd -q --check -c "$d/f2" >"$d/f2.zst"
		size=$(stat -c %s "$d/f2.zst")
		last=$(od -An -tu1 -j $((size - 1)) -N1 "$d/f2.zst")
		printf "$(printf '\\%03o' $((last ^ 1)))" | dd of="$d/f2.zst" bs=1 seek=$((size - 1)) conv=notrunc status=none
		cat "$d/f2.zst" >>"$d/s.zst"
		run --separate-stderr pg-apply -d "$tgt_URL" --job atomic --max-batch-bytes 64kB "$d/s.zst"
		[ "$status" -eq 1 ]
		[[ $stderr == *"checksum"* ]]
		whole_transactions_only "$d/list" atomic || { echo "(transaction 1 of $n1 rows)"; return 1; }
		runs=$((runs + 1))
	done
	# The clean stream after the damaged one: nothing applied twice.
	zstd -q --check -c "$d/f1" >"$d/good.zst"
	zstd -q --check -c "$d/f2" >>"$d/good.zst"
	run pg-apply -d "$tgt_URL" --job atomic --max-batch-bytes 64kB "$d/good.zst"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT count(*) || ' ' || max(id) FROM \"Items\"")" = "$((last_id + 10)) $((last_id + 10))" ]
	echo "# $runs damaged streams, each left whole transactions only" >&3
}

@test "an error at every line of a stream of multi-batch transactions leaves whole transactions only, none past the recorded position" {
	local d=$BATS_TEST_TMPDIR lines k status tried=0 kinds
	# Two transactions of 12 rows of 2000 bytes (24 kB), batches of 8 kB:
	# every transaction is a batch of its own and a COPY after 4 rows.
	gen_stream "$d/s" 1:12:2000 2:12:2000 >"$d/list"
	lines=$(wc -l <"$d/s")
	for ((k = 2; k <= lines; k++)); do
		# A malformed line in place of line k (exit 5), and the stream cut
		# in the middle of line k (exit 1): both at every line.
		for kinds in malformed cut; do
			reset_target
			if [[ $kinds == malformed ]]; then
				awk -v k="$k" 'NR == k { print "NOSUCHRECORD\tx"; next } { print }' "$d/s" >"$d/bad"
			else
				{ head -n $((k - 1)) "$d/s"; sed -n "${k}p" "$d/s" | head -c 20; } >"$d/bad"
			fi
			status=0
			pg-apply -d "$tgt_URL" --job every --max-batch-bytes 8kB --copy-threshold 4 "$d/bad" 2>"$d/err" || status=$?
			if [[ $kinds == malformed ]]; then
				[ "$status" -eq 5 ] || { echo "line $k malformed: exit $status: $(<"$d/err")"; return 1; }
			else
				[ "$status" -eq 1 ] || { echo "line $k cut: exit $status: $(<"$d/err")"; return 1; }
			fi
			whole_transactions_only "$d/list" every || { echo "($kinds at line $k)"; return 1; }
			tried=$((tried + 1))
		done
	done
	echo "# $tried injected errors, each left whole transactions only" >&3
}

@test "seeded bit flips of a -z archive of 100-row transactions, batches smaller than one (ATOMIC_FLIPS, 20 by default): whole transactions only" {
	local d=$BATS_TEST_TMPDIR i status size off bit flips=${ATOMIC_FLIPS:-20} rejected=0 clean=0
	# Twenty transactions of 100 rows of 640 bytes, in frames of about
	# 300 kB (four transactions each) with a damaged checksum mid-way.
	: >"$d/list"
	: >"$d/s.zst"
	for i in 0 1 2 3 4; do
		FIRST_ID=$((i * 400 + 1)) gen_stream "$d/p2" $((i * 4 + 1)):100:640 $((i * 4 + 2)):100:640 $((i * 4 + 3)):100:640 $((i * 4 + 4)):100:640 >>"$d/list"
		((i == 0)) || sed -i '1,2d' "$d/p2"
		zstd -q --check -c "$d/p2" >>"$d/s.zst"
	done
	size=$(stat -c %s "$d/s.zst")
	RANDOM=25
	for ((i = 0; i < flips; i++)); do
		reset_target
		off=$(((RANDOM * 32768 + RANDOM) % size)) bit=$((RANDOM % 8))
		cp "$d/s.zst" "$d/f.zst"
		printf "$(printf '\\%03o' $(($(od -An -tu1 -j "$off" -N1 "$d/s.zst") ^ (1 << bit))))" |
			dd of="$d/f.zst" bs=1 seek="$off" conv=notrunc status=none
		status=0
		pg-apply -d "$tgt_URL" --job flips --max-batch-bytes 64kB "$d/f.zst" 2>"$d/err" || status=$?
		((status == 0)) && clean=$((clean + 1)) || rejected=$((rejected + 1))
		whole_transactions_only "$d/list" flips || { echo "flip $i (byte $off bit $bit, exit $status): $(<"$d/err")"; return 1; }
	done
	echo "# $flips bit flips: $rejected rejected, $clean applied whole; none left part of a transaction" >&3
}

@test "SIGTERM and SIGKILL at seeded moments of a multi-batch apply leave whole transactions only (ATOMIC_KILLS, 6 by default)" {
	local d=$BATS_TEST_TMPDIR i kills=${ATOMIC_KILLS:-6} pid sig status delay stopped=0 killed=0 completed=0
	# Thirty transactions of 100 rows of 640 bytes, read through a pipe
	# that delivers them in pieces, so the signal finds the apply anywhere:
	# inside a COPY, between statements, waiting for a commit.
	gen_stream "$d/s" $(for i in $(seq 1 30); do printf '%d:100:640 ' "$i"; done) >"$d/list"
	RANDOM=35
	for ((i = 0; i < kills; i++)); do
		reset_target
		sig=$((i % 2 ? 9 : 15)) delay=$((RANDOM % 150))
		{ split -n l/20 --filter='cat; sleep 0.02' "$d/s"; } |
			pg-apply -d "$tgt_URL" --job kills --max-batch-bytes 64kB 2>"$d/err" &
		pid=$!
		echo "$pid" >>"$BATS_TEST_TMPDIR/pids"
		sleep "0.$(printf '%03d' $((100 + delay)))"
		kill -"$sig" "$pid" 2>/dev/null || true
		status=0
		wait "$pid" || status=$?
		case $status in
			0) ((sig == 15)) && stopped=$((stopped + 1)) || completed=$((completed + 1)) ;;
			137) killed=$((killed + 1)) ;;
			*) echo "signal $sig: exit $status: $(<"$d/err")"; return 1 ;;
		esac
		whole_transactions_only "$d/list" kills || { echo "(signal $sig after 0.$((100 + delay)) s)"; return 1; }
	done
	echo "# $kills signals: $stopped stopped cleanly by SIGTERM, $killed killed, $completed too late; whole transactions only" >&3
}

# log_mark: the server log's length now; log_since MARK PATTERN: whether the
# log holds PATTERN (fixed text) after MARK, waiting up to 10 s, since the
# backend may read pg-apply's last message after pg-apply has exited.
log_mark() {
	cluster_log pg 1000000 | wc -l
}

log_since() {
	local i
	for ((i = 0; i < 100; i++)); do
		cluster_log pg 1000000 | tail -n +$(($1 + 1)) | grep -qF -- "$2" && return 0
		sleep 0.1
	done
	echo "the server log has no \"$2\" since line $1:"
	cluster_log pg 1000000 | tail -n +$(($1 + 1)) | tail -n 20
	return 1
}

@test "an error while a COPY is in flight fails the COPY on the target with pg-apply's message, never ends it as a success" {
	local d=$BATS_TEST_TMPDIR mark status
	# Lines 17-30 are transaction 2: BEGIN, 12 rows, COMMIT. With
	# --copy-threshold 4 its rows from the fifth go by COPY, so at line 25
	# (its eighth row) a COPY is in flight.
	gen_stream "$d/s" 1:12:2000 2:12:2000 >"$d/list"
	reset_target
	awk 'NR == 25 { print "NOSUCHRECORD\tx"; next } { print }' "$d/s" >"$d/bad"
	mark=$(log_mark)
	status=0
	pg-apply -d "$tgt_URL" --job copyfail --max-batch-bytes 8kB --copy-threshold 4 "$d/bad" 2>"$d/err" || status=$?
	[ "$status" -eq 5 ] || { echo "exit $status: $(<"$d/err")"; return 1; }
	whole_transactions_only "$d/list" copyfail
	[ "$(q 'SELECT count(*) FROM "Items" WHERE id > 12')" = 0 ]
	# The server failed the COPY with pg-apply's own error (its text
	# without the "pg-apply: error: " prefix): PQputCopyEnd carried it.
	log_since "$mark" "COPY from stdin failed: pg-apply stopped: $(sed -n 's/^pg-apply: error: //p' "$d/err" | head -n 1)"

	# The stream cut in the middle of line 25: the batch is rolled back
	# before pg-apply exits, its COPY failed the same way.
	reset_target
	{ head -n 24 "$d/s"; sed -n 25p "$d/s" | head -c 20; } >"$d/cut"
	mark=$(log_mark)
	status=0
	pg-apply -d "$tgt_URL" --job copyfail --max-batch-bytes 8kB --copy-threshold 4 "$d/cut" 2>"$d/err" || status=$?
	[ "$status" -eq 1 ] || { echo "exit $status: $(<"$d/err")"; return 1; }
	whole_transactions_only "$d/list" copyfail
	log_since "$mark" "COPY from stdin failed: batch abandoned"
}

@test "a fatal error outside the apply (a later FILE gone while a transaction spans files) rolls back the open transaction and fails its COPY" {
	local d=$BATS_TEST_TMPDIR mark pid fd status i
	# FILE 1 (a fifo) ends inside transaction 2, in its COPY; FILE 2, which
	# holds the rest, is gone by the time pg-apply needs it: log_fatal()
	# in open_next_input(), whose hook must end the transaction.
	gen_stream "$d/s" 1:12:2000 2:12:2000 >"$d/list"
	sed -n '26,$p' "$d/s" >"$d/f2"
	mkfifo "$d/f1"
	reset_target
	mark=$(log_mark)
	pg-apply -d "$tgt_URL" --job files --checkpoint "$d/cp" --max-batch-bytes 8kB --copy-threshold 4 \
		"$d/f1" "$d/f2" 2>"$d/err" &
	pid=$!
	echo "$pid" >>"$BATS_TEST_TMPDIR/pids"
	exec {fd}>"$d/f1"
	head -n 16 "$d/s" >&$fd
	for ((i = 0; i < 100; i++)); do
		[ "$(q 'SELECT count(*) FROM "Items"')" = 12 ] && break
		sleep 0.1
	done
	[ "$(q 'SELECT count(*) FROM "Items"')" = 12 ]
	sed -n '17,25p' "$d/s" >&$fd
	for ((i = 0; i < 100; i++)); do
		[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-apply' AND query LIKE 'COPY%'")" = 1 ] && break
		sleep 0.1
	done
	[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-apply' AND query LIKE 'COPY%'")" = 1 ]
	rm "$d/f2"
	exec {fd}>&-
	status=0
	wait "$pid" || status=$?
	[ "$status" -eq 2 ] || { echo "exit $status: $(<"$d/err")"; return 1; }
	[[ $(<"$d/err") == *"cannot open \"$d/f2\""* ]]
	whole_transactions_only "$d/list" files
	[ "$(q 'SELECT count(*) FROM "Items"')" = 12 ]
	log_since "$mark" "COPY from stdin failed: pg-apply stopped: cannot open \"$d/f2\""
	# The checkpoint file says transaction 1, never past it.
	[ "$(head -n 1 "$d/cp")" = "$(awk 'NR == 1 { print $2 }' "$d/list")" ]
}
