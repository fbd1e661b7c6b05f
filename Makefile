# pimd — top-level Makefile.  See README.md; "make help" lists the targets.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share
SYSCONFDIR ?= /etc
UNITDIR    ?= /usr/lib/systemd/system
SYSUSERSDIR ?= /usr/lib/sysusers.d
TMPFILESDIR ?= /usr/lib/tmpfiles.d
DESTDIR    ?=

VERSION    := 0.1.0
SOVERSION  := 0

CC      ?= gcc
B       ?= build
PKGS    := libsystemd libprotobuf-c sqlite3 json-c check libpq
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
WARN    ?= -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wformat=2 -Wno-format-truncation -Wvla
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -DPIMD_VERSION=\"$(VERSION)\" -I$(B)/proto $(PKG_CFLAGS) $(CFLAGS)
# Include paths per directory: common/ sees only itself; client/ and compiler/ see common/;
# pimd's daemon/ sees common/ and the model-library ABI of client/pim_hooks.h.
INC_common   := -Icommon
INC_client   := -Iclient -Icommon
INC_daemon   := -Idaemon -Icommon -Iclient
INC_compiler := -Icompiler -Icommon
# Tests, benchmarks and the fuzz harnesses reach into every library.
INC_TESTS    := -Idaemon -Icommon -Iclient -Itests
# Dependency files beside every object and test binary (make re-reads them: a header change
# rebuilds what includes it).
DEPFLAGS = -MMD -MP -MF $@.d -MT $@
# What pimd and the tests link: pimd's core and the shared code (defined before compiler.mk).
CORE_LIBS := $(B)/libpimcore.a $(B)/libpimcommon.a
LIBS_COMMON := $(shell pkg-config --libs libprotobuf-c json-c 2>/dev/null) -lm
LIBS_DAEMON := $(shell pkg-config --libs libsystemd libprotobuf-c sqlite3 json-c libpq 2>/dev/null) -lpfm -lm
LIBS_CHECK  := $(shell pkg-config --libs check 2>/dev/null)

-include compiler/compiler.mk

all: $(B)/pimd $(B)/pimd-worker $(B)/pimctl $(B)/libpimclient.so $(B)/libpimclient.a $(B)/pimclient.pc $(COMPILER_ALL)

# ---------------------------------------------------------------- generated protocol code
# One run makes both files (a grouped target: make -j runs protoc-c once).
$(B)/proto/pim.pb-c.c $(B)/proto/pim.pb-c.h &: proto/pim.proto
	@mkdir -p $(B)/proto
	protoc-c --proto_path=proto --c_out=$(B)/proto proto/pim.proto

