#!/usr/bin/env bats
# pg-walcat in operation: --endpos and exactly-once across runs, the
# acknowledgement contract, signals, kill -9, server restarts, idle
# positions, limits, errors that end a run, and an independent cross-check
# against pg_recvlogical with test_decoding.

# One of the longest files: started first (test/run-bats).
# run-bats: slow 2

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	cluster_start src --set logical_decoding_work_mem=64kB
	psql_at src -c "CREATE PUBLICATION pub FOR ALL TABLES"
}

teardown_file() {
	cluster_stop_all
}

# Programs a test started in the background (bg CMD...): stopped after it
# even when it failed half-way, and cut off from bats' own descriptors.
bg() {
	"$@" 3>&- &
	echo "$!" >>"$BATS_TEST_TMPDIR/bg.pids"
}

teardown() {
	local p
	if [[ -f $BATS_TEST_TMPDIR/bg.pids ]]; then
		while read -r p; do kill "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/bg.pids"
	fi
}

# num(lsn) for awk (mawk has no strtonum): the LSN as a number.
AWK_LSN='function hex(s,  i, v) { v = 0; s = toupper(s); for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789ABCDEF", substr(s, i, 1)) - 1; return v }
function num(l,  p) { split(l, p, "/"); return hex(p[1]) * 4294967296 + hex(p[2]) }'

confirmed_is() {
	[ "$(confirmed "$1")" = "$2" ]
}

# ids FILE TABLE: the first value of every INSERT into TABLE, one a line.
ids() {
	awk -F'\t' -v t="$2" '$1 == "INSERT" && $3 == t { print $4 }' "$1"
}

# write_ack FILE LSN SLOT: a checkpoint file as the downstream writes it.
write_ack() {
	local sysid
	sysid=$(psql_at src -c "SELECT system_identifier FROM pg_control_system()")
	printf '%s\nsysid=%s\nslot=%s\n' "$2" "$sysid" "$3" >"$1.tmp"
	mv "$1.tmp" "$1"
}

# apply_sim FILE: what a reader following the spec applies: a header drops
# an open transaction; a transaction whose commit LSN is below the progress
# so far is skipped. Prints the first value of every applied INSERT.
apply_sim() {
	awk -F'\t' '
		'"$AWK_LSN"'
		$1 == "PGCS" { n = 0; open = 0 }
		$1 == "BEGIN" { open = 1; n = 0; skip = (num($3) < progress) }
		$1 == "INSERT" && open { rows[n++] = $4 }
		$1 == "COMMIT" && open { if (!skip) { for (i = 0; i < n; i++) print rows[i]; progress = num($4) } open = 0 }
	' "$1"
}

