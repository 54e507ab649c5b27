#!/usr/bin/env bats
# pgsync-config and pgsync's command line: strict configuration with
# FILE:LINE errors (exit 2), the derived message limit and the memory budget,
# connection strings shown without passwords. No server needed.

load lib/common
bats_require_minimum_version 1.5.0

setup() {
	cd "$BATS_TEST_TMPDIR" || return
	cat >base.conf <<'EOF'
job.name = orders
source.slot = orders_slot
source.publication = orders_pub
replication.tables = public.orders, sales.items
EOF
}

# conf LINES...: base.conf plus the given lines as test.conf.
conf() {
	{
		cat base.conf
		printf '%s\n' "$@"
	} >test.conf
}

# mini NAME PUBLICATION TABLES: the four required keys in NAME.conf.
mini() {
	printf 'job.name = j\nsource.slot = s\nsource.publication = %s\nreplication.tables = %s\n' "$2" "$3" >"$1.conf"
}

# refused NAME MESSAGE: pgsync-config -c NAME.conf exits 2 with exactly the
# one error line "NAME.conf:MESSAGE".
refused() {
	run pgsync-config -c "$1.conf"
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync-config: error: $1.conf:$2" ]
}

@test "a minimal configuration is valid and every key gets its documented default" {
	run pgsync-config -c base.conf
	[ "$status" -eq 0 ]
	[[ $output == *"job.state_dir = $BATS_TEST_TMPDIR/orders.state  # default"* ]]
	[[ $output == *"replication.tables = public.orders,sales.items"* ]]
	[[ $output == *"safety.auto_create_publication = false  # default"* ]]
	[[ $output == *"safety.heartbeat_interval = 10000ms  # default"* ]]
	[[ $output == *"safety.wal_retention_action = warn  # default"* ]]
	[[ $output == *"resources.snapshot_timeout = 21600000ms  # default"* ]]
	[[ $output == *"resources.max_parallel_copies = 4  # default"* ]]
	[[ $output == *"resources.memory_budget_mb = 336  # default"* ]]
}

@test "max_message_bytes unset is derived from the budget and capped at 32 MiB" {
	run pgsync-config -c base.conf
	[[ $output == *"resources.max_message_bytes = 33554432  # derived"* ]]
	# 80 MiB budget: (80 - 3 x 16 - 4 x 2 x 2 - 10) MiB / 6 = 1 MiB.
	conf "resources.memory_budget_mb = 80"
	run pgsync-config -c test.conf
	[ "$status" -eq 0 ]
	[[ $output == *"resources.max_message_bytes = 1048576  # derived"* ]]
}

@test "a budget that does not cover the sum is exit 2 at the budget's line" {
	conf "resources.max_batch_bytes = 64MB" "resources.memory_budget_mb = 200"
	refused test "6: resources.memory_budget_mb = 200 does not cover 3 x max_batch_bytes + max_parallel_copies x 2 x chunk_bytes + 6 x 1 MiB (smallest derived max_message_bytes) + 10 MiB = 224 MiB"
}

@test "resources.max_inflight_bytes is accepted but not counted in the budget, which bounds nothing by it" {
	conf "resources.max_inflight_bytes = 1TB"
	run pgsync-config -c test.conf
	[ "$status" -eq 0 ]
	[[ $output == *"resources.max_inflight_bytes = 1099511627776"* ]]
	[[ $output == *"resources.max_message_bytes = 33554432  # derived"* ]]
}

@test "a chunked copy's frames in the budget are its chunks: chunk_bytes, not buffer_size_kb" {
	conf "resources.snapshot_mode = chunked" "resources.chunk_bytes = 64MB" "resources.buffer_size_kb = 8"
	refused test "7: resources.memory_budget_mb = 336 does not cover 3 x max_batch_bytes + max_parallel_copies x 2 x chunk_bytes + 6 x 1 MiB (smallest derived max_message_bytes) + 10 MiB = 576 MiB"
	conf "resources.snapshot_mode = single" "resources.chunk_bytes = 64MB"
	run pgsync-config -c test.conf
	[ "$status" -eq 0 ]
	conf "resources.snapshot_mode = chunks" "resources.chunk_rows = 0" "resources.chunk_group_seconds = 1min"
	run pgsync-config -c test.conf
	[ "$status" -eq 2 ]
	[[ $output == *'test.conf:5: invalid resources.snapshot_mode "chunks": expected chunked|single'* ]]
	[[ $output == *'test.conf:6: invalid resources.chunk_rows "0": expected an integer from 1 to 1000000000'* ]]
	[[ $output == *'test.conf:7: invalid resources.chunk_group_seconds "1min": expected an integer from 1 to 86400'* ]]
}

