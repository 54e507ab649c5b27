# shellcheck shell=bash disable=SC2154 # load_start comes from scripts/bench
# bench-report.sh - what scripts/bench tells about a run: the environment,
# a table per scenario, and the chart. Sourced by scripts/bench. Reads the
# results JSON only: it never measures, and shows every recorded contender,
# failed ones included.

# bench_budget: resources.memory_budget_mb of a job with the benchmark's
# settings, as pgsync-config validates it (the budget every pgsync program
# of a run is held to); null when pgsync-config cannot say.
bench_budget() {
	local conf=$BENCH_BASE/budget.conf
	printf '%s\n' "job.name = bench" "job.state_dir = $BENCH_BASE/budget-state" "source.slot = bench" \
		"source.publication = bench_pub" "replication.tables = public.t" \
		"resources.max_parallel_copies = $jobs" >"$conf"
	pgsync-config -c "$conf" 2>/dev/null | sed -n -E 's/^resources\.memory_budget_mb = ([0-9]+).*/\1/p' |
		grep . || echo null
}

# bench_environment: machine, server and settings as JSON.
bench_environment() {
	local show
	show=$(cat "$BENCH_BASE/settings.json" 2>/dev/null)
	show=${show:-"{}"}
	jq -nc --argjson settings "$show" \
		--arg cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
		--argjson cores "$(nproc)" \
		--argjson mem_mb "$(awk '/^MemTotal/ { print int($2 / 1024) }' /proc/meminfo)" \
		--arg kernel "$(uname -r)" \
		--arg fs "$(df -T "$BENCH_BASE" | awk 'NR == 2 { print $2 }')" \
		--arg load_start "$load_start" --arg load_end "$(cut -d ' ' -f 1-3 /proc/loadavg)" \
		--arg pgcopydb "$(pgcopydb --version 2>/dev/null | sed -n 's/^pgcopydb version //p' | head -n 1)" \
		--arg pgsync "$(pg-apply --version 2>/dev/null)" \
		--argjson budget "$(bench_budget)" \
		'{cpu: $cpu, cores: $cores, memory_mb: $mem_mb, kernel: $kernel, filesystem: $fs,
		  load_average_start: $load_start, load_average_end: $load_end,
		  postgresql: $settings.server_version, settings: ($settings | del(.server_version)),
		  pgsync: $pgsync, memory_budget_mb: $budget, pgcopydb: (if $pgcopydb == "" then null else $pgcopydb end)}'
}