@test "--endpos exactly at a commit, between transactions and inside one; --endpos X then --start X gives every transaction once" {
	new_slot ep
	new_slot ep_adv
	psql_at src -c "CREATE TABLE ep (id int PRIMARY KEY)"
	for i in 1 2 3 4 5; do psql_at src -c "INSERT INTO ep VALUES ($i)"; done
	local mid
	mid=$(psql_at src -c "BEGIN" -c "INSERT INTO ep VALUES (6)" -c "SELECT pg_current_wal_insert_lsn()" \
		-c "INSERT INTO ep SELECT g FROM generate_series(7, 9) g" -c "COMMIT")
	psql_at src -c "INSERT INTO ep VALUES (10)"
	pg-walcat -d "$src_URL" --slot ep --publication pub --endpos now >"$BATS_TEST_TMPDIR/full"
	[ "$(ids "$BATS_TEST_TMPDIR/full" ep | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 " ]
	mapfile -t c < <(awk -F'\t' '$1 == "COMMIT" { print $3 }' "$BATS_TEST_TMPDIR/full" | tail -n 7)
	mapfile -t e < <(awk -F'\t' '$1 == "COMMIT" { print $4 }' "$BATS_TEST_TMPDIR/full" | tail -n 7)
	# c[i] and e[i] are the commit and end LSNs of the transaction that
	# inserted row i+1 (c[5] holds rows 6-9); DDL has no COMMIT record.
	local x

	# Exactly at a commit: that transaction is not below X.
	pg-walcat -d "$src_URL" --slot ep --publication pub --endpos "${c[3]}" >"$BATS_TEST_TMPDIR/a"
	[ "$(ids "$BATS_TEST_TMPDIR/a" ep | tr '\n' ' ')" = "1 2 3 " ]
	[ "$(tail -n 1 "$BATS_TEST_TMPDIR/a")" = "$(printf 'END\t%s' "${c[3]}")" ]
	# Between two transactions: everything before.
	pg-walcat -d "$src_URL" --slot ep --publication pub --endpos "${e[2]}" >"$BATS_TEST_TMPDIR/a"
	[ "$(ids "$BATS_TEST_TMPDIR/a" ep | tr '\n' ' ')" = "1 2 3 " ]
	[ "$(tail -n 1 "$BATS_TEST_TMPDIR/a")" = "$(printf 'END\t%s' "${e[2]}")" ]
	# Inside a commit record: the transaction commits below X.
	x=$(lsn_str $(($(lsn_num "${c[3]}") + 1)))
	pg-walcat -d "$src_URL" --slot ep --publication pub --endpos "$x" >"$BATS_TEST_TMPDIR/a"
	[ "$(ids "$BATS_TEST_TMPDIR/a" ep | tr '\n' ' ')" = "1 2 3 4 " ]
	# Inside a transaction's changes: it commits later, so it is not below X.
	pg-walcat -d "$src_URL" --slot ep --publication pub --endpos "$mid" >"$BATS_TEST_TMPDIR/a"
	[ "$(ids "$BATS_TEST_TMPDIR/a" ep | tr '\n' ' ')" = "1 2 3 4 5 " ]

	# Every split point: the two runs together give each row exactly once.
	for x in "${c[@]}" "${e[@]}" "$mid" "$(lsn_str $(($(lsn_num "${c[5]}") + 1)))"; do
		pg-walcat -d "$src_URL" --slot ep --publication pub --endpos "$x" >"$BATS_TEST_TMPDIR/a"
		pg-walcat -d "$src_URL" --slot ep --publication pub --start "$x" --endpos now >"$BATS_TEST_TMPDIR/b"
		[ "$(cat <(ids "$BATS_TEST_TMPDIR/a" ep) <(ids "$BATS_TEST_TMPDIR/b" ep) | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 " ]
		[ "$(head -n 1 "$BATS_TEST_TMPDIR/b" | cut -f6)" = "$x" ]
	done

	# A slot advanced to X (as pg-ack does) continues exactly there too.
	pg-walcat -d "$src_URL" --slot ep_adv --publication pub --endpos "${e[3]}" >"$BATS_TEST_TMPDIR/a"
	psql_at src -c "SELECT pg_replication_slot_advance('ep_adv', '${e[3]}')" >/dev/null
	pg-walcat -d "$src_URL" --slot ep_adv --publication pub --endpos now >"$BATS_TEST_TMPDIR/b"
	[ "$(cat <(ids "$BATS_TEST_TMPDIR/a" ep) <(ids "$BATS_TEST_TMPDIR/b" ep) | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 " ]
	# A position the slot has already passed cannot be served: continuity lost.
	run pg-walcat -d "$src_URL" --slot ep_adv --publication pub --start "${c[1]}" --endpos now
	[ "$status" -eq 4 ]
	[[ $output == *"replication slot \"ep_adv\" has confirmed ${e[3]}, beyond --start ${c[1]}"* ]]
	psql_at src -c "DROP TABLE ep"
}

@test "without --ack-file nothing is confirmed: confirmed_flush_lsn stays put while streaming" {
	new_slot noack
	local before pid
	before=$(confirmed noack)
	psql_at src -c "CREATE TABLE na (id int)"
	bg pg-walcat -d "$src_URL" --slot noack --publication pub --status-interval 100ms >"$BATS_TEST_TMPDIR/out" 2>/dev/null
	pid=$!
	for i in 1 2 3 4 5; do psql_at src -c "INSERT INTO na VALUES ($i)"; sleep 0.1; done
	wait_until 10 grep -q "^INSERT.*na.5$" "$BATS_TEST_TMPDIR/out"
	sleep 0.5
	[ "$(confirmed noack)" = "$before" ]
	kill -TERM "$pid"
	wait "$pid"
	[ "$(confirmed noack)" = "$before" ]
	psql_at src -c "DROP TABLE na"
}