@test "an explicit max_message_bytes is counted six times in the budget" {
	conf "resources.max_message_bytes = 100MB"
	refused test "5: resources.memory_budget_mb = 336 does not cover 3 x max_batch_bytes + max_parallel_copies x 2 x chunk_bytes + 6 x max_message_bytes + 10 MiB = 674 MiB"
	conf "resources.max_message_bytes = 100MB" "resources.memory_budget_mb = 674"
	run pgsync-config -c test.conf
	[ "$status" -eq 0 ]
	[[ $output == *"resources.max_message_bytes = 104857600"* ]]
}

@test "an unknown key is exit 2 with file and line" {
	conf "safety.heartbeat = 10s"
	refused test '5: unknown key "safety.heartbeat"'
}

@test "a duplicate key is exit 2 naming both lines" {
	conf "source.slot = other"
	refused test '5: duplicate key "source.slot" (first set on line 2)'
}

@test "bad values are each reported with their line, all in one run" {
	conf "safety.wal_retention_action = halt" "safety.heartbeat_interval = 10 s" \
		"resources.max_parallel_copies = 0" "safety.auto_create_publication = yes" \
		"resources.max_batch_bytes = 16 MB" "line without equals"
	run pgsync-config -c test.conf
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pgsync-config: error: test.conf:5: invalid safety.wal_retention_action "halt": expected warn|stop' ]
	[ "${lines[1]}" = 'pgsync-config: error: test.conf:6: invalid duration "10 s" for safety.heartbeat_interval: use a number with ms, s, min, h or d' ]
	[ "${lines[2]}" = 'pgsync-config: error: test.conf:7: invalid resources.max_parallel_copies "0": expected an integer from 1 to 64' ]
	[ "${lines[3]}" = 'pgsync-config: error: test.conf:8: invalid safety.auto_create_publication "yes": expected true or false' ]
	[ "${lines[4]}" = 'pgsync-config: error: test.conf:9: invalid size "16 MB" for resources.max_batch_bytes: use a number with optional kB, MB, GB or TB' ]
	[ "${lines[5]}" = 'pgsync-config: error: test.conf:10: expected "key = value"' ]
	[ "${#lines[@]}" -eq 6 ]
}

@test "table lists: unqualified, empty and duplicate items are refused" {
	mini t1 p 'public.a, b'
	refused t1 '4: invalid table "b" in replication.tables: expected schema.table, each name as the catalog stores it (1-63 letters, digits, _, $, spaces or double quotes) or in SQL'"'"'s double quotes'
	mini t2 p 'public.a,,public.b'
	refused t2 '4: empty item in replication.tables'
	mini t3 p 'public.a, public.a'
	refused t3 '4: table "public.a" is listed twice in replication.tables'
	# SQL's quoting: a dot, a comma or a quote in a name; case kept, as a
	# name written unquoted is taken as the catalog stores it.
	mini t4 p '"Sales".orders, "s.x"."a.b" , public."c,d", public."q""x", public."Mixed", "s.x"."a,b"'
	run pgsync-config -c t4.conf
	[ "$status" -eq 0 ]
	[[ $output == *'replication.tables = Sales.orders,"s.x"."a.b",public."c,d",public.q"x,public.Mixed,"s.x"."a,b"'* ]]
	run pgsync-config -c t4.conf --list replication.tables
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'Sales\torders\ns.x\ta.b\npublic\tc,d\npublic\tq"x\npublic\tMixed\ns.x\ta,b')" ]
	mini t6 p 'public."a\b", public.x'
	run pgsync-config -c t6.conf --list replication.tables
	[ "$output" = "$(printf 'public\ta\\\\b\npublic\tx')" ]
	mini t7 p 'public."c,d", public.c'
	run pgsync-config -c t7.conf --set 'replication.tables=public."c,d",d.e' --list replication.tables
	[ "$output" = "$(printf 'public\tc,d\nd\te')" ]
	mini t8 p "public.\"$(printf 'x%.0s' {1..64})\", public.x"
	refused t8 "4: invalid table \"public.\"$(printf 'x%.0s' {1..64})\"\" in replication.tables: a name is at most 63 bytes"
	mini t11 p $'public."a\x01b"'
	refused t11 $'4: invalid table "public."a\x01b"" in replication.tables: a name must not hold a control character'
	mini t9 p 'public."a.b", "public"."a.b"'
	refused t9 '4: table "public."a.b"" is listed twice in replication.tables'
	mini t10 p 'a.b.c'
	refused t10 '4: invalid table "a.b.c" in replication.tables: expected schema.table, each name as the catalog stores it (1-63 letters, digits, _, $, spaces or double quotes) or in SQL'"'"'s double quotes'
	run pgsync-config -c t9.conf --list job.name
	[ "$status" -eq 2 ]
	mini t5 p 'Sales Dept.Order "A", Sales Dept.order "A" 2, "q.x'
	run pgsync-config -c t5.conf
	[ "$status" -eq 0 ]
	[[ $output == *'replication.tables = Sales Dept.Order "A",Sales Dept.order "A" 2,"q.x'* ]]
}

