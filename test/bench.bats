#!/usr/bin/env bats
# scripts/bench: its interface, its lag arithmetic, and (with
# PGSYNC_BENCH_SMOKE=1) the shape of a --quick run's results. Benchmarks
# report; nothing here asserts a time or a ratio.

# With PGSYNC_BENCH_SMOKE=1 this file times a benchmark, which files run
# beside it would slow down: it runs alone (test/run-bats).
# run-bats: serial

bats_require_minimum_version 1.5.0
load lib/common

setup_file() {
	[[ ${PGSYNC_BENCH_SMOKE:-0} == 1 ]] || return 0
	local out=$BATS_FILE_TMPDIR/results
	mkdir -p "$out"
	# One quick run for every smoke test of this file.
	"$PGSYNC_SCRIPTS/bench" --quick --out "$out" >"$BATS_FILE_TMPDIR/bench.stdout" \
		2>"$BATS_FILE_TMPDIR/bench.stderr"
	echo $? >"$BATS_FILE_TMPDIR/bench.rc"
}

smoke() {
	[[ ${PGSYNC_BENCH_SMOKE:-0} == 1 ]] || skip "set PGSYNC_BENCH_SMOKE=1 to run the quick benchmark"
	json=$(ls "$BATS_FILE_TMPDIR"/results/results-*.json 2>/dev/null | head -n 1)
}

@test "bench --help prints the usage on stdout and exits 0" {
	run "$PGSYNC_SCRIPTS/bench" --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: bench [--quick]"* ]]
	[[ $output == *"--only LIST"* ]]
}

@test "bench rejects an unknown scenario with exit 2 and names it" {
	run --separate-stderr "$PGSYNC_SCRIPTS/bench" --only catchup,nosuch
	[ "$status" -eq 2 ]
	[[ $stderr == *"bench: error: unknown scenario: nosuch"* ]]
	[[ $stderr == *"usage: bench"* ]]
	[ -z "$output" ]
}

@test "bench rejects a size that is not a positive integer with exit 2" {
	run --separate-stderr "$PGSYNC_SCRIPTS/bench" --scale 5x
	[ "$status" -eq 2 ]
	[[ $stderr == *"bench: error: --scale needs a positive integer"* ]]
	run --separate-stderr "$PGSYNC_SCRIPTS/bench" --rate 0
	[ "$status" -eq 2 ]
	[[ $stderr == *"--rate needs a positive integer"* ]]
}

@test "make bench QUICK=1 runs scripts/bench --quick, make bench runs it without" {
	run make -s -n -C "$PGSYNC_ROOT" bench QUICK=1
	[ "$status" -eq 0 ]
	[[ $output == *"scripts/bench --quick"* ]]
	run make -s -n -C "$PGSYNC_ROOT" bench
	[ "$status" -eq 0 ]
	[[ $output == *"scripts/bench"* && $output != *"--quick"* ]]
}

@test "lag_stats gives byte and interpolated millisecond lag percentiles" {
	source "$PGSYNC_SCRIPTS/bench-lib.sh"
	# ms source applied: caught up, 100 bytes behind a 100 ms old position,
	# caught up, 10 bytes behind a position the source passed 10 ms earlier.
	printf '0 100 100\n100 200 100\n200 300 300\n300 400 390\n' >"$BATS_TEST_TMPDIR/lag"
	run lag_stats "$BATS_TEST_TMPDIR/lag"
	[ "$status" -eq 0 ]
	[ "$(jq -c . <<<"$output")" = '{"lag_bytes_p50":0,"lag_bytes_p99":100,"lag_bytes_max":100,"samples":4,"lag_ms_p50":0,"lag_ms_p99":100,"lag_ms_max":100}' ]
	: >"$BATS_TEST_TMPDIR/none"
	run lag_stats "$BATS_TEST_TMPDIR/none"
	[ "$(jq -c . <<<"$output")" = '{"samples":0}' ]
}

