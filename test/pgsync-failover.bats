#!/usr/bin/env bats
# High-availability sources on PostgreSQL 17+ (PGSYNC_MAJOR, default 17): a
# primary and a physical standby with slot synchronization (test/lib/ha.bash).
# A failover under a write load (old primary crashed, standby promoted) is
# ridden out by pgsync run through a multi-host source connection: it
# reconnects to the new primary, goes on on its timeline from the synced
# failover slot and ends with identical tables, no resync. The old primary
# restarted after the promotion is never streamed from. A standby that
# missed what the target applied, then promoted, is exit 4 with nothing of
# its timeline applied, on every run. check names each standby setting
# slot synchronization needs, and a slot of the job's name on a new primary
# that is no synced copy is exit 4. Before 17, source.failover_slot = on is
# refused and the default changes nothing: that test runs on
# PGSYNC_OLD_MAJOR (default PGSYNC_MAJOR when it is below 17, else 15) on
# any PGSYNC_MAJOR; the others skip below 17 (make check-versions). The
# source role has the guide's privileges only, the target role is no
# superuser; two publications, serial keys, a table with capital letters.

load lib/cluster
load lib/ha
load pgsync-helpers

# need_17: failover slots and slot synchronization are PostgreSQL 17's.
need_17() {
	(($(ha_major) >= 17)) ||
		skip "failover slots and slot synchronization need PostgreSQL 17 or later, PGSYNC_MAJOR is $(ha_major)"
}

# old_major: the pre-17 source of the refusal test.
old_major() {
	local m
	m=$(ha_major)
	((m < 17)) || m=15
	printf '%s\n' "${PGSYNC_OLD_MAJOR:-$m}"
}

