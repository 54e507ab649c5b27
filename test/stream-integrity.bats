#!/usr/bin/env bats
# Nothing is applied or confirmed that was not verified: positions only grow
# within a stream, zstd frames are checked before any transaction in them is
# applied, and damage anywhere (a changed LSN digit, a flipped bit of a
# compressed archive) either changes nothing or stops pg-apply before the
# damaged part reaches the target. In heredocs "→" stands for TAB.

load lib/cluster
load lib/slot
bats_require_minimum_version 1.5.0

setup_file() {
	# One cluster: the source database and a target database "tgt".
	cluster_start pg
	psql_at pg -c "CREATE DATABASE tgt"
	export tgt_URL="$pg_URL dbname=tgt"
	psql_at pg -c "CREATE PUBLICATION pub FOR ALL TABLES"
}

teardown() {
	kill_test_pids
}

teardown_file() {
	cluster_stop_all
}

T0='2026-12-01 00:00:00.000000+00'

pgcs() {
	sed 's/→/\t/g' >"$1"
}

q() {
	psql -X -v ON_ERROR_STOP=1 -qAt -d "$tgt_URL" -c "$1"
}

# q_then_truncate QUERY TABLE: the query's rows, then TABLE emptied (one
# connection: the loops below run it hundreds of times).
q_then_truncate() {
	psql -X -v ON_ERROR_STOP=1 -qAt -d "$tgt_URL" -c "$1" -c "TRUNCATE $2"
}

applied_lsn() {
	q "SELECT applied_lsn FROM pgsync.job WHERE job = '$1'"
}


@test "a transaction below an earlier POSITION of its stream exits 5 at its line; nothing is applied or checkpointed" {
	q "CREATE TABLE m (id int PRIMARY KEY, v text, n int)"
	pgcs "$BATS_TEST_TMPDIR/bad.pgcs" <<EOF
PGCS→1→7442718406132410263→1→-→0/1000→producer=hand
RELATION→public→m→1→d→3→id→23→-1→k→v→25→-1→-→n→23→-1→-
POSITION→0/5000→$T0
BEGIN→1→0/2000→$T0
INSERT→public→m→9001→a→1
COMMIT→1→0/2000→0/2010→$T0
EOF
	run --separate-stderr pg-apply -d "$tgt_URL" --job x --checkpoint "$BATS_TEST_TMPDIR/cp" "$BATS_TEST_TMPDIR/bad.pgcs"
	[ "$status" -eq 5 ]
	[[ $stderr == *"pg-apply: error: "*"bad.pgcs:4: BEGIN of transaction 1 at 0/2000 is below position 0/5000, which the stream's POSITION already reached"* ]]
	[ "$(q "SELECT count(*) FROM m")" = 0 ]
	[ -z "$(applied_lsn x)" ] || [ "$(applied_lsn x)" = 0/0 ]
	[[ ! -s $BATS_TEST_TMPDIR/cp ]] || ! grep -q 0/5000 "$BATS_TEST_TMPDIR/cp"
	# The same stream without the bogus promise applies the row.
	grep -v '^POSITION' "$BATS_TEST_TMPDIR/bad.pgcs" >"$BATS_TEST_TMPDIR/good.pgcs"
	run pg-apply -d "$tgt_URL" --job x --checkpoint "$BATS_TEST_TMPDIR/cp" "$BATS_TEST_TMPDIR/good.pgcs"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT v FROM m WHERE id = 9001")" = a ]
	[ "$(applied_lsn x)" = 0/2010 ]
}