@test "switchover.fence_roles: role names as stored, no duplicates; --set checks a command's value by the key's rules" {
	conf "switchover.fence_roles = app, app-batch , ops@eu"
	run pgsync-config -c test.conf
	[ "$status" -eq 0 ]
	[[ $output == *"switchover.fence_roles = app,app-batch,ops@eu"* ]]
	conf "switchover.fence_roles = app, app"
	run pgsync-config -c test.conf
	[ "$status" -eq 2 ]
	[[ $output == *'role "app" is listed twice in switchover.fence_roles'* ]]
	conf "switchover.fence_roles = app; DROP"
	run pgsync-config -c test.conf
	[ "$status" -eq 2 ]
	[[ $output == *'invalid role "app; DROP" in switchover.fence_roles'* ]]
	run pgsync-config -c base.conf --set switchover.max_lag=1MB --set switchover.timeout=30s
	[ "$status" -eq 0 ]
	[[ $output == *"switchover.max_lag = 1048576"* && $output == *"switchover.timeout = 30000ms"* ]]
	run pgsync-config -c base.conf --set switchover.timeout=0s
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync-config: error: switchover.timeout must be between 1s and 86400s" ]
	run pgsync-config -c base.conf --set switchover.nope=1
	[ "$status" -eq 2 ]
	[ "$output" = 'pgsync-config: error: unknown key "switchover.nope" in --set' ]
}

@test "source.publication is one name or a comma-separated list; source.publications is refused with the syntax" {
	mini p1 'a,  b ,c' public.a
	run pgsync-config -c p1.conf
	[ "$status" -eq 0 ]
	[[ $output == *"source.publication = a,b,c"* ]]
	mini p2 a,,b public.a
	refused p2 '3: invalid source.publication "a,,b": empty publication name in the list'
	mini p3 'a, a' public.a
	refused p3 '3: invalid source.publication "a, a": publication "a" is named twice'
	mini p4 'a, "B"' public.a
	refused p4 '3: invalid publication ""B"" in source.publication: use 1-63 letters, digits, _ or $ as stored in the catalog, names separated by commas'
	mini p5 'a, b' public.a
	sed -i 's/^source.publication =/source.publications =/' p5.conf
	refused p5 '3: unknown key "source.publications": several publications are one list, source.publication = a, b, c'
}

@test "a table list continues on the next line after a trailing comma; comments are ignored" {
	cat >multi.conf <<'EOF'
# the orders job
job.name = j   # trailing comment
source.slot = s
source.publication = p
replication.tables = public.a,
    public.b,   # continued
    x.c.1
EOF
	run pgsync-config -c multi.conf
	[ "$status" -eq 2 ]
	[[ $output == *'multi.conf:5: invalid table "x.c.1"'* ]]
	sed -i 's/x.c.1/"x".c_1/' multi.conf
	run pgsync-config -c multi.conf
	[ "$status" -eq 0 ]
	[[ $output == *"replication.tables = public.a,public.b,x.c_1"* ]]
	[[ $output == *"job.name = j"* ]]
}

@test "missing required keys are exit 2 naming each" {
	printf 'job.name = j\n' >short.conf
	run pgsync-config -c short.conf
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pgsync-config: error: short.conf: missing required key source.slot' ]
	[ "${lines[1]}" = 'pgsync-config: error: short.conf: missing required key source.publication' ]
	[ "${lines[2]}" = 'pgsync-config: error: short.conf: missing required key replication.tables' ]
}

@test "slot and job names follow PostgreSQL's and the file system's rules" {
	conf "job.state_dir = st"
	sed -i 's/^source.slot = .*/source.slot = Orders-Slot/; s/^job.name = .*/job.name = my job/' test.conf
	run pgsync-config -c test.conf
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pgsync-config: error: test.conf:1: invalid job.name "my job": use 1-63 letters, digits, _ or -' ]
	[ "${lines[1]}" = 'pgsync-config: error: test.conf:2: invalid source.slot "Orders-Slot": replication slot names use 1-63 lower-case letters, digits and _' ]
}

