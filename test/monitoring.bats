#!/usr/bin/env bats
# The monitoring files (monitoring/) against the real tools: promtool checks
# and unit-tests the alert rules, lints what `pgsync status --prometheus`
# writes for a live job, and a real Prometheus, scraping that output through
# prometheus-node-exporter's textfile collector as an operator sets it up,
# loads the rules and answers every query of the Grafana dashboard with data.
#
# Needs Debian's prometheus and prometheus-node-exporter: without them the
# tests skip; PGSYNC_TEST_MONITORING=1 installs them first
# (scripts/install-deps --monitoring) and never skips.

load lib/cluster
load pgsync-helpers

MON=$BATS_TEST_DIRNAME/../monitoring

setup_file() {
	if [[ ${PGSYNC_TEST_MONITORING:-} == 1 ]]; then
		"$PGSYNC_SCRIPTS/install-deps" --monitoring >&2
	fi
	cluster_start src
	cluster_start tgt
	# A serial key and a name with capitals, as users have them.
	psql_at src -c 'CREATE TABLE "MonOrders" (id serial PRIMARY KEY, item text, qty int);
		INSERT INTO "MonOrders" (item, qty) SELECT $$item $$ || g, g FROM generate_series(1, 2000) g;
		CREATE PUBLICATION mon_pub FOR TABLE "MonOrders"'
	lp_source_role mon_src MonOrders
	lp_target_role mon_tgt
	job_conf mon mon_slot mon_pub 'public.MonOrders' >/dev/null
	pgs mon bootstrap
	start_run mon
	wait_until 30 state_is mon STREAMING
	# Something applied, so that the lag in seconds and the rates are known.
	psql_at src -c 'INSERT INTO "MonOrders" (item, qty) SELECT $$late $$ || g, g FROM generate_series(1, 100) g'
	wait_until 30 applied_reaches mon
}

