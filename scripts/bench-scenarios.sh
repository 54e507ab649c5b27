# shellcheck shell=bash disable=SC2154 # sizes and options come from scripts/bench
# bench-scenarios.sh - the scenarios of scripts/bench and how each contender
# runs in them. Sourced by scripts/bench after bench-lib.sh. Every contender
# of a scenario gets the same cluster pair, data, settings and warm-up; a
# contender that fails is recorded as failed, never left out.

# --- snapshot: the initial copy ---------------------------------------------------

# pg_dump section FROM into TO (a database on the target).
section() {
	local from=$1 to=$2 sec=$3
	shift 3
	pg_dump -d "$from" --section="$sec" "$@" | psql -X -q -v ON_ERROR_STOP=1 -d "$to" >/dev/null
}

# total_rows URL SCHEMA_LIKE: exact row count over all those tables, one query.
total_rows() {
	q "$1" "SELECT coalesce(sum((xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I.%I',
		schemaname, tablename), false, true, '')))[1]::text::bigint), 0) FROM pg_tables WHERE schemaname LIKE '$2'"
}

# pgsync: slot with exported snapshot (held by pg-slot through a FIFO while
# it is needed), schema without indexes, the data (the post-data archive
# read meanwhile), then indexes with pg_restore --jobs.
snap_pgsync() {
	local s=$1 t=$2 pub=$3 hold=$RUN_DIR/hold holder holdfd slot lsn snap deadline rc=0
	mkfifo "$hold"
	local t0
	t0=$(bench_now)
	rss_run pg-slot pg-slot create -d "$s" --slot bench_snap --export-snapshot -q \
		<"$hold" >"$RUN_DIR/slot.out" 2>>"$RUN_DIR/stderr" &
	holder=$!
	exec {holdfd}>"$hold"
	deadline=$((SECONDS + 60))
	until [[ -s $RUN_DIR/slot.out ]]; do
		if ! kill -0 "$holder" 2>/dev/null || ((SECONDS > deadline)); then
			exec {holdfd}>&-
			wait "$holder" || true
			return 1
		fi
		sleep 0.02
	done
	IFS=$'\t' read -r slot lsn snap <"$RUN_DIR/slot.out"
	section "$s" "$t" pre-data --snapshot="$snap" 2>>"$RUN_DIR/stderr" || rc=1
	((rc == 0)) && { bench_autovacuum "$t" off 2>>"$RUN_DIR/stderr" || rc=1; }
	# As doc/snapshot.md: the post-data archive is read while the copy runs,
	# and pg_restore --jobs builds the indexes after it.
	local dumper=""
	if ((rc == 0)); then
		pg_dump -d "$s" --section=post-data -Fc -f "$RUN_DIR/post.dump" --snapshot="$snap" 2>>"$RUN_DIR/stderr" &
		dumper=$!
		rss_run pg-snapshot-dump timeout -k 10 "$timeout_s" pg-snapshot-dump -d "$s" --snapshot "$snap" \
			--position "$lsn" --slot "$slot" --publication "$pub" --jobs "$jobs" -q 2>>"$RUN_DIR/stderr" |
			rss_run pg-apply timeout -k 10 "$timeout_s" pg-apply -d "$t" --jobs "$jobs" --log-level warning \
				2>>"$RUN_DIR/stderr" || rc=1
	fi
	[[ -z $dumper ]] || wait "$dumper" || rc=1
	((rc == 0)) && { pg_restore -d "$t" --jobs "$jobs" --exit-on-error "$RUN_DIR/post.dump" 2>>"$RUN_DIR/stderr" || rc=1; }
	((rc == 0)) && { bench_autovacuum "$t" reset 2>>"$RUN_DIR/stderr" || rc=1; }
	exec {holdfd}>&-
	wait "$holder" || rc=1
	WALL=$(bench_elapsed "$t0")
	cpu_stop
	q "$s" "SELECT pg_drop_replication_slot('bench_snap')" >/dev/null 2>&1 || true
	return $rc
}

