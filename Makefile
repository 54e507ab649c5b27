# pgsync: `make` builds, `make check` tests, `make demo` shows a replication.
# Flags changed since the last build (make sanitize, CC=clang) rebuild all.

PREFIX ?= /usr/local
# systemd reads /usr/local/lib/systemd/system too; Debian 12 wants /lib/systemd/system.
SYSTEMDDIR ?= $(PREFIX)/lib/systemd/system
CC ?= cc
OPT ?= -O2 -g
SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

PG_INCLUDE := $(shell pg_config --includedir 2>/dev/null)
PG_LIBDIR := $(shell pg_config --libdir 2>/dev/null)
ZSTD_CFLAGS := $(shell pkg-config --cflags libzstd 2>/dev/null)
ZSTD_LIBS := $(shell pkg-config --libs libzstd 2>/dev/null || echo -lzstd)

LIB_INCLUDE = $(foreach d,$(LIB_DIRS),-I lib/$(d))
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter \
	-I $(PG_INCLUDE) $(ZSTD_CFLAGS) $(EXTRA_CFLAGS)
CFLAGS_ALL = $(CFLAGS_BASE) $(LIB_INCLUDE)
LDLIBS_ALL = -L $(PG_LIBDIR) -lpq $(ZSTD_LIBS) -lpthread -lm

