# kite build. `make` builds build/kite and build/kite-agent; `make test` the tests a change must
# pass (unit, and end-to-end under AddressSanitizer+UBSan); `make test-slow` the rest CI runs (the
# end-to-end tests against the plain build, and those marked slow); `make asan` the unit tests
# under AddressSanitizer+UBSan; `make soak` randomized API traffic
# against the ASan build; `make test-e2e-tsan` the e2e tests under ThreadSanitizer; `make bench`
# the benchmarks; `make up` a local cluster.
#
# Each folder of src/ is a module compiled to its own archive, linked in dependency order
# (DESIGN.md): a module's tests link only the modules it may use.

BUILD    ?= build
CC       ?= cc
# libmnl: rtnetlink for the pod network (src/agent/runtime/net.c); libnghttp2: HTTP/2 (src/http/h2.c)
# zlib: SPDY/3.1 header blocks for port-forward (src/agent/logs/spdy.c)
PKGS     := gnutls json-c sqlite3 yaml-0.1 libmnl libnghttp2 zlib
# Loaded with dlopen when first used, so an agent that does not use them does not map them (their
# headers only): libarchive when an image is imported (src/agent/images/libarchive.h); ldns, the
# cluster DNS responder's packets, under --serve-dns (src/agent/dns/ldns.h; it brings libssl and
# libcrypto); libnftables, the Service proxy's table, under --proxy-mode nftables (src/agent/proxy)
DL_PKGS  := libarchive ldns libnftables
# ... the agent's tests call ldns and libnftables themselves
TEST_PKGS_agent := ldns libnftables
# libcurl is a test peer only (the http module's tests drive the server with it)
TEST_PKGS_http := libcurl
# ... and the apiserver's: its tests run a real server in the test process
TEST_PKGS_apiserver := libcurl
CFLAGS   ?= -O2 -g
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The kite binary uses mimalloc: ~30% more API writes/s than glibc's malloc, whose
# consolidation showed in profiles (BENCHMARKS.md). Sanitizer builds keep their own allocator.
MALLOC   := -lmimalloc
ifeq ($(SANITIZE),1)
BUILD    := build-asan
# -g1: the line tables a sanitizer report's stack needs, without the variables' debug info, which
# took a fifth of the compile time of this build that `make test` starts with
CFLAGS   := -O1 -g1 $(SAN)
LDLIBS   += $(SAN)
MALLOC   :=
endif
# ThreadSanitizer (`make SANITIZE=thread build-tsan/kite`, `make test-e2e-tsan`): data races and
# lock-order inversions between the server's threads. It cannot be combined with ASan.
TSAN     := -fsanitize=thread
ifeq ($(SANITIZE),thread)
BUILD    := build-tsan
CFLAGS   := -O1 -g $(TSAN)
LDLIBS   += $(TSAN)
MALLOC   :=
endif
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -fno-strict-aliasing \
            -D_GNU_SOURCE -Isrc $(shell pkg-config --cflags $(PKGS) $(DL_PKGS) 2>/dev/null) -MMD -MP
# libwslay: WebSocket framing for exec and attach (src/agent/logs/exec.c); Debian ships no .pc
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser -lwslay -lpthread -lm


# module -> modules it links against, in link order (itself first)
DEPS_base      := base
DEPS_json      := json base
DEPS_api       := api json base
DEPS_store     := store base
DEPS_http      := http base
DEPS_pki       := pki base
DEPS_apiserver := apiserver http store pki api json base
DEPS_client    := client api json base
DEPS_agent     := agent client http pki api json base
# the controller framework (shared informers, the keyed work queue and its runner, leader
# election, the event recorder, timers): what controllers and the scheduler are built on
DEPS_framework := framework client api json base
DEPS_controllers := controllers framework client pki api json base
DEPS_scheduler := scheduler framework client api json base
DEPS_sim       := sim agent client http pki api json base
# cmd is linked whole into build/kite; its archive serves its unit tests (flags.c needs api)
# and kite-agent (the linker takes agent.o, flags.o and signals.o from it)
DEPS_cmd       := cmd api json base
# extra modules a module's unit tests may link (test fixtures only), linked before its own (they use base)
TESTDEPS_http  := pki
TESTDEPS_client := pki
# the apiserver's tests bootstrap the controllers' ClusterRoles from their descriptor rows
TESTDEPS_apiserver := controllers framework client
# the framework's and the scheduler's tests drive them against the controllers' fake API
TESTSRCS_framework := tests/unit/controllers/fakeapi.c
TESTSRCS_scheduler := tests/unit/controllers/fakeapi.c
MODULES        := base json api store http pki apiserver client agent sim framework controllers scheduler cmd