@test "with --ack-file the slot follows the file and never passes it" {
	new_slot withack
	psql_at src -c "CREATE TABLE wa (id int)"
	for i in 1 2 3 4 5 6; do psql_at src -c "INSERT INTO wa VALUES ($i)"; done
	pg-walcat -d "$src_URL" --slot withack --publication pub --endpos now >"$BATS_TEST_TMPDIR/dry"
	mapfile -t e < <(awk -F'\t' '$1 == "COMMIT" { print $4 }' "$BATS_TEST_TMPDIR/dry")
	local ack=$BATS_TEST_TMPDIR/applied.lsn pid max=0 cur
	write_ack "$ack" "${e[3]}" withack
	bg pg-walcat -d "$src_URL" --slot withack --publication pub --ack-file "$ack" --status-interval 100ms \
		>/dev/null 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	for _ in $(seq 1 30); do
		cur=$(confirmed withack)
		(($(lsn_num "$cur") <= $(lsn_num "${e[3]}")))
		[ "$cur" = "${e[3]}" ] && break
		sleep 0.1
	done
	[ "$(confirmed withack)" = "${e[3]}" ]
	# More traffic; the file does not move, neither does the slot.
	psql_at src -c "INSERT INTO wa VALUES (7)"
	sleep 0.5
	[ "$(confirmed withack)" = "${e[3]}" ]
	write_ack "$ack" "${e[5]}" withack
	wait_until 5 confirmed_is withack "${e[5]}"
	kill -TERM "$pid"
	wait "$pid"
	[ "$(confirmed withack)" = "${e[5]}" ]
	# A restart resumes from the acknowledged position: row 7 only.
	pg-walcat -d "$src_URL" --slot withack --publication pub --ack-file "$ack" --endpos now >"$BATS_TEST_TMPDIR/rest"
	[ "$(ids "$BATS_TEST_TMPDIR/rest" wa | tr '\n' ' ')" = "7 " ]
	[ "$(head -n 1 "$BATS_TEST_TMPDIR/rest" | cut -f6)" = "${e[5]}" ]
	psql_at src -c "DROP TABLE wa"
}

@test "a newly acknowledged position reaches the slot within seconds, not only at the next status interval" {
	new_slot ackprobe
	psql_at src -c "CREATE TABLE ap (id int PRIMARY KEY)"
	local out=$BATS_TEST_TMPDIR/out ack=$BATS_TEST_TMPDIR/ack pid end
	bg pg-walcat -d "$src_URL" --slot ackprobe --publication pub --ack-file "$ack" --status-interval 10min \
		>"$out" 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	psql_at src -c "INSERT INTO ap VALUES (1)"
	wait_until 20 grep -q "^COMMIT" "$out"
	end=$(awk -F'\t' '$1 == "COMMIT" { e = $4 } END { print e }' "$out")
	printf '%s\n' "$end" >"$ack"
	wait_until 5 confirmed_is ackprobe "$end"
	kill -TERM "$pid"
	wait "$pid"
	psql_at src -c "DROP TABLE ap"
}

@test "an acknowledgement file from another source or slot is continuity lost (exit 4); a garbage one exit 1" {
	new_slot ackid
	local ack=$BATS_TEST_TMPDIR/applied.lsn
	printf '0/1\nsysid=12345\nslot=ackid\n' >"$ack"
	run pg-walcat -d "$src_URL" --slot ackid --publication pub --ack-file "$ack" --endpos now
	[ "$status" -eq 4 ]
	[[ $output == *"pg-walcat: error: the source is another server than the job's: system identifier "*", the job's is 12345; nothing was confirmed to it: resync required"* ]]
	write_ack "$ack" "$(confirmed ackid)" other
	run pg-walcat -d "$src_URL" --slot ackid --publication pub --ack-file "$ack" --endpos now
	[ "$status" -eq 4 ]
	[[ $output == *"is for slot \"other\", not \"ackid\""* ]]
	printf 'not an lsn\n' >"$ack"
	run pg-walcat -d "$src_URL" --slot ackid --publication pub --ack-file "$ack" --endpos now
	[ "$status" -eq 1 ]
	[[ $output == *"pg-walcat: error: "*"$ack"* ]]
	# The slot is past what the file says: what lies between is lost.
	write_ack "$ack" 0/1 ackid
	run pg-walcat -d "$src_URL" --slot ackid --publication pub --ack-file "$ack" --endpos now
	[ "$status" -eq 4 ]
	[[ $output == *"beyond 0/1 acknowledged in \"$ack\""* ]]
}