@test "a COMMIT end far ahead exits 5 at the next BEGIN before its transaction is committed, even one transaction a batch" {
	q "CREATE TABLE far (id int PRIMARY KEY)"
	pgcs "$BATS_TEST_TMPDIR/far.pgcs" <<EOF
PGCS→1→7442718406132410263→1→-→0/1000→producer=hand
RELATION→public→far→1→d→1→id→23→-1→k
BEGIN→1→0/2000→$T0
INSERT→public→far→1
COMMIT→1→0/2000→F/0→$T0
BEGIN→2→0/3000→$T0
INSERT→public→far→2
COMMIT→2→0/3000→0/3010→$T0
EOF
	run --separate-stderr pg-apply -d "$tgt_URL" --job far --max-batch-bytes 1 --checkpoint "$BATS_TEST_TMPDIR/cp" "$BATS_TEST_TMPDIR/far.pgcs"
	[ "$status" -eq 5 ]
	[[ $stderr == *"far.pgcs:6: BEGIN of transaction 2 at 0/3000 is below position F/0, which the stream's COMMIT end already reached"* ]]
	[ "$(q "SELECT count(*) FROM far")" = 0 ]
	[ -z "$(applied_lsn far)" ] || [ "$(applied_lsn far)" = 0/0 ]
	[[ ! -s $BATS_TEST_TMPDIR/cp ]] || ! grep -q F/0 "$BATS_TEST_TMPDIR/cp"
	sed -i 's|F/0|0/2010|' "$BATS_TEST_TMPDIR/far.pgcs"
	run pg-apply -d "$tgt_URL" --job far --max-batch-bytes 1 "$BATS_TEST_TMPDIR/far.pgcs"
	[ "$status" -eq 0 ]
	[ "$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM far")" = 1,2 ]
}

# A real stream of four one-row transactions from pg-walcat, into $1.
real_stream() {
	psql_at pg -c "CREATE TABLE $2 (id int PRIMARY KEY, v text)"
	q "CREATE TABLE $2 (id int PRIMARY KEY, v text)"
	psql_at pg -c "SELECT pg_create_logical_replication_slot('${2}_slot', 'pgoutput')" >/dev/null
	for i in 1 2 3 4; do
		psql_at pg -c "INSERT INTO $2 VALUES ($i, 'row $i')"
	done
	pg-walcat -d "$pg_URL" --slot "${2}_slot" --publication pub --endpos now "${@:3}" >"$1"
}

