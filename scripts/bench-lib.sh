# shellcheck shell=bash
# bench-lib.sh - shell helpers for scripts/bench: throwaway cluster pairs,
# timing, peak RSS, waiting on a condition inside the server, and recording
# results as JSON lines. Sourced, never run. It measures and records; it
# never decides who wins (scripts/bench prints the ratios from the records).

# Settings every cluster of a run gets, whatever the contender: durable
# commits (pg-cluster's own default is fsync=off, which no user runs).
# wal_retrieve_retry_interval: the logical replication launcher starts at
# most one round of apply workers per interval (5 s by default), so a
# subscription enabled right after another one's worker started would wait
# for the benchmark's sake, not its own. min_wal_size: a checkpoint keeps the
# WAL segments it retires for reuse (see bench_prealloc_wal).
BENCH_SETTINGS=(fsync=on full_page_writes=on synchronous_commit=on
	shared_buffers=256MB min_wal_size=2GB max_wal_size=4GB checkpoint_timeout=30min
	max_logical_replication_workers=8 max_worker_processes=16
	wal_retrieve_retry_interval=100ms)

bench_log() { printf 'bench: %s\n' "$*" >&2; }
bench_die() {
	printf 'bench: error: %s\n' "$*" >&2
	exit 1
}

bench_now() { date +%s.%N; }
# Seconds since $1 (a bench_now value), two decimals.
bench_elapsed() { awk -v a="$1" -v b="$(bench_now)" 'BEGIN { printf "%.2f", b - a }'; }

# q URL SQL: one statement, unaligned tuples, stop on error.
q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
# psql_script URL < SQL
psql_script() { psql -X -q -v ON_ERROR_STOP=1 -d "$1" >/dev/null; }

# db_url URL DB: the same server, another database (the conninfo ends in dbname=).
db_url() { printf '%s dbname=%s\n' "${1% dbname=*}" "$2"; }

# bench_pair NAME: a fresh source/target cluster pair under $BENCH_BASE/NAME,
# both with BENCH_SETTINGS; sets SRC and TGT (conninfo of database postgres).
bench_pair() {
	local dir=$BENCH_BASE/$1 sets=() kv
	for kv in "${BENCH_SETTINGS[@]}"; do sets+=(--set "$kv"); done
	mkdir -p "$dir"
	chmod 755 "$dir"
	SRC=$(pg-cluster start "$dir/src" "${BENCH_MAJOR_OPT[@]}" "${sets[@]}") ||
		bench_die "cannot start the source cluster for $1"
	TGT=$(pg-cluster start "$dir/tgt" "${BENCH_MAJOR_OPT[@]}" "${sets[@]}") ||
		bench_die "cannot start the target cluster for $1"
	printf '%s\n' "$dir/src" "$dir/tgt" >>"$BENCH_BASE/.clusters"
	PAIR_DIR=$dir
	bench_prealloc_wal "$SRC" "${BENCH_WAL_SEGMENTS:-128}"
	bench_prealloc_wal "$TGT" "${BENCH_WAL_SEGMENTS:-128}"
	# What the servers say they run with, for the report (same for every pair).
	[[ -s $BENCH_BASE/settings.json ]] ||
		q "$SRC" "SELECT json_object_agg(name, current_setting(name)) FROM pg_settings WHERE name IN
			('server_version', 'fsync', 'full_page_writes', 'synchronous_commit', 'wal_level', 'shared_buffers',
			 'min_wal_size', 'max_wal_size', 'checkpoint_timeout', 'logical_decoding_work_mem', 'max_sync_workers_per_subscription',
			 'max_logical_replication_workers', 'wal_compression', 'wal_retrieve_retry_interval')" \
			>"$BENCH_BASE/settings.json"
}

# bench_prealloc_wal URL SEGMENTS: have SEGMENTS WAL segment files on disk
# for reuse. A new cluster creates (and zero-fills) each segment the first
# time it needs it, and a checkpoint recycles old segments instead: made in
# advance, the first contender on a pair writes its WAL as the ones after it
# do, and as on any server that has been running for a while.
bench_prealloc_wal() {
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" >/dev/null <<SQL
CREATE TABLE bench_wal_warmup (x int);
DO \$\$ BEGIN
  -- Each switch ends the current segment, the next insert opens a new one.
  FOR i IN 1..$2 LOOP INSERT INTO bench_wal_warmup VALUES (i); PERFORM pg_switch_wal(); END LOOP;
END \$\$;
DROP TABLE bench_wal_warmup;
CHECKPOINT;
SQL
}

bench_pair_destroy() {
	pg-cluster destroy "$PAIR_DIR/src" >/dev/null 2>&1 || true
	pg-cluster destroy "$PAIR_DIR/tgt" >/dev/null 2>&1 || true
	rm -rf "$PAIR_DIR"
}

