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
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter \
	$(LIB_INCLUDE) -I $(PG_INCLUDE) $(ZSTD_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS_ALL = -L $(PG_LIBDIR) -lpq $(ZSTD_LIBS) -lpthread -lm

PROGS := $(patsubst %.c,%,$(wildcard bin/*.c))
# lib/ is grouped by subsystem (lib/README.md); every folder is on the
# include path, so a header is named by its file name alone.
LIB_DIRS := base source stream apply snapshot config
LIB_SRC := $(foreach d,$(LIB_DIRS),$(wildcard lib/$(d)/*.c))
LIB_HDR := $(foreach d,$(LIB_DIRS),$(wildcard lib/$(d)/*.h))
LIB_OBJ := $(patsubst lib/%.c,build/lib/%.o,$(LIB_SRC))
UNIT_SRC := $(wildcard test/unit/*_test.c)
UNIT_BIN := $(patsubst test/unit/%.c,build/unit/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard test/fuzz/*_fuzz.c)

.SECONDARY:
.PHONY: all check unit bats sanitize demo bench install deb clean deps check-versions fuzz FORCE

all: $(PROGS)

# Rebuild everything when the compiler or flags change.
build/.flags: FORCE
	@mkdir -p build
	@echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS) $(LDLIBS_ALL)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS) $(LDLIBS_ALL)' > $@

build/lib/%.o: lib/%.c $(LIB_HDR) build/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c -o $@ $<

# An archive, so each program links only the modules it uses.
build/libpgsync.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

bin/%: bin/%.c build/libpgsync.a $(LIB_HDR) build/.flags
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< build/libpgsync.a $(LDLIBS_ALL)

build/unit/%: test/unit/%.c test/unit/unit.h build/libpgsync.a build/.flags
	@mkdir -p build/unit
	$(CC) $(CFLAGS_ALL) -I test/unit -o $@ $< build/libpgsync.a $(LDLIBS_ALL)

deps:
	@scripts/install-deps

unit: $(UNIT_BIN)
	@test/run-unit $(UNIT_BIN)

bats: all
	@test/run-bats $(BATS_FLAGS) $(or $(TESTS),test/*.bats)

# Everything: unit tests, then the end-to-end suite against real servers.
check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory bats

# Every test on every supported major: clusters default to that major
# (PGSYNC_PG_MAJOR for pg-cluster, PGSYNC_MAJOR for tests that pass --major).
MAJORS ?= 14 15 16 17 18
check-versions: deps
	@scripts/install-deps --majors=$$(echo $(MAJORS) | tr ' ' ,)
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@status=0; for m in $(MAJORS); do \
		echo "== PostgreSQL $$m"; \
		PGSYNC_MAJOR=$$m PGSYNC_PG_MAJOR=$$m bats $(BATS_FLAGS) $(or $(TESTS),test/*.bats) || status=1; \
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