@test "every LSN digit of a real stream changed: the result is the source's, or pg-apply stops before the damaged part" {
	local clean=$BATS_TEST_TMPDIR/clean.pgcs dir=$BATS_TEST_TMPDIR/mut
	real_stream "$clean" dig
	[ "$(grep -c '^COMMIT' "$clean")" = 4 ]
	pg-apply -d "$tgt_URL" --job dig_clean "$clean"
	local want final
	want=$(q "SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM dig")
	final=$(applied_lsn dig_clean)
	q "TRUNCATE dig"
	# One mutant per hex digit of every LSN field (the digit XOR 8), and
	# for each its line number and class.
	mkdir "$dir"
	awk -F'\t' -v OFS='\t' -v dir="$dir" '
		{ line[NR] = $0 }
		END {
			n = 0
			for (l = 1; l <= NR; l++) {
				split(line[l], f, "\t")
				r = f[1]; delete idx
				if (r == "PGCS") idx[6] = "header"
				else if (r == "BEGIN") idx[3] = "begin"
				else if (r == "COMMIT") { idx[3] = "commit"; idx[4] = "commit-end" }
				else if (r == "POSITION") idx[2] = "position"
				else if (r == "END") idx[2] = "end"
				for (k in idx) {
					v = f[k]
					for (c = 1; c <= length(v); c++) {
						ch = substr(v, c, 1)
						d = index("0123456789ABCDEF", ch)
						if (d == 0) continue
						nv = substr(v, 1, c - 1) substr("89ABCDEF01234567", d, 1) substr(v, c + 1)
						n++
						out = dir "/" n
						for (j = 1; j <= NR; j++) {
							if (j != l) { print line[j] > out; continue }
							s = f[1]
							for (m = 2; m in f; m++) s = s "\t" (m == k ? nv : f[m])
							print s > out
						}
						close(out)
						print n, l, idx[k] > (dir "/manifest")
					}
				}
			}
		}' "$clean"
	# For a damaged line L: the transactions whose COMMIT is above it, and
	# the end position of each.
	local -a commit_line end_lsn
	mapfile -t commit_line < <(awk -F'\t' '$1 == "COMMIT" { print NR }' "$clean")
	mapfile -t end_lsn < <(awk -F'\t' '$1 == "COMMIT" { print $4 }' "$clean")
	local -a rows_want
	local start
	start=$(head -1 "$clean" | cut -f6)
	IFS=, read -r -a rows_want <<<"$want"
	local n line class status got rows pos allowed j tried=0 same=0 moved=0 rejected=0
	declare -A by_class
	while read -r n line class; do
		tried=$((tried + 1))
		status=0
		pg-apply -d "$tgt_URL" --job "dig_$n" --max-batch-bytes 1 "$dir/$n" 2>"$dir/$n.err" || status=$?
		got=$(q_then_truncate "SELECT coalesce(string_agg(id || ':' || v, ',' ORDER BY id), '') || '|' ||
			coalesce((SELECT applied_lsn::text FROM pgsync.job WHERE job = 'dig_$n'), '') FROM dig" dig)
		rows=${got%|*} pos=${got#*|}
		if [ "$status" -eq 0 ]; then
			[ "$rows" = "$want" ] || { echo "mutant $n (line $line, $class): exit 0 with rows $rows, want $want"; return 1; }
			if [ "$pos" = "$final" ]; then same=$((same + 1)); else moved=$((moved + 1)); fi
			by_class[$class]="${by_class[$class]} ok"
			continue
		fi
		rejected=$((rejected + 1))
		by_class[$class]="${by_class[$class]} exit$status"
		[ "$status" -eq 5 ] || [ "$status" -eq 1 ] || { echo "mutant $n: exit $status: $(<"$dir/$n.err")"; return 1; }
		allowed=0
		for j in "${!commit_line[@]}"; do
			((commit_line[j] < line)) && allowed=$((j + 1))
		done
		# What was applied is a prefix of what came before the damage ...
		local prefix="" k=-1 bound
		for ((j = 0; j <= allowed; j++)); do
			if [ "$rows" = "$prefix" ]; then k=$j; break; fi
			((j < allowed)) && prefix=${prefix:+$prefix,}${rows_want[j]}
		done
		((k >= 0)) || { echo "mutant $n (line $line, $class): exit $status with rows '$rows', more than the $allowed transactions before the damage"; return 1; }
		# ... and the recorded position is no further than that prefix's end.
		bound=$start
		((k > 0)) && bound=${end_lsn[k - 1]}
		if [ -n "$pos" ]; then
			(($(lsn_num "$pos") <= $(lsn_num "$bound"))) ||
				{ echo "mutant $n (line $line, $class): position $pos recorded after $k transactions"; return 1; }
		fi
	done <"$dir/manifest"
	echo "# LSN digits changed: $tried; identical result $same, identical rows at another position $moved, rejected $rejected" >&3
	for class in "${!by_class[@]}"; do
		echo "#   $class: $(tr ' ' '\n' <<<"${by_class[$class]}" | grep . | sort | uniq -c | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }')" >&3
	done
	((tried > 60 && rejected > 0))
}

# zstd_frames FILE: "START END" byte offsets of each zstd frame (RFC 8878).
zstd_frames() {
	od -An -v -tu1 "$1" | awk '
		{ for (i = 1; i <= NF; i++) b[n++] = $i }
		END {
			p = 0
			while (p < n) {
				s = p; fhd = b[p + 4]; p += 5
				single = int(fhd / 32) % 2; fcs = int(fhd / 64); did = fhd % 4
				if (!single) p++
				p += (did == 3 ? 4 : did)
				p += (fcs == 0 ? single : (fcs == 1 ? 2 : (fcs == 2 ? 4 : 8)))
				do {
					h = b[p] + b[p + 1] * 256 + b[p + 2] * 65536; p += 3
					type = int(h / 2) % 4; size = int(h / 8)
					p += (type == 1 ? 1 : size)
				} while (h % 2 == 0)
				if (int(fhd / 4) % 2) p += 4
				print s, p
			}
		}'
}

@test "seeded bit flips of a -z archive (INTEGRITY_FLIPS, 80 by default): the result is the source's, or nothing of the damaged frame is applied" {
	local dir=$BATS_TEST_TMPDIR/z start="" seg
	mkdir "$dir"
	psql_at pg -c "CREATE TABLE zb (id int PRIMARY KEY, v text)"
	q "CREATE TABLE zb (id int PRIMARY KEY, v text)"
	psql_at pg -c "SELECT pg_create_logical_replication_slot('zb_slot', 'pgoutput')" >/dev/null
	# Three runs of pg-walcat -z (so at least three frames), concatenated;
	# three rows of 60 kB of hex each, so a frame holds more than one zstd
	# block and more than a reader decodes at once: its checksum comes
	# after transactions a careless reader would already have committed.
	for seg in 1 2 3; do
		for i in 1 2 3; do
			psql_at pg -c "INSERT INTO zb SELECT $((seg * 10 + i)), string_agg(md5(random()::text), '') FROM generate_series(1, 1920)"
		done
		pg-walcat -d "$pg_URL" --slot zb_slot --publication pub --endpos now ${start:+--start "$start"} -z \
			>"$dir/seg$seg.zst" 2>/dev/null
		start=$(zstd -dc "$dir/seg$seg.zst" | awk -F'\t' '$1 == "END" { print $2 }')
		[ -n "$start" ]
	done
	cat "$dir/seg1.zst" "$dir/seg2.zst" "$dir/seg3.zst" >"$dir/all.zst"
	local size
	size=$(stat -c %s "$dir/all.zst")
	# Each frame: its end offset and how many rows the frames up to it hold.
	local -a fend frows
	local fs fe total=0 nframes=0
	while read -r fs fe; do
		total=$((total + $(dd if="$dir/all.zst" bs=1 skip="$fs" count=$((fe - fs)) status=none | zstd -dc | grep -c '^INSERT' || true)))
		fend+=("$fe") frows+=("$total")
		nframes=$((nframes + 1))
	done < <(zstd_frames "$dir/all.zst")
	[ "${fend[nframes - 1]}" = "$size" ]
	[ "$total" = 9 ]
	((nframes >= 3))
	pg-apply -d "$tgt_URL" --job zb_clean "$dir/all.zst"
	local want
	want=$(q "SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM zb")
	[ "$(psql_at pg -c "SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM zb")" = "$want" ]
	q "TRUNCATE zb"
	local -a rows_want
	IFS=, read -r -a rows_want <<<"$want"
	# INTEGRITY_FLIPS (offset, bit) pairs from a fixed seed: 80 in make
	# check, INTEGRITY_FLIPS=1000 for a long run.
	local flips=${INTEGRITY_FLIPS:-80}
	local n=0 off bit status got allowed j k prefix same=0 checksum=0 decomp=0 malformed=0 truncated=0 identity=0 other=0
	RANDOM=15
	while ((n < flips)); do
		n=$((n + 1))
		off=$(((RANDOM * 32768 + RANDOM) % size)) bit=$((RANDOM % 8))
		cp "$dir/all.zst" "$dir/f.zst"
		printf "$(printf '\\%03o' $(($(od -An -tu1 -j "$off" -N1 "$dir/all.zst") ^ (1 << bit))))" |
			dd of="$dir/f.zst" bs=1 seek="$off" conv=notrunc status=none
		status=0
		pg-apply -d "$tgt_URL" --job "zb_$n" --max-batch-bytes 1 "$dir/f.zst" 2>"$dir/err" || status=$?
		got=$(q_then_truncate "SELECT coalesce(string_agg(id || ':' || v, ',' ORDER BY id), '') FROM zb" zb)
		if [ "$status" -eq 0 ]; then
			[ "$got" = "$want" ] || { echo "flip $n (byte $off bit $bit): exit 0 with other rows"; return 1; }
			same=$((same + 1))
			continue
		fi
		[ "$(wc -l <"$dir/err")" = 1 ] || { echo "flip $n: more than one line: $(<"$dir/err")"; return 1; }
		case $(<"$dir/err") in
			*"checksum"*) checksum=$((checksum + 1)) ;;
			*"cannot decompress"* | *"cannot verify"*) decomp=$((decomp + 1)) ;;
			*"truncated"*) truncated=$((truncated + 1)) ;;
			# A flip in a later segment's header, read before its frame's
			# checksum: another source, refused before anything of it.
			*"another server than the job's"*) [ "$status" -eq 4 ] && identity=$((identity + 1)) || other=$((other + 1)) ;;
			*) [ "$status" -eq 5 ] && malformed=$((malformed + 1)) || other=$((other + 1)) ;;
		esac
		# Only the rows of the frames before the damaged one, exactly as the
		# source has them, may have been applied.
		allowed=0
		for ((k = 0; k < nframes; k++)); do
			((off >= fend[k])) && allowed=${frows[k]}
		done
		prefix=""
		for ((j = 0; j <= allowed; j++)); do
			[ "$got" = "$prefix" ] && break
			((j < allowed)) && prefix=${prefix:+$prefix,}${rows_want[j]}
		done
		[ "$got" = "$prefix" ] ||
			{ echo "flip $n (byte $off bit $bit, exit $status): rows beyond the $allowed of the frames before the damaged one: $(<"$dir/err")"; return 1; }
	done
	echo "# -z archive of $size bytes in $nframes frames, $flips seeded bit flips: identical result $same; rejected: checksum mismatch $checksum, other zstd error $decomp, malformed text $malformed, truncated $truncated, another source $identity, other $other" >&3
	((other == 0))
}

