# husk: one Makefile for the whole tree.  `make help` lists the targets.
BUILD ?= build
CC ?= gcc
SHELL := /bin/sh

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wvla -Wpointer-arith -Wundef -Wno-format-nonliteral
BASE_CFLAGS := -std=gnu11 -g -D_GNU_SOURCE -MMD -MP $(WARN)
REL_CFLAGS := -O2 -fstack-protector-strong -D_FORTIFY_SOURCE=2
SAN_CFLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

VMM_SRCS := $(sort $(wildcard vmm/*.c vmm/x86/*.c vmm/devices/*.c vmm/virtio/*.c vmm/snap/*.c))
# Snapshots (vmm/snap/) compress with liblz4's frame API.
VMM_LIBS := -lpthread -llz4
VMM_LIB_SRCS := $(filter-out vmm/main.c,$(VMM_SRCS))
# The agent shares the VMM's event loop; it links jansson statically (it is
# the guest's init, before any library exists there).
AGENT_SRCS := $(sort $(wildcard guest-agent/*.c)) vmm/evloop.c
AGENT_LIB_SRCS := $(filter-out guest-agent/main.c vmm/evloop.c,$(AGENT_SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
# The image library: husk-img, and the VMM's virtio-blk.
IMG_SRCS := $(sort $(wildcard images/img/*.c))
# huskd's state store (SQLite): api/store.h.
STORE_SRCS := $(sort $(wildcard api/store*.c))
# huskd's HTTP layer: server (http.c on libuv), its socket-free core, router, JSON envelope.
HTTP_CORE_SRCS := api/http_conn.c api/http_parse.c api/http_req.c api/http_resp.c
HTTP_SRCS := api/http.c $(HTTP_CORE_SRCS) api/router.c api/json_resp.c
HTTP_LIBS := -luv -lhttp_parser -ljansson
# huskd: the API server and its sandbox manager.
HUSKD_SRCS := api/huskd.c api/h_sandbox.c api/h_stats.c api/h_fs.c api/h_archive.c api/h_jobs.c api/agentop.c api/sbx.c api/sbx_create.c api/sbx_setup.c api/sbx_exec.c api/sbx_pause.c api/sbx_ckpt.c api/h_ckpt.c api/sbx_snap.c api/h_snap.c api/sbx_build.c \
	api/waiters.c api/outbuf.c api/task.c api/vmm_proc.c api/vmm_ctl.c api/util.c api/agent_client.c \
	guest-agent/proto.c $(HTTP_SRCS) $(STORE_SRCS) $(IMG_SRCS)
# husk: the command-line client of huskd (api/cli/README.md).
HUSK_CLI_SRCS := $(sort $(wildcard api/cli/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/$(1)/%.o,$(2))

BIN := $(BUILD)/bin
VMM := $(BIN)/husk-vmm
VMM_SAN := $(BIN)/husk-vmm-san
AGENT := $(BIN)/husk-agent
BOOTBENCH := $(BIN)/bootbench
DISKBENCH := $(BIN)/diskbench
BENCH_CPIO := $(BUILD)/images/bench.cpio
AGENTCTL := $(BIN)/husk-agentctl
AGENTBENCH := $(BIN)/agentbench
AGENT_SAN := $(BIN)/husk-agent-san
RAWFRAMES := $(BUILD)/tests/rawframes
HUSK_IMG := $(BIN)/husk-img
IMGWRITE := $(BUILD)/tests/imgwrite
UNIT := $(BUILD)/tests/unit-tests
HUSKD := $(BIN)/huskd
HUSKD_SAN := $(BIN)/huskd-san
HUSK_CLI := $(BIN)/husk
HUSK_CLI_SAN := $(BIN)/husk-san
HTTP_ECHO := $(BUILD)/tests/http-echo
HTTP_SMOKE := $(BUILD)/tests/http-smoke
KERNEL := $(BUILD)/images/bzImage
INITRAMFS := $(BUILD)/images/initramfs.cpio

.PHONY: all help deps build images runtimes run stop run-vm test unit bench bench-api bench-snapshot fuzz format clean client
all: build images

help:
	@echo "make deps     install every Debian package the build, images and tests need"
	@echo "make run      install, build, start huskd (tools/husk-up) and run python in a sandbox"
	@echo "make stop     stop the huskd that make run started"
	@echo "make run-vm   install, build, then boot one bare guest (no huskd)"
	@echo "make test     install, build, then run every test; ends with 'N passed, N failed'"
	@echo "make bench    install, build, then benchmark boots (vs QEMU microvm), the agent, disks and the API"
	@echo "make fuzz     run every fuzz target for FUZZ_SECONDS (default 60) each"
	@echo "make format   clang-format the C sources"

deps:
	@tools/deps.sh

build: $(VMM) $(VMM_SAN) $(AGENT) $(AGENT_SAN) $(AGENTCTL) $(AGENTBENCH) $(BOOTBENCH) $(UNIT) $(RAWFRAMES) $(HUSK_IMG) $(IMGWRITE) \
	$(HTTP_ECHO) $(HTTP_SMOKE) $(HUSKD) $(HUSKD_SAN) $(HUSK_CLI) $(HUSK_CLI_SAN)
images: $(KERNEL) $(INITRAMFS) runtimes

# V=1 shows whole command lines.
Q := $(if $(V),,@)

$(BUILD)/obj/rel/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(BASE_CFLAGS) $(REL_CFLAGS) -Ivmm -Iguest-agent -Iapi -Iimages/img -c $< -o $@

$(BUILD)/obj/san/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC san  $<")
	$(Q)$(CC) $(BASE_CFLAGS) $(SAN_CFLAGS) -Ivmm -Iguest-agent -Iapi -Iimages/img -c $< -o $@

$(VMM): $(call obj,rel,$(VMM_SRCS) $(IMG_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(REL_CFLAGS) -pie -Wl,-z,relro,-z,now -o $@ $^ $(VMM_LIBS)

$(VMM_SAN): $(call obj,san,$(VMM_SRCS) $(IMG_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ $(VMM_LIBS)

# The agent runs as the guest's init before any library exists there.
$(AGENT): $(call obj,rel,$(AGENT_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -static -o $@ $^ -ljansson

# The agent again, with sanitizers, for the tests that run it on the host.
$(AGENT_SAN): $(call obj,san,$(AGENT_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ -ljansson

$(RAWFRAMES): $(call obj,san,tests/agent/rawframes.c api/agent_client.c guest-agent/proto.c)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ -ljansson

$(AGENTCTL): $(call obj,rel,api/husk-agentctl.c api/agent_client.c api/vmm_ctl.c guest-agent/proto.c)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ -ljansson

$(AGENTBENCH): $(call obj,rel,tools/bench/agentbench.c api/agent_client.c guest-agent/proto.c)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ -ljansson

# Runs inside guests, from an initramfs appended to the test one.
$(DISKBENCH): $(call obj,rel,tools/bench/diskbench.c)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -static -o $@ $^

$(BENCH_CPIO): $(DISKBENCH)
	@mkdir -p $(dir $@)
	$(Q)d=$$(mktemp -d) && mkdir -p $$d/usr/bin && cp $(DISKBENCH) $$d/usr/bin/ && \
		(cd $$d && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >$@ && rm -rf $$d

$(BOOTBENCH): $(call obj,rel,tools/bench/bootbench.c)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $^

$(HUSK_IMG): $(call obj,rel,images/husk-img.c $(IMG_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(REL_CFLAGS) -pie -Wl,-z,relro,-z,now -o $@ $^

# Random writes through the library, mirrored into a raw file, for tests/img.
$(IMGWRITE): $(call obj,san,tests/img/imgwrite.c $(IMG_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^

$(HUSKD): $(call obj,rel,$(HUSKD_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(REL_CFLAGS) -o $@ $^ -lpthread $(HTTP_LIBS) -lsqlite3

# huskd with sanitizers, for the API tests.
$(HUSKD_SAN): $(call obj,san,$(HUSKD_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ -lpthread $(HTTP_LIBS) -lsqlite3

$(HUSK_CLI): $(call obj,rel,$(HUSK_CLI_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(REL_CFLAGS) -o $@ $^ -lhttp_parser -ljansson -lyaml -lcrypto

$(HUSK_CLI_SAN): $(call obj,san,$(HUSK_CLI_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ -lhttp_parser -ljansson -lyaml -lcrypto

$(UNIT): $(call obj,san,$(UNIT_SRCS) $(VMM_LIB_SRCS) $(AGENT_LIB_SRCS) $(IMG_SRCS) $(HTTP_SRCS) $(STORE_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ $(VMM_LIBS) $(HTTP_LIBS) -lsqlite3

# The HTTP layer over real sockets (tests/api): a test server and the client that drives it.
$(HTTP_ECHO): $(call obj,san,tests/api/echo_server.c $(HTTP_SRCS))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^ $(HTTP_LIBS)

$(HTTP_SMOKE): $(call obj,san,tests/api/http_smoke.c tests/api/http_client.c)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SAN_CFLAGS) -o $@ $^

$(KERNEL): images/kernel/husk.config images/kernel/build.sh
	images/kernel/build.sh $@

$(INITRAMFS): $(AGENT) images/initramfs/build.sh
	images/initramfs/build.sh $(AGENT) $@

# The runtime root file systems and their catalog (images/runtimes/README.md);
# cached, so an unchanged runtime takes a fraction of a second.
runtimes: $(HUSK_IMG)
	HUSK_IMG=$(HUSK_IMG) images/runtimes/build.sh $(BUILD)/images/runtimes

unit: $(UNIT)
	$(UNIT)

# The quickstart: huskd up (natively, or in a nested KVM host where this
# machine has no hardware KVM; tools/husk-up), then one sandbox run by the CLI.
run: deps
	@$(MAKE) --no-print-directory all
	tools/husk-up
	$(BIN)/husk run --runtime python:3.13 -- python3 -c 'print(sum([1,2,3]))'

# Stops the huskd that make run started.
stop:
	tools/husk-up --stop

# One bare VM: the VMM boots the guest kernel and runs a command, no huskd.
run-vm: deps
	@$(MAKE) --no-print-directory all
	tools/husk-kvm-run --timeout 600 -- $(VMM) --kernel $(KERNEL) --initrd $(INITRAMFS) \
		--mem 256M --vcpus 2 \
		--cmdline 'quiet husk.cmd="uname -sr; echo cpus: $$(nproc); grep MemTotal /proc/meminfo"'

test: deps
	@$(MAKE) --no-print-directory all fuzz-build client
	tests/run.sh

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_CPIO) client
	tools/husk-kvm-run --timeout 3000 --mem 6144 --bring "$$(command -v qemu-system-x86_64)" --bring /usr/share/qemu --bring /usr/share/seabios --bring "$$(command -v node)" -- sh -c 'tools/bench/boot.sh && tools/bench/agent.sh && tools/bench/disk.sh && tools/bench/api.sh && tools/bench/snapshot.sh'

# Only the API benchmark (huskd with the published client).
bench-api: deps
	@$(MAKE) --no-print-directory all client
	tools/husk-kvm-run --timeout 1800 --mem 6144 --bring "$$(command -v node)" -- tools/bench/api.sh

# Only the snapshot benchmark (pause, save, restore; 256 MiB and 1 GiB guests).
bench-snapshot: deps
	@$(MAKE) --no-print-directory all
	tools/husk-kvm-run --timeout 1800 --mem 6144 -- tools/bench/snapshot.sh

# The published sandbox client, for the API's end-to-end tests.
CLIENT_DIR := tests/api/client
client: $(CLIENT_DIR)/node_modules/.husk-stamp
$(CLIENT_DIR)/node_modules/.husk-stamp: $(CLIENT_DIR)/package.json
	@echo "  NPM     $(CLIENT_DIR) (@agentuity/core)"
	$(Q)cd $(CLIENT_DIR) && npm install --no-audit --no-fund --silent
	@touch $@

# libFuzzer targets: every parser a guest or a client can reach.
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Ivmm -Iguest-agent -Iapi -Iimages/img
FUZZ_TARGETS := $(BUILD)/fuzz/fuzz_virtq $(BUILD)/fuzz/fuzz_vsock $(BUILD)/fuzz/fuzz_frame $(BUILD)/fuzz/fuzz_img \
	$(BUILD)/fuzz/fuzz_http $(BUILD)/fuzz/fuzz_snapfile

$(BUILD)/fuzz/fuzz_virtq: tests/fuzz/fuzz_virtq.c vmm/virtio/virtq.c vmm/guest_mem.c vmm/log.c
$(BUILD)/fuzz/fuzz_vsock: tests/fuzz/fuzz_vsock.c vmm/virtio/vsock_pkt.c
$(BUILD)/fuzz/fuzz_frame: tests/fuzz/fuzz_frame.c guest-agent/proto.c
$(BUILD)/fuzz/fuzz_img: tests/fuzz/fuzz_img.c $(IMG_SRCS)
$(BUILD)/fuzz/fuzz_http: tests/fuzz/fuzz_http.c tests/unit/test_http_fake.c $(HTTP_CORE_SRCS)
$(BUILD)/fuzz/fuzz_http: FUZZ_LIBS := -lhttp_parser
$(BUILD)/fuzz/fuzz_snapfile: tests/fuzz/fuzz_snapfile.c $(wildcard vmm/snap/*.c) vmm/guest_mem.c
$(BUILD)/fuzz/fuzz_snapfile: FUZZ_LIBS := -llz4 -lpthread
$(FUZZ_TARGETS):
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $^ -ljansson $(FUZZ_LIBS)

fuzz-build: $(FUZZ_TARGETS)

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

format:
	clang-format -i $(VMM_SRCS) $(AGENT_SRCS) $(UNIT_SRCS) $(wildcard vmm/*.h vmm/*/*.h guest-agent/*.h tests/unit/*.h) tools/bench/bootbench.c \
		$(IMG_SRCS) images/img/*.h images/husk-img.c tests/img/*.c \
		$(HTTP_SRCS) api/http*.h api/router.h api/json_resp.h tests/api/*.c tests/api/*.h

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
