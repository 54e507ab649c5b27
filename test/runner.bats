#!/usr/bin/env bats
# test/run-bats, which make check runs the bats files with: the merged TAP,
# the counts CI reads from its last line, the serial files, and the job
# slots' own port ranges. No server: its test files here are tiny.

load lib/common

setup() {
	cd "$BATS_TEST_TMPDIR" || return
	mkdir t
}

# run_bats ARG...: test/run-bats in a clean environment (the outer bats'
# variables, and its libexec directory in PATH, would confuse the inner
# ones), in this test's directory, where it writes build/.
run_bats() {
	local path="" dir
	local IFS=:
	for dir in $PATH; do
		[[ $dir == *bats-core* ]] || path+=${path:+:}$dir
	done
	unset IFS
	run env -i PATH="$path" HOME="$HOME" ${PGSYNC_TEST_FILE_TIMEOUT:+PGSYNC_TEST_FILE_TIMEOUT=$PGSYNC_TEST_FILE_TIMEOUT} \
		"$PGSYNC_ROOT/test/run-bats" "$@"
}

# A test file t/NAME.bats with the given lines. (The @ is spliced in: bats
# would take a literal one for a test of this file.)
test_file() {
	local name=$1 at=@
	shift
	printf '%s\n' "${@//@test/${at}test}" >"t/$name.bats"
}

@test "the files' TAP is merged in the arguments' order, numbered on, and the summary line comes last" {
	test_file a '@test "a1" { true; }' '@test "a2" { echo why >&2; false; }' '@test "a3" { skip later; }'
	test_file b '@test "b1" { true; }' '@test "b2" { true; }'
	run_bats -j 2 t/a.bats t/b.bats
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${lines[-1]}" = "bats: 3 passed, 1 failed, 1 skipped" ]
	[ "$(grep -E '^(not )?ok ' <<<"$output" | sed -E 's/ in [0-9]+ms//')" = "ok 1 a1
not ok 2 a2
ok 3 a3 # skip later
ok 4 b1
ok 5 b2" ]
	grep -qx '1\.\.5' <<<"$output"
	grep -qE '^# +[0-9.]+s  t/a\.bats$' <<<"$output"
	cmp <(grep -v '^#' build/bats.tap) <(grep -E '^(not )?ok |^1\.\.' <<<"$output")
	run_bats -j 1 t/b.bats
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "bats: 2 passed, 0 failed, 0 skipped" ]
}

@test "a file whose bats dies before its tests are done, or that fails in setup_file, counts as failed" {
	test_file dies '@test "d1" { true; }' '@test "d2" { kill -9 "$PPID" "$BATS_ROOT_PID"; sleep 1; }' '@test "d3" { true; }'
	test_file nosetup 'setup_file() { false; }' '@test "n1" { true; }'
	test_file fine '@test "f1" { true; }'
	run_bats t/dies.bats t/nosetup.bats t/fine.bats
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${lines[-1]}" = "bats: 2 passed, 2 failed, 0 skipped" ]
	grep -q '^not ok [0-9]* t/dies.bats: 1 of 3 tests reported, bats exited ' <<<"$output"
}