@test "a pg-snapshot-dump -z snapshot: each snapshot frame is verified before it is loaded; one big frame is refused" {
	local dir=$BATS_TEST_TMPDIR/s
	mkdir "$dir"
	psql_at pg -c "CREATE TABLE snz (id int PRIMARY KEY, v text)" \
		-c "INSERT INTO snz SELECT i, md5(i::text) || md5((i * 7)::text) FROM generate_series(1, 4000) i"
	q "CREATE TABLE snz (id int PRIMARY KEY, v text)"
	pg-snapshot-dump -d "$pg_URL" --own-snapshot --table public.snz --frame-size 64kB -z >"$dir/snap.zst" 2>/dev/null
	local want got size fs fe total=0 nframes=0
	local -a fend frows
	want=$(psql_at pg -c "SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM snz")
	while read -r fs fe; do
		total=$((total + $(dd if="$dir/snap.zst" bs=1 skip="$fs" count=$((fe - fs)) status=none | zstd -dc | grep -c '^ROW' || true)))
		fend+=("$fe") frows+=("$total")
		nframes=$((nframes + 1))
	done < <(zstd_frames "$dir/snap.zst")
	((nframes >= 4))
	[ "$total" = 4000 ]
	pg-apply -d "$tgt_URL" --job snz_ok "$dir/snap.zst"
	[ "$(q "SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM snz")" = "$want" ]
	# A flipped bit in the third frame: what loaded is a correct part of the
	# frames before it, and no more.
	q "DROP TABLE snz; CREATE TABLE snz (id int PRIMARY KEY, v text)"
	size=$(stat -c %s "$dir/snap.zst")
	local off=$(((fend[1] + fend[2]) / 2)) rc=0
	cp "$dir/snap.zst" "$dir/bad.zst"
	printf '\x55' | dd of="$dir/bad.zst" bs=1 seek="$off" conv=notrunc status=none
	cmp -s "$dir/snap.zst" "$dir/bad.zst" && printf '\xAA' | dd of="$dir/bad.zst" bs=1 seek="$off" conv=notrunc status=none
	run --separate-stderr pg-apply -d "$tgt_URL" --job snz_bad "$dir/bad.zst"
	[ "$status" -ne 0 ]
	[ "$(q "SELECT count(*) FROM snz")" -le "${frows[1]}" ]
	psql_at pg -c "COPY snz TO STDOUT" | LC_ALL=C sort >"$dir/src"
	q "COPY snz TO STDOUT" | LC_ALL=C sort >"$dir/tgt"
	[ -z "$(LC_ALL=C comm -13 "$dir/src" "$dir/tgt")" ]
	[ -z "$(q "SELECT applied_lsn FROM pgsync.job WHERE job = 'snz_bad'")" ] ||
		[ "$(q "SELECT applied_lsn FROM pgsync.job WHERE job = 'snz_bad'")" = 0/0 ]
	# Recompressed as one frame, it cannot be verified frame by frame.
	q "DROP TABLE snz; CREATE TABLE snz (id int PRIMARY KEY, v text)"
	zstd -dc "$dir/snap.zst" | zstd -q --check >"$dir/one.zst"
	run --separate-stderr pg-apply -d "$tgt_URL" --job snz_one "$dir/one.zst"
	[ "$status" -eq 5 ]
	[[ $stderr == *"cannot be verified before loading: decompress it first, or write it with pg-snapshot-dump -z"* ]]
	[ "$(q "SELECT count(*) FROM snz")" = 0 ]
}