srcs_of = $(shell find src/$(1) -name '*.c' 2>/dev/null | sort)
objs_of = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(call srcs_of,$(1)))
lib_of  = $(BUILD)/lib/libkite_$(1).a
libs_for = $(foreach m,$(DEPS_$(1)),$(call lib_of,$(m)))

.PHONY: FORCE all install check-layers deps test test-slow test-unit test-e2e test-e2e-etcd test-e2e-asan test-e2e-asan-slow test-scale test-e2e-tsan soak asan bench up clean fmt $(addprefix test-,$(MODULES))
all: deps $(BUILD)/kite $(BUILD)/kite-agent $(BUILD)/kubectl-kite

deps:
	@scripts/install-deps

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Variables in the recipes below are escaped ($$) so they expand when the recipe runs, after
# `deps` installed the packages pkg-config asks about, not when the rules are defined.
# (cmd's archive leaves out the mains: a test's own main comes from criterion)
MAINS := $(BUILD)/obj/cmd/main.o $(BUILD)/obj/cmd/agent_main.o
define module_rules
$(call lib_of,$(1)): $(filter-out $(MAINS),$(call objs_of,$(1)))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^

$(BUILD)/tests/test-$(1): $(patsubst %.c,$(BUILD)/%.o,$(shell find tests/unit/$(1) -name '*.c' 2>/dev/null | sort) $(TESTSRCS_$(1))) $(foreach m,$(TESTDEPS_$(1)),$(call lib_of,$(m))) $(call libs_for,$(1))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -o $$@ $$^ $$(LDLIBS) $$(if $$(TEST_PKGS_$(1)),$$(shell pkg-config --libs $$(TEST_PKGS_$(1)) 2>/dev/null)) -lcriterion

test-$(1): deps $(BUILD)/tests/test-$(1)
	scripts/run-unit $(BUILD)/tests/test-$(1)
endef
$(foreach m,$(MODULES),$(eval $(call module_rules,$(m))))

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c $< -o $@

$(BUILD)/kite: $(BUILD)/obj/cmd/main.o $(filter-out $(MAINS),$(call objs_of,cmd)) \
               $(call libs_for,sim) $(call libs_for,controllers) $(call libs_for,scheduler) $(call libs_for,apiserver) $(call lib_of,pki)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(foreach m,sim agent controllers scheduler framework client apiserver http pki store api json base,$(call lib_of,$(m))) $(MALLOC) $(LDLIBS)

# The node agent linked alone (`kite-agent`, the same flags as `kite agent`): every library a
# process maps costs it the pages it touches (relocations, data, the code run at start), so
# the apiserver's SQLite, mimalloc and libm in build/kite made an idle `kite agent` ~9 MB RSS;
# linked alone it is ~7 MB (BENCHMARKS.md, pods). No mimalloc: under glibc's malloc the agent
# is smaller idle and per pod. --as-needed drops every library of LDLIBS it does not call.
$(BUILD)/kite-agent: $(BUILD)/obj/cmd/agent_main.o $(call lib_of,cmd) $(call libs_for,agent)
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(call lib_of,cmd) $(call libs_for,agent) -Wl,--as-needed $(LDLIBS)

# `kubectl kite nodes`: kubectl runs an executable called kubectl-kite found on PATH as a plugin,
# with the words after `kite`; it is kite itself (its subcommands read $KUBECONFIG as kubectl does)
$(BUILD)/kubectl-kite: $(BUILD)/kite
	ln -sf kite $@

# `make install [PREFIX=/usr/local]`: kite, kite-agent and the kubectl plugin into PREFIX/bin
PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/kite $(BUILD)/kite-agent $(DESTDIR)$(PREFIX)/bin/
	ln -sf kite $(DESTDIR)$(PREFIX)/bin/kubectl-kite

