#!/usr/bin/env bats
# lib/'s structure as lib/README.md states it, checked without a server:
# each folder sees only the folders below it, an include that runs back up
# does not compile, no two modules depend on each other, and
# doc/architecture.md's table of which program links which modules is what
# the link maps say.

load lib/common

setup_file() {
	make -C "$PGSYNC_ROOT" -s all >/dev/null
}

@test "every include of lib/ names a header of a folder its own may use (the Makefile's LAYER_ lists)" {
	run "$PGSYNC_SCRIPTS/layering" includes
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "no module of lib/ depends on itself through others (no include cycle)" {
	run "$PGSYNC_SCRIPTS/layering" cycles
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "an include that runs back up (base/ naming an apply/ header) does not compile" {
	local flags
	printf '#include "applier.h"\nint x;\n' >"$BATS_TEST_TMPDIR/up.c"
	flags=$(make -C "$PGSYNC_ROOT" -s layer-flags DIR=base)
	[[ $flags == "-I lib/base" ]]
	cd "$PGSYNC_ROOT"
	run cc -fsyntax-only $flags -I "$(pg_config --includedir)" "$BATS_TEST_TMPDIR/up.c"
	[ "$status" -ne 0 ]
	[[ $output == *"applier.h"*"No such file"* ]]
	# The same file compiles where apply/ is visible: the failure is the layer's.
	run cc -fsyntax-only $(make -s layer-flags DIR=apply) -I "$(pg_config --includedir)" "$BATS_TEST_TMPDIR/up.c"
	[ "$status" -eq 0 ]
}

@test "the checker sees a cycle and an upward include when there is one" {
	# A copy of lib/ and the Makefile with stream/escape.h including
	# streamread.h (stream -> stream cycle through record) and base/buf.h
	# including escape.h (base may use nothing else).
	local copy=$BATS_TEST_TMPDIR/tree
	mkdir -p "$copy/scripts"
	cp -r "$PGSYNC_ROOT/lib" "$PGSYNC_ROOT/Makefile" "$copy/"
	cp "$PGSYNC_SCRIPTS/layering" "$copy/scripts/"
	sed -i '0,/#include "buf.h"/s//#include "buf.h"\n#include "streamread.h"/' "$copy/lib/stream/escape.h"
	printf '#include "escape.h"\n' >>"$copy/lib/base/buf.h"
	run "$copy/scripts/layering" cycles
	[ "$status" -eq 1 ]
	[[ $output == *"cycle: "*"escape"* ]]
	run "$copy/scripts/layering" includes
	[ "$status" -eq 1 ]
	[[ $output == *"lib/base/buf.h: includes stream/escape.h, but lib/base may use only: base"* ]]
}

@test "doc/architecture.md's program-to-module table is the one the link maps give" {
	local doc
	doc=$(awk '/^\| module \| pg-walcat/ { on = 1 } on && /^$/ { exit } on' "$PGSYNC_ROOT/doc/architecture.md")
	run "$PGSYNC_SCRIPTS/layering" table
	[ "$status" -eq 0 ]
	[ "$output" = "$doc" ] || { diff <(echo "$doc") <(echo "$output"); return 1; }
}

@test "no function of bin/ or lib/ takes more than 8 parameters" {
	run "$PGSYNC_SCRIPTS/layering" params
	echo "$output"
	[ "$status" -eq 0 ]
}