# bench_conf SOURCE_DB PUB SCHEMA_LIKE CONF [MODE]: a pgsync job "bench" on
# slot bench_boot of every table of those schemas, its state under
# $RUN_DIR, copied in resources.snapshot_mode MODE (default: the default).
bench_conf() {
	local tables
	tables=$(q "$1" "SELECT string_agg(format('%s.%s', schemaname, tablename), ',' ORDER BY 1)
		FROM pg_tables WHERE schemaname LIKE '$3'")
	printf '%s\n' "job.name = bench" "job.state_dir = $RUN_DIR/state" "source.slot = bench_boot" \
		"source.publication = $2" "replication.tables = $tables" \
		"resources.max_parallel_copies = $jobs" ${5:+"resources.snapshot_mode = $5"} >"$4"
}

# The orchestrator's own command: slot, schema, copy, indexes, job row.
# Its GNU time figure is the largest of its processes (pg-snapshot-dump or
# pg-apply, usually). The job and slot are cleaned up afterwards, untimed.
# MODE: resources.snapshot_mode (default chunked, pgsync-bootstrap-single
# single).
snap_bootstrap() {
	local s=$1 t=$2 pub=$3 like=$4 mode=${5:-} conf=$RUN_DIR/pgsync.conf t0 rc=0
	bench_conf "$s" "$pub" "$like" "$conf" "$mode"
	t0=$(bench_now)
	PGSYNC_SOURCE_URL=$s PGSYNC_TARGET_URL=$t rss_run pgsync+children timeout -k 10 "$timeout_s" \
		pgsync -c "$conf" --log warn bootstrap >>"$RUN_DIR/stderr" 2>&1 || rc=1
	WALL=$(bench_elapsed "$t0")
	cpu_stop
	PGSYNC_SOURCE_URL=$s PGSYNC_TARGET_URL=$t pgsync -c "$conf" --log error cleanup --yes \
		>/dev/null 2>&1 || true
	q "$s" "SELECT pg_drop_replication_slot('bench_boot') FROM pg_replication_slots
		WHERE slot_name = 'bench_boot'" >/dev/null 2>&1 || true
	return $rc
}

# A subscription's initial sync, until every table is ready ('r').
snap_builtin() {
	local s=$1 t=$2 pub=$3 n t0 rc=0
	n=$(q "$s" "SELECT count(*) FROM pg_publication_tables WHERE pubname = '$pub'")
	t0=$(bench_now)
	section "$s" "$t" pre-data 2>>"$RUN_DIR/stderr" || return 1
	q "$t" "CREATE SUBSCRIPTION bench_sub CONNECTION '$s' PUBLICATION $pub" 2>>"$RUN_DIR/stderr" || return 1
	wait_sql "$t" "(SELECT count(*) FILTER (WHERE srsubstate = 'r') = $n AND count(*) = $n FROM pg_subscription_rel)" \
		"$timeout_s" || rc=1
	((rc == 0)) && { section "$s" "$t" post-data 2>>"$RUN_DIR/stderr" || rc=1; }
	WALL=$(bench_elapsed "$t0")
	cpu_stop
	q "$t" "DROP SUBSCRIPTION bench_sub" >/dev/null 2>>"$RUN_DIR/stderr" || rc=1
	((rc == 0)) || echo "bench: error: initial sync not done within ${timeout_s}s" >>"$RUN_DIR/stderr"
	return $rc
}

# psql COPY TO STDOUT | psql COPY FROM STDIN, one table after another.
snap_pipe() {
	local s=$1 t=$2 like=$3 t0 tab
	t0=$(bench_now)
	section "$s" "$t" pre-data 2>>"$RUN_DIR/stderr" || return 1
	while read -r tab; do
		timeout -k 10 "$timeout_s" psql -X -q -v ON_ERROR_STOP=1 -d "$s" -c "COPY $tab TO STDOUT" 2>>"$RUN_DIR/stderr" |
			timeout -k 10 "$timeout_s" psql -X -q -v ON_ERROR_STOP=1 -d "$t" -c "COPY $tab FROM STDIN" \
				2>>"$RUN_DIR/stderr" || return 1
	done < <(q "$s" "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname LIKE '$like' ORDER BY 1")
	section "$s" "$t" post-data 2>>"$RUN_DIR/stderr" || return 1
	WALL=$(bench_elapsed "$t0")
	cpu_stop
}

# pgcopydb clone does the schema itself (and a VACUUM ANALYZE of each table).
snap_pgcopydb() {
	local s=$1 t=$2 t0 rc=0
	t0=$(bench_now)
	rss_run pgcopydb timeout -k 10 "$timeout_s" pgcopydb clone --source "$s" --target "$t" --dir "$RUN_DIR/pgcopydb" \
		--table-jobs "$jobs" --index-jobs "$jobs" >"$RUN_DIR/pgcopydb.log" 2>&1 || rc=1
	WALL=$(bench_elapsed "$t0")
	cpu_stop
	((rc == 0)) || grep -E 'ERROR|FATAL' "$RUN_DIR/pgcopydb.log" | tail -n 1 >>"$RUN_DIR/stderr"
	return $rc
}

# snapshot_contenders SCENARIO SOURCE_DB PUB SCHEMA_LIKE EXPECTED_ROWS
snapshot_contenders() {
	local name=$1 s=$2 pub=$3 like=$4 expect=$5 c t got status note dur
	for c in pgsync pgsync-bootstrap pgsync-bootstrap-single builtin copy-pipe pgcopydb; do
		new_run "$name-$c"
		WALL=""
		if [[ $c == pgcopydb ]] && ! command -v pgcopydb >/dev/null; then
			record "$name" "$c" skipped "" "$expect" "" "pgcopydb not installed (scripts/install-deps --bench)"
			continue
		fi
		q "$TGT" "DROP DATABASE IF EXISTS bench_copy WITH (FORCE)"
		q "$TGT" "CREATE DATABASE bench_copy"
		t=$(db_url "$TGT" bench_copy)
		bench_warm
		status=ok note=""
		case $c in
		pgsync) snap_pgsync "$s" "$t" "$pub" || status=failed
			dur="loader sessions synchronous_commit=off, then a synchronous commit of the position" ;;
		pgsync-bootstrap) snap_bootstrap "$s" "$t" "$pub" "$like" || status=failed
			dur="as pgsync: pgsync bootstrap runs the same programs, in chunks each committed with its record" ;;
		pgsync-bootstrap-single) snap_bootstrap "$s" "$t" "$pub" "$like" single || status=failed
			dur="as pgsync: pgsync bootstrap at one snapshot (resources.snapshot_mode = single)" ;;
		builtin) snap_builtin "$s" "$t" "$pub" || status=failed
			dur="subscription default synchronous_commit=off; max_sync_workers_per_subscription=$(q "$TGT" "SHOW max_sync_workers_per_subscription")" ;;
		copy-pipe) snap_pipe "$s" "$t" "$like" || status=failed
			dur="synchronous_commit=on, one transaction per table" ;;
		pgcopydb) snap_pgcopydb "$s" "$t" || status=failed
			dur="synchronous_commit=on (server setting)" ;;
		esac
		if [[ $status == ok ]]; then
			got=$(total_rows "$t" "$like")
			[[ $got == "$expect" ]] || { status=failed note="copied $got rows, expected $expect"; }
		else
			note=$(run_reason)
			note=${note:-exit status non-zero}
		fi
		record "$name" "$c" "$status" "$WALL" "$expect" "$dur" "$note"
		q "$TGT" "DROP DATABASE IF EXISTS bench_copy WITH (FORCE)"
	done
}