# The same starting line for every contender: both clusters checkpointed (no
# contender pays for another's dirty buffers) and the source WAL read once
# into the page cache (the first contender does not pay for cold WAL).
bench_warm() {
	q "$SRC" CHECKPOINT
	q "$TGT" CHECKPOINT
	cat "$PAIR_DIR"/src/data/pg_wal/0* >/dev/null 2>&1 || true
	cpu_mark
}

# bench_autovacuum URL off|reset: autovacuum_enabled on every ordinary table
# of that database, as pgsync bootstrap and the fast path of doc/snapshot.md
# do around a copy into new tables (a vacuum the load starts would hold up
# the primary key's build for deadlock_timeout).
bench_autovacuum() {
	local set="SET (autovacuum_enabled = false)"
	[[ $2 == off ]] || set="RESET (autovacuum_enabled)"
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" >/dev/null <<SQL
SELECT format('ALTER TABLE %s $set', c.oid::regclass) FROM pg_class c
 WHERE c.relkind = 'r' AND c.relnamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema', 'pg_toast', 'pgsync') \gexec
SQL
}

# wait_sql URL CONDITION TIMEOUT_S: poll CONDITION (an SQL boolean) inside the
# server every 10 ms over one connection, so waiting costs no process starts.
# Fails when TIMEOUT_S passes first. Each poll commits: one transaction over
# the whole wait would hold back the target's xmin, so the contender being
# waited for could not prune the versions of the rows it updates, and a
# subscription applying hot rows would slow down many times over.
wait_sql() {
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" >/dev/null 2>&1 <<SQL
DO \$bench\$
DECLARE deadline timestamptz := clock_timestamp() + interval '$3 seconds';
BEGIN
  LOOP
    EXIT WHEN ($2);
    IF clock_timestamp() > deadline THEN RAISE EXCEPTION 'timed out'; END IF;
    COMMIT;
    PERFORM pg_sleep(0.01);
  END LOOP;
END
\$bench\$;
SQL
}

# rss_run NAME CMD...: run CMD under GNU time; its peak RSS (kB) and its
# CPU seconds (user, system) land in $RUN_DIR/rss.NAME.
rss_run() {
	local name=$1
	shift
	/usr/bin/time -f '%M %U %S' -o "$RUN_DIR/rss.$name" "$@"
}

# The CPU each side's server spent on a contender, beside the client
# programs' (GNU time): to tell what bounds a scenario, decoding on the
# source (walsender) or executing on the target (apply backends).
# server_ticks DIR: clock ticks of the cluster in DIR so far: its
# postmaster's own, the children it reaped (cutime, cstime: exited backends
# and walsenders) and those still running. Background processes count too.
server_ticks() {
	local pm p f total=0
	pm=$(head -n 1 "$1/data/postmaster.pid" 2>/dev/null) || { echo 0; return; }
	for p in "$pm" $(pgrep -P "$pm"); do
		f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		# Fields after "pid (comm) ": utime stime cutime cstime are 12-15.
		read -r -a f <<<"${f##*) }"
		total=$((total + f[11] + f[12] + f[13] + f[14]))
	done
	echo "$total"
}

# cpu_mark: the start of a contender's CPU accounting (bench_warm calls it,
# after its checkpoints); cpu_stop: its end (once its wall time is taken).
cpu_mark() {
	CPU_MARK_SRC=$(server_ticks "$PAIR_DIR/src") CPU_MARK_TGT=$(server_ticks "$PAIR_DIR/tgt")
	CPU_STOP_SRC="" CPU_STOP_TGT=""
}
cpu_stop() {
	CPU_STOP_SRC=$(server_ticks "$PAIR_DIR/src") CPU_STOP_TGT=$(server_ticks "$PAIR_DIR/tgt")
}

# cpu_json: {"program": s, ..., "source server": s, "target server": s}.
cpu_json() {
	local f out="{}" v hz
	hz=$(getconf CLK_TCK)
	for f in "$RUN_DIR"/rss.*; do
		[[ -e $f ]] || continue
		v=$(awk 'NF == 3 && $1 ~ /^[0-9]+$/ { printf "%.2f", $2 + $3 }' "$f" | tail -n 1)
		[[ -n $v ]] || continue
		out=$(jq -c --arg k "${f##*/rss.}" --argjson v "$v" '. + {($k): $v}' <<<"$out")
	done
	if [[ -n ${CPU_MARK_SRC:-} ]]; then
		[[ -n ${CPU_STOP_SRC:-} ]] || cpu_stop
		out=$(jq -c --argjson s "$(((CPU_STOP_SRC - CPU_MARK_SRC) * 100 / hz))" \
			--argjson t "$(((CPU_STOP_TGT - CPU_MARK_TGT) * 100 / hz))" \
			'. + {"source server": ($s / 100), "target server": ($t / 100)}' <<<"$out")
	fi
	printf '%s\n' "$out"
}