@test "a relative state_dir is relative to the configuration file; --state-dir overrides it" {
	mkdir -p etc
	conf "job.state_dir = state/orders"
	mv test.conf etc/
	run pgsync-config -c etc/test.conf
	[[ $output == *"job.state_dir = $BATS_TEST_TMPDIR/etc/state/orders"* ]]
	run pgsync-config -c etc/test.conf --state-dir /var/lib/pgsync/orders
	[[ $output == *"job.state_dir = /var/lib/pgsync/orders"* ]]
}

@test "the NUL-separated form carries every key for the script" {
	run bash -c "pgsync-config -c base.conf -0 | tr '\\0' '\\n'"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "config.file=$BATS_TEST_TMPDIR/base.conf" ]
	[ "${#lines[@]}" -eq 28 ]
	[[ $output == *$'\n'"safety.max_retries=5"$'\n'* ]]
}

@test "a missing configuration file is exit 2" {
	run pgsync-config -c nonexistent.conf
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync-config: error: cannot open configuration file nonexistent.conf: No such file or directory" ]
}

@test "pgsync reports configuration errors as pgsync with file and line, exit 2" {
	conf "resources.buffer_size_kb = lots"
	PGSYNC_TARGET_URL=host=/nonexistent run pgsync -c test.conf check
	[ "$status" -eq 2 ]
	[ "$output" = 'pgsync: error: test.conf:5: invalid resources.buffer_size_kb "lots": expected an integer from 8 to 1048576' ]
}

@test "--display-url drops the password of URLs and keyword strings" {
	run pgsync-config --display-url <<<"postgresql://app:s3cret@db.example:6543/shop?sslmode=require"
	[ "$status" -eq 0 ]
	[ "$output" = "host=db.example port=6543 user=app dbname=shop" ]
	run env -u PGPORT pgsync-config --display-url <<<"host=db user=app password=s3cret dbname=shop"
	[ "$output" = "host=db port=5432 user=app dbname=shop" ]
}

@test "--display-url names host, port, user and database also where libpq's defaults or a service give them" {
	local me
	me=$(id -un)
	run env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE pgsync-config --display-url <<<"host=db"
	[ "$output" = "host=db port=5432 user=$me dbname=$me" ]
	run env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE pgsync-config --display-url <<<"postgresql:///shop"
	[ "$output" = "host=(local socket) port=5432 user=$me dbname=shop" ]
	printf '[svc]\nhost=db.example\nport=6543\nuser=app\npassword=s3cret\ndbname=shop\n' >"$BATS_TEST_TMPDIR/svc.conf"
	run env PGSERVICEFILE="$BATS_TEST_TMPDIR/svc.conf" pgsync-config --display-url <<<"service=svc"
	[ "$output" = "host=db.example port=6543 user=app dbname=shop" ]
}

@test "--service writes a libpq service section and refuses what it cannot hold" {
	run pgsync-config --service src <<<"postgresql://app:s3cret@db:6543/shop?sslmode=require&keepalives=1"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "[src]" ]
	[[ $output == *$'\n'"password=s3cret"$'\n'* ]]
	[[ $output == *$'\n'"keepalives=1"* ]]
	run pgsync-config --service src --label PGSYNC_SOURCE_URL <<<"service=other"
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync-config: error: PGSYNC_SOURCE_URL: the service option is not supported here; spell the connection out" ]
	run pgsync-config --service src --label PGSYNC_SOURCE_URL <<<"host=db password=never-shown junk"
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync-config: error: PGSYNC_SOURCE_URL is not a valid connection string or URL" ]
}

@test "pgsync --help prints usage on stdout with exit 0, --version the version" {
	run pgsync --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: pgsync [-c FILE] [--state-dir DIR] [--json] [--log LEVEL] check" ]]
	[[ $output == *"Exit status: 0 done or stopped by a signal"* ]]
	run pgsync --version
	[ "$output" = "pgsync (pgsync) 0.1.0" ]
	run pgsync-config --version
	[ "$output" = "pgsync-config (pgsync) 0.1.0" ]
}

@test "pgsync usage errors are exit 2 with usage on stderr" {
	run pgsync
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pgsync: error: no command given" ]
	[[ ${lines[1]} == "usage: pgsync "* ]]
	run pgsync frobnicate
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pgsync: error: unknown command "frobnicate"' ]
	run pgsync --bogus status
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pgsync: error: unknown option --bogus" ]
	run pgsync --log loud status
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = 'pgsync: error: invalid log level "loud": use debug, info, warn or error' ]
	run pgsync run --yes
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "pgsync: error: --yes belongs to cleanup" ]
	run pgsync-config --bogus
	[ "$status" -eq 2 ]
	[[ ${lines[-1]} == "       pgsync-config --write-checkpoint FILE < CHECKPOINT" ]]
}