@test "files run N at a time, each job slot with its own share of the port range; serial files run alone, after the others" {
	# p1 and p2 each wait for the other: they pass only when run together.
	local meet='t=0; until [ -e "$W/OTHER.on" ] || ((t++ > 300)); do sleep 0.1; done; [ -e "$W/OTHER.on" ]'
	local note='echo "$PGSYNC_PORT_MIN $PGSYNC_PORT_MAX $PGSYNC_TEST_WAIT_SCALE" >"$W/NAME.ports"; date +%s.%N >"$W/NAME.start"'
	local W=$BATS_TEST_TMPDIR
	for n in p1:p2 p2:p1; do
		local me=${n%:*} other=${n#*:}
		test_file "$me" "W=$W" "@test \"$me\" { ${note//NAME/$me}; touch \"\$W/$me.on\"; ${meet//OTHER/$other}; date +%s.%N >\"\$W/$me.end\"; }"
	done
	test_file s '# run-bats: serial' "W=$W" "@test \"s\" { ${note//NAME/s}; }"
	run_bats -j 2 t/s.bats t/p1.bats t/p2.bats
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "bats: 3 passed, 0 failed, 0 skipped" ]
	# The serial file is reported last, and started after both others ended.
	[ "$(grep -E '^ok ' <<<"$output" | sed -E 's/^ok [0-9]+ ([a-z0-9]+).*/\1/' | tr '\n' ' ')" = "p1 p2 s " ]
	awk -v s="$(<s.start)" -v a="$(<p1.end)" -v b="$(<p2.end)" 'BEGIN { exit !(s >= a && s >= b) }'
	# The two slots' ranges split 20000-45000 without overlapping; two
	# files at a time wait twice as long, one alone as long as ever.
	local lo1 hi1 lo2 hi2 scale1 scale2 scale_s
	read -r lo1 hi1 scale1 <p1.ports
	read -r lo2 hi2 scale2 <p2.ports
	read -r _ _ scale_s <s.ports
	echo "p1 $lo1-$hi1, p2 $lo2-$hi2, wait scales $scale1 $scale2 $scale_s"
	[ "$scale1 $scale2 $scale_s" = "2 2 1" ]
	((lo1 >= 20000 && hi1 <= 45000 && lo2 >= 20000 && hi2 <= 45000))
	((lo1 <= hi1 && lo2 <= hi2))
	((hi1 < lo2 || hi2 < lo1))
}

@test "slow files start first, the longest first; the report keeps the arguments' order" {
	local W=$BATS_TEST_TMPDIR
	test_file a "@test \"a\" { echo a >>$W/order; }"
	test_file b '# run-bats: slow 1' "@test \"b\" { echo b >>$W/order; }"
	test_file c '# run-bats: slow 5' "@test \"c\" { echo c >>$W/order; }"
	run_bats -j 1 t/a.bats t/b.bats t/c.bats
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(tr '\n' ' ' <order)" = "c b a " ]
	[ "$(grep -E '^ok ' <<<"$output" | sed -E 's/^ok ([0-9]+) ([a-z]).*/\1\2/' | tr '\n' ' ')" = "1a 2b 3c " ]
}

@test "run-bats refuses a bad -j and no files with exit 2" {
	run_bats -j 0 t/x.bats
	[ "$status" -eq 2 ]
	run_bats -j
	[ "$status" -eq 2 ]
	run_bats
	[ "$status" -eq 2 ]
	[[ $output == "usage: run-bats "* ]]
}

@test "a file still running after PGSYNC_TEST_FILE_TIMEOUT is stopped and counts as failed; the others' results stand" {
	test_file hangs '@test "h1" { true; }' '@test "h2" { sleep 60; }' '@test "h3" { true; }'
	test_file fine '@test "f1" { true; }'
	PGSYNC_TEST_FILE_TIMEOUT=3 run_bats -j 2 t/hangs.bats t/fine.bats
	echo "$output"
	[ "$status" -eq 1 ]
	grep -qx 'ok 1 h1 in [0-9]*ms' <<<"$output"
	grep -q '^not ok [0-9]* t/hangs.bats: still running after 3 s (PGSYNC_TEST_FILE_TIMEOUT): stopped' <<<"$output"
	grep -qx 'ok [0-9]* f1 in [0-9]*ms' <<<"$output"
	[ "${lines[-1]}" = "bats: 2 passed, 2 failed, 0 skipped" ]
	PGSYNC_TEST_FILE_TIMEOUT=soon run_bats t/fine.bats
	[ "$status" -eq 2 ]
	[ "$output" = "run-bats: error: PGSYNC_TEST_FILE_TIMEOUT must be a positive number of seconds" ]
}
