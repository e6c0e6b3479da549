# ScalWS build. `make` builds into build/; `make SANITIZE=1` into
# build/sanitize/ with ASan+UBSan. `make run` and `make test` first install
# missing Debian packages (scripts/deps.sh), then build, then run.

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build/sanitize
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else
BUILD ?= build
SAN :=
endif

CC ?= cc
OPT ?= -O2 -g
PKGS := libprotobuf-c yaml-0.1
LLHTTP_DIR := /usr/share/llhttp
LLHTTP_INC := /usr/share/include/llhttp

# Recursive (=) so pkg-config runs only when a recipe needs it: `make test`
# installs pkg-config itself before the sub-make that builds.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
CPPFLAGS = -D_GNU_SOURCE -I. -I$(BUILD)/gen -I$(LLHTTP_INC) $(PKG_CFLAGS)
CFLAGS = -std=gnu11 $(OPT) -Wall -Wextra -Werror -MMD -MP $(SAN)
LDFLAGS = $(SAN)
LDLIBS = $(PKG_LIBS)

GEN := $(BUILD)/gen/proto/scalws.pb-c.c
GEN_H := $(GEN:.c=.h)
LIB_SRCS := $(filter-out supervisor/main.c,$(wildcard core/*.c shm/*.c worker/*.c supervisor/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/scalws.pb-c.o
LLHTTP_OBJS := $(patsubst $(LLHTTP_DIR)/%.c,$(BUILD)/obj/llhttp/%.o,$(wildcard $(LLHTTP_DIR)/*.c))
LIB := $(BUILD)/libscalws.a
BIN := $(BUILD)/scalwsd
UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:test/unit/%.c=$(BUILD)/test/%)
TEST_SUPPORT := $(wildcard test/unit/support/*.c)

.PHONY: all deps run test unit clean
all: $(BIN) $(UNIT_BINS)

deps:
	@scripts/deps.sh

# The two commands: install, build, run. Sub-makes so that pkg-config is
# asked only after deps.sh has installed it.
run: deps
	@$(MAKE) --no-print-directory all
	exec $(BIN) -c conf/scalws.yaml

test: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) test/run.sh

$(GEN) $(GEN_H): proto/scalws.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen proto/scalws.proto

$(BUILD)/obj/gen/scalws.pb-c.o: $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# llhttp: Debian's sources, compiled into the build without -Werror (not ours).
$(BUILD)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(SAN) -I$(LLHTTP_INC) -w -c $< -o $@

$(LIB): $(LIB_OBJS) $(LLHTTP_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/obj/supervisor/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/test/%: test/unit/%.c $(TEST_SUPPORT) $(LIB) | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itest/unit -o $@ $< $(TEST_SUPPORT) $(LIB) $(LDFLAGS) $(LDLIBS) -lcmocka

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(BUILD)/test -name '*.d' 2>/dev/null)
