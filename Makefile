# ScalWS build. `make help` lists the targets.
#
# Builds go to build/ (`make SANITIZE=1`: build/sanitize/ with ASan+UBSan;
# the fuzz targets: build/fuzz/, with clang). `make run`, `make test` and
# `make fuzz` first install the Debian packages they need
# (scripts/deps.sh run|test|fuzz); every other build first checks for them
# and says what to run if one is missing.

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build/sanitize
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SANITIZE),fuzz)
# Set by `make fuzz` for its sub-make: the library as libFuzzer needs it.
BUILD ?= build/fuzz
CC := clang
SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
       -fno-omit-frame-pointer
else
BUILD ?= build
SAN :=
endif

CC ?= cc
# `make test` and `make fuzz` build with one job per CPU: the unit tests
# alone are some 70 binaries to link, and CI builds everything twice.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
OPT ?= -O2 -g
# Each binary links its own packages: scalwsd (and its library) takes the
# routes ingressd publishes over ZeroMQ; ingressd (issue 10) also reads the
# Kubernetes objects, JSON over HTTPS, with jansson and libcurl: PKGS. The
# tests and tools link both libraries, so PKGS too. Compiling sees PKGS'
# flags, one set for every object.
SCALWSD_PKGS := libprotobuf-c yaml-0.1 libbpf openssl libnghttp2 libzmq
PKGS := $(SCALWSD_PKGS) jansson libcurl
LLHTTP_DIR := /usr/share/llhttp
LLHTTP_INC := /usr/share/include/llhttp

# Recursive (=) so pkg-config runs only when a recipe needs it, after the
# preflight check (or deps.sh) has made sure it is there.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
SCALWSD_LIBS = $(shell pkg-config --libs $(SCALWSD_PKGS))
CPPFLAGS = -D_GNU_SOURCE -I. -I$(BUILD)/gen -I$(LLHTTP_INC) $(PKG_CFLAGS)
CFLAGS = -std=gnu11 $(OPT) -Wall -Wextra -Werror -MMD -MP $(SAN)
LDFLAGS = $(SAN)
LDLIBS = $(PKG_LIBS)