setup_file() {
	if (($(ha_major) < 17)); then
		# Only the refusal test runs: a target, no primary and standby.
		cluster_start tgt
		lp_target_role fo_tgt
		return
	fi
	ha_start src stby
	cluster_start tgt
	lp_roles_for_tests fo_src fo_tgt
	psql_at src -c 'CREATE TABLE fo_a (id serial PRIMARY KEY, v text);
		CREATE TABLE "FoCaps" (id bigserial PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
		INSERT INTO fo_a (v) SELECT $$seed$$ || g FROM generate_series(1, 200) g;
		INSERT INTO "FoCaps" (n) SELECT g FROM generate_series(1, 10) g;
		CREATE PUBLICATION fo_pub FOR TABLE fo_a;
		CREATE PUBLICATION fo2_pub FOR TABLE "FoCaps"' >/dev/null
	job_conf fo fo_slot fo_pub,fo2_pub public.fo_a,public.FoCaps safety.max_retries=10 >/dev/null
	SRC_URL=$(ha_url src stby fo_src)
	export SRC_URL
}

teardown_file() {
	if run_alive; then stop_run TERM; fi
	cluster_stop_all
}

teardown() {
	[[ ! -d $BATS_FILE_TMPDIR/writer ]] || touch "$BATS_FILE_TMPDIR/writer/stop"
	kill_test_pids
}

# writer URL: inserts and updates through URL (both hosts, whichever is the
# primary) until writer/stop exists, at most 20000 rounds; failed rounds
# (no primary for a moment) are retried after a pause.
writer() {
	local url=$1 i=0
	mkdir -p "$BATS_FILE_TMPDIR/writer"
	rm -f "$BATS_FILE_TMPDIR/writer/stop"
	(
		while [[ ! -f $BATS_FILE_TMPDIR/writer/stop ]] && ((i < 20000)); do
			i=$((i + 1))
			psql -X -qAt -d "$url" -c "INSERT INTO fo_a (v) SELECT 'w$i.' || g FROM generate_series(1, 20) g;
				UPDATE \"FoCaps\" SET n = n + 1 WHERE id = 1 + $i % 10;
				INSERT INTO \"FoCaps\" (n) VALUES ($i)" >/dev/null 2>&1 || sleep 0.2
		done
	) 3>&- &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
}

stop_writer() {
	touch "$BATS_FILE_TMPDIR/writer/stop"
	wait_until 30 bash -c "! kill -0 $(tail -n 1 "$BATS_TEST_TMPDIR/pids") 2>/dev/null"
}

# same_on CLUSTER TABLE...: CLUSTER and the target hold the same rows.
same_on() {
	local c=$1 t url
	shift
	url=$(cluster_url "$c")
	for t in "$@"; do
		[[ $(table_checksum "$url" "$t") == $(table_checksum "$tgt_URL" "$t") ]] || {
			echo "table $t differs between $c and the target" >&2
			return 1
		}
	done
}

# applied_on CLUSTER JOB: the target applied everything CLUSTER has written.
applied_on() {
	local lsn
	lsn=$(psql_at "$1" -c "SELECT pg_current_wal_lsn()")
	[[ $(psql_at tgt -c "SELECT applied_lsn >= '$lsn' FROM pgsync.job WHERE job = '$2'") == t ]]
}

@test "bootstrap makes the job's slot a failover slot on a 17+ primary by default" {
	need_17
	run pgs fo bootstrap
	[ "$status" -eq 0 ]
	[ "$(psql_at src -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fo_slot'")" = t ]
}

@test "a failover under a write load: run follows the new primary on its timeline, no resync, identical tables" {
	need_17
	start_run fo
	wait_until 60 state_is fo STREAMING
	writer "$(ha_url src stby)"
	# Decoding moves the slot; the standby's copy becomes synced and persistent.
	wait_until 120 ha_slot_synced stby fo_slot
	# check and status call it ready, naming the standby without its password.
	local sb="$(cluster_url stby) password=sekrit"
	PGSYNC_STANDBY_URLS="$sb" run pgs fo check
	[ "$status" -eq 0 ]
	[[ $output == *"ok    standby $(cluster_url stby): ready for a failover: replication slot fo_slot is synced, persistent and valid"* ]]
	[[ $output != *sekrit* && $output != *synchronized_standby_slots* ]]
	PGSYNC_STANDBY_URLS="$sb" run pgs fo status
	[[ $output == *"failover:        ready to $(cluster_url stby)"* ]]
	PGSYNC_STANDBY_URLS="$sb" run pgs fo status --json
	jq -e '.failover.ready == true and .failover.standbys[0].ready == true' <<<"$output"
	PGSYNC_STANDBY_URLS="$sb" run pgs fo status --prometheus
	[[ $output == *$'\npgsync_failover_ready{pgsync_job="fo",standby="'"$(cluster_url stby)"'"} 1'* ]]
	[[ $output != *sekrit* ]]
	sleep 3
	local before rows_before t0 t1 switch
	before=$(job_field fo applied_lsn)
	cluster_stop src --mode immediate
	t0=$EPOCHREALTIME
	ha_promote stby
	switch=$(psql_at stby -c "SELECT pg_current_wal_insert_lsn()")
	# Streaming again: a transaction of the new timeline applied.
	wait_until 180 sql_is tgt t "SELECT applied_lsn > '$switch' FROM pgsync.job WHERE job = 'fo'"
	t1=$EPOCHREALTIME
	sleep 3
	stop_writer
	wait_until 120 applied_on stby fo
	run_alive
	same_on stby fo_a FoCaps
	rows_before=$(psql_at tgt -c "SELECT count(*) FROM fo_a")
	wait_until 60 state_is fo STREAMING
	[ "$(job_field fo source_timeline)" = 2 ]
	[ "$(job_field fo last_error)" = "" ]
	[ "$(psql_at tgt -c "SELECT reconnects > 0 FROM pgsync.job_runtime WHERE job = 'fo'")" = t ]
	grep -q "follows timeline 1 at" "$(current_run_log)"
	! grep -q RESYNC_REQUIRED "$(current_run_log)"
	printf '# promotion to streaming again: %.1f s; %s rows of fo_a and %s of FoCaps compared (applied %s before the crash)\n' \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rows_before" "$(psql_at tgt -c 'SELECT count(*) FROM "FoCaps"')" "$before" >&3
}

@test "the old primary restarted after the promotion is never streamed from" {
	need_17
	run_alive
	local url old_confirmed
	cluster_start src >/dev/null
	# A split brain: the old primary takes a write the new one never had.
	psql_at src -c "INSERT INTO fo_a (v) VALUES ('old-primary')" >/dev/null
	old_confirmed=$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'fo_slot'")
	# The stream breaks; the source connection lists the old primary first.
	psql_at stby -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'fo_slot'" >/dev/null
	wait_until 60 grep -q "the source is on timeline 1, before timeline 2" "$(current_run_log)"
	sleep 3
	run_alive
	[ "$(psql_at tgt -c "SELECT count(*) FROM fo_a WHERE v = 'old-primary'")" = 0 ]
	[ "$(psql_at src -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'fo_slot'")" = "$old_confirmed" ]
	# Gone again: the job goes on on the new primary.
	cluster_stop src --mode immediate
	psql_at stby -c "INSERT INTO fo_a (v) VALUES ('after-split')" >/dev/null
	wait_until 120 sql_is tgt 1 "SELECT count(*) FROM fo_a WHERE v = 'after-split'"
	wait_until 60 applied_on stby fo
	same_on stby fo_a FoCaps
	[ "$(job_field fo source_timeline)" = 2 ]
	stop_run TERM
	[ "$RUN_STATUS" -eq 0 ]
}

@test "a standby that missed what the target applied, then promoted: exit 4, nothing of its timeline applied, again on the next run" {
	need_17
	ha_start src2 stby2
	psql_at src2 -c "CREATE ROLE fo_src LOGIN REPLICATION; GRANT CONNECT ON DATABASE postgres TO fo_src;
		CREATE TABLE fo_b (id serial PRIMARY KEY, v text); GRANT SELECT ON fo_b TO fo_src;
		GRANT SELECT ON SEQUENCE fo_b_id_seq TO fo_src;
		INSERT INTO fo_b (v) SELECT 'seed' FROM generate_series(1, 20);
		CREATE PUBLICATION fo_b_pub FOR TABLE fo_b" >/dev/null
	job_conf fob fob_slot fo_b_pub public.fo_b safety.max_retries=10 >/dev/null
	local url
	url=$(ha_url src2 stby2 fo_src)
	SRC_URL=$url run pgs fob bootstrap
	[ "$status" -eq 0 ]
	SRC_URL=$url start_run fob
	wait_until 60 state_is fob STREAMING
	psql_at src2 -c "INSERT INTO fo_b (v) SELECT 'both' FROM generate_series(1, 10)" >/dev/null
	for _ in $(seq 60); do
		ha_slot_synced stby2 fob_slot && break
		psql_at src2 -c "INSERT INTO fo_b (v) VALUES ('tick')" >/dev/null
		sleep 1
	done
	ha_slot_synced stby2 fob_slot
	wait_until 60 ha_caught_up src2 stby2
	# A standby has no failover slots of its own.
	run pg-slot create -d "$(cluster_url stby2)" --slot fo_p4 --failover
	[ "$status" -eq 3 ]
	[[ $output == *"pg-slot: error: the source is a standby (in recovery): a failover slot is created on the primary"* ]]
	# Nor is a standby streamed from, even where its synced slot is found.
	run pg-walcat -d "$(cluster_url stby2) user=fo_src" --slot fob_slot --publication fo_b_pub --no-loop
	[ "$status" -eq 1 ]
	[[ $output == *"pg-walcat: warning: the source is in recovery (a standby): not streaming from it"* ]]
	# Without synchronized_standby_slots the target may get ahead of a standby.
	cluster_set src2 "synchronized_standby_slots=" >/dev/null
	cluster_stop stby2 --mode fast
	psql_at src2 -c "INSERT INTO fo_b (v) SELECT 'only-old' FROM generate_series(1, 10)" >/dev/null
	wait_until 60 sql_is tgt 10 "SELECT count(*) FROM fo_b WHERE v = 'only-old'"
	local applied
	applied=$(job_field fob applied_lsn)
	cluster_stop src2 --mode immediate
	cluster_start stby2 >/dev/null
	ha_promote stby2
	psql_at stby2 -c "INSERT INTO fo_b (v) VALUES ('new-timeline')" >/dev/null
	wait_run 120
	[ "$RUN_STATUS" -eq 4 ]
	[ "$(job_state fob)" = RESYNC_REQUIRED ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM fo_b WHERE v = 'new-timeline'")" = 0 ]
	[ "$(job_field fob applied_lsn)" = "$applied" ]
	[ "$(job_field fob source_timeline)" = 1 ]
	[[ $(job_field fob last_error) == *"left timeline 1 at "*", before the applied position $applied on timeline 1"* ]]
	# Nothing confirmed on the new primary's slot past what it had.
	[ "$(psql_at stby2 -c "SELECT confirmed_flush_lsn <= '$applied' FROM pg_replication_slots WHERE slot_name = 'fob_slot'")" = t ]
	SRC_URL=$url run pgs fob run
	[ "$status" -eq 4 ]
	[ "$(psql_at tgt -c "SELECT count(*) FROM fo_b WHERE v = 'new-timeline'")" = 0 ]
	# pg-walcat alone, from the job's checkpoint, refuses the same way.
	run pg-walcat -d "$(cluster_url stby2) user=fo_src" --slot fob_slot --publication fo_b_pub \
		--ack-file "$BATS_FILE_TMPDIR/fob.state/applied.lsn" --no-loop
	[ "$status" -eq 4 ]
	[[ $output == *"pg-walcat: error: the source's timeline 2 left timeline 1 at "*", before the applied position $applied on timeline 1: the target holds transactions the new primary never had: resync required"* ]]
	run pg-ack -d "$(cluster_url stby2) user=fo_src" --slot fob_slot --from "$BATS_FILE_TMPDIR/fob.state/applied.lsn"
	[ "$status" -eq 4 ]
	[[ $output == *"nothing confirmed, resync required"* ]]
}

@test "pg-slot: --failover, --no-failover and alter on a 17+ primary; refused for a temporary slot and while a consumer holds it" {
	need_17
	local u
	u=$(cluster_url stby2)
	run pg-slot create -d "$u" --slot fo_p1 --failover
	[ "$status" -eq 0 ]
	[ "$(psql_at stby2 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fo_p1'")" = t ]
	run pg-slot create -d "$u" --slot fo_p2 --no-failover
	[ "$status" -eq 0 ]
	[ "$(psql_at stby2 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fo_p2'")" = f ]
	run pg-slot alter -d "$u" --slot fo_p2 --failover
	[ "$status" -eq 0 ]
	[ "$(psql_at stby2 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fo_p2'")" = t ]
	run pg-slot create -d "$u" --slot fo_p2 --if-not-exists --no-failover
	[ "$status" -eq 0 ]
	[ "$(psql_at stby2 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fo_p2'")" = f ]
	run pg-slot alter -d "$u" --slot fo_p2
	[ "$status" -eq 2 ]
	run pg-slot create -d "$u" --slot fo_p3 --export-snapshot --temporary --failover
	[ "$status" -eq 2 ]
	[[ $output == *"a temporary slot is never synchronized"* ]]
	# A consumer holds the slot: the clear error, nothing changed.
	pg-walcat -d "$u" --slot fo_p2 --publication fo_b_pub >/dev/null 2>"$BATS_TEST_TMPDIR/p2.err" 3>&- &
	echo $! >>"$BATS_TEST_TMPDIR/pids"
	wait_until 60 sql_is stby2 t "SELECT active FROM pg_replication_slots WHERE slot_name = 'fo_p2'" ||
		{ cat "$BATS_TEST_TMPDIR/p2.err"; false; }
	run pg-slot alter -d "$u" --slot fo_p2 --failover
	[ "$status" -eq 1 ]
	[[ $output == *'pg-slot: error: replication slot "fo_p2" is active for PID '*"stop the consumer first"* ]]
	[ "$(psql_at stby2 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fo_p2'")" = f ]
	kill_test_pids
}

@test "before PostgreSQL 17: source.failover_slot = on is refused with the message, the default changes nothing" {
	local major url
	major=$(old_major)
	cluster_start old --major "$major"
	psql_at old -c "CREATE ROLE fo_src LOGIN REPLICATION; GRANT CONNECT ON DATABASE postgres TO fo_src;
		CREATE TABLE fo_c (id serial PRIMARY KEY, v text); GRANT SELECT ON fo_c TO fo_src;
		GRANT SELECT ON SEQUENCE fo_c_id_seq TO fo_src;
		INSERT INTO fo_c (v) SELECT 'seed' FROM generate_series(1, 20);
		CREATE PUBLICATION fo_c_pub FOR TABLE fo_c" >/dev/null
	url="$(cluster_url old) user=fo_src"
	job_conf foc foc_slot fo_c_pub public.fo_c source.failover_slot=on >/dev/null
	SRC_URL=$url run pgs foc check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  source: source.failover_slot = on needs PostgreSQL 17 or later, and the source runs $major; fix: set source.failover_slot = off or leave it out"* ]]
	SRC_URL=$url run pgs foc bootstrap
	[ "$status" -eq 3 ]
	[[ $output == *"source.failover_slot = on needs PostgreSQL 17 or later"* ]]
	[ "$(psql_at old -c "SELECT count(*) FROM pg_replication_slots")" = 0 ]
	run pg-slot create -d "$url" --slot foc_x --failover
	[ "$status" -eq 3 ]
	[[ $output == *"pg-slot: error: a failover slot needs PostgreSQL 17 or later, and the source runs $major: leave out --failover"* ]]
	job_conf foc foc_slot fo_c_pub public.fo_c >/dev/null
	SRC_URL=$url run pgs foc bootstrap
	[ "$status" -eq 0 ]
	[ "$(psql_at old -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'foc_slot'")" = 1 ]
}

@test "slot sync off, a same-named slot on the standby, synchronized_standby_slots stale or empty: check and status say why" {
	need_17
	ha_start src3 stby3
	cluster_set stby3 sync_replication_slots=off >/dev/null
	psql_at src3 -c "CREATE ROLE fo_src LOGIN REPLICATION; GRANT CONNECT ON DATABASE postgres TO fo_src;
		CREATE TABLE fo_d (id serial PRIMARY KEY, v text); GRANT SELECT ON fo_d TO fo_src;
		GRANT SELECT ON SEQUENCE fo_d_id_seq TO fo_src;
		INSERT INTO fo_d (v) SELECT 'seed' FROM generate_series(1, 20);
		CREATE PUBLICATION fo_d_pub FOR TABLE fo_d" >/dev/null
	job_conf fod fod_slot fo_d_pub public.fo_d >/dev/null
	local url sb
	url=$(ha_url src3 stby3 fo_src)
	sb=$(cluster_url stby3)
	SRC_URL=$url run pgs fod bootstrap
	[ "$status" -eq 0 ]
	# The key changed for an existing job: run alters the slot before it streams.
	job_conf fod fod_slot fo_d_pub public.fo_d source.failover_slot=off >/dev/null
	SRC_URL=$url start_run fod
	wait_until 60 state_is fod STREAMING
	[ "$(psql_at src3 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fod_slot'")" = f ]
	grep -q "replication slot fod_slot: no-failover now, as source.failover_slot = off says" "$(current_run_log)"
	stop_run TERM
	job_conf fod fod_slot fo_d_pub public.fo_d >/dev/null
	SRC_URL=$url start_run fod
	wait_until 60 grep -q "replication slot fod_slot: failover now, as source.failover_slot = auto says" "$(current_run_log)"
	wait_until 60 sql_is src3 t "SELECT active FROM pg_replication_slots WHERE slot_name = 'fod_slot'"
	[ "$(psql_at src3 -c "SELECT failover FROM pg_replication_slots WHERE slot_name = 'fod_slot'")" = t ]
	psql_at src3 -c "INSERT INTO fo_d (v) SELECT 'more' FROM generate_series(1, 10)" >/dev/null
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[ "$status" -eq 0 ]
	[[ $output == *"warn  standby $sb: sync_replication_slots is off: the job's slot is not synchronized to it; fix: ALTER SYSTEM SET sync_replication_slots = on"* ]]
	[[ $output == *"warn  standby $sb: replication slot fod_slot is not on it"* ]]
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod status
	[[ $output == *"failover:        NOT ready to $sb: sync_replication_slots is off"* ]]
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod status --prometheus
	[[ $output == *$'\npgsync_failover_ready{pgsync_job="fod",standby="'"$sb"'"} 0'* ]]
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod status --json
	jq -e '.failover.ready == false and (.failover.standbys[0].reason | startswith("sync_replication_slots is off"))' <<<"$output"
	# A slot of the job's name made on the standby blocks every slot's sync.
	psql_at stby3 -c "SELECT pg_create_logical_replication_slot('fod_slot', 'pgoutput')" >/dev/null
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[ "$status" -eq 3 ]
	[[ $output == *"FAIL  standby $sb: replication slot fod_slot on it is not a synced copy of the primary's: it blocks the synchronization of every slot; fix: drop it on the standby"* ]]
	psql_at stby3 -c "SELECT pg_drop_replication_slot('fod_slot')" >/dev/null
	# The primary waits for standbys it names: a missing one stalls decoding.
	cluster_set src3 synchronized_standby_slots=gone_phys >/dev/null
	SRC_URL=$url run pgs fod check
	[[ $output == *"warn  source: synchronized_standby_slots names gone_phys, which does not exist: logical decoding waits for it, and the job stalls"* ]]
	cluster_set src3 "synchronized_standby_slots=" >/dev/null
	SRC_URL=$url run pgs fod check
	[[ $output == *"warn  source: synchronized_standby_slots is empty while standbys exist"* ]]
	cluster_set src3 synchronized_standby_slots=stby3_phys >/dev/null
}

@test "check names each standby setting slot synchronization needs, and a stale physical slot the primary waits for" {
	need_17
	local url sb conninfo
	url=$(ha_url src3 stby3 fo_src)
	sb=$(cluster_url stby3)
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[ "$status" -eq 0 ]
	[[ $output != *hot_standby_feedback* && $output != *primary_slot_name* && $output != *"names no dbname"* ]]
	cluster_set stby3 hot_standby_feedback=off >/dev/null
	wait_until 30 sql_is stby3 off "SHOW hot_standby_feedback"
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[ "$status" -eq 0 ]
	[[ $output == *"warn  standby $sb: hot_standby_feedback is off: slot synchronization needs it; fix: ALTER SYSTEM SET hot_standby_feedback = on"* ]]
	cluster_set stby3 hot_standby_feedback=on "primary_slot_name=" >/dev/null
	wait_until 30 sql_is stby3 "" "SHOW primary_slot_name"
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[[ $output == *"warn  standby $sb: primary_slot_name is empty: slot synchronization needs the standby's own physical slot on the primary; fix: create a physical slot on the primary and set primary_slot_name on the standby"* ]]
	[[ $output != *hot_standby_feedback* ]]
	conninfo=$(psql_at stby3 -c "SHOW primary_conninfo")
	[[ $conninfo == *dbname=postgres* ]]
	cluster_set stby3 primary_slot_name=stby3_phys "primary_conninfo=${conninfo/ dbname=postgres/}" >/dev/null
	wait_until 30 sql_is stby3 f "SELECT setting ~ 'dbname' FROM pg_settings WHERE name = 'primary_conninfo'"
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[[ $output == *"warn  standby $sb: primary_conninfo names no dbname: slot synchronization needs one; fix: add dbname=<the job's database> to primary_conninfo on the standby"* ]]
	[[ $output != *primary_slot_name* ]]
	cluster_set stby3 "primary_conninfo=$conninfo" >/dev/null
	wait_until 60 sql_is src3 streaming "SELECT state FROM pg_stat_replication WHERE application_name = 'stby3'"
	# A physical slot that exists but no standby streams through.
	psql_at src3 -c "SELECT pg_create_physical_replication_slot('idle_phys')" >/dev/null
	cluster_set src3 "synchronized_standby_slots=stby3_phys, idle_phys" >/dev/null
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[ "$status" -eq 0 ]
	[[ $output == *"warn  source: synchronized_standby_slots names idle_phys, which is inactive: logical decoding waits for its standby, and the job stalls while it is down; fix: bring its standby back, or remove idle_phys from synchronized_standby_slots"* ]]
	[[ $output != *"names stby3_phys"* ]]
	cluster_set src3 synchronized_standby_slots=stby3_phys >/dev/null
	psql_at src3 -c "SELECT pg_drop_replication_slot('idle_phys')" >/dev/null
	SRC_URL=$url PGSYNC_STANDBY_URLS="$sb" run pgs fod check
	[[ $output != *idle_phys* && $output != *"names no dbname"* && $output != *primary_slot_name* ]]
}

@test "slot sync off: after a failover the missing slot is exit 4; a slot of the job's name made on the new primary is no synced copy: exit 4 with the message" {
	need_17
	run_alive
	# The standby has no copy of the slot: a failover to it is a resync.
	wait_until 60 ha_caught_up src3 stby3
	cluster_stop src3 --mode immediate
	ha_promote stby3
	wait_run 180
	[ "$RUN_STATUS" -eq 4 ]
	[ "$(job_state fod)" = RESYNC_REQUIRED ]
	[[ $(job_field fod last_error) == *"replication slot fod_slot no longer exists on the source"* || $(job_field fod last_error) == *'replication slot "fod_slot" does not exist'* ]]
	# A slot of the job's name made on the new primary knows nothing of the
	# job: never taken for the synced copy.
	local applied
	applied=$(job_field fod applied_lsn)
	psql_at stby3 -c "SELECT pg_create_logical_replication_slot('fod_slot', 'pgoutput')" >/dev/null
	run pg-walcat -d "$(cluster_url stby3) user=fo_src" --slot fod_slot --publication fo_d_pub \
		--ack-file "$BATS_FILE_TMPDIR/fod.state/applied.lsn" --no-loop
	[ "$status" -eq 4 ]
	[[ $output == *"pg-walcat: error: the source's timeline 2 "*", but replication slot \"fod_slot\" on it is not the job's failover slot synced before the promotion (synced is false): continuity is lost, resync required"* ]]
	SRC_URL=$(ha_url src3 stby3 fo_src) run pgs fod run
	[ "$status" -eq 4 ]
	[ "$(job_field fod applied_lsn)" = "$applied" ]
	[ "$(psql_at stby3 -c "SELECT confirmed_flush_lsn > '$applied' FROM pg_replication_slots WHERE slot_name = 'fod_slot'")" = t ]
}
