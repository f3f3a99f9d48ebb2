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
# Snapshots (vmm/snap/) compress with liblz4's frame API, check with xxHash, seal with libcrypto.
VMM_LIBS := -lpthread -llz4 -lxxhash -lcrypto
# The release VMM links those libraries' archives in (libc stays shared: libslirp is dlopened).
# Every sandbox start execs it: nested, four fewer shared objects to map and bind save ~10 ms.
VMM_REL_LIBS := -Wl,-Bstatic -llz4 -lxxhash -lcrypto -Wl,-Bdynamic -lpthread -ldl
VMM_MAIN_SRCS := $(filter-out vmm/evloop.c,$(VMM_SRCS))
VMM_LIB_SRCS := $(filter-out vmm/main.c,$(VMM_MAIN_SRCS))
AGENT_SRCS := $(filter-out guest-agent/proto.c,$(sort $(wildcard guest-agent/*.c)))
AGENT_LIB_SRCS := $(filter-out guest-agent/main.c,$(AGENT_SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))

# Code that several programs share is built once, as a small library whose
# public header sits in the folder that owns it, and linked:
#   proto   guest-agent/proto.h   the agent protocol's frames (agent, huskd, clients)
#   evloop  vmm/evloop.h          the epoll loop (VMM, agent)
#   img     images/img/img.h      the disk image library (VMM, husk-img, huskd)
#   http    api/http/http.h       the HTTP server, router and JSON envelope (huskd, tests)
#   agent   api/agent/*.h         the host side of the agent protocol (huskd, husk-agentctl, benchmarks)
#   vmmctl  api/vmmctl/vmm_ctl.h  husk-vmm's control socket, as a client (huskd, husk-agentctl)
#   httpc   api/cli/cli_http.h    the CLI's HTTP client (husk, the API benchmark)
PROTO_SRCS := guest-agent/proto.c
EVLOOP_SRCS := vmm/evloop.c
IMG_SRCS := $(sort $(wildcard images/img/*.c))
HTTP_CORE_SRCS := api/http/http_conn.c api/http/http_head.c api/http/http_parse.c api/http/http_req.c api/http/http_resp.c
HTTP_SRCS := api/http/http.c $(HTTP_CORE_SRCS) api/http/router.c api/http/json_resp.c \
	api/http/http_tunnel.c api/http/http_tls.c
HTTP_LIBS := -luv -lhttp_parser -ljansson -lssl -lcrypto
AGENTLIB_SRCS := $(sort $(wildcard api/agent/*.c))
VMMCTL_SRCS := $(sort $(wildcard api/vmmctl/*.c))
HTTPC_SRCS := api/cli/cli_http.c api/cli/cli_url.c
LIBS := proto evloop img http agent vmmctl httpc
# lib,NAME,VARIANT: the archive of library NAME built for VARIANT (rel or san).
lib = $(BUILD)/lib/$(2)/libhusk-$(1).a

# huskd (api/huskd): its state store (SQLite) in store/, the rest beside main.
STORE_SRCS := $(sort $(wildcard api/huskd/store/*.c))
# huskd's layers, each calling only the ones below it: routes/ (the API on the
# HTTP library) -> sandbox/ (the manager) -> store/ (SQLite), vmm/ (husk-vmm
# processes), net/ (the host's nftables table and veth slots), keys/ (data keys
# wrapped by org keys, for sealed files), and the agent
# library's sessions.
HUSKD_SRCS := api/huskd/main.c api/huskd/huskd_opts.c api/huskd/huskd_log.c $(sort $(wildcard api/huskd/routes/*.c api/huskd/e2b/*.c \
	api/huskd/sandbox/*.c api/huskd/vmm/*.c api/huskd/net/*.c api/huskd/tenant/*.c api/huskd/keys/*.c)) $(STORE_SRCS)
HUSKD_LIBS = $(call lib,http,$(1)) $(call lib,agent,$(1)) $(call lib,vmmctl,$(1)) \
	$(call lib,proto,$(1)) $(call lib,img,$(1))
# husk: the command-line client of huskd (api/cli/README.md).
HUSK_CLI_SRCS := $(filter-out $(HTTPC_SRCS),$(sort $(wildcard api/cli/*.c)))
INCLUDES := -I$(BUILD)/gen -Ivmm -Iguest-agent -Iimages/img -Iimages/oci -Iapi/http -Iapi/agent -Iapi/vmmctl -Iapi/cli -Iapi/jail -Iapi/huskd \
	-Iapi/huskd/store -Iapi/huskd/vmm -Iapi/huskd/net -Iapi/huskd/sandbox -Iapi/huskd/routes -Iapi/huskd/e2b -Iapi/huskd/tenant -Iapi/huskd/keys

obj = $(patsubst %.c,$(BUILD)/obj/$(1)/%.o,$(2))

BIN := $(BUILD)/bin
VMM := $(BIN)/husk-vmm
VMM_SAN := $(BIN)/husk-vmm-san
AGENT := $(BIN)/husk-agent
BOOTBENCH := $(BIN)/bootbench
DISKBENCH := $(BIN)/diskbench
NETBENCH := $(BIN)/netbench
BENCH_CPIO := $(BUILD)/images/bench.cpio
AGENTCTL := $(BIN)/husk-agentctl
# husk-jail: starts a VMM in a network namespace of its own (api/jail).
JAIL := $(BIN)/husk-jail
JAIL_SRCS := $(sort $(wildcard api/jail/*.c))
NL_CFLAGS := $(shell pkg-config --cflags libnl-route-3.0 2>/dev/null || echo -I/usr/include/libnl3)
AGENTBENCH := $(BIN)/agentbench
APIBENCH := $(BIN)/apibench
AGENT_SAN := $(BIN)/husk-agent-san
RAWFRAMES := $(BUILD)/tests/rawframes
# A stand-in husk-vmm with a pretend guest, for huskd's host-only tests (tests/fakes/README.md).
FAKE_VMM := $(BUILD)/tests/fake-vmm
FAKE_CHECK := $(BUILD)/tests/fake-check
FAKE_VMM_SRCS := $(sort $(wildcard tests/fakes/*.c))
FAKE_CHECK_SRCS := $(sort $(wildcard tests/fakes/check/*.c))
SESSION_TEST := $(BUILD)/tests/session-test
DIALHOST := $(BUILD)/tests/dialhost
SBX_TEST := $(BUILD)/tests/sbx-test
HUSK_IMG := $(BIN)/husk-img
# husk runtime import: husk-oci checks an image (images/oci), husk-import converts it; beside huskd.
OCI_SRCS := images/oci/oci_json.c images/oci/oci_layer.c images/oci/oci_layout.c
HUSK_OCI := $(BIN)/husk-oci
HUSK_IMPORT := $(BIN)/husk-import
IMGWRITE := $(BUILD)/tests/imgwrite
UNIT := $(BUILD)/tests/unit-tests
HUSKD := $(BIN)/huskd
HUSKD_SAN := $(BIN)/huskd-san
HUSK_CLI := $(BIN)/husk
HUSK_CLI_SAN := $(BIN)/husk-san
HTTP_ECHO := $(BUILD)/tests/http-echo
HTTP_SMOKE := $(BUILD)/tests/http-smoke
KERNEL := $(BUILD)/images/bzImage
# The same kernel uncompressed (ELF): what huskd and the tests boot.
VMLINUX := $(BUILD)/images/vmlinux
INITRAMFS := $(BUILD)/images/initramfs.cpio

.PHONY: all help deps build images runtimes run stop run-vm test unit bench bench-api bench-net bench-memfile bench-templates bench-runtimes bench-snapshot bench-vs-tree fuzz format check-format clean client
all: build images

help:
	@echo "make deps     install every Debian package the build, images and tests need"
	@echo "make run      install, build, start huskd (tools/husk-up) and run python in a sandbox"
	@echo "make stop     stop the huskd that make run started"
	@echo "make run-vm   install, build, then boot one bare guest (no huskd)"
	@echo "make test     install, build, then run every test; ends with 'N passed, N failed'"
	@echo "make bench    install, build, then benchmark boots (vs QEMU microvm), the agent, disks, the network (vs QEMU user), the API and each runtime"
	@echo "make fuzz     run every fuzz target for FUZZ_SECONDS (default 60) each"
	@echo "make format   clang-format every C file (make check-format: fail where one differs)"

deps:
	@tools/deps.sh

# The build under run, test and bench: one job per core unless make was given -j.
SUBMAKE = $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc))

build: $(VMM) $(VMM_SAN) $(AGENT) $(AGENT_SAN) $(AGENTCTL) $(JAIL) $(AGENTBENCH) $(APIBENCH) $(BOOTBENCH) $(UNIT) $(RAWFRAMES) $(FAKE_VMM) $(FAKE_CHECK) $(SESSION_TEST) $(DIALHOST) $(SBX_TEST) $(HUSK_IMG) $(HUSK_OCI) $(HUSK_IMPORT) $(IMGWRITE) \
	$(HTTP_ECHO) $(HTTP_SMOKE) $(HUSKD) $(HUSKD_SAN) $(HUSK_CLI) $(HUSK_CLI_SAN)
images: $(KERNEL) $(VMLINUX) $(INITRAMFS) runtimes

# V=1 shows whole command lines.
Q := $(if $(V),,@)

# The guest's DSDT, compiled from ASL by ACPICA's iasl (its preprocessor
# reads the addresses from layout.h) into a C table acpi.c includes.
DSDT_H := $(BUILD)/gen/dsdt.h
$(DSDT_H): vmm/x86/dsdt.asl vmm/x86/layout.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  IASL    $<")
	$(Q)iasl -vs -p $(BUILD)/gen/dsdt -tc $< >$(BUILD)/gen/iasl.log || { cat $(BUILD)/gen/iasl.log; exit 1; }
	$(Q)sed 's/^unsigned char dsdt_aml_code\[\]/static const unsigned char dsdt_aml[]/' $(BUILD)/gen/dsdt.hex >$@
$(call obj,rel,vmm/x86/acpi.c) $(call obj,san,vmm/x86/acpi.c): $(DSDT_H)

# Each VMM thread role's seccomp program, made by libseccomp at build time (vmm/confine/).
CONFINE_GEN := $(BUILD)/gen/confine-gen
CONFINE_BPF := $(BUILD)/gen/confine_bpf.h
$(CONFINE_GEN): vmm/confine/confine_gen.c vmm/confine/confine_rules.c vmm/confine/confine_rules.h vmm/confine.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -O1 -D_GNU_SOURCE $(WARN) -Ivmm -Ivmm/confine -o $@ $(filter %.c,$^) -lseccomp
$(CONFINE_BPF): $(CONFINE_GEN)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$(CONFINE_GEN) >$@.tmp && mv $@.tmp $@
$(call obj,rel,vmm/confine.c) $(call obj,san,vmm/confine.c): $(CONFINE_BPF)

$(BUILD)/obj/rel/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(BASE_CFLAGS) $(REL_CFLAGS) $(INCLUDES) $(CFLAGS_EXTRA) -c $< -o $@

$(BUILD)/obj/san/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC san  $<")
	$(Q)$(CC) $(BASE_CFLAGS) $(SAN_CFLAGS) $(INCLUDES) $(CFLAGS_EXTRA) -c $< -o $@

# The libraries (see LIBS above), each for the release and the sanitizer build.
LIB_SRCS_proto := $(PROTO_SRCS)
LIB_SRCS_evloop := $(EVLOOP_SRCS)
LIB_SRCS_img := $(IMG_SRCS)
LIB_SRCS_http := $(HTTP_SRCS)
LIB_SRCS_agent := $(AGENTLIB_SRCS)
LIB_SRCS_vmmctl := $(VMMCTL_SRCS)
LIB_SRCS_httpc := $(HTTPC_SRCS)
define lib_rules
$(call lib,$(1),rel): $(call obj,rel,$(LIB_SRCS_$(1)))
$(call lib,$(1),san): $(call obj,san,$(LIB_SRCS_$(1)))
endef
$(foreach l,$(LIBS),$(eval $(call lib_rules,$(l))))
$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# link,FLAGS,LIBS: links $@ from its objects, then its libraries in the order given.
define link
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(1) -o $@ $(filter %.o,$^) $(filter %.a,$^) $(2)
endef
HARDEN := $(REL_CFLAGS) -pie -Wl,-z,relro,-z,now,-z,pack-relative-relocs

$(VMM): $(call obj,rel,$(VMM_MAIN_SRCS)) $(call lib,evloop,rel) $(call lib,img,rel)
	$(call link,$(HARDEN),$(VMM_REL_LIBS))

$(VMM_SAN): $(call obj,san,$(VMM_MAIN_SRCS)) $(call lib,evloop,san) $(call lib,img,san)
	$(call link,$(SAN_CFLAGS),$(VMM_LIBS))

# The agent runs as the guest's init before any library exists there.
$(AGENT): $(call obj,rel,$(AGENT_SRCS)) $(call lib,proto,rel) $(call lib,evloop,rel)
	$(call link,-static,-ljansson)

# The agent again, with sanitizers, for the tests that run it on the host.
$(AGENT_SAN): $(call obj,san,$(AGENT_SRCS)) $(call lib,proto,san) $(call lib,evloop,san)
	$(call link,$(SAN_CFLAGS),-ljansson)

$(RAWFRAMES): $(call obj,san,tests/agent/rawframes.c) $(call lib,agent,san) $(call lib,proto,san)
	$(call link,$(SAN_CFLAGS),-ljansson)

# --mem as husk-vmm reads it: its parser (vmm/guest_mem.c).
$(FAKE_VMM): $(call obj,san,$(FAKE_VMM_SRCS) vmm/guest_mem.c) $(call lib,proto,san) $(call lib,img,san)
	$(call link,$(SAN_CFLAGS),-ljansson -lm -lcrypto)

# Drives fake-vmm as huskd would, to check the fake itself (tests/fakes/check.sh).
$(FAKE_CHECK): $(call obj,san,$(FAKE_CHECK_SRCS)) $(call lib,proto,san) $(call lib,img,san)
	$(call link,$(SAN_CFLAGS),-ljansson -lcrypto)

# agent_session on a libuv loop, against the agent on the host (tests/agent/host.sh).
$(SESSION_TEST): $(call obj,san,tests/agent/session_test.c tests/agent/session_fake.c tests/agent/session_pull.c) $(call lib,agent,san) $(call lib,proto,san)
	$(call link,$(SAN_CFLAGS),-luv -ljansson)

# The host side of an agent that dials home (tests/agent/dial.sh, t_dial.sh).
$(DIALHOST): $(call obj,san,tests/agent/dialhost.c) $(call lib,proto,san)
	$(call link,$(SAN_CFLAGS),-ljansson)

# Static: it is exec'd before every VMM, and nested, a static exec saves ~25 ms of mapping
# and binding shared objects. --no-warnings: libnl's address helpers, never called here,
# name NSS functions, which a static glibc warns of.
JAIL_LDFLAGS := $(REL_CFLAGS) -static-pie -Wl,-z,relro,-z,now,--no-warnings
$(JAIL): $(call obj,rel,$(JAIL_SRCS))
	$(call link,$(JAIL_LDFLAGS),-lnl-route-3 -lnl-3 -lcap-ng -lpthread)
$(call obj,rel,$(JAIL_SRCS)): CFLAGS_EXTRA := $(NL_CFLAGS)

$(AGENTCTL): $(call obj,rel,api/agentctl/husk-agentctl.c) $(call lib,agent,rel) $(call lib,vmmctl,rel) $(call lib,proto,rel)
	$(call link,,-ljansson)

$(AGENTBENCH): $(call obj,rel,tools/bench/agentbench.c) $(call lib,agent,rel) $(call lib,proto,rel)
	$(call link,,-ljansson)

$(APIBENCH): $(call obj,rel,tools/bench/apibench.c) $(call lib,httpc,rel) $(call lib,agent,rel) $(call lib,proto,rel)
	$(call link,,-lhttp_parser -ljansson)

# Runs inside guests, from an initramfs appended to the test one.
$(DISKBENCH): $(call obj,rel,tools/bench/diskbench.c)
	$(call link,-static,)

$(NETBENCH): $(call obj,rel,tools/bench/netbench.c)
	$(call link,-static,)

$(BENCH_CPIO): $(DISKBENCH) $(NETBENCH)
	@mkdir -p $(dir $@)
	$(Q)d=$$(mktemp -d) && mkdir -p $$d/usr/bin && cp $(DISKBENCH) $(NETBENCH) $$d/usr/bin/ && \
		(cd $$d && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >$@ && rm -rf $$d

$(BOOTBENCH): $(call obj,rel,tools/bench/bootbench.c)
	$(call link,,)

$(HUSK_IMG): $(call obj,rel,images/husk-img.c) $(call lib,img,rel)
	$(call link,$(HARDEN),-lcrypto)

$(HUSK_OCI): $(call obj,rel,images/oci/husk-oci.c $(OCI_SRCS))
	$(call link,$(HARDEN),-larchive -lcrypto -ljansson)

$(HUSK_IMPORT): images/runtimes/import.sh
	@mkdir -p $(dir $@)
	$(Q)install -m 755 $< $@

# Random writes through the library, mirrored into a raw file, for tests/img.
$(IMGWRITE): $(call obj,san,tests/img/imgwrite.c) $(call lib,img,san)
	$(call link,$(SAN_CFLAGS),-lcrypto)

$(HUSKD): $(call obj,rel,$(HUSKD_SRCS)) $(call HUSKD_LIBS,rel)
	$(call link,$(REL_CFLAGS),$(HTTP_LIBS) -lsqlite3 -lnftables -lresolv -lcrypto -larchive)

# huskd with sanitizers, for the API tests.
$(HUSKD_SAN): $(call obj,san,$(HUSKD_SRCS)) $(call HUSKD_LIBS,san)
	$(call link,$(SAN_CFLAGS),$(HTTP_LIBS) -lsqlite3 -lnftables -lresolv -lcrypto -larchive)

$(HUSK_CLI): $(call obj,rel,$(HUSK_CLI_SRCS)) $(call lib,httpc,rel) $(call lib,proto,rel)
	$(call link,$(REL_CFLAGS),-lhttp_parser -ljansson -lyaml -lcrypto)

$(HUSK_CLI_SAN): $(call obj,san,$(HUSK_CLI_SRCS)) $(call lib,httpc,san) $(call lib,proto,san)
	$(call link,$(SAN_CFLAGS),-lhttp_parser -ljansson -lyaml -lcrypto)

$(UNIT): $(call obj,san,$(UNIT_SRCS) $(VMM_LIB_SRCS) $(AGENT_LIB_SRCS) $(STORE_SRCS) api/huskd/net/dns_msg.c api/huskd/net/net_policy.c \
	api/huskd/routes/r_target.c api/huskd/tenant/tenant.c api/huskd/keys/keystore.c api/huskd/keys/keystore_kms.c \
	api/huskd/sandbox/zipconv.c) \
	$(call lib,http,san) $(call lib,img,san) $(call lib,evloop,san) $(call lib,proto,san)
	$(call link,$(SAN_CFLAGS),$(VMM_LIBS) $(HTTP_LIBS) -lsqlite3 -lresolv -lcrypto -larchive)

# The sandbox manager's tests (tests/huskd): the real manager and store, husk-vmm played by fake-vmm.
SBX_TEST_SRCS := $(sort $(wildcard tests/huskd/*.c)) api/huskd/huskd_log.c \
	$(sort $(wildcard api/huskd/sandbox/*.c api/huskd/vmm/*.c api/huskd/net/*.c api/huskd/keys/*.c)) $(STORE_SRCS)
$(SBX_TEST): $(call obj,san,$(SBX_TEST_SRCS)) $(call HUSKD_LIBS,san)
	$(call link,$(SAN_CFLAGS),$(HTTP_LIBS) -lsqlite3 -lnftables -lresolv -lcrypto -larchive)

# The HTTP layer over real sockets (tests/api): a test server and the client that drives it.
$(HTTP_ECHO): $(call obj,san,tests/api/echo_server.c) $(call lib,http,san)
	$(call link,$(SAN_CFLAGS),$(HTTP_LIBS))

$(HTTP_SMOKE): $(call obj,san,tests/api/http_smoke.c tests/api/http_smoke_streams.c tests/api/http_client.c \
		tests/api/http_smoke_cli.c) $(call lib,httpc,san)
	$(call link,$(SAN_CFLAGS),$(HTTP_LIBS))

$(KERNEL) $(VMLINUX) &: images/kernel/husk.config images/kernel/build.sh
	images/kernel/build.sh $(KERNEL)

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
	@$(SUBMAKE) all
	tools/husk-up
	$(BIN)/husk run --runtime python:3.13 -- python3 -c 'print(sum([1,2,3]))'

# Stops the huskd that make run started.
stop:
	tools/husk-up --stop

# One bare VM: the VMM boots the guest kernel and runs a command, no huskd.
run-vm: deps
	@$(SUBMAKE) all
	tools/husk-kvm-run --timeout 600 -- $(VMM) --kernel $(VMLINUX) --initrd $(INITRAMFS) \
		--mem 256M --vcpus 2 \
		--cmdline 'quiet husk.cmd="uname -sr; echo cpus: $$(nproc); grep MemTotal /proc/meminfo"'

test: deps
	@$(SUBMAKE) all fuzz-build client
	tests/run.sh

# Every benchmark, each in a nested host of its own, then every goal line in one list
# (tools/bench/all.sh; HUSK_BENCH_PARTS="boot agent" for some of them).
bench: deps
	@$(SUBMAKE) all $(BENCH_CPIO) client
	tools/bench/all.sh
# Only the network benchmark (guest TCP through husk-vmm's stack against QEMU's -netdev user).
bench-net: deps
	@$(SUBMAKE) all $(BENCH_CPIO)
	tools/husk-kvm-run --timeout 3000 --mem 6144 --bring "$$(command -v qemu-system-x86_64)" --bring /usr/share/qemu --bring /usr/share/seabios --bring "$$(command -v node)" --bring /usr/sbin/ip -- tools/bench/net.sh

# Only the memory-file benchmark (restore from a mapped memory file, density of children).
bench-memfile: deps
	@$(SUBMAKE) all
	tools/husk-kvm-run --timeout 1800 --mem 6144 -- tools/bench/memfile.sh

# Only the template benchmark (create -> first exec booting and from a template; density).
# It prints as it goes: a nested host silent for 5 minutes has wedged (its kernel's soft
# lockup), and is stopped then rather than at the time limit.
bench-templates: deps
	@$(SUBMAKE) all client
	tools/husk-kvm-run --timeout 1800 --idle 300 --mem 6144 --bring "$$(command -v node)" -- tools/bench/templates.sh

# Only the runtime benchmark (image size, create -> first exec for each runtime).
bench-runtimes: deps
	@$(SUBMAKE) all client
	tools/husk-kvm-run --timeout 3000 --mem 6144 --bring "$$(command -v node)" -- tools/bench/runtimes.sh

# Only the API benchmark (huskd with the published client).
bench-api: deps
	@$(SUBMAKE) all client
	tools/husk-kvm-run --timeout 3000 --mem 6144 --bring "$$(command -v node)" -- tools/bench/api.sh

# create -> first exec against another tree of husk: OLD=a clone where make all ran
# (both trees' huskds in one nested host, creates alternating).
bench-vs-tree: deps
	@$(SUBMAKE) all client
	OLD="$(OLD)" tools/bench/vs-tree.sh

# Only the snapshot benchmark (pause, save, restore; 256 MiB and 1 GiB guests).
bench-snapshot: deps
	@$(SUBMAKE) all
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
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(INCLUDES)
FUZZ_TARGETS := $(BUILD)/fuzz/fuzz_virtq $(BUILD)/fuzz/fuzz_vsock $(BUILD)/fuzz/fuzz_frame $(BUILD)/fuzz/fuzz_img \
	$(BUILD)/fuzz/fuzz_http $(BUILD)/fuzz/fuzz_snapfile $(BUILD)/fuzz/fuzz_session $(BUILD)/fuzz/fuzz_net \
	$(BUILD)/fuzz/fuzz_dns $(BUILD)/fuzz/fuzz_proxy $(BUILD)/fuzz/fuzz_devices $(BUILD)/fuzz/fuzz_devstate \
	$(BUILD)/fuzz/fuzz_oci $(BUILD)/fuzz/fuzz_tls $(BUILD)/fuzz/fuzz_zipconv $(BUILD)/fuzz/fuzz_e2b_wire \
	$(BUILD)/fuzz/fuzz_policy

$(BUILD)/fuzz/fuzz_virtq: tests/fuzz/fuzz_virtq.c vmm/virtio/virtq.c vmm/guest_mem.c vmm/log.c
$(BUILD)/fuzz/fuzz_vsock: tests/fuzz/fuzz_vsock.c vmm/virtio/vsock_pkt.c
$(BUILD)/fuzz/fuzz_frame: tests/fuzz/fuzz_frame.c guest-agent/proto.c
$(BUILD)/fuzz/fuzz_img: tests/fuzz/fuzz_img.c $(IMG_SRCS)
$(BUILD)/fuzz/fuzz_img: FUZZ_LIBS := -lcrypto
$(BUILD)/fuzz/fuzz_http: tests/fuzz/fuzz_http.c tests/unit/test_http_fake.c $(HTTP_CORE_SRCS)
$(BUILD)/fuzz/fuzz_http: FUZZ_LIBS := -lhttp_parser
$(BUILD)/fuzz/fuzz_snapfile: tests/fuzz/fuzz_snapfile.c $(wildcard vmm/snap/*.c) vmm/guest_mem.c vmm/confine.c vmm/log.c
$(BUILD)/fuzz/fuzz_snapfile: FUZZ_LIBS := -llz4 -lxxhash -lpthread -lcrypto
$(BUILD)/fuzz/fuzz_session: tests/fuzz/fuzz_session.c api/agent/agent_session.c api/agent/agent_call.c guest-agent/proto.c
$(BUILD)/fuzz/fuzz_session: FUZZ_LIBS := -luv
$(BUILD)/fuzz/fuzz_net: tests/fuzz/fuzz_net.c tests/unit/virtio_tb.c $(VMM_LIB_SRCS) vmm/evloop.c $(IMG_SRCS)
$(BUILD)/fuzz/fuzz_net: FUZZ_LIBS := -lpthread -llz4 -lxxhash -lcrypto
# The whole VMM but main, as the device tests link it; clang also names a GNU extension gcc takes.
$(BUILD)/fuzz/fuzz_net: FUZZ_EXTRA := -Itests/unit -Wno-gnu-variable-sized-type-not-at-end
# The guest-facing devices, driven as a guest does; their state restored from corrupted snapshots.
FUZZ_DEV_SRCS := tests/fuzz/fuzz_dev.c tests/unit/virtio_tb.c $(VMM_LIB_SRCS) vmm/evloop.c $(IMG_SRCS)
$(BUILD)/fuzz/fuzz_devices: tests/fuzz/fuzz_devices.c $(FUZZ_DEV_SRCS)
$(BUILD)/fuzz/fuzz_devstate: tests/fuzz/fuzz_devstate.c $(FUZZ_DEV_SRCS)
$(BUILD)/fuzz/fuzz_devices $(BUILD)/fuzz/fuzz_devstate: FUZZ_LIBS := -lpthread -llz4 -lxxhash -lcrypto
$(BUILD)/fuzz/fuzz_devices $(BUILD)/fuzz/fuzz_devstate: FUZZ_EXTRA := -Itests/unit -Itests/fuzz -Wno-gnu-variable-sized-type-not-at-end
$(BUILD)/fuzz/fuzz_dns: tests/fuzz/fuzz_dns.c api/huskd/net/dns_msg.c
$(BUILD)/fuzz/fuzz_dns: FUZZ_LIBS := -lresolv
$(BUILD)/fuzz/fuzz_proxy: tests/fuzz/fuzz_proxy.c api/huskd/routes/r_target.c
$(BUILD)/fuzz/fuzz_policy: tests/fuzz/fuzz_policy.c api/huskd/net/net_policy.c
$(BUILD)/fuzz/fuzz_oci: tests/fuzz/fuzz_oci.c images/oci/oci_json.c images/oci/oci_layer.c
$(BUILD)/fuzz/fuzz_oci: FUZZ_LIBS := -larchive
$(BUILD)/fuzz/fuzz_zipconv: tests/fuzz/fuzz_zipconv.c api/huskd/sandbox/zipconv.c
$(BUILD)/fuzz/fuzz_zipconv: FUZZ_LIBS := -larchive
$(BUILD)/fuzz/fuzz_e2b_wire: tests/fuzz/fuzz_e2b_wire.c api/huskd/e2b/e2b_wire.c
$(BUILD)/fuzz/fuzz_tls: tests/fuzz/fuzz_tls.c api/http/http_tls.c
$(BUILD)/fuzz/fuzz_tls: FUZZ_LIBS := -lssl -lcrypto
$(FUZZ_TARGETS):
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) $(FUZZ_EXTRA) -o $@ $(filter %.c,$^) -ljansson $(FUZZ_LIBS)

$(BUILD)/fuzz/fuzz_net $(BUILD)/fuzz/fuzz_devices $(BUILD)/fuzz/fuzz_devstate: $(DSDT_H)
$(BUILD)/fuzz/fuzz_snapfile $(BUILD)/fuzz/fuzz_net $(BUILD)/fuzz/fuzz_devices $(BUILD)/fuzz/fuzz_devstate: $(CONFINE_BPF)

fuzz-build: $(FUZZ_TARGETS)

fuzz: deps
	@$(SUBMAKE) fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Every C file of the tree, formatted by Debian bookworm's clang-format (14):
# other versions format some constructs differently, so the check names it.
C_FILES := $(sort $(shell find vmm guest-agent api images tests tools -name '*.[ch]' -not -path '*/node_modules/*'))
CLANG_FORMAT ?= clang-format
CLANG_FORMAT_VERSION := 14

format:
	@$(CLANG_FORMAT) --version | grep -q "version $(CLANG_FORMAT_VERSION)\." || \
		{ echo "format: need clang-format $(CLANG_FORMAT_VERSION) (Debian bookworm's clang-format package)" >&2; exit 1; }
	$(CLANG_FORMAT) -i $(C_FILES)

# Fails, naming the files, where a C file differs from what make format writes.
check-format:
	@$(CLANG_FORMAT) --version | grep -q "version $(CLANG_FORMAT_VERSION)\." || \
		{ echo "check-format: need clang-format $(CLANG_FORMAT_VERSION) (Debian bookworm's clang-format package)" >&2; exit 1; }
	@bad=""; for f in $(C_FILES); do \
		$(CLANG_FORMAT) --dry-run --Werror "$$f" >/dev/null 2>&1 || bad="$$bad $$f"; \
	done; \
	if [ -n "$$bad" ]; then echo "check-format: not formatted (run make format):$$bad" >&2; exit 1; fi; \
	echo "check-format: $(words $(C_FILES)) files formatted"

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