PROGS := $(patsubst %.c,%,$(wildcard bin/*.c))
# pg-apply's own modules: its state, how it reports and exits, how it
# replaces a lost session. They see all of pg-apply's state and call exit():
# program code, not library, so they are not in libpgsync.a.
APPLY_PROG_SRC := $(wildcard bin/apply/*.c)
APPLY_PROG_HDR := $(wildcard bin/apply/*.h)
APPLY_PROG_OBJ := $(patsubst bin/apply/%.c,build/bin/apply/%.o,$(APPLY_PROG_SRC))
# lib/ is grouped by subsystem (lib/README.md). A folder's modules see only
# the folders below it (LAYER_<folder>), so an include that runs back up
# does not compile; programs and tests see every folder. A header is named
# by its file name alone.
LIB_DIRS := base source stream apply snapshot config verify
LAYER_base := base
LAYER_stream := base stream
LAYER_source := base stream source
LAYER_snapshot := base stream source snapshot
LAYER_apply := base stream apply
LAYER_config := base config
LAYER_verify := base stream verify
LIB_SRC := $(foreach d,$(LIB_DIRS),$(wildcard lib/$(d)/*.c))
LIB_HDR := $(foreach d,$(LIB_DIRS),$(wildcard lib/$(d)/*.h))
LIB_OBJ := $(patsubst lib/%.c,build/lib/%.o,$(LIB_SRC))
UNIT_SRC := $(wildcard test/unit/*_test.c)
UNIT_BIN := $(patsubst test/unit/%.c,build/unit/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard test/fuzz/*_fuzz.c)

.SECONDARY:
.PHONY: layer-flags all check check-fast check-world soak chaos-long unit bats sanitize demo bench install deb clean deps check-versions fuzz FORCE

all: $(PROGS)

# Rebuild everything when the compiler, the flags or the set of modules
# change (a module moved away must leave the archive).
BUILD_ID = $(CC) $(CFLAGS_ALL) $(LDFLAGS) $(LDLIBS_ALL) $(LIB_OBJ) $(APPLY_PROG_OBJ)
build/.flags: FORCE
	@mkdir -p build
	@echo '$(BUILD_ID)' | cmp -s - $@ || echo '$(BUILD_ID)' > $@

build/lib/%.o: lib/%.c $(LIB_HDR) build/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(foreach d,$(LAYER_$(firstword $(subst /, ,$*))),-I lib/$(d)) -c -o $@ $<

# An archive, so each program links only the modules it uses.
build/libpgsync.a: $(LIB_OBJ) build/.flags
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

build/bin/apply/%.o: bin/apply/%.c $(APPLY_PROG_HDR) $(LIB_HDR) build/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I bin/apply -c -o $@ $<

# The link map tells which modules each program links (scripts/layering).
bin/pg-apply: $(APPLY_PROG_OBJ) $(APPLY_PROG_HDR)
bin/%: bin/%.c build/libpgsync.a $(LIB_HDR) build/.flags
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -I bin/apply -o $@ $< $(filter build/bin/%.o,$^) build/libpgsync.a $(LDLIBS_ALL) -Wl,-Map,build/$*.map

# The include flags of lib/$(DIR)'s modules, for test/layering.bats.
layer-flags:
	@echo $(foreach d,$(LAYER_$(DIR)),-I lib/$(d))

build/unit/%: test/unit/%.c test/unit/unit.h build/libpgsync.a build/.flags
	@mkdir -p build/unit
	$(CC) $(CFLAGS_ALL) -I test/unit -o $@ $< build/libpgsync.a $(LDLIBS_ALL)

deps:
	@scripts/install-deps

unit: $(UNIT_BIN)
	@test/run-unit $(UNIT_BIN)

# The bats files, JOBS at a time (test/run-bats; serial ones last).
bats: all
	@test/run-bats $(if $(JOBS),-j $(JOBS)) $(BATS_FLAGS) $(or $(TESTS),test/*.bats)

# The tiers (README, "Tests"):
#   check-fast   no server: the unit tests and the bats files that start
#                none (options, configuration, usage; under 2 minutes)
#   check        the unit tests, then every bats file against real servers
#                on the default major, several files at a time (under 10
#                minutes on 2 cores); what CI runs
#   check-world  check-versions (every major), sanitize, soak and chaos-long:
#                hours, before a release
FAST_TESTS := test/cli.bats test/pgsync-config.bats test/bench.bats test/structure.bats test/runner.bats \
	test/layering.bats test/rules.bats

check-fast: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory bats TESTS="$(FAST_TESTS)"

check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory bats

# The long variants of the tests that take a size from the environment
# (each file says what its variables do; make check runs their defaults).
SOAK_VARS = CHUNKED_SEEDS="$$(seq -s ' ' 1 40)" RANDOM_STREAM_SEEDS="$$(seq -s ' ' 1 40)" \
	INTEGRITY_FLIPS=1000 ATOMIC_FLIPS=400 ATOMIC_KILLS=60 FAULTS=20 COPY_FAULTS=5 DURATION=120 \
	PGSYNC_TEST_MONITORING=1 PGSYNC_TEST_DEB=1 PGSYNC_TEST_SOAK=1 PGSYNC_BENCH_SMOKE=1
SOAK_TESTS := test/pgsync-chunked.bats test/pg-apply.bats test/stream-integrity.bats test/chaos.bats \
	test/pg-apply-atomic.bats test/monitoring.bats test/package.bats test/bench.bats
soak: deps
	@$(MAKE) --no-print-directory all
	@env $(SOAK_VARS) $(MAKE) --no-print-directory bats TESTS="$(SOAK_TESTS)"

# test/chaos at length, in both modes (about 16 minutes each).
chaos-long: deps
	@$(MAKE) --no-print-directory all
	@status=0; for mode in pipe pgsync; do \
		CHAOS_MODE=$$mode FAULTS=110 DURATION=900 test/chaos || status=1; \
	done; exit $$status

# Every tier, each run even when one before it failed.
check-world: deps
	@status=0; for t in check-versions sanitize soak chaos-long; do \
		echo "== make $$t"; \
		$(MAKE) --no-print-directory $$t || status=1; \
	done; exit $$status

# Every test on every supported major: clusters default to that major
# (PGSYNC_PG_MAJOR for pg-cluster, PGSYNC_MAJOR for tests that pass --major).
MAJORS ?= 14 15 16 17 18
check-versions: deps
	@scripts/install-deps --majors=$$(echo $(MAJORS) | tr ' ' ,)
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@status=0; for m in $(MAJORS); do \
		echo "== PostgreSQL $$m"; \
		PGSYNC_MAJOR=$$m PGSYNC_PG_MAJOR=$$m test/run-bats $(if $(JOBS),-j $(JOBS)) $(BATS_FLAGS) \
			$(or $(TESTS),test/*.bats) || status=1; \
	done; exit $$status

sanitize: deps
	@$(MAKE) --no-print-directory EXTRA_CFLAGS="$(SAN_FLAGS)" OPT="-O1 -g" all unit bats

# libFuzzer targets in test/fuzz/, each for SECONDS (scripts/fuzz).
fuzz: deps
	@scripts/install-deps --fuzz
	@scripts/fuzz $(or $(SECONDS),60)

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo

bench: deps
	@scripts/install-deps --bench
	@$(MAKE) --no-print-directory all
	@scripts/bench $(if $(QUICK),--quick)

# The systemd units name the programs by their installed path.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(PROGS) bin/pgsync scripts/archive-segment $(DESTDIR)$(PREFIX)/bin/
	install -m 644 doc/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/lib/pgsync
	install -m 644 lib/pgsync/*.sh $(DESTDIR)$(PREFIX)/lib/pgsync/
	install -d $(DESTDIR)$(SYSTEMDDIR)
	for u in scripts/systemd/*.service scripts/systemd/*.timer; do \
		sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' "$$u" >$(DESTDIR)$(SYSTEMDDIR)/$${u##*/} && \
		chmod 644 $(DESTDIR)$(SYSTEMDDIR)/$${u##*/} || exit 1; \
	done
	install -d $(DESTDIR)$(PREFIX)/share/pgsync/monitoring
	install -m 644 monitoring/* $(DESTDIR)$(PREFIX)/share/pgsync/monitoring/

# A Debian package, built by debhelper from debian/ in a copy of the tree:
# build/deb/pgsync_<version>_<arch>.deb (scripts/install-deps --deb first).
deb:
	@scripts/install-deps --deb
	rm -rf build/deb && mkdir -p build/deb/src
	tar -c --exclude=./build --exclude=./.git --exclude='./test' . | tar -x -C build/deb/src
	cd build/deb/src && dpkg-buildpackage -b --no-sign
	@ls build/deb/*.deb

clean:
	rm -rf build $(PROGS)