@test "cleanup without --yes refuses with exit 2 before touching anything" {
	run pgsync -c base.conf cleanup
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync: error: cleanup drops the job's replication slot and its pgsync.job row: confirm with --yes" ]
}

@test "a missing target URL is a configuration error, exit 2" {
	PGSYNC_TARGET_URL= run pgsync -c base.conf status
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync: error: PGSYNC_TARGET_URL is not set (the target connection string or URL)" ]
	PGSYNC_TARGET_URL=host=x PGSYNC_SOURCE_URL= run pgsync -c base.conf check
	[ "$status" -eq 2 ]
	[ "$output" = "pgsync: error: PGSYNC_SOURCE_URL is not set (the source connection string or URL)" ]
}

@test "--json logs are one JSON object per line" {
	conf "bogus = 1"
	run pgsync --json -c test.conf check
	[ "$status" -eq 2 ]
	echo "$output" | jq -e 'select(.program == "pgsync" and .level == "error" and (.msg | endswith("unknown key \"bogus\"")))'
}

@test "--json log lines stay JSON when a message holds a control character" {
	run --separate-stderr pgsync --json $'bo\x01gus'
	[ "$status" -eq 2 ]
	head -1 <<<"$stderr" | jq -e '.program == "pgsync" and .level == "error" and .msg == "unknown command \"bo\u0001gus\""'
}

@test "the catalog DDL is the C programs' own definition" {
	run pgsync-config --catalog-sql
	[ "$status" -eq 0 ]
	[[ $output == *"CREATE TABLE IF NOT EXISTS pgsync.job ("* ]]
	[[ $output == *"CREATE TABLE IF NOT EXISTS pgsync.job_runtime ("* ]]
}

@test "--write-checkpoint writes a checkpoint pg-ack reads, and writes nothing from invalid input" {
	mkdir ck
	printf '0/1A2B3C4\nsysid=7311\ntimeline=2\nslot=orders_slot\n' | pgsync-config --write-checkpoint ck/applied.lsn
	[ "$(cat ck/applied.lsn)" = $'0/1A2B3C4\nsysid=7311\ntimeline=2\nslot=orders_slot' ]
	# The reader's own checks: a slot of another name is refused before any connection.
	run --separate-stderr pg-ack --slot other --from ck/applied.lsn
	[ "$status" -eq 4 ]
	[[ $stderr == *'records slot "orders_slot", not "other"'* ]]
	run --separate-stderr pgsync-config --write-checkpoint ck/applied.lsn <<<"not-an-lsn"
	[ "$status" -eq 2 ]
	[ "$stderr" = 'pgsync-config: error: invalid checkpoint file "on standard input": first line is not an LSN at line 1' ]
	run --separate-stderr pgsync-config --write-checkpoint ck/applied.lsn < /dev/null
	[ "$status" -eq 2 ]
	[[ $stderr == *"file is empty"* ]]
	[ "$(head -1 ck/applied.lsn)" = 0/1A2B3C4 ]
	run --separate-stderr pgsync-config --write-checkpoint nodir/applied.lsn <<<"0/1"
	[ "$status" -eq 1 ]
	[[ $stderr == "pgsync-config: error: cannot create checkpoint file \"nodir/applied.lsn.tmp."* ]]
	[ "$(ls ck)" = applied.lsn ]
}

@test "the commented example configuration is valid, also with every key uncommented" {
	run pgsync-config -c "$PGSYNC_ROOT/doc/pgsync.conf.example"
	[ "$status" -eq 0 ]
	[[ $output == *"replication.tables = public.orders,public.order_lines,billing.invoices"* ]]
	sed -E 's/^#([a-z_]+\.[a-z_]+ = )/\1/' "$PGSYNC_ROOT/doc/pgsync.conf.example" >all.conf
	[ "$(grep -cE '^[a-z_]+\.[a-z_]+ = ' all.conf)" -eq 27 ]
	run pgsync-config -c all.conf
	[ "$status" -eq 0 ]
	[[ $output != *"# default"* ]]
}

@test "status against an unreachable target is a runtime error (exit 1) naming the connection" {
	PGSYNC_TARGET_URL="host=$BATS_TEST_TMPDIR port=1 user=nobody password=never-shown dbname=x" run pgsync -c base.conf status
	[ "$status" -eq 1 ]
	[[ $output == "pgsync: error: cannot read the target (host=$BATS_TEST_TMPDIR port=1 user=nobody dbname=x): connection to server on socket"* ]]
	[[ $output != *never-shown* ]]
}