GEN := $(BUILD)/gen/proto/scalws.pb-c.c
GEN_H := $(GEN:.c=.h)
LIB_SRCS := $(filter-out supervisor/main.c ebpf/%.bpf.c,\
              $(wildcard core/*.c shm/*.c worker/*.c supervisor/*.c ebpf/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/scalws.pb-c.o
LLHTTP_OBJS := $(patsubst $(LLHTTP_DIR)/%.c,$(BUILD)/obj/llhttp/%.o,$(wildcard $(LLHTTP_DIR)/*.c))
LIB := $(BUILD)/libscalws.a
BIN := $(BUILD)/scalwsd
# The same binary but for its build id (core/version.h), for the tests of
# binary upgrades, which alternate between two builds they can tell apart.
BIN_ALT := $(BUILD)/scalwsd-alt
UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:test/unit/%.c=$(BUILD)/test/%)
TEST_SUPPORT := $(wildcard test/unit/support/*.c)
# Every test/fuzz/fuzz_NAME.c is a target build/fuzz/fuzz_NAME, run on
# test/fuzz/corpus/NAME/ (scripts/fuzz.sh).
FUZZ_SRCS := $(wildcard test/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:test/fuzz/%.c=build/fuzz/%)
FUZZ_SECONDS ?= 60

# Where `make install` puts things. The binary reads
# /etc/scalws/scalws.yaml by default, so the configuration goes under /etc
# whatever the PREFIX.
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
SYSCONFDIR ?= /etc
DOCDIR ?= $(PREFIX)/share/doc/scalws
DESTDIR ?=
INSTALL ?= install
DOCS := README.md $(wildcard docs/*.md docs/*.html docs/adr/*.md docs/benchmarks/*.md)

.DEFAULT_GOAL := all
.PHONY: all scalwsd unit help deps run run-tls test fuzz fuzz-build install uninstall clean \
        preflight

all: $(BIN) $(BIN_ALT) $(UNIT_BINS)

scalwsd: $(BIN)

unit: $(UNIT_BINS)

help:
	@echo 'make                build scalwsd, ingressd and the tests into build/'
	@echo 'make scalwsd        build build/scalwsd alone (needs no test tools)'
	@echo '                    (BUILD_ID=...: the build id, default git describe)'
	@echo 'make ingressd       build build/ingressd, the Kubernetes ingress controller'
	@echo 'make run            install what running needs, build, serve conf/scalws.yaml'
	@echo '                    on 127.0.0.1:8080'
	@echo 'make run-tls        the same with conf/tls.yaml (TLS on 8443, a self-signed'
	@echo '                    certificate for localhost made into build/tls/)'
	@echo 'make test           install what testing needs, build, run every test'
	@echo '                    (SANITIZE=1: on an ASan+UBSan build in build/sanitize/)'
	@echo 'make fuzz           install clang, build build/fuzz/fuzz_NAME for every'
	@echo '                    test/fuzz/fuzz_NAME.c, run each for FUZZ_SECONDS (60)'
	@echo 'make install        install scalwsd, ingressd, the example config and the docs'
	@echo '                    (PREFIX=$(PREFIX), DESTDIR=, SYSCONFDIR=$(SYSCONFDIR))'
	@echo 'make uninstall      remove what make install put (the config stays)'
	@echo 'make deps           install every Debian package any target needs (root)'
	@echo 'make clean          remove build/'
	@echo
	@echo 'Packages per use: scripts/deps.sh run|test|fuzz|bench (as root);'
	@echo 'scripts/deps.sh --check SET only says what is missing.'

# What a build needs, checked before the first compiler or pkg-config call
# so that a fresh machine is told what to install: the unit tests need the
# test set, the fuzz build clang, everything else the run set.
PREFLIGHT := run $(if $(filter all unit $(UNIT_BINS),$(or $(MAKECMDGOALS),all)),test) \
             $(if $(filter fuzz,$(SANITIZE)),fuzz)
preflight:
	@scripts/deps.sh --check $(PREFLIGHT) || \
	    { echo "deps: then: make$(if $(MAKECMDGOALS), $(MAKECMDGOALS))" >&2; exit 1; }

deps:
	@scripts/deps.sh all

# The two commands of the README: install, build, run. Sub-makes so that
# pkg-config is asked only after deps.sh has installed it.
run:
	@scripts/deps.sh run
	@$(MAKE) --no-print-directory scalwsd
	exec $(BIN) -c conf/scalws.yaml

# conf/tls.yaml with a self-signed certificate for localhost (build/tls/).
run-tls:
	@scripts/deps.sh run
	@$(MAKE) --no-print-directory scalwsd build/tls/localhost.crt
	exec $(BIN) -c conf/tls.yaml

build/tls/localhost.crt:
	@mkdir -p build/tls
	openssl req -x509 -nodes -days 30 -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
	  -subj /CN=localhost -addext subjectAltName=DNS:localhost \
	  -keyout build/tls/localhost.key -out $@

test:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) test/run.sh

fuzz:
	@scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory -j$(JOBS) SANITIZE=fuzz BUILD=build/fuzz fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh $(FUZZ_BINS)

fuzz-build: $(FUZZ_BINS)

$(GEN) $(GEN_H): proto/scalws.proto | preflight
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen proto/scalws.proto

$(BUILD)/obj/gen/scalws.pb-c.o: $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The sk_reuseport program (ebpf/): compiled for the running kernel's BTF,
# dumped at build time (never committed), and wrapped in a libbpf skeleton
# that ebpf/ebpf.c includes. /usr/sbin is not on every user's PATH.
BPFTOOL ?= $(or $(shell command -v bpftool 2>/dev/null),/usr/sbin/bpftool)
BPF_CLANG ?= clang
EBPF_GEN := $(BUILD)/gen/ebpf
EBPF_SKEL := $(EBPF_GEN)/accept.skel.h

$(EBPF_GEN)/vmlinux.h: | preflight
	@mkdir -p $(dir $@)
	@[ -r /sys/kernel/btf/vmlinux ] || { echo "ebpf: the running kernel has no BTF" \
	    "(/sys/kernel/btf/vmlinux): the eBPF accept policies need CONFIG_DEBUG_INFO_BTF" >&2; exit 1; }
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c >$@.tmp && mv $@.tmp $@

$(EBPF_GEN)/accept.bpf.o: ebpf/accept.bpf.c ebpf/policy.h $(EBPF_GEN)/vmlinux.h
	$(BPF_CLANG) -O2 -g -target bpf -mcpu=v3 -Wall -Wextra -Werror -I$(EBPF_GEN) -I. -c $< -o $@

$(EBPF_SKEL): $(EBPF_GEN)/accept.bpf.o
	$(BPFTOOL) gen skeleton $< name sws_accept >$@.tmp && mv $@.tmp $@

$(BUILD)/obj/ebpf/ebpf.o: $(EBPF_SKEL)

$(BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# llhttp: Debian's sources, compiled into the build without -Werror (not ours).
$(BUILD)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c | preflight
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(SAN) -I$(LLHTTP_INC) -w -c $< -o $@

$(LIB): $(LIB_OBJS) $(LLHTTP_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/obj/supervisor/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(SCALWSD_LIBS)

# The build id goes into core/version.o alone. A file holds the id of the
# last build and changes only with it (the FORCE'd recipe rewrites it only
# when different), so a new id recompiles that one object and relinks.
ifeq ($(origin BUILD_ID),undefined)
BUILD_ID := $(or $(shell git describe --always --dirty --tags 2>/dev/null),unknown)
endif
BUILD_ID_FILE := $(BUILD)/gen/build-id
$(BUILD_ID_FILE): FORCE
	@mkdir -p $(dir $@)
	@case '$(BUILD_ID)' in ''|*[!A-Za-z0-9._+~-]*) \
	    echo "BUILD_ID '$(BUILD_ID)': letters, digits and ._+~- only" >&2; exit 1;; esac
	@echo '$(BUILD_ID)' | cmp -s - $@ || echo '$(BUILD_ID)' >$@
FORCE:

$(BUILD)/obj/core/version.o: CPPFLAGS += -DSWS_BUILD_ID='"$(BUILD_ID)"'
$(BUILD)/obj/core/version.o: $(BUILD_ID_FILE)

# scalwsd-alt: its version-alt.o comes before the library, so the linker
# takes sws_build_id from it and never pulls the archive's version.o.
$(BUILD)/obj/core/version-alt.o: core/version.c $(BUILD_ID_FILE) | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DSWS_BUILD_ID='"$(BUILD_ID)-alt"' $(CFLAGS) -c $< -o $@

$(BIN_ALT): $(BUILD)/obj/supervisor/main.o $(BUILD)/obj/core/version-alt.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(SCALWSD_LIBS)

# ingressd (issue 10), a binary of its own: ingressd/*.c but main.c form
# libingressd.a. Every unit test, fuzz target and test tool links it before
# the library: an archive adds only the objects something references, so a
# test that uses no ingressd code gets none of it.
INGRESSD_SRCS := $(filter-out ingressd/main.c,$(wildcard ingressd/*.c))
INGRESSD_LIB := $(BUILD)/libingressd.a
INGRESSD := $(BUILD)/ingressd
all: $(INGRESSD)

$(BUILD)/test/%: test/unit/%.c $(TEST_SUPPORT) $(INGRESSD_LIB) $(LIB) | $(GEN_H) preflight
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itest/unit -o $@ $< $(TEST_SUPPORT) $(INGRESSD_LIB) $(LIB) $(LDFLAGS) $(LDLIBS) -lcmocka

# The integration tests' tools (test/tools/NAME.c -> build/test/NAME).
$(BUILD)/test/%: test/tools/%.c $(INGRESSD_LIB) $(LIB) | $(GEN_H) preflight
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(INGRESSD_LIB) $(LIB) $(LDFLAGS) $(LDLIBS)

# A fuzz target: libFuzzer's main, the libraries built with fuzzer-no-link.
build/fuzz/fuzz_%: test/fuzz/fuzz_%.c $(INGRESSD_LIB) $(LIB) | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(INGRESSD_LIB) $(LIB) $(LDFLAGS) $(LDLIBS)
ingressd: $(INGRESSD)
.PHONY: ingressd

$(INGRESSD_LIB): $(INGRESSD_SRCS:%.c=$(BUILD)/obj/%.o)
	@rm -f $@
	ar rcs $@ $^

$(INGRESSD): $(BUILD)/obj/ingressd/main.o $(INGRESSD_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ingressd's Kubernetes client: build/test/kube_probe, for the integration
# tests, prints the events the client delivers.
all: $(BUILD)/test/kube_probe

# The tool that drives scalwsd's ingress subscription in the integration
# tests: the routes of a scalwsd YAML file, published as ingressd would.
ROUTES_PUB := $(BUILD)/test/routes_pub
all: $(ROUTES_PUB)

# What one endpoint change costs ingressd at 10,000 Ingresses, for
# callgrind (test/tools/ingress_change.c; docs/benchmarks/2026-12-01-ingress.md).
all: $(BUILD)/test/ingress_change

# What the supervisor's build of that full set costs in page faults and
# CPU (test/tools/table_build_cost.c; ADR 0055).
all: $(BUILD)/test/table_build_cost

# The config as installed: its static route serves the installed docs
# (the source tree's `root: ..` is the checkout).
install: $(BIN) $(INGRESSD)
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSCONFDIR)/scalws
	$(INSTALL) -m 0755 $(BIN) $(DESTDIR)$(SBINDIR)/scalwsd
	$(INSTALL) -m 0755 $(INGRESSD) $(DESTDIR)$(SBINDIR)/ingressd
	sed 's|^\( *root:\) \.\.$$|\1 $(DOCDIR)|' conf/scalws.yaml >$(BUILD)/scalws.yaml.installed
	@grep -q '^ *root: $(DOCDIR)$$' $(BUILD)/scalws.yaml.installed || \
	    { echo "install: conf/scalws.yaml has no 'root: ..' line to point at $(DOCDIR)" >&2; exit 1; }
	$(INSTALL) -m 0644 $(BUILD)/scalws.yaml.installed $(DESTDIR)$(SYSCONFDIR)/scalws/scalws.yaml.example
	@# An operator's configuration is never overwritten.
	@[ -e $(DESTDIR)$(SYSCONFDIR)/scalws/scalws.yaml ] || \
	    { echo "$(INSTALL) -m 0644 $(BUILD)/scalws.yaml.installed $(DESTDIR)$(SYSCONFDIR)/scalws/scalws.yaml"; \
	      $(INSTALL) -m 0644 $(BUILD)/scalws.yaml.installed $(DESTDIR)$(SYSCONFDIR)/scalws/scalws.yaml; }
	$(INSTALL) -d $(DESTDIR)$(DOCDIR)/docs/adr $(DESTDIR)$(DOCDIR)/docs/benchmarks
	for f in $(DOCS); do $(INSTALL) -m 0644 $$f $(DESTDIR)$(DOCDIR)/$$f || exit 1; done

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/scalwsd $(DESTDIR)$(SBINDIR)/ingressd \
	    $(DESTDIR)$(SYSCONFDIR)/scalws/scalws.yaml.example
	rm -rf $(DESTDIR)$(DOCDIR)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(BUILD)/test -name '*.d' 2>/dev/null) $(wildcard build/fuzz/fuzz_*.d)