# rss_json: the rss.* files of this contender as {"program": kB, ...}.
rss_json() {
	local f out="{}" v
	for f in "$RUN_DIR"/rss.*; do
		[[ -e $f ]] || continue
		# GNU time prefixes "Command exited with non-zero status N" lines.
		v=$(grep -E '^[0-9]+( |$)' "$f" | tail -n 1 | cut -d ' ' -f 1)
		[[ -n $v ]] || continue
		out=$(jq -c --arg k "${f##*/rss.}" --argjson v "$v" '. + {($k): $v}' <<<"$out")
	done
	printf '%s\n' "$out"
}

# new_run NAME: a fresh directory for one contender's logs and RSS files.
new_run() {
	CPU_MARK_SRC="" CPU_STOP_SRC=""
	RUN_DIR=$BENCH_BASE/runs/$1
	rm -rf "$RUN_DIR"
	mkdir -p "$RUN_DIR"
	chmod 777 "$RUN_DIR"
}

# The last line of a contender's error log: the reason it failed.
run_reason() {
	local f=$RUN_DIR/stderr
	# timeout(1) exits 124 (137 after -k): GNU time says so in the RSS file.
	if grep -q -E 'non-zero status (124|137)|terminated by signal 9' "$RUN_DIR"/rss.* 2>/dev/null; then
		# shellcheck disable=SC2154 # set by scripts/bench
		echo "timed out after ${timeout_s}s and was stopped"
		return 0
	fi
	if [[ -s $f ]]; then
		grep -v -E '^(Command exited|Command terminated)' "$f" | grep -E 'error|fatal|FATAL|ERROR' |
			tail -n 1 | cut -c 1-200
	fi
	return 0
}

# record SCENARIO CONTENDER STATUS WALL_S ROWS DURABILITY NOTE [EXTRA_JSON]
# One result line. STATUS: ok, failed or skipped. WALL_S and ROWS may be "".
record() {
	local extra=${8:-"{}"}
	jq -nc --arg scenario "$1" --arg contender "$2" --arg status "$3" \
		--arg wall "$4" --arg rows "$5" --arg durability "$6" --arg note "$7" \
		--argjson rss "$(rss_json)" --argjson cpu "$(cpu_json)" --argjson extra "$extra" '
		{scenario: $scenario, contender: $contender, status: $status,
		 wall_s: (if $wall == "" then null else ($wall | tonumber) end),
		 rows: (if $rows == "" then null else ($rows | tonumber) end),
		 durability: $durability, note: $note, peak_rss_kb: $rss, cpu_s: $cpu}
		| (.rows_per_s = (if .status == "ok" and .wall_s and .rows and .wall_s > 0 then (.rows / .wall_s | floor) else null end))
		+ $extra' >>"$BENCH_JSONL"
	bench_log "$1: $2: $3${4:+ in ${4}s}${7:+ ($7)}"
}

# lag_stats FILE: from bench-sampler lines "<ms> <source> <applied>", the
# lag in bytes (source position minus applied) and in milliseconds (how long
# ago the source was at the applied position, interpolated between samples)
# as JSON: samples, p50/p99/max of both (nearest rank).
lag_stats() {
	local pairs
	pairs=$(awk '
	{ t[NR] = $1; s[NR] = $2; a[NR] = $3 }
	END {
		j = 1
		for (i = 1; i <= NR; i++) {
			b = s[i] - a[i]; if (b < 0) b = 0
			# applied only grows, so the first source sample at or past it
			# only moves forward
			while (j < i && s[j] < a[i]) j++
			if (s[j] <= a[i] || j == 1) ts = t[j]
			else ts = t[j - 1] + (a[i] - s[j - 1]) / (s[j] - s[j - 1]) * (t[j] - t[j - 1])
			m = t[i] - ts; if (m < 0) m = 0
			printf "%d %.1f\n", b, m
		}
	}' "$1")
	if [[ -z $pairs ]]; then
		echo '{"samples": 0}'
		return
	fi
	{
		cut -d ' ' -f 1 <<<"$pairs" | sort -n | awk '{ v[NR] = $1 } END { print_pcts("bytes", v, NR) }
			function pct(n, p,   r) { r = int((p * n + 99) / 100); return r < 1 ? 1 : r }
			function print_pcts(k, v, n) { if (n) printf "lag_%s_p50 %s\nlag_%s_p99 %s\nlag_%s_max %s\n", k, v[pct(n, 50)], k, v[pct(n, 99)], k, v[n]; printf "samples %d\n", n }'
		cut -d ' ' -f 2 <<<"$pairs" | sort -n | awk '{ v[NR] = $1 } END { print_pcts("ms", v, NR) }
			function pct(n, p,   r) { r = int((p * n + 99) / 100); return r < 1 ? 1 : r }
			function print_pcts(k, v, n) { if (n) printf "lag_%s_p50 %s\nlag_%s_p99 %s\nlag_%s_max %s\n", k, v[pct(n, 50)], k, v[pct(n, 99)], k, v[n] }'
	} | jq -cRn '[inputs | split(" ") | {(.[0]): (.[1] | tonumber)}] | add // {samples: 0}'
}