@test "an acknowledged position past the source's WAL is another server's (exit 4) before anything is confirmed; nothing is lost" {
	new_slot ackahead
	psql_at src -c "CREATE TABLE aa (id int PRIMARY KEY)"
	psql_at src -c "INSERT INTO aa VALUES (1)"
	local ack=$BATS_TEST_TMPDIR/applied.lsn before
	before=$(confirmed ackahead)
	write_ack "$ack" FF/0 ackahead
	run --separate-stderr pg-walcat -d "$src_URL" --slot ackahead --publication pub --ack-file "$ack" --endpos now
	[ "$status" -eq 4 ]
	[[ $stderr == *"pg-walcat: error: the source is another server than the job's: its WAL ends at "*", before FF/0 that the job already took from the source"*"nothing was confirmed to it"* ]]
	[ -z "$output" ]
	[ "$(confirmed ackahead)" = "$before" ]
	# While streaming: a position past what this stream wrote stops it too.
	write_ack "$ack" "$before" ackahead
	bg pg-walcat -d "$src_URL" --slot ackahead --publication pub --ack-file "$ack" --status-interval 100ms \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err"
	local pid=$! rc=0
	wait_until 20 grep -q "^COMMIT" "$BATS_TEST_TMPDIR/out"
	write_ack "$ack" FF/0 ackahead
	wait "$pid" || rc=$?
	[ "$rc" -eq 5 ]
	grep -q "pg-walcat: error: acknowledged position FF/0 in \"$ack\" is past .*, the most this run has written" "$BATS_TEST_TMPDIR/err"
	[ "$(confirmed ackahead)" = "$before" ]
	# Transactions before and after are all still delivered.
	psql_at src -c "INSERT INTO aa VALUES (2)"
	write_ack "$ack" "$before" ackahead
	pg-walcat -d "$src_URL" --slot ackahead --publication pub --ack-file "$ack" --endpos now >"$BATS_TEST_TMPDIR/rest"
	[ "$(ids "$BATS_TEST_TMPDIR/rest" aa | tr '\n' ' ')" = "1 2 " ]
	psql_at src -c "DROP TABLE aa"
}

@test "after kill -9 nothing unacknowledged is lost: the next run from the slot delivers it" {
	new_slot k9
	psql_at src -c "CREATE TABLE k9 (id int)"
	for i in 1 2 3; do psql_at src -c "INSERT INTO k9 VALUES ($i)"; done
	pg-walcat -d "$src_URL" --slot k9 --publication pub --endpos now >"$BATS_TEST_TMPDIR/dry"
	local ack=$BATS_TEST_TMPDIR/applied.lsn pid e2
	e2=$(awk -F'\t' '$1 == "COMMIT" { print $4 }' "$BATS_TEST_TMPDIR/dry" | sed -n 3p)
	write_ack "$ack" "$e2" k9
	bg pg-walcat -d "$src_URL" --slot k9 --publication pub --ack-file "$ack" --status-interval 100ms \
		>"$BATS_TEST_TMPDIR/out" 2>/dev/null
	pid=$!
	for i in 4 5 6; do psql_at src -c "INSERT INTO k9 VALUES ($i)"; done
	wait_until 10 grep -q "^INSERT.*k9.6$" "$BATS_TEST_TMPDIR/out"
	wait_until 5 confirmed_is k9 "$e2"
	kill -KILL "$pid"
	wait "$pid" || true
	# Rows 4-6 were written but never acknowledged: they come again.
	pg-walcat -d "$src_URL" --slot k9 --publication pub --endpos now >"$BATS_TEST_TMPDIR/again"
	[ "$(ids "$BATS_TEST_TMPDIR/again" k9 | tr '\n' ' ')" = "4 5 6 " ]
	psql_at src -c "DROP TABLE k9"
}

@test "SIGTERM stops at a transaction boundary with exit 0 and a final status update" {
	new_slot sigterm
	psql_at src -c "CREATE TABLE sg (id int)"
	local ack=$BATS_TEST_TMPDIR/applied.lsn pid
	bg pg-walcat -d "$src_URL" --slot sigterm --publication pub --ack-file "$ack" --status-interval 1h \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	psql_at src -c "INSERT INTO sg SELECT generate_series(1, 100)"
	wait_until 10 grep -q "^COMMIT" "$BATS_TEST_TMPDIR/out"
	# The downstream acknowledges; only the final status update can carry it.
	write_ack "$ack" "$(awk -F'\t' '$1 == "COMMIT" { print $4 }' "$BATS_TEST_TMPDIR/out")" sigterm
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	[[ $(tail -n 1 "$BATS_TEST_TMPDIR/out") =~ ^(COMMIT|POSITION)$'\t' ]]
	[ "$(ids "$BATS_TEST_TMPDIR/out" sg | wc -l)" -eq 100 ]
	[ "$(confirmed sigterm)" = "$(head -n 1 "$ack")" ]
	! grep -q error "$BATS_TEST_TMPDIR/err"
	psql_at src -c "DROP TABLE sg"
}