UNIT_MODULES := $(foreach m,$(MODULES),$(if $(wildcard tests/unit/$(m)/*.c),$(m)))
# One target per module, so that `make -jN test-unit` runs N modules at once (their tests wait on
# timers and sockets much of the time); each module's output is printed whole when it is done.
test-unit: $(addprefix $(BUILD)/unit-run-,$(UNIT_MODULES))
$(BUILD)/unit-run-%: deps $(BUILD)/tests/test-% FORCE
	@s=0; scripts/run-unit $(BUILD)/tests/test-$* >$(BUILD)/unit-$*.log 2>&1 || s=1; \
	  flock $(BUILD)/.unit-out sh -c 'echo "== unit: $*"; cat $(BUILD)/unit-$*.log'; exit $$s
FORCE:

# The end-to-end tests run in parallel (pytest-xdist): E2E_WORKERS processes, whole files to each
# (--dist loadfile: a module's tests share its cluster and run in order). They mostly wait on
# processes, so 4 workers suit this 2-core machine (README, Tests). Each worker takes its own
# ports, pod bridges and pod CIDRs (tests/e2e/conftest.py). E2E_ARGS: more pytest arguments.
# Their files go to /tmp/kite-e2e-<worktree>/<build>/gwN/ (emptied at the start of the next run), not
# pytest's shared /tmp/pytest-of-USER, which every run on the machine prunes.
E2E_WORKERS ?= 4
E2E_TMP := /tmp/kite-e2e-$(shell echo $(CURDIR) | md5sum | cut -c1-8)
PYTEST_E2E = /usr/bin/python3 -m pytest -q -n $(E2E_WORKERS) --dist loadfile --durations=15 $(E2E_ARGS)
# A container a killed run left mounted under the previous run's files would keep pytest from
# emptying them: unmount what is left there first.
E2E_PREP = mkdir -p $(E2E_TMP); awk '$$2 ~ "^$(E2E_TMP)/" {print $$2}' /proc/mounts | sort -r | xargs -r umount -l

# Every e2e test (those marked slow too) against the plain build.
test-e2e: all $(BUILD)/busybox.tar
	@$(E2E_PREP)
	KITE=$(abspath $(BUILD)/kite) $(PYTEST_E2E) --basetemp=$(E2E_TMP)/$(BUILD) tests/e2e

# Runs that need the machine to themselves (tests marked scale: 10,000 simulated nodes against
# kite up); every other target skips them.
test-scale: all
	@$(E2E_PREP)
	KITE=$(abspath $(BUILD)/kite) KITE_SCALE_TESTS=1 /usr/bin/python3 -m pytest -q --basetemp=$(E2E_TMP)/scale -m scale tests/e2e

# Every e2e test against the plain build, each cluster stored in a real etcd (KITE_TEST_STORE=etcd:
# one etcd per worker, tests/e2e/conftest.py); tests of what only SQLite has skip with the reason.
test-e2e-etcd: all $(BUILD)/busybox.tar
	@$(E2E_PREP)
	KITE_TEST_STORE=etcd KITE=$(abspath $(BUILD)/kite) $(PYTEST_E2E) --basetemp=$(E2E_TMP)/$(BUILD)-etcd tests/e2e

# DESIGN.md's dependency rules (the DEPS_* lines above), checked on includes and on the symbols
# each module's archive takes from the others: a violation fails the build of `make test`
check-layers: all
	scripts/check-layers $(BUILD)

asan:
	$(MAKE) SANITIZE=1 test-unit

# The end-to-end tests against the sanitizer build (any report in a log fails them), but for
# those marked slow (test-e2e-asan-slow).
test-e2e-asan:
	$(MAKE) SANITIZE=1 build-asan/kite build-asan/kite-agent build-asan/kubectl-kite build-asan/busybox.tar
	@$(E2E_PREP)
	KITE=$(abspath build-asan/kite) ASAN_OPTIONS=detect_leaks=1 $(PYTEST_E2E) --basetemp=$(E2E_TMP)/build-asan -m "not slow" tests/e2e

test-e2e-asan-slow:
	$(MAKE) SANITIZE=1 build-asan/kite build-asan/kite-agent build-asan/kubectl-kite build-asan/busybox.tar
	@$(E2E_PREP)
	KITE=$(abspath build-asan/kite) ASAN_OPTIONS=detect_leaks=1 $(PYTEST_E2E) --basetemp=$(E2E_TMP)/build-asan-slow -m slow tests/e2e

# The end-to-end tests against the ThreadSanitizer build (slow; not part of `make test`): a
# report in a log fails the test. second_deadlock_stack shows both stacks of a lock-order report.
TSAN_E2E_OPTIONS ?= halt_on_error=0 second_deadlock_stack=1 history_size=4
test-e2e-tsan:
	$(MAKE) SANITIZE=thread build-tsan/kite build-tsan/kite-agent build-tsan/kubectl-kite
	@$(E2E_PREP)
	KITE=$(abspath build-tsan/kite) TSAN_OPTIONS="$(TSAN_E2E_OPTIONS)" $(PYTEST_E2E) --basetemp=$(E2E_TMP)/build-tsan tests/e2e

# A randomized mix of API operations from several clients against the ASan build for
# SOAK_SECONDS (default 600; SOAK_SEED replays a run): fails on a wrong answer, a 5xx, the
# server dying or a sanitizer report (tests/soak/soak.py). Not part of `make test`; CI runs it.
# SOAK_HOSTILE=1 mixes hostile shapes into it (YAML bombs, deep nesting, anonymous HTTP/2 bodies,
# oversized bodies, huge integers in query parameters); SOAK_SKIP=hostile-<shape> leaves one out.
soak:
	$(MAKE) SANITIZE=1 build-asan/kite
	KITE=$(abspath build-asan/kite) ASAN_OPTIONS=detect_leaks=1 SOAK_SECONDS=$${SOAK_SECONDS:-600} \
	    /usr/bin/python3 tests/soak/soak.py

# What a change must pass, in ~10 minutes on 2 cores (README): the sanitizer build (with -j,
# both cores; the same -Wall -Wextra -Werror as the plain one), the layering check on its
# archives, the unit tests and the end-to-end tests once each under ASan+UBSan (the same tests
# a plain pass runs, with every memory and UB check on). The optimized build is test-slow's.
NPROC := $(shell nproc 2>/dev/null || echo 2)
test: deps
	$(MAKE) -j$(NPROC) SANITIZE=1 build-asan/kite build-asan/kite-agent
	scripts/check-layers build-asan
	$(MAKE) -j$(NPROC) asan
	$(MAKE) test-e2e-asan

# The rest of the tests, which CI runs after `make test`: the unit and e2e tests against the plain
# build (an optimized build times and races differently), and the e2e ones marked slow under the
# sanitizers, and the whole e2e suite once more with every cluster on etcd.
test-slow: deps
	$(MAKE) -j$(NPROC) all
	$(MAKE) check-layers
	$(MAKE) -j$(NPROC) test-unit
	$(MAKE) test-e2e
	$(MAKE) test-e2e-etcd
	$(MAKE) test-e2e-asan-slow

bench: all
	bench/run

# The node's image store starts with busybox (no registry): example manifests run as they are.
up: all $(BUILD)/busybox.tar
	$(BUILD)/kite images import $(BUILD)/busybox.tar --root-dir $${DATA_DIR:-$(CURDIR)/.kite}/agent
	$(BUILD)/kite up --data-dir $${DATA_DIR:-$(CURDIR)/.kite} --listen $${LISTEN:-127.0.0.1:6443} --update-kubeconfig

# The busybox OCI image (no network) that `make up` imports: kite images import $(BUILD)/busybox.tar
busybox-image: $(BUILD)/busybox.tar
$(BUILD)/busybox.tar: scripts/make-busybox-image
	@mkdir -p $(BUILD)
	scripts/make-busybox-image $@

clean:
	rm -rf build build-asan build-tsan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- fuzzing (libFuzzer; not part of `make test`) -------------------------------------------
# `make fuzz-build` compiles every tests/fuzz/fuzz_<name>.c with clang, libFuzzer and
# ASan+UBSan into build-fuzz/fuzz_<name>, with the sources it needs compiled the same way.
# `make fuzz` runs each target in turn for FUZZ_SECONDS (in-process: one job, one core) on
# its seed corpus tests/fuzz/corpus/<name>/ (read only) plus build-fuzz/corpus/<name>/,
# where new inputs go; findings land in build-fuzz/artifacts/<name>/. A finding becomes a
# regression test in tests/unit/<module>/ and a file in the seed corpus.
FUZZ_BUILD   := build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_SAN     := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -O1 -g $(FUZZ_SAN) -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow \
                -fno-strict-aliasing -D_GNU_SOURCE -Isrc -Itests/fuzz \
                $(shell pkg-config --cflags gnutls json-c yaml-0.1 2>/dev/null)
FUZZ_LDLIBS  := $(shell pkg-config --libs gnutls json-c yaml-0.1 2>/dev/null) -lhttp_parser -lpthread -lm
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
# the module sources a target may need; the linker keeps what it uses from the archive
FUZZ_SRCS    := $(call srcs_of,base) $(call srcs_of,json) \
                $(filter-out src/api/registry%,$(call srcs_of,api)) src/client/kubeconfig.c \
                src/http/request.c src/apiserver/metrics_text.c src/store/etcd-pb.c
FUZZ_OBJS    := $(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_SRCS))

.PHONY: fuzz fuzz-build
fuzz-build: $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_TARGETS))

$(FUZZ_BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libkite_fuzz.a: $(FUZZ_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_BUILD)/libkite_fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< $(FUZZ_BUILD)/libkite_fuzz.a $(FUZZ_LDLIBS) -o $@

fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	    echo "== fuzz: $$t ($(FUZZ_SECONDS)s)"; \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/artifacts/$$t tests/fuzz/corpus/$$t; \
	    $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=2048 \
	        -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t/ -print_final_stats=1 \
	        $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t; \
	done

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