# pgbench_published URL: pgbench -i at --scale, published as bench_pub.
pgbench_published() {
	pgbench -i -q -s "$scale" -d "$1" >/dev/null 2>&1 || bench_die "pgbench -i failed"
	# pgsync bootstrap refuses a published table without a key (updates and
	# deletes on it would fail on the source); pgbench_history is empty here.
	q "$1" "ALTER TABLE pgbench_history ADD COLUMN hid bigserial PRIMARY KEY"
	q "$1" "CREATE PUBLICATION bench_pub FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
	q "$1" "VACUUM ANALYZE"
}

run_snapshot_pgbench() {
	local s expect=$((scale * 100011))
	scenario snapshot-pgbench "initial copy of pgbench scale $scale ($expect rows, 4 tables)" rows \
		"$(jq -nc --argjson scale "$scale" --argjson jobs "$jobs" '{scale: $scale, jobs: $jobs}')"
	bench_pair snapshot-pgbench
	q "$SRC" "CREATE DATABASE bench"
	s=$(db_url "$SRC" bench)
	pgbench_published "$s"
	snapshot_contenders snapshot-pgbench "$s" bench_pub public "$expect"
	bench_pair_destroy
}

run_snapshot_tenants() {
	local s expect=$((tenants * 5 * tenant_rows))
	scenario snapshot-tenants "initial copy of $tenants schemas x 5 tables x $tenant_rows rows ($expect rows)" rows \
		"$(jq -nc --argjson t "$tenants" --argjson r "$tenant_rows" --argjson jobs "$jobs" \
			'{tenants: $t, tables_per_tenant: 5, rows_per_table: $r, jobs: $jobs}')"
	bench_pair snapshot-tenants
	q "$SRC" "CREATE DATABASE bench"
	s=$(db_url "$SRC" bench)
	psql_script "$s" <<SQL
DO \$\$
BEGIN
  FOR s IN 1..$tenants LOOP
    EXECUTE format('CREATE SCHEMA tenant%s', s);
    FOR t IN 1..5 LOOP
      EXECUTE format('CREATE TABLE tenant%s.t%s (id bigint PRIMARY KEY, account int NOT NULL,
                      name text, amount numeric(12,2), created timestamptz)', s, t);
      EXECUTE format('INSERT INTO tenant%s.t%s SELECT g, g %% 97, %L || g, g * 1.25,
                      timestamptz %L + g * interval ''1 minute'' FROM generate_series(1, $tenant_rows) g',
                     s, t, 'customer ', '2024-01-01 00:00+00');
    END LOOP;
  END LOOP;
END \$\$;
VACUUM ANALYZE;
SQL
	q "$s" "SELECT format('CREATE PUBLICATION bench_pub FOR TABLE %s', string_agg(format('%I.%I', schemaname, tablename), ', '))
		FROM pg_tables WHERE schemaname LIKE 'tenant%'" | psql_script "$s"
	snapshot_contenders snapshot-tenants "$s" bench_pub 'tenant%' "$expect"
	bench_pair_destroy
}

# --- verify: source and target compared ---------------------------------------------