@test "an idle or filtered source still advances: keepalives and heartbeats become POSITION records" {
	psql_at src -c "CREATE TABLE only_this (id int)" -c "CREATE TABLE not_published (id int)" \
		-c "CREATE PUBLICATION pub_one FOR TABLE only_this"
	new_slot idle
	local pid out=$BATS_TEST_TMPDIR/out w
	bg pg-walcat -d "$src_URL" --slot idle --publication pub_one --heartbeat-interval 1s --log-level debug \
		>"$out" 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	# Writes that the publication filters out move the position past them.
	w=$(psql_at src -c "INSERT INTO not_published VALUES (1)" -c "SELECT pg_current_wal_lsn()")
	wait_until 10 awk -F'\t' -v w="$(lsn_num "$w")" "$AWK_LSN"'
		$1 == "POSITION" && num($2) >= w { found = 1 } END { exit !found }' "$out"
	# With nothing at all happening, the heartbeat (a message the source
	# writes) moves it again; no MESSAGE record shows it.
	local last
	last=$(awk -F'\t' '$1 == "POSITION" { p = $2 } END { print p }' "$out")
	wait_until 10 awk -F'\t' -v l="$last" '$1 == "POSITION" && $2 != l && seen { found = 1 } $2 == l { seen = 1 } END { exit !found }' "$out"
	! grep -q "^MESSAGE" "$out"
	! grep -q "^BEGIN" "$out"
	grep -q "heartbeat written" "$BATS_TEST_TMPDIR/err"
	kill -TERM "$pid"
	wait "$pid"
	psql_at src -c "DROP PUBLICATION pub_one" -c "DROP TABLE only_this, not_published"
}

@test "a server restart while streaming: reconnect, new header, and after the reader's discard no gap and no repeat" {
	new_slot restart
	psql_at src -c "CREATE TABLE rs (id int PRIMARY KEY)"
	local out=$BATS_TEST_TMPDIR/out pid writer
	bg pg-walcat -d "$src_URL" --slot restart --publication pub --status-interval 200ms >"$out" 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	# One row per transaction, retried until the server takes it (a commit
	# whose reply the restart cut off is retried harmlessly).
	(
		for i in $(seq 1 150); do
			until psql -X -qAt -d "$src_URL" -c "INSERT INTO rs VALUES ($i) ON CONFLICT DO NOTHING" 2>/dev/null; do
				sleep 0.05
			done
		done
	) 3>&- &
	writer=$!
	echo "$writer" >>"$BATS_TEST_TMPDIR/bg.pids"
	wait_until 20 grep -q "^INSERT.*rs.50$" "$out"
	cluster_restart src --mode fast
	wait "$writer"
	wait_until 30 grep -q "^INSERT.*rs.150$" "$out"
	kill -TERM "$pid"
	wait "$pid"
	# It did lose the connection and start a new stream.
	grep -q "reconnecting in" "$BATS_TEST_TMPDIR/err"
	[ "$(grep -c "^PGCS" "$out")" -ge 2 ]
	# What a reader applies is every row exactly once, in order.
	[ "$(apply_sim "$out" | tr "\n" " ")" = "$(seq 1 150 | tr "\n" " ")" ]
	psql_at src -c "DROP TABLE rs"
}

@test "a crash restart of the source (immediate shutdown) while streaming: the stale normal connection is replaced and streaming resumes with no gap" {
	new_slot crashrestart
	psql_at src -c "CREATE TABLE rs2 (id int PRIMARY KEY)"
	local out=$BATS_TEST_TMPDIR/out pid writer
	bg pg-walcat -d "$src_URL" --slot crashrestart --publication pub --status-interval 200ms >"$out" 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	# One row per transaction, retried until the server takes it (a commit
	# whose reply the restart cut off is retried harmlessly).
	(
		for i in $(seq 1 150); do
			until psql -X -qAt -d "$src_URL" -c "INSERT INTO rs2 VALUES ($i) ON CONFLICT DO NOTHING" 2>/dev/null; do
				sleep 0.05
			done
		done
	) 3>&- &
	writer=$!
	echo "$writer" >>"$BATS_TEST_TMPDIR/bg.pids"
	wait_until 20 grep -q "^INSERT.*rs2.50$" "$out"
	cluster_restart src --mode immediate
	wait "$writer"
	wait_until 30 grep -q "^INSERT.*rs2.150$" "$out"
	kill -TERM "$pid"
	wait "$pid"
	# It did lose the connection and start a new stream.
	grep -q "reconnecting in" "$BATS_TEST_TMPDIR/err"
	[ "$(grep -c "^PGCS" "$out")" -ge 2 ]
	# What a reader applies is every row exactly once, in order.
	[ "$(apply_sim "$out" | tr "\n" " ")" = "$(seq 1 150 | tr "\n" " ")" ]
	psql_at src -c "DROP TABLE rs2"
}