# bench_report JSON: the text report.
bench_report() {
	jq -r '
	def mb: if . == null then "" else ((. / 1024 * 10 | round) / 10 | tostring) + "M" end;
	def num: if . == null then "-" else tostring end;
	def fmt2: (. * 100 | round) as $c | "\($c / 100 | floor).\($c % 100 | tostring | if length < 2 then "0" + . else . end)";
	def rss: . as $r | [.peak_rss_kb | to_entries[] | "\(.key) \(.value | mb)"] | join(", ")
		| if . == "" and ($r.contender | startswith("builtin")) then "(server processes)" else . end;
	.environment.memory_budget_mb as $budget |
	def pad($n): tostring | if length >= $n then . else . + (" " * ($n - length)) end;
	def lpad($n): tostring | if length >= $n then . else (" " * ($n - length)) + . end;
	"pgsync benchmarks, \(.started)\(if .quick then " (QUICK: smoke sizes, not a result)" else "" end)",
	"",
	"PostgreSQL \(.environment.postgresql), \(.environment.cores) cores (\(.environment.cpu)), \(.environment.memory_mb) MB, \(.environment.filesystem)",
	"load average at start \(.environment.load_average_start), at end \(.environment.load_average_end)",
	"every cluster: " + (.environment.settings | to_entries | map("\(.key)=\(.value)") | join(" ")),
	(.scenarios[] |
		"",
		"== \(.name): \(.title) [load average \(.load_average_at_start)]",
		(if .name == "steady" then
			"\("contender" | pad(16)) \("status" | pad(7)) \("lag p50" | lpad(9)) \("p99" | lpad(9)) \("max" | lpad(9)) \("p99 bytes" | lpad(11)) \("txn p50" | lpad(9)) \("p90" | lpad(8)) \("p99" | lpad(8)) \("max" | lpad(8)) \("tps" | lpad(7)) \("drain" | lpad(7))  peak RSS",
			(.results[] |
			"\(.contender | pad(16)) \(.status | pad(7)) \((.lag.lag_ms_p50 | num) + "ms" | lpad(9)) \((.lag.lag_ms_p99 | num) + "ms" | lpad(9)) \((.lag.lag_ms_max | num) + "ms" | lpad(9)) \(.lag.lag_bytes_p99 | num | lpad(11)) \((.txn.txn_ms_p50 | num) + "ms" | lpad(9)) \((.txn.txn_ms_p90 | num) + "ms" | lpad(8)) \((.txn.txn_ms_p99 | num) + "ms" | lpad(8)) \((.txn.txn_ms_max | num) + "ms" | lpad(8)) \(.achieved_tps | if . == null then "-" else (. | round | tostring) end | lpad(7)) \((.drain_s | num) + "s" | lpad(7))  \(rss)\(if .note != "" then "  [" + .note + "]" else "" end)")
		else
			"\("contender" | pad(16)) \("status" | pad(7)) \("wall" | lpad(9)) \(.rows_unit + "/s" | lpad(14)) \("vs " + (.baseline | if startswith("builtin") then "builtin" else . end) | lpad(10))  peak RSS",
			(.results[] |
			"\(.contender | pad(16)) \(.status | pad(7)) \((.wall_s | if . == null then "-" else fmt2 + "s" end) | lpad(9)) \(.rows_per_s | num | lpad(14)) \(.speedup_vs_builtin | if . == null then "-" else fmt2 + "x" end | lpad(10))  \(rss)\(if .note != "" then "  [" + .note + "]" else "" end)")
		end),
		"durability: " + ([.results[] | "\(.contender): \(.durability)"] | join("; ")),
		# The largest peak RSS of one pgsync program (bootstrap: its
		# largest process) against the budget its job validates.
		([.results[] | select(.contender | startswith("pgsync") or startswith("pg-walcat"))
			| .peak_rss_kb // {} | to_entries[]] | max_by(.value)) as $top
		| (if $top == null then empty else
			"memory: largest pgsync program \($top.key) \($top.value | mb)"
			+ (if $budget == null then "" else
				(if $top.value > $budget * 1024 then ", OVER" else ", within" end)
				+ " the \($budget) MB resources.memory_budget_mb pgsync-config validates for this job" end)
		  end),
		"cpu seconds: " + ([.results[] | select(.status == "ok" and .cpu_s != null and (.cpu_s | length) > 0)
			| "\(.contender): " + ([.cpu_s | to_entries[] | "\(.key) \(.value)"] | join(", "))] | join("; "))
	),
	"",
	"vs builtin: time of the built-in subscription with its default settings (builtin-async where both run) / contender time (above 1: faster).",
	"vs md5: time of an md5 of every table on both sides / contender time.",
	"lag: sampled every 100 ms (how long ago the source was at the applied position, interpolated); txn: each probe transaction'"'"'s way (50 a second beside the load), from the source'"'"'s clock_timestamp() to a trigger on the target.",
	"cpu seconds: user + system of each client program (GNU time) and of the server processes on each side (backends, walsenders, workers and background processes) while the contender ran."
	' "$1"
}

# bench_chart JSON PNG: one panel per scenario, wall seconds per contender
# (failed ones drawn as 0 and labelled), lag percentiles for steady.
bench_chart() {
	local json=$1 png=$2 dir=$BENCH_BASE/chart n i name title plots="" rows cols
	rm -rf "$dir"
	mkdir -p "$dir"
	n=$(jq '.scenarios | length' "$json")
	((n > 0)) || return 1
	cols=$((n < 3 ? n : 3))
	rows=$(((n + cols - 1) / cols))
	for ((i = 0; i < n; i++)); do
		name=$(jq -r ".scenarios[$i].name" "$json")
		title=$(jq -r ".scenarios[$i].title" "$json" | sed 's/"/\\"/g')
		if [[ $name == steady ]]; then
			# Values are written above the bars: one contender's lag can dwarf another's.
			jq -r ".scenarios[$i].results[] | [(.contender + (if .status == \"ok\" then \"\" else \" (\" + .status + \")\" end)),
				(.lag.lag_ms_p50 // 0), (.lag.lag_ms_p99 // 0), (.lag.lag_ms_max // 0),
				(([.lag.lag_ms_p50, .lag.lag_ms_p99, .lag.lag_ms_max] | map(. // \"-\" | tostring) | join(\" / \")) + \" ms\")]
				| @tsv" "$json" >"$dir/$i.dat"
			plots+="set title \"$name: replication lag (ms)\\n$title\" noenhanced
set style histogram clustered gap 1
set style data histograms
set key inside top center horizontal
set xtics norotate
plot '$dir/$i.dat' using 2:xtic(1) title 'p50' lc rgb '#4e79a7', '' using 3 title 'p99' lc rgb '#f28e2b', \\
  '' using 4 title 'max' lc rgb '#e15759', \\
  '' using (\$0 - 0.25):2:(sprintf('%.0f', \$2)) with labels offset 0,0.6 font ',8' notitle, \\
  '' using 0:3:(sprintf('%.0f', \$3)) with labels offset 0,0.6 font ',8' notitle, \\
  '' using (\$0 + 0.25):4:(sprintf('%.0f', \$4)) with labels offset 0,0.6 font ',8' notitle
set style data boxes
set xtics rotate by -20
unset key
"
		else
			jq -r ".scenarios[$i].results[] | [.contender, (if .status == \"ok\" then .wall_s else 0 end),
				(if .status == \"ok\" then (.wall_s | tostring) + \" s\" else .status end),
				(if .status != \"ok\" then 10066329 elif (.contender | startswith(\"pgsync\") or startswith(\"pg-walcat\")) then 15896107 else 5142951 end)] | @tsv" "$json" >"$dir/$i.dat"
			plots+="set title \"$name: wall time (s, lower is better)\\n$title\" noenhanced
plot '$dir/$i.dat' using 0:2:4:xtic(1) with boxes lc rgb variable, '' using 0:2:3 with labels offset 0,0.7 font ',9'
"
		fi
	done
	gnuplot 2>"$dir/gnuplot.err" <<EOF || { cat "$dir/gnuplot.err" >&2; return 1; }
set terminal pngcairo size $((cols * 560)),$((rows * 420)) font 'DejaVu Sans,10'
set output '$png'
set datafile separator "\t"
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
set xtics noenhanced rotate by -20
set grid ytics
unset key
set multiplot layout $rows,$cols title "pgsync benchmarks $(jq -r '.started + (if .quick then " (QUICK: smoke sizes)" else "" end)' "$json")\\nPostgreSQL $(jq -r '.environment.postgresql' "$json"), $(jq -r '.environment.cores' "$json") cores, fsync=on"
$plots
unset multiplot
EOF
}