teardown_file() {
	local f
	for f in "$BATS_FILE_TMPDIR"/*.pid.mon; do
		[[ -s $f ]] && kill "$(<"$f")" 2>/dev/null
	done
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

need() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null ||
			skip "$p is not installed (scripts/install-deps --monitoring, or PGSYNC_TEST_MONITORING=1)"
	done
}

# The pgsync_* series the rules and the dashboard use.
used_series() {
	{
		grep -oE 'pgsync_[a-z_]+' "$MON/pgsync-alerts.yml"
		jq -r '.panels[].targets[].expr' "$MON/pgsync-dashboard.json" | grep -oE 'pgsync_[a-z_]+'
	} | grep -vx 'pgsync_job' | sort -u
}

@test "promtool: the alert rules are valid and each fires on its condition and only then" {
	need promtool
	run promtool check rules "$MON/pgsync-alerts.yml"
	echo "$output"
	[ "$status" -eq 0 ]
	cd "$BATS_TEST_DIRNAME/monitoring"
	run promtool test rules pgsync-alerts.test.yml
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *SUCCESS* ]]
	# Every alert is tested firing.
	local a
	for a in $(grep -oP '^\s+- alert: \K\w+' "$MON/pgsync-alerts.yml"); do
		grep -A2 "alertname: $a\$" pgsync-alerts.test.yml | grep -q 'exp_alerts:$' || {
			echo "alert $a is never tested firing"
			return 1
		}
	done
}

@test "status --prometheus of a live job passes promtool check metrics, in base units, with every series the rules and the dashboard use" {
	need promtool
	run pgs mon status --prometheus
	[ "$status" -eq 0 ]
	local out=$output
	run promtool check metrics <<<"$out"
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	# The job's own label is not job, which Prometheus gives the scrape job.
	[[ $out == *'pgsync_state{pgsync_job="mon",state="STREAMING"} 1'* ]]
	[[ $out != *'{job='* ]]
	# Counters end in _total, and only counters do.
	[ -z "$(grep '^# TYPE ' <<<"$out" | awk '($4 == "counter") != ($3 ~ /_total$/)')" ]
	local s missing=""
	for s in $(used_series); do
		# One series per standby: a job without PGSYNC_STANDBY_URLS has none
		# (test/pgsync-failover.bats checks it with standbys); the time left
		# only while a chunked copy runs (test/pgsync-progress.bats).
		[[ $s != pgsync_failover_ready && $s != pgsync_snapshot_eta_seconds ]] || continue
		grep -q "^$s{" <<<"$out" || missing+=" $s"
	done
	[ -z "$missing" ] || {
		echo "not in the output:$missing"
		return 1
	}
}

@test "the dashboard is a Grafana dashboard: unique panel ids, panels inside the 24-column grid without overlap, every query on the data source variable" {
	local db=$MON/pgsync-dashboard.json
	jq -e '.uid == "pgsync" and (.templating.list | map(.name) | index("datasource") != null and index("job") != null)' "$db"
	jq -e '[.panels[].id] | length == (unique | length)' "$db"
	jq -e 'all(.panels[]; .gridPos.x >= 0 and .gridPos.w > 0 and .gridPos.x + .gridPos.w <= 24)' "$db"
	jq -e 'all(.panels[]; .datasource.uid == "${datasource}" and (.targets | length > 0)
		and all(.targets[]; .datasource.uid == "${datasource}" and (.refId | length > 0) and (.expr | length > 0)))' "$db"
	# No two panels share a cell of the grid.
	[ "$(jq -r '.panels[] | .gridPos as $g | range($g.x; $g.x + $g.w) as $x | range($g.y; $g.y + $g.h) as $y | "\($x),\($y)"' "$db" | sort | uniq -d)" = "" ]
}

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		ss -Htln "sport = :$p" | grep -q . || break
	done
	echo "$p"
}

prom_query() {
	curl -fsS --max-time 20 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"
}

# has_data EXPR: the instant query returns at least one series.
has_data() {
	prom_query "$1" | jq -e '.status == "success" and (.data.result | length) > 0' >/dev/null
}

@test "a real Prometheus scraping the textfile collector loads the rules, sees no alert on a healthy job and answers every dashboard query with data" {
	# Three servers and a scrape loop beside the other files of make check
	# once lost its Prometheus mid-test: the long tier runs it alone.
	[[ ${PGSYNC_TEST_MONITORING:-} == 1 ]] || skip "a live Prometheus and node exporter: set PGSYNC_TEST_MONITORING=1 (long tier)"
	need prometheus prometheus-node-exporter promtool curl
	local d=$BATS_FILE_TMPDIR/prom
	mkdir -p "$d/textfile" "$d/data"
	# What the pgsync-status timer or cron line does: rewrite, then rename.
	(
		while :; do
			pgs mon status --prometheus >"$d/textfile/pgsync_mon.prom.tmp" &&
				mv "$d/textfile/pgsync_mon.prom.tmp" "$d/textfile/pgsync_mon.prom"
			sleep 1
		done
	) 2>"$d/status.log" &
	echo $! >"$BATS_FILE_TMPDIR/status.pid.mon"
	local node_port
	node_port=$(free_port)
	prometheus-node-exporter --collector.disable-defaults --collector.textfile \
		--collector.textfile.directory="$d/textfile" --web.listen-address="127.0.0.1:$node_port" \
		>"$d/node.log" 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/node.pid.mon"
	cat >"$d/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - $MON/pgsync-alerts.yml
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:$node_port']
EOF
	PROM_PORT=$(free_port)
	prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/data" \
		--web.listen-address="127.0.0.1:$PROM_PORT" >"$d/prometheus.log" 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/prometheus.pid.mon"
	wait_until 60 has_data 'pgsync_state{pgsync_job="mon",state="STREAMING"} == 1' || {
		tail -n 20 "$d/prometheus.log" "$d/node.log" "$d/status.log"
		return 1
	}
	# The scrape kept the series' own label: no exported_job.
	! has_data '{exported_job=~".+"}'
	# Enough samples for the rates of the dashboard.
	sleep 5
	local expr q failed=""
	while IFS= read -r expr; do
		q=${expr//\$job/mon}
		q=${q//\$__rate_interval/1m}
		# Series a streaming job without standbys has none of: the time a
		# chunked copy has left, a standby's readiness. Prometheus must
		# still take the query.
		if [[ $expr == pgsync_snapshot_eta_seconds* || $expr == pgsync_failover_ready* ]]; then
			prom_query "$q" | jq -e '.status == "success"' >/dev/null || failed+=$'\n'"  $expr: $(prom_query "$q")"
			continue
		fi
		# A scrape that missed its deadline on a busy machine leaves a gap:
		# the data is there when the next one comes.
		wait_until 15 has_data "$q" || failed+=$'\n'"  $expr: $(prom_query "$q")"
	done < <(jq -r '.panels[].targets[].expr' "$MON/pgsync-dashboard.json")
	[ -z "$failed" ] || {
		echo "dashboard queries without data:$failed"
		return 1
	}
	echo "scrapes: $(prom_query 'sum_over_time(up[10m])' | jq -r '.data.result[0].value[1]') up of $(prom_query 'count_over_time(up[10m])' | jq -r '.data.result[0].value[1]')" >&3
	# The rules load and evaluate without error, and none fires.
	run curl -sS --max-time 20 "http://127.0.0.1:$PROM_PORT/api/v1/rules"
	[ "$status" -eq 0 ] || {
		echo "$output"
		tail -n 20 "$d/prometheus.log"
		return 1
	}
	echo "$output" | jq -e '[.data.groups[].rules[]] | length == 12 and all(.health == "ok")'
	echo "$output" | jq -e '[.data.groups[].rules[] | select(.state != "inactive")] | length == 0'
	# A job in ERROR: the alert goes pending (for: 2m).
	stop_run TERM
	psql_at tgt -c "UPDATE pgsync.job SET state = 'ERROR' WHERE job = 'mon'" >/dev/null
	wait_until 30 eval 'curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/alerts" | jq -e ".data.alerts[] | select(.labels.alertname == \"PgsyncStateError\" and .labels.pgsync_job == \"mon\")" >/dev/null'
}