conn_file_is() {
	[[ $(cat "$1" 2>/dev/null) == "$2" ]]
}

@test "--connection-file follows the source connection: connected, reconnecting, connected again with the count, disconnected at exit" {
	new_slot connfile
	local f=$BATS_TEST_TMPDIR/connection pid
	printf 'connected\t99\n' >"$f" # left by an earlier run: replaced at startup
	bg pg-walcat -d "$src_URL" --slot connfile --publication pub --connection-file "$f" >/dev/null 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	wait_until 10 conn_file_is "$f" $'connected\t0'
	psql_at src -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'connfile'" >/dev/null
	wait_until 20 conn_file_is "$f" $'connected\t1'
	cluster_stop src --mode fast
	wait_until 20 conn_file_is "$f" $'reconnecting\t1'
	cluster_start src
	wait_until 60 conn_file_is "$f" $'connected\t2'
	kill -TERM "$pid"
	wait "$pid"
	conn_file_is "$f" $'disconnected\t2'
	# No temporary file is left beside it.
	[ "$(ls "$BATS_TEST_TMPDIR" | grep -c '^connection')" -eq 1 ]
}

@test "--connection-file that cannot be written is a usage error (exit 2) before connecting" {
	run pg-walcat -d "$src_URL" --slot nosuchslot --publication pub --connection-file /nonexistent/dir/connection
	[ "$status" -eq 2 ]
	[[ $output == *"pg-walcat: error: --connection-file: cannot create connection file \"/nonexistent/dir/connection.tmp."* ]]
}

@test "--no-loop exits 1 when the connection is lost instead of reconnecting" {
	new_slot noloop
	local pid rc=0
	bg pg-walcat -d "$src_URL" --slot noloop --publication pub --no-loop >/dev/null 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	wait_until 10 slot_active noloop
	psql_at src -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'noloop'" >/dev/null
	wait "$pid" || rc=$?
	[ "$rc" -eq 1 ]
	grep -q "pg-walcat: error: not reconnecting (--no-loop)" "$BATS_TEST_TMPDIR/err"
}

@test "a 1,000,000-row transaction is streamed through the spool with bounded memory" {
	new_slot million
	psql_at src -c "CREATE TABLE million (id int PRIMARY KEY, v text)" \
		-c "INSERT INTO million SELECT g, 'row ' || g FROM generate_series(1, 1000000) g"
	local out=$BATS_TEST_TMPDIR/out rss
	/usr/bin/time -f '%M' -o "$BATS_TEST_TMPDIR/rss" \
		pg-walcat -d "$src_URL" --slot million --publication pub --endpos now --spool-dir "$BATS_TEST_TMPDIR" >"$out"
	[ "$(grep -c "^INSERT" "$out")" -eq 1000000 ]
	[ "$(awk -F'\t' '$1 == "INSERT" { s += $4 } END { printf "%.0f", s }' "$out")" = 500000500000 ]
	[ "$(grep -c "^BEGIN" "$out")" -eq 1 ]
	[ "$(psql_at src -c "SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = 'million'")" -ge 1 ]
	rss=$(cat "$BATS_TEST_TMPDIR/rss")
	echo "# 1,000,000-row transaction: peak RSS ${rss} kB" >&3
	sanitized pg-walcat || ((rss < 40000))
	psql_at src -c "DROP TABLE million"
}

@test "a change over --max-message-bytes stops with exit 1 naming its size and the limit" {
	new_slot maxmsg
	local before
	before=$(confirmed maxmsg)
	psql_at src -c "CREATE TABLE mx (id int, v text)" -c "INSERT INTO mx VALUES (1, 'small')" \
		-c "INSERT INTO mx VALUES (2, repeat('x', 5000))"
	run pg-walcat -d "$src_URL" --slot maxmsg --publication pub --endpos now --max-message-bytes 4kB
	[ "$status" -eq 1 ]
	[[ $output =~ "pg-walcat: error: a change of "[0-9]+" bytes exceeds the limit of 4096 bytes (--max-message-bytes)" ]]
	# The transaction before it came out whole; the one with it did not.
	[[ $output == *"$(printf 'INSERT\tpublic\tmx\t1\tsmall')"* ]]
	[[ $output != *"$(printf 'INSERT\tpublic\tmx\t2\t')"* ]]
	[ "$(confirmed maxmsg)" = "$before" ]
	# Raising the limit lets it through.
	run pg-walcat -d "$src_URL" --slot maxmsg --publication pub --endpos now --max-message-bytes 8kB
	[ "$status" -eq 0 ]
	psql_at src -c "DROP TABLE mx"
}