# ---------------------------------------------------------------- libraries
# libpimcommon.a: what pimd, pimctl and pim-extract share (common/: util, sys, manifest, frame)
# and the generated protocol code.  libpimcore.a: pimd's modules (daemon/), the pure engines
# among them (PURE_MODULES below) and the shells.
COMMON_SRC := $(wildcard common/*.c)
COMMON_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(COMMON_SRC)) $(B)/obj/gen/pim.pb-c.o
DAEMON_MAIN := daemon/pimd.c daemon/pimd_worker.c
MIGRATIONS := $(sort $(wildcard sql/[0-9][0-9][0-9][0-9]-*.sql))
# The fleet catalogue's schema (PostgreSQL), applied by pimd's catalogue thread.
CATALOGUE_MIGRATIONS := $(sort $(wildcard sql/catalogue/[0-9][0-9][0-9][0-9]-*.sql))
CORE_SRC := $(filter-out $(DAEMON_MAIN),$(wildcard daemon/*.c))
CORE_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(CORE_SRC)) $(B)/obj/gen/migrations.o $(B)/obj/gen/catalogue_migrations.o

$(B)/gen/migrations.c: $(MIGRATIONS) sql/embed.sh
	@mkdir -p $(dir $@)
	sh sql/embed.sh $@ $(MIGRATIONS)

$(B)/gen/catalogue_migrations.c: $(CATALOGUE_MIGRATIONS) sql/embed.sh
	@mkdir -p $(dir $@)
	sh sql/embed.sh $@ -n catalogue_migrations $(CATALOGUE_MIGRATIONS)

$(B)/obj/gen/catalogue_migrations.o: $(B)/gen/catalogue_migrations.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_daemon) -fPIC $(DEPFLAGS) -c -o $@ $<

$(B)/obj/gen/pim.pb-c.o: $(B)/proto/pim.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC $(DEPFLAGS) -c -o $@ $<

$(B)/obj/gen/migrations.o: $(B)/gen/migrations.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_daemon) -fPIC $(DEPFLAGS) -c -o $@ $<

# With the include paths of the source's directory (daemon/x.c: INC_daemon).
$(B)/obj/%.o: %.c $(B)/proto/pim.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_$(patsubst %/,%,$(dir $*))) -fPIC $(DEPFLAGS) -c -o $@ $<

$(B)/libpimcommon.a: $(COMMON_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/libpimcore.a: $(CORE_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/pimd: $(B)/obj/daemon/pimd.o $(CORE_LIBS)
	$(CC) $(ALL_CFLAGS) -o $@ $(B)/obj/daemon/pimd.o -Wl,--whole-archive $(CORE_LIBS) \
		-Wl,--no-whole-archive $(LIBS_DAEMON)

# pimd-worker runs model libraries in a fresh image (exec'ed by pimd's workers) and gives them
# the two hooks of client/pim_hooks.h; it links only the worker's part of the core.
HOOK_EXPORTS := -Wl,--export-dynamic-symbol=pim_region_enter -Wl,--export-dynamic-symbol=pim_region_exit
$(B)/pimd-worker: $(B)/obj/daemon/pimd_worker.o $(CORE_LIBS)
	$(CC) $(ALL_CFLAGS) $(HOOK_EXPORTS) -Wl,--as-needed -o $@ $(B)/obj/daemon/pimd_worker.o \
		$(CORE_LIBS) $(LIBS_DAEMON)

# ---------------------------------------------------------------- libpimclient and pimctl
# The manifest reader (common/manifest.c, with util.c and sys.c) parses and validates the JSON
# form for pim_model_load_json, as pimctl and pimd do.
CLIENT_OBJ := $(B)/obj/client/pimclient.o $(B)/obj/client/pimclient_typed.o $(B)/obj/client/pimclient_model.o \
	$(B)/obj/client/pimclient_mx.o $(B)/obj/common/frame.o $(B)/obj/common/wire.o $(B)/obj/common/manifest.o $(B)/obj/common/util.o \
	$(B)/obj/common/sys.o $(B)/obj/gen/pim.pb-c.o
LIBS_CLIENT := $(shell pkg-config --libs libprotobuf-c json-c 2>/dev/null) -lpthread

$(B)/libpimclient.a: $(CLIENT_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/libpimclient.so.$(VERSION): $(CLIENT_OBJ) client/libpimclient.map
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libpimclient.so.$(SOVERSION) \
		-Wl,--version-script=client/libpimclient.map -Wl,-z,defs -o $@ $(CLIENT_OBJ) $(LIBS_CLIENT)

$(B)/libpimclient.so: $(B)/libpimclient.so.$(VERSION)
	ln -sf libpimclient.so.$(VERSION) $(B)/libpimclient.so.$(SOVERSION)
	ln -sf libpimclient.so.$(VERSION) $@

$(B)/pimclient.pc: client/pimclient.pc.in Makefile
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(LIBDIR)|' -e 's|@includedir@|$(INCLUDEDIR)|' \
		-e 's|@version@|$(VERSION)|' $< > $@

# pimctl: libpimclient and the shared code (the manifest reader, the SVG writer), not pimd's
# core; its charts (client/chart.c, pure: data in, text out) also go to the unit tests.
$(B)/libpimchart.a: $(B)/obj/client/chart.o
	rm -f $@ && ar rcs $@ $^

# One file per command family (client/pimctl/), with the include paths of client/.
INC_client/pimctl := $(INC_client)
PIMCTL_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard client/pimctl/*.c))
$(B)/pimctl: $(PIMCTL_OBJ) $(B)/libpimchart.a $(B)/libpimclient.a $(B)/libpimcommon.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_COMMON) -lpthread

-include $(shell find $(B)/obj $(B)/tests $(B)/bench -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------- unit tests (check)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))

# -rdynamic: tests that load model libraries provide the pim_region_* hooks to them.
$(B)/tests/%: tests/unit/%.c $(B)/libpimchart.a $(CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_TESTS) $(DEPFLAGS) -rdynamic -o $@ $< $(B)/libpimchart.a $(CORE_LIBS) $(LIBS_DAEMON) \
		$(LIBS_CHECK) -ldl $(TEST_LDFLAGS)

# test_reply fails the allocations of pimd's code one by one: its own __wrap_ functions.
$(B)/tests/test_reply: TEST_LDFLAGS := \
	-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=vasprintf,--wrap=asprintf

# Test model libraries (tests/models/*.c): small shared objects following client/pim_hooks.h.
MODEL_SRC := $(wildcard tests/models/*.c)
MODEL_SO := $(patsubst tests/models/%.c,$(B)/tests/models/%.so,$(MODEL_SRC))
$(B)/tests/models/%.so: tests/models/%.c client/pim_hooks.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Werror -Iclient $(DEPFLAGS) -shared -fPIC -o $@ $<

# Runs every unit test binary, then repeats check's summary line of each at the end, with the
# tests a suite left out here (its "SKIP name: why" lines, test_util.h) counted as skipped.
unit: $(UNIT_BIN) $(MODEL_SO) $(B)/pimd-worker
	@rm -f $(B)/tests/summary; fail=0; skipped=0; \
	for t in $(UNIT_BIN); do \
		echo "== $$t"; \
		PIMD_TEST_MODELS=$(abspath $(B))/tests/models PIMD_TEST_WORKER=$(abspath $(B))/pimd-worker $$t > $(B)/tests/out 2>&1; rc=$$?; cat $(B)/tests/out; \
		n=$$(grep -c '^SKIP ' $(B)/tests/out); skipped=$$((skipped + n)); \
		printf '%-22s %s%s\n' "$$(basename $$t):" "$$(grep -E '^[0-9]+%: Checks' $(B)/tests/out)" \
			"$$([ $$n -eq 0 ] || echo ", Skipped: $$n")" >> $(B)/tests/summary; \
		[ $$rc -eq 0 ] || fail=1; \
	done; \
	echo; echo "Unit test summary (check):"; cat $(B)/tests/summary; \
	[ $$skipped -eq 0 ] || echo "SKIP: $$skipped tests not run here (the SKIP lines above say why)"; \
	exit $$fail

clean:
	rm -rf $(B) build-asan build-fuzz

.PHONY: all unit clean check-fleet bench-fleet

# ---------------------------------------------------------------- end-to-end helpers
$(B)/tests/e2e-tool: tests/e2e/e2e-tool.c $(B)/libpimclient.a $(CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_TESTS) $(DEPFLAGS) -rdynamic -o $@ $< $(B)/libpimclient.a $(CORE_LIBS) \
		$(LIBS_DAEMON) -lpthread -ldl

# A client of the typed calls alone (pim.h, the shared library): what an application writes.
$(B)/tests/e2e-typed: tests/e2e/typed.c client/pim.h $(B)/libpimclient.so
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -pedantic $(WARN) $(CFLAGS) -Iclient -o $@ $< -L$(B) -lpimclient -Wl,-rpath,$(abspath $(B))

# A client written from pimd(8) alone: its own framing and encoding, no generated code.
$(B)/tests/e2e-rawtext: tests/e2e/rawtext.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE $(CFLAGS) $(DEPFLAGS) -o $@ $<

# ---------------------------------------------------------------- dependencies
# Debian 12 packages the build, the tests and the demo need.  procps: kill(1) and ps for the tests;
# e2fsprogs: mkfs.ext4 for make stress; libxml2-utils (xmllint), jq and chromium: the chart tests
# parse every SVG and render it in a headless browser.
DEB_PKGS := gcc make pkg-config libpfm4-dev libsystemd-dev libprotobuf-c-dev protobuf-c-compiler \
	libsqlite3-dev sqlite3 libjson-c-dev check libsubunit-dev mandoc systemd util-linux procps \
	e2fsprogs libxml2-utils jq chromium libpq-dev postgresql-15 \
	$(MLIR_DEB_PKGS) $(ONNX_DEB_PKGS)

# A machine without package lists (a fresh minimal install) needs "apt-get update" first.
deps:
	@missing=$$(for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "Installing missing packages:" $$missing; \
		if ! ls /var/lib/apt/lists 2>/dev/null | grep -q '_Packages'; then apt-get update || exit 1; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing \
		|| { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; }; \
	else \
		echo "Missing packages; install them with:"; \
		echo "  sudo apt-get install -y" $$missing; exit 1; \
	fi

# ---------------------------------------------------------------- checks
# The public header must stay C99 and -pedantic clean.
$(B)/tests/header-c99.o: client/pim.h
	@mkdir -p $(dir $@)
	printf '#include "pim.h"\nint main(void) { return PIM_PROTOCOL_VERSION - 1; }\n' | \
		$(CC) -std=c99 -pedantic -Wall -Wextra -Werror -Iclient -x c -c -o $@ -

$(B)/units/pimd.service: systemd/pimd.service.in
	@mkdir -p $(dir $@)
	sed 's|@sbindir@|$(abspath $(B))|g' $< > $@
$(B)/units/pimd.socket: systemd/pimd.socket
	@mkdir -p $(dir $@)
	cp $< $@

check-units: $(B)/pimd $(B)/units/pimd.service $(B)/units/pimd.socket
	sh tests/e2e/test_units.sh $(B)/units

# The pure modules (README.md, Layout): the engines pimd wires to sockets and SQLite, and util.
# check-purity holds them to it (tests/purity.sh), and checks that the check refuses a shell.
PURE_MODULES := common/util common/wire common/strbuf common/svg common/sha256 client/chart daemon/placement daemon/calibrate daemon/metrics daemon/mx daemon/mx_avx2 daemon/mx_avx512 daemon/mx_ocp \
	daemon/placement_reason daemon/placement_units daemon/placement_movement daemon/pimsim daemon/pimsim_stream daemon/pimsim_exec daemon/jitq daemon/jitq_paper daemon/perfcsv daemon/events daemon/bandwidth daemon/answers
PURE_OBJ := $(patsubst %,$(B)/obj/%.o,$(PURE_MODULES))

# The store speaks its own structs (store.h): neither its objects nor the headers they are built
# from know the protocol (rpc.c converts).
STORE_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard daemon/store*.c))

check-purity: $(PURE_OBJ) $(B)/obj/daemon/config.o $(STORE_OBJ)
	sh tests/purity.sh $(PURE_OBJ)
	@if sh tests/purity.sh $(PURE_OBJ) $(B)/obj/daemon/config.o >/dev/null; then \
		echo "purity: the check passed daemon/config.o, which reads a file"; exit 1; fi
	@if grep -l 'pim\.pb-c\.h' $(STORE_OBJ:.o=.o.d) || nm -u $(STORE_OBJ) | grep -E 'pim__|protobuf_c'; then \
		echo "purity: the store knows the protocol (above); convert in the RPC layer"; exit 1; fi
	@echo "purity: the store's $(words $(STORE_OBJ)) objects know nothing of the protocol"

check-man:
	mandoc -Tlint -Wwarning man/*
	@echo "man: $(words $(wildcard man/*)) pages lint clean"

check-e2e: all $(B)/tests/e2e-tool $(B)/tests/e2e-rawtext $(B)/tests/e2e-typed $(MODEL_SO)
	sh tests/e2e/run.sh $(B)
	sh tests/e2e/cgroup.sh $(B)
	sh tests/e2e/jobs.sh $(B)
	sh tests/e2e/bcpu.sh $(B)

# The fleet catalogue end to end, against a throw-away PostgreSQL cluster (pg_virtualenv).
check-fleet: all $(MODEL_SO)
	pg_virtualenv -o log_min_messages=panic -t sh tests/e2e/fleet.sh $(B)

# B_cpu measured under load as when quiet, ROUNDS times (default 1), against its goal (within
# 10%); check-e2e runs one round and prints the ratio (doc/testing.md).
check-bcpu: all $(B)/tests/e2e-tool
	PIMD_E2E_GOALS=1 sh tests/e2e/bcpu.sh $(B) $(ROUNDS)

# Every sh block of README.md, in order, against the pimd its tour starts (tests/readme-examples.sh;
# the marker that leaves a block out: doc/testing.md).
check-readme: all
	sh tests/readme-examples.sh --self-test
	sh tests/readme-examples.sh $(B)

# pimctl's SVG charts: parsed with xmllint against the answers they draw, rendered by Chromium;
# pimctl's progress lines on a pseudo-terminal.
check-charts: all $(B)/tests/e2e-tool $(MODEL_SO)
	sh tests/e2e/charts.sh $(B)

# Availability at the sizes of the issue reports and the documented limits (minutes, GBs
# through sockets), with the timing goals make check leaves out: not part of make check.
# Figures in doc/benchmarks.md.
stress: all $(B)/tests/e2e-tool $(MODEL_SO)
	sh tests/e2e/stress.sh $(B)
	PIMD_E2E_GOALS=1 sh tests/e2e/jobs.sh $(B)
	PIMD_E2E_GOALS=1 sh tests/e2e/bcpu.sh $(B)

check-install: all
	@rm -rf $(B)/destdir
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(B))/destdir PREFIX=/usr >/dev/null
	@for f in usr/sbin/pimd usr/libexec/pimd/pimd-worker usr/bin/pimctl usr/lib/libpimclient.so.$(SOVERSION) usr/lib/libpimclient.a \
		usr/include/pim.h usr/include/pim_hooks.h usr/lib/pkgconfig/pimclient.pc usr/lib/systemd/system/pimd.service \
		usr/lib/systemd/system/pimd.socket usr/lib/sysusers.d/pimd.conf usr/lib/tmpfiles.d/pimd.conf \
		usr/share/man/man8/pimd.8 usr/share/man/man1/pimctl.1 usr/share/man/man1/pim-extract.1 \
		usr/share/man/man3/libpimclient.3 \
		usr/share/man/man5/pimd.conf.5 usr/share/bash-completion/completions/pimctl; do \
		[ -e $(B)/destdir/$$f ] || { echo "install: $$f missing"; exit 1; }; done
	@grep -q 'ExecStart=/usr/sbin/pimd' $(B)/destdir/usr/lib/systemd/system/pimd.service
	@readelf -d $(B)/destdir/usr/lib/libpimclient.so.$(VERSION) | grep -q 'SONAME.*libpimclient.so.$(SOVERSION)'
	@printf '#include <pim.h>\nint main(void){pim_client *c=pim_client_new();pim_client_free(c);return 0;}\n' | \
		$(CC) -x c - -o $(B)/destdir/link-test \
		$$(PKG_CONFIG_SYSROOT_DIR=$(abspath $(B))/destdir PKG_CONFIG_LIBDIR=$(abspath $(B))/destdir/usr/lib/pkgconfig pkg-config --cflags --libs pimclient) \
		-Wl,-rpath,$(abspath $(B))/destdir/usr/lib && $(B)/destdir/link-test
	@echo "install: DESTDIR layout complete; pkg-config link test passed"

# make check: everything, from a fresh Debian 12 machine (it installs what it needs when root).
check: deps
	$(MAKE) --no-print-directory all $(UNIT_BIN) $(MODEL_SO) $(BENCH_BIN) $(B)/bench/fleet-hosts $(B)/tests/e2e-tool \
		$(B)/tests/e2e-rawtext $(B)/tests/header-c99.o
	$(MAKE) --no-print-directory check-purity
	$(MAKE) --no-print-directory check-man
	$(MAKE) --no-print-directory check-units
	$(MAKE) --no-print-directory check-install
	$(MAKE) --no-print-directory check-e2e
	$(MAKE) --no-print-directory check-fleet
	$(MAKE) --no-print-directory check-charts
	$(MAKE) --no-print-directory check-fuzz-replay
	$(MAKE) --no-print-directory check-compiler
	$(MAKE) --no-print-directory check-onnx ONNX_TESTS_EVERY=$(ONNX_CHECK_EVERY)
	$(MAKE) --no-print-directory check-torch
	$(MAKE) --no-print-directory check-readme
	$(MAKE) --no-print-directory unit

# ASan + UBSan build of everything, then the unit and end-to-end tests on it.
ASAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan:
	$(MAKE) --no-print-directory B=build-asan CFLAGS="$(ASAN_CFLAGS)" \
		all $(patsubst $(B)/%,build-asan/%,$(UNIT_BIN) $(MODEL_SO)) build-asan/tests/e2e-tool \
		build-asan/tests/e2e-rawtext $(patsubst %,build-asan/tests/%_replay,$(FUZZ_TARGETS))
	ASAN_OPTIONS=detect_leaks=1 PIMD_E2E_ASAN=1 $(MAKE) --no-print-directory B=build-asan \
		CFLAGS="$(ASAN_CFLAGS)" check-fuzz-replay check-e2e unit

# ---------------------------------------------------------------- fuzzing
# make fuzz: libFuzzer + ASan + UBSan (clang) on the request path and the manifest reader,
# FUZZ_SECONDS each.  make check replays the committed corpus through the same targets.
FUZZ_TARGETS := fuzz_request fuzz_manifest
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer

INC_tests/fuzz := $(INC_TESTS)
$(B)/tests/%_replay: $(B)/obj/tests/fuzz/%.o $(B)/obj/tests/fuzz/replay.o $(CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS_DAEMON)

check-fuzz-replay: $(patsubst %,$(B)/tests/%_replay,$(FUZZ_TARGETS))
	$(B)/tests/fuzz_request_replay tests/fuzz/corpus/request/*
	$(B)/tests/fuzz_manifest_replay tests/fuzz/corpus/manifest/*

fuzz-seeds: $(B)/tests/e2e-tool
	mkdir -p tests/fuzz/corpus/request tests/fuzz/corpus/manifest
	$(B)/tests/e2e-tool seeds tests/fuzz/corpus/request tests/fuzz/corpus/manifest tests/e2e/data/decoder-block.json

fuzz:
	@dpkg-query -W -f='$${Status}\n' clang libclang-rt-14-dev 2>/dev/null | grep -c 'install ok installed' | \
		grep -q 2 || { [ "$$(id -u)" = 0 ] && apt-get install -y clang libclang-rt-14-dev; }
	$(MAKE) --no-print-directory B=build-fuzz CC=clang WARN="-Wall -Wextra -Wno-unused-parameter" \
		CFLAGS="$(FUZZ_CFLAGS)" build-fuzz/libpimcore.a build-fuzz/libpimcommon.a
	@for t in $(FUZZ_TARGETS); do \
		clang -std=gnu11 -D_GNU_SOURCE -Ibuild-fuzz/proto $(INC_TESTS) $(PKG_CFLAGS) -O1 -g \
			-fsanitize=fuzzer,address,undefined -o build-fuzz/$$t tests/fuzz/$$t.c build-fuzz/libpimcore.a \
			build-fuzz/libpimcommon.a $(LIBS_DAEMON) || exit 1; \
		mkdir -p build-fuzz/corpus-$$t; \
		dir=$$(echo $$t | sed 's/fuzz_//'); \
		build-fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 \
			build-fuzz/corpus-$$t tests/fuzz/corpus/$$dir || exit 1; \
	done

# ---------------------------------------------------------------- stress (root)
# Tests too slow for make check, or that need root for loop mounts; see doc/testing.md.
$(B)/tests/fs-shutdown: tests/stress/fs-shutdown.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE $(CFLAGS) $(DEPFLAGS) -o $@ $<

stress: stress-durable

stress-durable: all $(B)/tests/fs-shutdown
	sh tests/stress/durable.sh $(B)

# ---------------------------------------------------------------- demo
demo: deps
	$(MAKE) --no-print-directory all
	sh examples/demo.sh $(B) $(DEMO_MANIFEST) $(DEMO_LIBRARY)

# The README's pictures (doc/*.svg): the demo, its charts written into doc/.
pictures: deps
	$(MAKE) --no-print-directory all
	DEMO_CHARTS=$(abspath doc) sh examples/demo.sh $(B) $(DEMO_MANIFEST) $(DEMO_LIBRARY) >/dev/null
	@echo "pictures: doc/placement.svg doc/calibration.svg doc/jitq-plan.svg"

# The exported GPT-2-style decoder at prefill and decode, profiled and placed (needs MLIR 19 and
# python3-torch: make deps).
demo-decoder: deps
	$(MAKE) --no-print-directory all
	sh examples/demo-decoder.sh $(B)

# ---------------------------------------------------------------- install
install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(B)/pimd $(DESTDIR)$(SBINDIR)/pimd
	install -d $(DESTDIR)$(LIBEXECDIR)/pimd
	install -m 0755 $(B)/pimd-worker $(DESTDIR)$(LIBEXECDIR)/pimd/pimd-worker
	install -m 0755 $(B)/pimctl $(DESTDIR)$(BINDIR)/pimctl
	if [ -x $(B)/pim-extract ]; then install -m 0755 $(B)/pim-extract $(DESTDIR)$(BINDIR)/pim-extract; fi
	install -m 0755 $(B)/libpimclient.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libpimclient.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libpimclient.so.$(SOVERSION)
	ln -sf libpimclient.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libpimclient.so
	install -m 0644 $(B)/libpimclient.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 client/pim.h $(DESTDIR)$(INCLUDEDIR)/pim.h
	install -m 0644 client/pim_hooks.h $(DESTDIR)$(INCLUDEDIR)/pim_hooks.h
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(LIBDIR)|' -e 's|@includedir@|$(INCLUDEDIR)|' \
		-e 's|@version@|$(VERSION)|' client/pimclient.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/pimclient.pc
	sed 's|@sbindir@|$(SBINDIR)|g' systemd/pimd.service.in > $(DESTDIR)$(UNITDIR)/pimd.service
	install -m 0644 systemd/pimd.socket $(DESTDIR)$(UNITDIR)/pimd.socket
	install -m 0644 systemd/pimd.sysusers $(DESTDIR)$(SYSUSERSDIR)/pimd.conf
	install -m 0644 systemd/pimd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/pimd.conf
	install -d $(DESTDIR)$(DATADIR)/pimd
	install -m 0644 systemd/pimd-catalogue.conf $(DESTDIR)$(DATADIR)/pimd/pimd-catalogue.conf
	install -d $(DESTDIR)$(DATADIR)/bash-completion/completions
	install -m 0644 client/pimctl.bash-completion $(DESTDIR)$(DATADIR)/bash-completion/completions/pimctl
	install -m 0644 man/pimctl.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/pim-extract.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/libpimclient.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 man/pimd.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 man/pimd.8 $(DESTDIR)$(MANDIR)/man8/

# ---------------------------------------------------------------- benchmarks
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))

$(B)/bench/%: bench/%.c $(B)/libpimclient.a $(CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_TESTS) $(DEPFLAGS) -o $@ $< $(B)/libpimclient.a $(CORE_LIBS) \
		$(LIBS_DAEMON) -lpthread

# The fleet catalogue at scale (doc/fleet.md): fleet-hosts speaks for FLEET_HOSTS simulated hosts
# with pimd's publishing code, and a real pimd places a model it never measured.
FLEET_HOSTS ?= 1000
FLEET_REGIONS ?= 10000
$(B)/bench/fleet-hosts: bench/fleet_hosts.c $(CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_TESTS) $(DEPFLAGS) -o $@ $< $(CORE_LIBS) $(LIBS_DAEMON) -lpthread

bench-fleet: all $(B)/bench/fleet-hosts
	pg_virtualenv -o log_min_messages=panic -o max_wal_size=4GB -t sh bench/bench_fleet.sh $(B) $(FLEET_HOSTS) $(FLEET_REGIONS)

bench: deps all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; \
		case $$b in *bench_query) $$b $(B)/pimd ;; *) $$b ;; esac || exit 1; done
	@echo "== bench/bench_extract.sh"
	@$(MAKE) --no-print-directory bench-extract

# LLMs at real width (needs MLIR 19 and python3-torch: make deps).  bench-hostcode: per ONNX
# node class, pim-extract's host code timed region by region (hostcode-run, its own hooks)
# beside PyTorch's CPU time for the same op, in one run; demo-llm: GPT-J-6B- and LLaMA-7B-shaped
# decode steps exported, extracted, profiled by a private pimd and placed, beside Torch-PIM's
# Fig. 3(f) (pictures in $(B)/demo-llm/).
$(B)/bench/hostcode-run: bench/hostcode_run.c $(B)/libpimcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_compiler) -Iclient $(DEPFLAGS) -rdynamic -o $@ $< $(B)/libpimcommon.a \
		$(LIBS_COMMON) -ldl

ifeq ($(MLIR_AVAILABLE),1)
bench-hostcode: deps $(PIM_EXTRACT) $(B)/bench/hostcode-run
	sh bench/bench_hostcode.sh $(B)

demo-llm: deps $(PIM_EXTRACT) $(B)/pimd $(B)/pimd-worker $(B)/pimctl
	sh bench/demo_llm.sh $(B)
else
bench-hostcode demo-llm:
	$(MLIR_MISSING)
endif

jitq-report: $(B)/bench/bench_jitq_report
	$(B)/bench/bench_jitq_report

help:
	@echo "make            build pimd, pimctl, libpimclient into $(B)/"
	@echo "make demo       build, start pimd privately, load and show the example model, stop;"
	@echo "                its three charts in $(B)/demo/"
	@echo "make pictures   the README's pictures (doc/*.svg) from the demo model"
	@echo "make demo-decoder  the same for a decoder exported from PyTorch, at prefill and decode"
	@echo "make check      every test: unit, end to end, units, man pages, install, purity, the"
	@echo "                README's commands; behaviour, not speed (doc/testing.md)"
	@echo "make asan       the tests again with AddressSanitizer and UBSan"
	@echo "make stress     availability under hostile clients at full scale, and (root) stress-durable:"
	@echo "                acknowledged data on an ext4 that fails (minutes)"
	@echo "make bench      benchmarks (ratios measured side by side in one run), then bench-extract"
	@echo "make bench-extract  GPT-2 small (124 M parameters) exported, through pim-extract, profiled"
	@echo "make bench-hostcode  pim-extract's host code per ONNX node class at LLM width, timed"
	@echo "                beside PyTorch's CPU time for the same op (ratios, goals)"
	@echo "make demo-llm   GPT-J-6B- and LLaMA-7B-shaped decode steps (d 4096) exported, profiled"
	@echo "                and placed, beside Torch-PIM's Fig. 3(f); pictures in $(B)/demo-llm/"
	@echo "make jitq-report  JIT-Q figures of the models beside the paper's"
	@echo "make deps       install the Debian packages needed (as root), or print the command"
	@echo "make install    install under DESTDIR/PREFIX"

.PHONY: check-bcpu jitq-report fuzz fuzz-seeds check-fuzz-replay deps check check-purity check-units check-man check-e2e check-charts check-readme check-install asan demo pictures install bench help stress stress-durable demo-decoder bench-hostcode demo-llm