@test "bench-sampler builds warning-free and refuses bad arguments with exit 2" {
	cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I "$(pg_config --includedir)" \
		-o "$BATS_TEST_TMPDIR/sampler" "$PGSYNC_SCRIPTS/bench-sampler.c" -L "$(pg_config --libdir)" -lpq
	run --separate-stderr "$BATS_TEST_TMPDIR/sampler" a b c
	[ "$status" -eq 2 ]
	[[ $stderr == "usage: bench-sampler SOURCE TARGET TARGET_QUERY INTERVAL_MS OUTFILE" ]]
	run --separate-stderr "$BATS_TEST_TMPDIR/sampler" a b c 10ms out
	[ "$status" -eq 2 ]
	[[ $stderr == "bench-sampler: error: invalid interval: 10ms" ]]
}

@test "smoke: bench --quick exits 0 and writes the JSON, text and PNG results" {
	smoke
	[ "$(cat "$BATS_FILE_TMPDIR/bench.rc")" -eq 0 ] || { cat "$BATS_FILE_TMPDIR/bench.stderr"; false; }
	[ -n "$json" ]
	jq -e . "$json" >/dev/null
	[ -s "${json%.json}.txt" ]
	[ "$(head -c 8 "${json%.json}.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
	[ "$(cat "$BATS_FILE_TMPDIR/results/.gitignore")" = '*' ]
}

@test "smoke: every scenario is recorded with the built-in subscription and pgsync as contenders" {
	smoke
	run jq -r '.scenarios[].name' "$json"
	[ "$output" = "$(printf '%s\n' snapshot-pgbench snapshot-tenants catchup bigtx-insert toast-update steady verify)" ]
	run jq -r '.scenarios[] | [.name, ([.results[].contender] | join(","))] | @tsv' "$json"
	[[ ${lines[0]} == $'snapshot-pgbench\tpgsync,pgsync-bootstrap,pgsync-bootstrap-single,builtin,copy-pipe,pgcopydb' ]]
	[[ ${lines[1]} == $'snapshot-tenants\tpgsync,pgsync-bootstrap,pgsync-bootstrap-single,builtin,copy-pipe,pgcopydb' ]]
	[[ ${lines[2]} == $'catchup\tpgsync,builtin,builtin-async,pg-walcat-only,pg_recvlogical' ]]
	[[ ${lines[3]} == $'bigtx-insert\tpgsync,builtin,builtin-async,pg-walcat-only,pg_recvlogical' ]]
	[[ ${lines[4]} == $'toast-update\tpgsync,builtin,builtin-async,pg-walcat-only,pg_recvlogical' ]]
	[[ ${lines[5]} == $'steady\tpgsync,builtin,builtin-async' ]]
	[[ ${lines[6]} == $'verify\tpgsync,md5,pgcopydb,pgsync-running' ]]
}

@test "smoke: every contender applied the same data as the source (none failed)" {
	smoke
	run jq -r '.scenarios[] | .name as $n | .results[] | select(.status != "ok" and .status != "skipped")
		| "\($n) \(.contender): \(.status) \(.note)"' "$json"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "smoke: timed results carry wall time, rows/s, ratio to the subscription and durability" {
	smoke
	run jq -e '[.scenarios[] | select(.name != "steady") | .results[] | select(.status == "ok")
		| (.wall_s > 0) and (.rows > 0) and (.rows_per_s >= 0) and (.speedup_vs_builtin > 0)
		  and (.durability | length > 0)] | (length > 0) and all' "$json"
	[ "$status" -eq 0 ]
	run jq -e '[.scenarios[] | select(.name != "steady") | .baseline as $b | .results[] | select(.contender == $b) | .speedup_vs_builtin] | all(. == 1)' "$json"
	[ "$status" -eq 0 ]
}