@test "--zstd writes a zstd stream that decompresses to the plain one" {
	new_slot zs
	psql_at src -c "CREATE TABLE zs (id int)" -c "INSERT INTO zs SELECT generate_series(1, 1000)"
	local end
	pg-walcat -d "$src_URL" --slot zs --publication pub --endpos now >"$BATS_TEST_TMPDIR/plain"
	end=$(tail -n 1 "$BATS_TEST_TMPDIR/plain" | cut -f2)
	pg-walcat -d "$src_URL" --slot zs --publication pub --endpos "$end" -z >"$BATS_TEST_TMPDIR/z"
	[ "$(head -c 4 "$BATS_TEST_TMPDIR/z" | od -An -tx1 | tr -d ' ')" = 28b52ffd ]
	zstd -dc "$BATS_TEST_TMPDIR/z" | grep -v '^POSITION' >"$BATS_TEST_TMPDIR/unz"
	grep -v '^POSITION' "$BATS_TEST_TMPDIR/plain" | cmp - "$BATS_TEST_TMPDIR/unz"
	psql_at src -c "DROP TABLE zs"
}

@test "a missing slot is continuity lost (exit 4), a missing publication a preflight failure (exit 3)" {
	run pg-walcat -d "$src_URL" --slot nosuchslot --publication pub --endpos now
	[ "$status" -eq 4 ]
	[[ $output == *'pg-walcat: error: replication slot "nosuchslot" does not exist'* ]]
	new_slot nopub
	run pg-walcat -d "$src_URL" --slot nopub --publication pub,nosuchpub --endpos now
	[ "$status" -eq 3 ]
	[[ $output == *'pg-walcat: error: publication "nosuchpub" does not exist'* ]]
}

@test "a slot active for another process is an error naming its pid (exit 1)" {
	new_slot busy
	local pid holder
	bg pg_recvlogical -d "$src_URL" --slot busy --start -f /dev/null -o proto_version=1 -o publication_names=pub
	holder=$!
	wait_until 10 slot_active busy
	pid=$(psql_at src -c "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'busy'")
	run pg-walcat -d "$src_URL" --slot busy --publication pub --endpos now
	[ "$status" -eq 1 ]
	[[ $output == *"pg-walcat: error: replication slot \"busy\" is active for PID $pid"* ]]
	kill "$holder"
}