# md5_tables URL: per table of schema public, the md5 of its rows' md5s in
# key order, computed in the server: what a user checks by hand.
md5_tables() {
	psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" <<'SQL'
SELECT format('SELECT %L || '' '' || md5(string_agg(md5(t::text), '''' ORDER BY %s)) FROM %s t',
	c.oid::regclass, (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY k.n)
		FROM pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, n), pg_attribute a
		WHERE i.indrelid = c.oid AND i.indisprimary AND a.attrelid = c.oid AND a.attnum = k.attnum),
	c.oid::regclass)
  FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace ORDER BY 1 \gexec
SQL
}

# verify_md5 SOURCE TARGET: md5_tables on both sides at once; the same sums.
verify_md5() {
	local s=$1 t=$2 pid rc=0
	md5_tables "$s" >"$RUN_DIR/md5.source" 2>>"$RUN_DIR/stderr" &
	pid=$!
	md5_tables "$t" >"$RUN_DIR/md5.target" 2>>"$RUN_DIR/stderr" || rc=1
	wait "$pid" || rc=1
	((rc == 0)) || return 1
	if [[ ! -s $RUN_DIR/md5.source ]] || ! cmp -s "$RUN_DIR/md5.source" "$RUN_DIR/md5.target"; then
		echo "bench: error: the md5 sums differ" >>"$RUN_DIR/stderr"
		return 1
	fi
}

# pgcopydb compare data (pgcopydb 0.13 and later) with a work directory of
# its own: it fetches the catalogs it needs there.
verify_pgcopydb() {
	rss_run pgcopydb timeout -k 10 "$timeout_s" pgcopydb compare data --source "$1" --target "$2" \
		--dir "$RUN_DIR/pgcopydb" >"$RUN_DIR/pgcopydb.log" 2>&1 && return 0
	grep -E 'ERROR|FATAL' "$RUN_DIR/pgcopydb.log" | tail -n 1 >>"$RUN_DIR/stderr"
	return 1
}

# pgbench at --scale copied by pgsync bootstrap (the job left stopped), then
# on the same two databases: pgsync verify (which takes the stopped job's
# stream to its point itself), an md5 of every table on both sides, and
# pgcopydb compare data.
# The job of the verify scenario streaming (pgsync run) under a pgbench load
# of 200 tps: verify then asks run for its consistent point and the stream
# pauses. Sets RUNNING_PIDS (run, pgbench).
verify_running_start() {
	local s=$1 t=$2 conf=$3
	PGSYNC_SOURCE_URL=$s PGSYNC_TARGET_URL=$t pgsync -c "$conf" --log warn run >>"$RUN_DIR/run.log" 2>&1 &
	RUNNING_PIDS=$!
	wait_sql "$t" "EXISTS (SELECT 1 FROM pgsync.job WHERE job = 'bench' AND state = 'STREAMING')" 120 ||
		return 1
	pgbench -n -R 200 -T "$timeout_s" -c 2 -d "$s" >"$RUN_DIR/pgbench.out" 2>&1 &
	RUNNING_PIDS+=" $!"
	sleep 2
}

verify_running_stop() {
	local p
	for p in $RUNNING_PIDS; do stop_pid "$p"; done
	for p in $RUNNING_PIDS; do wait "$p" 2>/dev/null || true; done
	RUNNING_PIDS=""
}

run_verify() {
	local s t conf c expect=$((scale * 100011)) status note dur t0 boot extra
	scenario verify "pgsync verify of pgbench scale $scale ($expect rows, 4 tables)" rows \
		"$(jq -nc --argjson scale "$scale" --argjson jobs "$jobs" '{scale: $scale, jobs: $jobs}')" md5
	bench_pair verify
	q "$SRC" "CREATE DATABASE bench"
	q "$TGT" "CREATE DATABASE bench"
	s=$(db_url "$SRC" bench)
	t=$(db_url "$TGT" bench)
	pgbench_published "$s"
	new_run verify-bootstrap
	boot=$RUN_DIR
	conf=$boot/pgsync.conf
	bench_conf "$s" bench_pub public "$conf"
	PGSYNC_SOURCE_URL=$s PGSYNC_TARGET_URL=$t pgsync -c "$conf" --log warn bootstrap >>"$boot/stderr" 2>&1 ||
		bench_die "pgsync bootstrap failed: $(tail -n 1 "$boot/stderr")"
	q "$t" "VACUUM ANALYZE"
	# pgsync-running last: its load changes the data.
	for c in pgsync md5 pgcopydb pgsync-running; do
		new_run "verify-$c"
		WALL=""
		status=ok note="" extra="{}"
		if [[ $c == pgcopydb ]] && ! pgcopydb compare data --help >/dev/null 2>&1; then
			# Not installed: no version, and no exit under set -e.
			note=$({ pgcopydb --version 2>/dev/null || true; } | sed -n 's/^pgcopydb version //p' | head -n 1)
			note=${note:+"pgcopydb $note has no compare data (0.13 and later)"}
			record verify "$c" skipped "" "$expect" "" "${note:-pgcopydb not installed (scripts/install-deps --bench)}"
			continue
		fi
		if [[ $c == pgsync-running ]] && ! verify_running_start "$s" "$t" "$conf"; then
			verify_running_stop
			record verify "$c" failed "" "" "" "pgsync run did not reach STREAMING: $(tail -n 1 "$RUN_DIR/run.log")"
			continue
		fi
		bench_warm
		t0=$(bench_now)
		case $c in
		pgsync | pgsync-running)
			PGSYNC_SOURCE_URL=$s PGSYNC_TARGET_URL=$t rss_run pgsync+children timeout -k 10 "$timeout_s" \
				pgsync -c "$conf" --log warn --json verify --jobs "$jobs" >"$RUN_DIR/verify.json" 2>>"$RUN_DIR/stderr" ||
				status=failed
			dur="exact, at one consistent point while the source runs: each row hashed by the servers (hashtextextended; md5 where encodings or hashes differ), compared per key-hash range"
			[[ $c == pgsync ]] ||
				dur="as pgsync, with pgsync run streaming a 200 tps pgbench load: verify pauses the stream at its consistent point"
			;;
		md5) verify_md5 "$s" "$t" || status=failed
			dur="md5 of every table's rows in key order, each side in one session; not at one point in time" ;;
		pgcopydb) verify_pgcopydb "$s" "$t" || status=failed
			dur="pgcopydb compare data, a work directory of its own" ;;
		esac
		WALL=$(bench_elapsed "$t0")
		cpu_stop
		[[ $c != pgsync-running ]] || verify_running_stop
		if [[ $status == ok && $c == pgsync ]]; then
			[[ $(jq -r '.outcome + " " + (.rows_compared | tostring)' "$RUN_DIR/verify.json") == "identical $expect" ]] ||
				{ status=failed note="verify: $(jq -c '{outcome, rows_compared}' "$RUN_DIR/verify.json" 2>/dev/null)"; }
		elif [[ $status == ok && $c == pgsync-running ]]; then
			# The load adds history rows: at least the scale's rows compared.
			if jq -e --argjson n "$expect" '.outcome == "identical" and .rows_compared >= $n' "$RUN_DIR/verify.json" >/dev/null; then
				extra=$(jq -c '{pause_ms}' "$RUN_DIR/verify.json")
				note="the stream paused $(jq -r .pause_ms "$RUN_DIR/verify.json") ms"
			else
				status=failed note="verify: $(jq -c '{outcome, rows_compared}' "$RUN_DIR/verify.json" 2>/dev/null)"
			fi
		elif [[ $status != ok ]]; then
			note=$(run_reason)
			note=${note:-exit status non-zero}
		fi
		record verify "$c" "$status" "$WALL" "$expect" "$dur" "$note" "$extra"
	done
	bench_pair_destroy
}

# --- WAL: catch-up, large transactions --------------------------------------------

# pg-walcat-only is not an alternative but half of pgsync: the change
# stream written to a file, to tell decoding and encoding from applying.
WAL_CONTENDERS=(pgsync builtin builtin-async pg-walcat-only pg_recvlogical)

wal_durability() {
	case $1 in
	pgsync) echo "synchronous_commit=off (pg-apply's default, as a subscription's), batched commits, confirmed once flushed" ;;
	builtin) echo "subscription synchronous_commit=on" ;;
	builtin-async) echo "subscription synchronous_commit=off (its default)" ;;
	pg-walcat-only) echo "no apply: the change stream to a file (not fsync'd)" ;;
	pg_recvlogical) echo "decoding only (pgoutput options as pg-walcat's): to a file, fsync every 10 s and at exit" ;;
	esac
}

# The marker: one row committed after the workload; a contender has applied
# everything once it is on the target.
marker_ddl="CREATE TABLE bench_marker (id int PRIMARY KEY)"

setup_pgbench() {
	pgbench -i -q -s "$wal_scale" -d "$1" >/dev/null 2>&1 && q "$1" "$marker_ddl"
}
verify_pgbench="SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ':' || (SELECT sum(bbalance) FROM pgbench_branches)
	|| ':' || (SELECT count(*) FROM pgbench_history) || ':' || (SELECT count(*) FROM bench_marker)"
pub_pgbench="pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history, bench_marker"

# wal_prepare SOURCE_DB PUBLICATION_TABLES SETUP_FN: the publication, and per
# contender a target database with the same starting data, a slot made now
# (before the workload) and, for the subscriptions, a disabled subscription.
wal_prepare() {
	local s=$1 tables=$2 setup=$3 c id t sc
	q "$s" "CREATE PUBLICATION bench_pub FOR TABLE $tables"
	for c in "${WAL_CONTENDERS[@]}"; do
		id=${c//-/_}
		q "$TGT" "CREATE DATABASE c_$id"
		t=$(db_url "$TGT" "c_$id")
		[[ $c == pg_recvlogical || $c == pg-walcat-only ]] || "$setup" "$t" || bench_die "cannot set up the target database for $c"
		case $c in
		pgsync | pg-walcat-only) pg-slot create -d "$s" --slot "s_$id" -q >/dev/null ;;
		*) q "$s" "SELECT pg_create_logical_replication_slot('s_$id', 'pgoutput')" >/dev/null ;;
		esac
		case $c in builtin) sc=on ;; builtin-async) sc=off ;; *) continue ;; esac
		q "$t" "CREATE SUBSCRIPTION s_$id CONNECTION '$s' PUBLICATION bench_pub WITH (create_slot = false,
			slot_name = 's_$id', enabled = false, copy_data = false, synchronous_commit = '$sc')"
	done
}

# wal_contenders SCENARIO SOURCE_DB ROWS VERIFY_SQL: the workload is in the
# slots; each contender in turn applies (or decodes) all of it.
wal_contenders() {
	local name=$1 s=$2 rows=$3 verify=$4 end c id t t0 status note want got recv_opts
	# The floor decodes the way pg-walcat asks the server to: protocol 2 with
	# large transactions streamed while in progress from PostgreSQL 14 on.
	if (($(q "$s" "SHOW server_version_num") >= 140000)); then
		recv_opts=(-o proto_version=2 -o streaming=on -o messages=true)
	else
		recv_opts=(-o proto_version=1)
	fi
	q "$s" "INSERT INTO bench_marker VALUES (1)"
	end=$(q "$s" "SELECT pg_current_wal_lsn()")
	want=$(q "$s" "$verify")
	for c in "${WAL_CONTENDERS[@]}"; do
		id=${c//-/_}
		t=$(db_url "$TGT" "c_$id")
		new_run "$name-$c"
		bench_warm
		status=ok note=""
		t0=$(bench_now)
		case $c in
		pgsync)
			rss_run pg-walcat timeout -k 10 "$timeout_s" pg-walcat -d "$s" --slot "s_$id" --publication bench_pub \
				--endpos "$end" --log-level warn 2>>"$RUN_DIR/stderr" |
				rss_run pg-apply timeout -k 10 "$timeout_s" pg-apply -d "$t" --log-level warning \
					2>>"$RUN_DIR/stderr" || status=failed
			;;
		builtin | builtin-async)
			q "$t" "ALTER SUBSCRIPTION s_$id ENABLE"
			wait_sql "$t" "EXISTS (SELECT 1 FROM bench_marker WHERE id = 1)" "$timeout_s" || {
				status=failed
				echo "bench: error: the subscription did not apply the marker within ${timeout_s}s" >>"$RUN_DIR/stderr"
			}
			;;
		pg-walcat-only)
			rss_run pg-walcat timeout -k 10 "$timeout_s" pg-walcat -d "$s" --slot "s_$id" --publication bench_pub \
				--endpos "$end" --log-level warn >"$RUN_DIR/decoded.bin" 2>>"$RUN_DIR/stderr" || status=failed
			;;
		pg_recvlogical)
			rss_run pg_recvlogical timeout -k 10 "$timeout_s" pg_recvlogical -d "$s" --slot "s_$id" --start \
				-f "$RUN_DIR/decoded.bin" "${recv_opts[@]}" -o publication_names=bench_pub \
				--endpos "$end" --no-loop 2>>"$RUN_DIR/stderr" || status=failed
			;;
		esac
		WALL=$(bench_elapsed "$t0")
		cpu_stop
		case $c in builtin | builtin-async) q "$t" "ALTER SUBSCRIPTION s_$id DISABLE" ;; esac
		if [[ $status != ok ]]; then
			note=$(run_reason)
			note=${note:-exit status non-zero}
		elif [[ $c == pg_recvlogical || $c == pg-walcat-only ]]; then
			got=$(stat -c %s "$RUN_DIR/decoded.bin" 2>/dev/null || echo 0)
			if [[ $c == pg_recvlogical ]]; then note="$got bytes of pgoutput"
			else
				note="$got bytes of change stream"
				# the marker's transaction is the last one in the stream
				grep -q $'^INSERT\tpublic\tbench_marker\t1$' "$RUN_DIR/decoded.bin" || got=0
			fi
			((got > 0)) || { status=failed note="nothing decoded, or the marker missing"; }
			rm -f "$RUN_DIR/decoded.bin"
		else
			got=$(q "$t" "$verify")
			[[ $got == "$want" ]] || { status=failed note="target differs from the source after apply"; }
		fi
		record "$name" "$c" "$status" "$WALL" "$rows" "$(wal_durability "$c")" "$note"
	done
}

run_catchup() {
	local s per=$(((transactions + 3) / 4)) n
	n=$((per * 4))
	scenario catchup "catch-up of a $n-transaction pgbench backlog (scale $wal_scale)" "row changes" \
		"$(jq -nc --argjson n "$n" --argjson scale "$wal_scale" '{transactions: $n, clients: 4, scale: $scale}')"
	bench_pair catchup
	q "$SRC" "CREATE DATABASE bench"
	s=$(db_url "$SRC" bench)
	setup_pgbench "$s" || bench_die "pgbench -i failed"
	wal_prepare "$s" "$pub_pgbench" setup_pgbench
	bench_log "catchup: building the backlog ($n transactions)"
	pgbench -n -c 4 -j 2 -t "$per" -d "$s" >"$BENCH_BASE/catchup-pgbench.out" 2>&1 || bench_die "pgbench failed"
	# tpcb-like: three updates and one insert per transaction
	wal_contenders catchup "$s" $((n * 4)) "$verify_pgbench"
	bench_pair_destroy
}

setup_big() {
	q "$1" "CREATE TABLE big (id bigint PRIMARY KEY, k int NOT NULL, v text)" && q "$1" "$marker_ddl"
}

run_bigtx() {
	local s
	scenario bigtx-insert "one transaction inserting $bigtx_rows rows" rows \
		"$(jq -nc --argjson n "$bigtx_rows" '{rows: $n}')"
	bench_pair bigtx-insert
	q "$SRC" "CREATE DATABASE bench"
	s=$(db_url "$SRC" bench)
	setup_big "$s"
	wal_prepare "$s" "big, bench_marker" setup_big
	q "$s" "INSERT INTO big SELECT g, g % 1000, md5(g::text) FROM generate_series(1, $bigtx_rows) g"
	wal_contenders bigtx-insert "$s" "$bigtx_rows" \
		"SELECT count(*) || ':' || sum(k) || ':' || (SELECT count(*) FROM bench_marker) FROM big"
	bench_pair_destroy
}

# 20,000 bytes per row, stored out of line and uncompressed: a real TOAST value.
setup_toast() {
	psql_script "$1" <<SQL
CREATE TABLE doc (id int PRIMARY KEY, n int NOT NULL, body text);
ALTER TABLE doc ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO doc SELECT g, 0, repeat(md5(g::text), 625) FROM generate_series(1, $toast_rows) g;
$marker_ddl;
SQL
}

run_toast() {
	local s rounds=$(((toast_updates + toast_rows - 1) / toast_rows)) i n
	n=$((rounds * toast_rows))
	scenario toast-update "$n updates of rows with an unchanged 20 kB TOASTed column ($toast_rows rows, $rounds transactions)" \
		"row changes" "$(jq -nc --argjson r "$toast_rows" --argjson n "$n" '{rows: $r, updates: $n, value_bytes: 20000}')"
	bench_pair toast-update
	q "$SRC" "CREATE DATABASE bench"
	s=$(db_url "$SRC" bench)
	setup_toast "$s"
	wal_prepare "$s" "doc, bench_marker" setup_toast
	for ((i = 0; i < rounds; i++)); do echo "UPDATE doc SET n = n + 1;"; done | psql_script "$s"
	wal_contenders toast-update "$s" "$n" \
		"SELECT sum(n) || ':' || sum(length(body)) || ':' || (SELECT count(*) FROM bench_marker) FROM doc"
	bench_pair_destroy
}

# --- steady state: lag under a fixed rate ------------------------------------------

# The child of a process we started (GNU time's command).
child_of() { awk '{ print $1 }' "/proc/$1/task/$1/children" 2>/dev/null; }

# stop_pid PID: SIGTERM, then wait up to 10 s; SIGKILL after that.
stop_pid() {
	local pid=$1 i
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# probe_setup SOURCE TARGET: the table a second, slower load inserts into, the
# source's clock_timestamp() in each row, and a trigger on the target (ENABLE
# ALWAYS: replication sessions fire it too) stamping when the row is applied,
# before the target's commit. Both clusters share the machine's clock.
probe_setup() {
	local ddl="CREATE TABLE bench_probe (id bigserial PRIMARY KEY, src_ts timestamptz, tgt_ts timestamptz)"
	q "$1" "$ddl" && psql_script "$2" <<SQL
$ddl;
CREATE FUNCTION bench_stamp() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN NEW.tgt_ts := clock_timestamp(); RETURN NEW; END \$\$;
CREATE TRIGGER bench_stamp BEFORE INSERT ON bench_probe FOR EACH ROW EXECUTE FUNCTION bench_stamp();
ALTER TABLE bench_probe ENABLE ALWAYS TRIGGER bench_stamp;
SQL
}

# probe_stats TARGET: each probe transaction's way from the source's insert to
# the target's apply, in ms, as JSON (nearest-rank percentiles).
probe_stats() {
	q "$1" "SELECT json_build_object('samples', count(*),
		'txn_ms_p50', round(percentile_disc(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
		'txn_ms_p90', round(percentile_disc(0.9) WITHIN GROUP (ORDER BY ms)::numeric, 2),
		'txn_ms_p99', round(percentile_disc(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2),
		'txn_ms_max', round(max(ms)::numeric, 2))
		FROM (SELECT extract(epoch FROM tgt_ts - src_ts) * 1000 AS ms FROM bench_probe) p"
}

run_steady() {
	local c id s t t0 status note want got query apply_t walcat_t sampler lag tps drain sc extra i probe probe_pid txn
	scenario steady "pgbench at $rate tps for ${seconds}s with the consumer running (scale $wal_scale)" \
		"row changes" "$(jq -nc --argjson r "$rate" --argjson d "$seconds" --argjson scale "$wal_scale" \
			'{rate_tps: $r, seconds: $d, clients: 4, scale: $scale, sample_interval_ms: 100}')"
	bench_pair steady
	for c in pgsync builtin builtin-async; do
		id=${c//-/_}
		new_run "steady-$c"
		# Each contender gets its own freshly initialised source and target
		# databases: the same starting data, no backlog.
		q "$SRC" "CREATE DATABASE s_$id"
		q "$TGT" "CREATE DATABASE c_$id"
		s=$(db_url "$SRC" "s_$id")
		t=$(db_url "$TGT" "c_$id")
		{ setup_pgbench "$s" && setup_pgbench "$t" && probe_setup "$s" "$t"; } || bench_die "pgbench -i failed"
		q "$s" "CREATE PUBLICATION bench_pub FOR TABLE $pub_pgbench, bench_probe"
		status=ok note="" apply_t="" walcat_t="" lag='{"samples": 0}' tps=null drain=null txn='{"samples": 0}'
		probe=$RUN_DIR/probe.sql
		echo "INSERT INTO bench_probe (src_ts) VALUES (clock_timestamp());" >"$probe"
		bench_warm
		case $c in
		pgsync)
			pg-slot create -d "$s" --slot "s_$id" -q >/dev/null
			mkfifo "$RUN_DIR/pipe"
			/usr/bin/time -f '%M %U %S' -o "$RUN_DIR/rss.pg-apply" pg-apply -d "$t" --checkpoint "$RUN_DIR/applied.lsn" \
				--log-level warning <"$RUN_DIR/pipe" 2>>"$RUN_DIR/stderr" &
			apply_t=$!
			/usr/bin/time -f '%M %U %S' -o "$RUN_DIR/rss.pg-walcat" pg-walcat -d "$s" --slot "s_$id" --publication bench_pub \
				--ack-file "$RUN_DIR/applied.lsn" --log-level warn >"$RUN_DIR/pipe" 2>>"$RUN_DIR/stderr" &
			walcat_t=$!
			query="SELECT applied_lsn FROM pgsync.job WHERE job = 's_$id'"
			;;
		*)
			[[ $c == builtin ]] && sc=on || sc=off
			q "$t" "CREATE SUBSCRIPTION s_$id CONNECTION '$s' PUBLICATION bench_pub
				WITH (copy_data = false, synchronous_commit = '$sc')"
			query="SELECT remote_lsn FROM pg_replication_origin_status
				WHERE external_id = (SELECT 'pg_' || oid FROM pg_subscription WHERE subname = 's_$id')"
			;;
		esac
		q "$s" "INSERT INTO bench_marker VALUES (1)"
		if ! wait_sql "$t" "EXISTS (SELECT 1 FROM bench_marker WHERE id = 1)" 60; then
			status=failed note="the consumer did not start applying within 60s"
		else
			# shellcheck disable=SC2153 # set by scripts/bench
			"$SAMPLER" "$s" "$t" "$query" 100 "$RUN_DIR/lag.txt" >"$RUN_DIR/sampler.out" 2>>"$RUN_DIR/stderr" &
			sampler=$!
			# The probes ride on the load: 50 a second, one client.
			pgbench -n -R 50 -T "$seconds" -c 1 -f "$probe" -d "$s" >"$RUN_DIR/probe.out" 2>&1 &
			probe_pid=$!
			pgbench -n -R "$rate" -T "$seconds" -c 4 -j 2 -d "$s" >"$RUN_DIR/pgbench.out" 2>&1 ||
				{ status=failed note="pgbench failed"; }
			wait "$probe_pid" || { status=failed note="the probe's pgbench failed"; }
			# Lag is sampled while the load runs, not while it drains.
			stop_pid "$sampler"
			wait "$sampler" 2>/dev/null || true
			lag=$(lag_stats "$RUN_DIR/lag.txt")
			tps=$(sed -n -E 's/^tps = ([0-9.]+) .*/\1/p' "$RUN_DIR/pgbench.out" | head -n 1)
			tps=${tps:-null}
			# How long the consumer still needs once the load stops.
			t0=$(bench_now)
			q "$s" "INSERT INTO bench_marker VALUES (2)"
			if wait_sql "$t" "EXISTS (SELECT 1 FROM bench_marker WHERE id = 2)" "$timeout_s"; then
				drain=$(bench_elapsed "$t0")
				txn=$(probe_stats "$t")
			else
				status=failed note="not caught up ${timeout_s}s after the load stopped"
			fi
		fi
		if [[ $c == pgsync ]]; then
			stop_pid "$(child_of "$walcat_t")"
			wait "$walcat_t" || { status=failed; note=${note:-"pg-walcat: $(run_reason)"}; }
			# pg-apply ends at the end of its input.
			for ((i = 0; i < 100; i++)); do kill -0 "$apply_t" 2>/dev/null || break; sleep 0.1; done
			stop_pid "$(child_of "$apply_t")"
			wait "$apply_t" || { status=failed; note=${note:-"pg-apply: $(run_reason)"}; }
		else
			q "$t" "DROP SUBSCRIPTION s_$id" >/dev/null
		fi
		if [[ $status == ok ]]; then
			want=$(q "$s" "$verify_pgbench")
			got=$(q "$t" "$verify_pgbench")
			[[ $got == "$want" ]] || { status=failed note="target differs from the source"; }
		fi
		extra=$(jq -nc --argjson lag "$lag" --argjson tps "$tps" --argjson drain "$drain" --argjson txn "$txn" \
			'{lag: $lag, achieved_tps: $tps, drain_s: $drain, txn: $txn}')
		record steady "$c" "$status" "" "" "$(wal_durability "$c")" "$note" "$extra"
	done
	bench_pair_destroy
}