@test "smoke: every pgsync program's peak RSS is recorded in every scenario" {
	smoke
	run jq -r '.scenarios[] | .name as $n | .results[] | select(.contender == "pgsync")
		| "\($n) \(.peak_rss_kb | keys | join(","))"' "$json"
	[ "${lines[0]}" = "snapshot-pgbench pg-apply,pg-slot,pg-snapshot-dump" ]
	[ "${lines[1]}" = "snapshot-tenants pg-apply,pg-slot,pg-snapshot-dump" ]
	for i in 2 3 4 5; do [[ ${lines[$i]} == *" pg-apply,pg-walcat" ]]; done
	[ "${lines[6]}" = "verify pgsync+children" ]
	run jq -e '[.scenarios[].results[] | select(.contender == "pgsync") | .peak_rss_kb[] | . > 0] | all' "$json"
	[ "$status" -eq 0 ]
}

@test "smoke: every contender that ran has the CPU seconds of both servers, and pgsync's of each of its programs" {
	smoke
	run jq -e '[.scenarios[].results[] | select(.status == "ok") | .cpu_s
		| has("source server") and has("target server") and (.["source server"] >= 0) and (.["target server"] >= 0)] | all' "$json"
	[ "$status" -eq 0 ]
	run jq -e '[.scenarios[] | select(.name == "catchup" or .name == "bigtx-insert") | .results[]
		| select(.contender == "pgsync") | .cpu_s | has("pg-apply") and has("pg-walcat")] | (length == 2) and all' "$json"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^cpu seconds: .*pgsync: pg-apply [0-9.]*, pg-walcat [0-9.]*, source server [0-9.]*, target server [0-9.]*' "${json%.json}.txt")" -ge 4 ]
}

@test "smoke: every scenario holds its largest pgsync program against the memory budget pgsync-config validates" {
	smoke
	run jq -e '.environment.memory_budget_mb > 0' "$json"
	[ "$status" -eq 0 ]
	budget=$(jq '.environment.memory_budget_mb' "$json")
	txt=${json%.json}.txt
	[ "$(grep -c '^== ' "$txt")" -eq "$(grep -c "^memory: largest pgsync program .* [0-9.]*M, within the $budget MB resources.memory_budget_mb" "$txt")" ]
}

@test "smoke: verify also runs beside pgsync run under load, and reports how long the stream paused" {
	smoke
	run jq -e '[.scenarios[] | select(.name == "verify") | .results[] | select(.contender == "pgsync-running")
		| (.status == "ok") and (.pause_ms >= 0) and (.note | test("^the stream paused [0-9]+ ms$"))] | (length == 1) and all' "$json"
	[ "$status" -eq 0 ]
}

@test "smoke: steady state reports lag percentiles from 100 ms samples" {
	smoke
	run jq -e '[.scenarios[] | select(.name == "steady") | .results[]
		| (.lag.samples > 10) and (.lag.lag_ms_p50 <= .lag.lag_ms_p99) and (.lag.lag_ms_p99 <= .lag.lag_ms_max)
		  and (.lag.lag_bytes_p99 >= 0) and (.achieved_tps > 0)] | (length == 3) and all' "$json"
	[ "$status" -eq 0 ]
}

@test "smoke: the text report has the environment and a table per scenario" {
	smoke
	txt=${json%.json}.txt
	grep -q '^PostgreSQL 1[0-9]' "$txt"
	grep -q 'fsync=on' "$txt"
	grep -q 'synchronous_commit=on' "$txt"
	[ "$(grep -c '^== ' "$txt")" -eq 7 ]
	[ "$(grep -c '^contender  *status  *wall .* vs builtin  peak RSS$' "$txt")" -eq 5 ]
	[ "$(grep -c '^contender  *status  *wall .* vs md5  peak RSS$' "$txt")" -eq 1 ]
	grep -q '^contender  *status  *lag p50 ' "$txt"
	grep -q '^pgsync  *ok ' "$txt"
	# stdout is the report itself
	cmp -s "$txt" "$BATS_FILE_TMPDIR/bench.stdout"
}