@test "a slot invalidated while streaming, or before, is continuity lost (exit 4)" {
	new_slot lost
	local pid rc=0
	psql_at src -c "CREATE TABLE lostt (v text)"
	bg pg-walcat -d "$src_URL" --slot lost --publication pub >/dev/null 2>"$BATS_TEST_TMPDIR/err"
	pid=$!
	wait_until 10 slot_active lost
	# The slot retains more WAL than allowed: the server terminates its
	# walsender and invalidates it; the reconnect finds it lost.
	psql_at src -c "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" -c "SELECT pg_reload_conf()" >/dev/null
	for _ in 1 2 3; do
		psql_at src -c "INSERT INTO lostt SELECT repeat('x', 1000) FROM generate_series(1, 2000)" \
			-c "SELECT pg_switch_wal()" -c "CHECKPOINT" >/dev/null
	done
	psql_at src -c "ALTER SYSTEM RESET max_slot_wal_keep_size" -c "SELECT pg_reload_conf()" >/dev/null
	[ "$(psql_at src -c "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lost'")" = lost ]
	wait "$pid" || rc=$?
	[ "$rc" -eq 4 ]
	grep -q 'pg-walcat: error: replication slot "lost" is invalidated (wal_status is lost): continuity is lost, resync required' "$BATS_TEST_TMPDIR/err"
	# And a run that starts on the invalidated slot stops at once.
	run pg-walcat -d "$src_URL" --slot lost --publication pub --endpos now
	[ "$status" -eq 4 ]
	[[ $output == *'pg-walcat: error: replication slot "lost" is invalidated'*"resync required"* ]]
	psql_at src -c "DROP TABLE lostt"
}

@test "a role without REPLICATION and a source without wal_level=logical are preflight failures with the fix (exit 3)" {
	psql_at src -c "CREATE ROLE plain LOGIN"
	run pg-walcat -d "$src_URL user=plain" --slot x --publication pub --endpos now
	[ "$status" -eq 3 ]
	[[ $output == *"pg-walcat: error: "*"ALTER ROLE plain REPLICATION"* ]]
	cluster_start replica --set wal_level=replica
	run pg-walcat -d "$replica_URL" --slot x --publication pub --endpos now
	[ "$status" -eq 3 ]
	[[ $output == *"wal_level"*"logical"*"restart"* ]]
	cluster_stop replica --mode immediate
}

@test "cross-check: the changes match what pg_recvlogical with test_decoding reports for the same range" {
	# Two slots created together see the same transactions.
	psql_at src -c "SELECT pg_create_logical_replication_slot('xc_pgo', 'pgoutput')" \
		-c "SELECT pg_create_logical_replication_slot('xc_td', 'test_decoding')" >/dev/null
	psql_at src <<'SQL'
CREATE TABLE xa (id int PRIMARY KEY, v text);
CREATE TABLE xb (k text PRIMARY KEY, n numeric);
INSERT INTO xa SELECT g, 'v' || g FROM generate_series(1, 50) g;
BEGIN;
INSERT INTO xb VALUES ('one', 1), ('two', 2);
UPDATE xa SET v = 'changed' WHERE id <= 10;
DELETE FROM xa WHERE id > 45;
COMMIT;
UPDATE xa SET id = id + 1000 WHERE id = 1;
BEGIN;
INSERT INTO xa SELECT g, repeat('big', 30) FROM generate_series(2000, 4000) g;
SAVEPOINT s;
DELETE FROM xb;
ROLLBACK TO s;
UPDATE xb SET n = n * 10;
COMMIT;
BEGIN;
INSERT INTO xa VALUES (9999, 'aborted');
ROLLBACK;
TRUNCATE xb;
INSERT INTO xb VALUES ('after', 3);
SQL
	local end
	end=$(psql_at src -c "SELECT pg_current_wal_lsn()")
	pg-walcat -d "$src_URL" --slot xc_pgo --publication pub --endpos "$end" >"$BATS_TEST_TMPDIR/pgo"
	pg_recvlogical -d "$src_URL" --slot xc_td --start --endpos "$end" -f "$BATS_TEST_TMPDIR/td" \
		-o skip-empty-xacts=1 -o include-xids=1
	# Reduce both to "xid op table first-value" lines (the new row's first
	# column, or the old key's for a delete), transactions as B/C xid.
	awk -F'\t' '
		$1 == "BEGIN" { print "B", $2 } $1 == "COMMIT" { print "C", $2 }
		$1 == "INSERT" { print "I", $3, $4 }
		$1 == "UPDATE" { print "U", $3, ($4 == "N") ? $5 : $(5 + (NF - 4) / 2) }
		$1 == "DELETE" { print "D", $3, $5 }
		$1 == "TRUNCATE" { print "T", $4 }' "$BATS_TEST_TMPDIR/pgo" >"$BATS_TEST_TMPDIR/pgo.norm"
	sed -E \
		-e 's/^BEGIN ([0-9]+)$/B \1/' -e 's/^COMMIT ([0-9]+)$/C \1/' \
		-e "s/^table public\.([a-z]+): INSERT: [a-z]+\[[a-z ]+\]:'?([^' ]*)'?( .*)?$/I \1 \2/" \
		-e "s/^table public\.([a-z]+): UPDATE: (old-key: [^ ]+ new-tuple: )?[a-z]+\[[a-z ]+\]:'?([^' ]*)'?( .*)?$/U \1 \3/" \
		-e "s/^table public\.([a-z]+): DELETE: [a-z]+\[[a-z ]+\]:'?([^' ]*)'?( .*)?$/D \1 \2/" \
		-e "s/^table public\.([a-z]+): TRUNCATE: .*$/T \1/" \
		"$BATS_TEST_TMPDIR/td" >"$BATS_TEST_TMPDIR/td.norm"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/pgo.norm")" -gt 2000 ]
	diff "$BATS_TEST_TMPDIR/td.norm" "$BATS_TEST_TMPDIR/pgo.norm"
	psql_at src -c "DROP TABLE xa, xb"
}
