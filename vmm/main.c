// SPDX-License-Identifier: MIT
/* husk-vmm: one KVM microVM per process. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "confine.h"
#include "control.h"
#include "devices/power.h"
#include "devices/serial.h"
#include "devices/vmgenid.h"
#include "keyring.h"
#include "kvm.h"
#include "log.h"
#include "memfile.h"
#include "netstack.h"
#include "virtio/blk.h"
#include "virtio/net.h"
#include "virtio/rng.h"
#include "virtio/vsock.h"
#include "vm.h"
#include "x86/boot.h"
#include "x86/layout.h"

#define MAX_VCPUS 255 /* xAPIC IDs in the MADT are 8 bits */
#define MIN_MEM (32ULL << 20)
#define MAX_DISKS BLK_MAX_DISKS
/* What --restore does without --lazy or --eager. */
#define RESTORE_LAZY true
#define STR_(x) #x
#define STR(x) STR_(x)

/*
 * Always on the guest command line, ahead of the user's, who can override
 * any of it: the console, the panic signal (see devices/power.h), no PCI bus
 * to probe, and no in-guest speculation mitigations. Those guard a guest's
 * kernel from its own processes; a sandbox guest belongs to one tenant, who
 * is root in it anyway, and KVM and the host guard everything else. Patching
 * every return instruction at boot costs a guest hundreds of milliseconds.
 */
static const char base_cmdline[] =
	"console=ttyS0 reboot=panic_warm panic=-1 pci=off mitigations=off";

struct options {
	const char *kernel;
	const char *initrd;
	const char *cmdline;
	const char *console;
	const char *vsock_uds;
	const char *control;
	const char *restore;
	bool lazy;            /* guest RAM of a --restore filled on demand */
	bool verify_dirty;    /* diff pauses also compare every page (tests) */
	bool lazy_on_demand;  /* a lazy restore fills nothing in the background (tests) */
	bool held;            /* the restored guest waits for the control socket's resume */
	const char *mem_file; /* guest RAM of a --restore mapped from this memory file */
	const char *extract;  /* only write the --restore snapshot's RAM to this file */
	uint64_t cid;
	uint64_t mem;
	unsigned vcpus;
	struct blk_spec disks[MAX_DISKS];
	unsigned nr_disks;
	bool net;
	struct net_spec net_spec;
	unsigned expose_port; /* 0: none */
	const char *expose_path;
	int key_fd; /* -1: none */
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: husk-vmm (--kernel KERNEL [--initrd FILE] [--cmdline TEXT] | --restore "
	        "FILE [--lazy|--eager])\n"
	        "                [--mem SIZE] [--vcpus N] [--console stdio|PATH]\n"
	        "                [--vsock PATH [--cid N]] [--disk SPEC]... [--net slirp[,...]]\n"
	        "                [--expose PORT:PATH] [--seccomp kill|log|off]\n"
	        "                [--control PATH] [-v]\n"
	        "\n"
	        "Boots a Linux guest in a KVM microVM.\n"
	        "\n"
	        "  --kernel KERNEL    x86-64 Linux: vmlinux (ELF, boots without decompressing)\n"
	        "                     or bzImage (boot protocol 2.12 or newer)\n"
	        "  --initrd FILE      initramfs or initrd image\n"
	        "  --cmdline TEXT     kernel command line, appended to \"%s\"\n"
	        "  --mem SIZE         guest RAM: a number with K, M or G (default MiB),\n"
	        "                     a multiple of 2 MiB, at least 32M (default 256M)\n"
	        "  --vcpus N          virtual CPUs, 1 to %d (default 1)\n"
	        "  --console DEST     where the serial console goes: stdio (default) or a file\n"
	        "  --vsock PATH       a virtio-vsock device; its host side is the Unix socket\n"
	        "                     PATH: connect, send \"CONNECT <port>\\n\", read \"OK "
	        "<n>\\n\",\n"
	        "                     then stream; guest connections to host port P go to PATH_P\n"
	        "  --cid N            the guest's vsock CID, 3 or more (default 3)\n"
	        "  --disk SPEC        a virtio-blk disk, /dev/vda, /dev/vdb... in order (up to "
	        "%d);\n"
	        "                     SPEC is PATH[,ro][,format=raw|qcow2][,serial=ID]: a qcow2\n"
	        "                     image (with its backing chain, never written) unless\n"
	        "                     format=raw says otherwise\n"
	        "  --net SPEC         a virtio-net device on a user-mode stack (libslirp):\n"
	        "                     slirp[,mac=XX:XX:XX:XX:XX:XX][,mtu=N][,rate=N][,ip=A];\n"
	        "                     the guest gets A (10.0.2.4 to 10.0.2.239, default\n"
	        "                     10.0.2.15) by DHCP (ip=dhcp is added to its command\n"
	        "                     line), DNS at 10.0.2.3, and reaches what this process\n"
	        "                     can (never the host's loopback); rate=N[K|M|G] holds\n"
	        "                     what the guest sends to N bytes per second\n"
	        "  --expose PORT:PATH with --net: connections to the Unix socket PATH reach\n"
	        "                     the guest's TCP PORT\n"
	        "  --control PATH     a control socket: one-line commands status, pause, resume,\n"
	        "                     snapshot FILE (of the paused VM), dump (devices' queues\n"
	        "                     and connections to stderr)\n"
	        "  --restore FILE     start from a snapshot instead of booting; --mem, --vcpus\n"
	        "                     and the devices (--disk, --vsock, --net) must be as when\n"
	        "                     it was\n"
	        "                     saved\n"
	        "  --mem-file FILE    with --restore: map guest memory from FILE, the snapshot's\n"
	        "                     RAM uncompressed (shared with every VMM that maps it)\n"
	        "  --extract-memory FILE  with --restore: write the snapshot's RAM to FILE for\n"
	        "                     --mem-file, and exit\n"
	        "  --lazy, --eager    with --restore: fill guest memory from the file as the\n"
	        "                     guest touches it, the rest in the background (userfaultfd;\n"
	        "                     eager where that is not allowed), or all of it before the\n"
	        "                     guest runs (default: %s)\n"
	        "  --verify-dirty     with --mem-file: a diff pause also compares every page and\n"
	        "                     fails on one that changed unrecorded (for tests)\n"
	        "  --lazy-on-demand   with --lazy: nothing fills guest memory in the background\n"
	        "                     (for tests: a pause before the load ends)\n"
	        "  --held             with --restore and --control: restore, then keep the\n"
	        "                     vCPUs parked until the control socket's resume (a resume\n"
	        "                     made ahead); guest memory a lazy restore has not placed\n"
	        "                     comes in only as the guest touches it\n"
	        "  --key-fd N         read keys from descriptor N to its end, one a line: 64\n"
	        "                     hex digits open a sealed --restore and seal the snapshots\n"
	        "                     this VM writes (the control socket's key changes it);\n"
	        "                     'disk HEX PATH' opens the encrypted disk image PATH,\n"
	        "                     'master HEX PATH' too by its master key (128 digits)\n"
	        "  --seccomp MODE     each thread's syscall allowlist: kill (default: a call\n"
	        "                     outside it ends the VMM), log (the kernel logs it; to\n"
	        "                     find what a new code path needs) or off\n"
	        "  -v, --verbose      more messages on stderr (twice for debug)\n"
	        "  -h, --help         this text\n"
	        "\n"
	        "Environment: HUSK_KVM_DEVICE names the KVM device (default /dev/kvm).\n"
	        "\n"
	        "Exit status: 0 the guest powered off or rebooted; 1 the VMM failed;\n"
	        "2 bad usage, bad input files or no usable KVM; 3 the guest crashed\n"
	        "(kernel panic, triple fault, KVM could not run it).\n",
	        base_cmdline, MAX_VCPUS, MAX_DISKS, RESTORE_LAZY ? "--lazy" : "--eager");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "husk-vmm: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'husk-vmm --help'.\n");
	return VM_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"kernel", required_argument, NULL, 'k'},
		{"initrd", required_argument, NULL, 'i'},
		{"cmdline", required_argument, NULL, 'c'},
		{"mem", required_argument, NULL, 'm'},
		{"vcpus", required_argument, NULL, 'n'},
		{"console", required_argument, NULL, 'o'},
		{"vsock", required_argument, NULL, 's'},
		{"cid", required_argument, NULL, 'C'},
		{"disk", required_argument, NULL, 'd'},
		{"net", required_argument, NULL, 'N'},
		{"expose", required_argument, NULL, 'X'},
		{"control", required_argument, NULL, 'x'},
		{"restore", required_argument, NULL, 'r'},
		{"lazy", no_argument, NULL, 'L'},
		{"mem-file", required_argument, NULL, 'W'},
		{"extract-memory", required_argument, NULL, 'Z'},
		{"eager", no_argument, NULL, 'E'},
		{"verify-dirty", no_argument, NULL, 'V'},
		{"lazy-on-demand", no_argument, NULL, 'O'},
		{"held", no_argument, NULL, 'H'},
		{"seccomp", required_argument, NULL, 'S'},
		{"key-fd", required_argument, NULL, 'K'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end, err[256];
	long n;
	int c;

	*o = (struct options){.cmdline = "",
	                      .console = "stdio",
	                      .cid = 3,
	                      .mem = 256ULL << 20,
	                      .vcpus = 1,
	                      .lazy = RESTORE_LAZY,
	                      .key_fd = -1};
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			o->kernel = optarg;
			break;
		case 'i':
			o->initrd = optarg;
			break;
		case 'c':
			o->cmdline = optarg;
			break;
		case 'o':
			o->console = optarg;
			break;
		case 'm':
			if (guest_mem_parse_size(optarg, &o->mem))
				return usage_error("--mem '%s' is not a size such as 256M or 1G",
				                   optarg);
			if (o->mem < MIN_MEM || o->mem % (2ULL << 20))
				return usage_error(
					"--mem '%s' must be a multiple of 2M and at least 32M",
					optarg);
			break;
		case 'n':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 1 || n > MAX_VCPUS)
				return usage_error("--vcpus '%s' must be a number from 1 to 255",
				                   optarg);
			o->vcpus = (unsigned)n;
			break;
		case 's':
			o->vsock_uds = optarg;
			break;
		case 'C':
			errno = 0;
			o->cid = strtoull(optarg, &end, 10);
			if (errno || *end || end == optarg || o->cid < 3 || o->cid >= UINT32_MAX)
				return usage_error(
					"--cid '%s' must be a number from 3 to 4294967294", optarg);
			break;
		case 'd':
			if (o->nr_disks == MAX_DISKS)
				return usage_error("--disk '%s': at most " STR(MAX_DISKS) " disks",
				                   optarg);
			if (blk_spec_parse(optarg, &o->disks[o->nr_disks], err, sizeof(err)))
				return usage_error("%s", err);
			o->nr_disks++;
			break;
		case 'N':
			if (net_spec_parse(optarg, &o->net_spec, err, sizeof(err)))
				return usage_error("%s", err);
			o->net = true;
			break;
		case 'X':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end != ':' || n < 1 || n > 65535 || !end[1])
				return usage_error(
					"--expose '%s' must be PORT:PATH, a TCP port from "
					"1 to 65535 and a Unix socket path",
					optarg);
			o->expose_port = (unsigned)n;
			o->expose_path = end + 1;
			break;
		case 'x':
			o->control = optarg;
			break;
		case 'r':
			o->restore = optarg;
			break;
		case 'L':
			o->lazy = true;
			break;
		case 'W':
			o->mem_file = optarg;
			break;
		case 'Z':
			o->extract = optarg;
			break;
		case 'E':
			o->lazy = false;
			break;
		case 'V':
			o->verify_dirty = true;
			break;
		case 'O':
			o->lazy = o->lazy_on_demand = true;
			break;
		case 'H':
			o->held = true;
			break;
		case 'K':
			n = strtol(optarg, &end, 10);
			if (*end || n < 3 || n > 1023)
				return usage_error(
					"--key-fd '%s' must be a descriptor from 3 to 1023",
					optarg);
			o->key_fd = (int)n;
			break;
		case 'S':
			if (!strcmp(optarg, "kill"))
				confine_mode = SECCOMP_KILL;
			else if (!strcmp(optarg, "log"))
				confine_mode = SECCOMP_LOG;
			else if (!strcmp(optarg, "off"))
				confine_mode = SECCOMP_OFF;
			else
				return usage_error("--seccomp '%s' must be kill, log or off",
				                   optarg);
			break;
		case 'v':
			if (log_max_level < LOG_DEBUG)
				log_max_level++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->kernel && !o->restore)
		return usage_error("%s", "--kernel (or --restore) is required");
	if (o->kernel && o->restore)
		return usage_error("%s", "--kernel boots a guest, --restore resumes one: give one");
	if ((o->mem_file || o->extract) && !o->restore)
		return usage_error("%s", "--mem-file and --extract-memory go with --restore");
	if (o->held && (!o->restore || !o->control))
		return usage_error("%s", "--held goes with --restore and --control (whose "
		                         "resume starts the guest)");
	if (o->expose_port && !o->net)
		return usage_error("%s", "--expose needs the guest's network: add --net slirp");
	return 0;
}

/* A console file holds at most this much of the guest's output (the latest). */
#define CONSOLE_MAX (8ULL << 20)

static int open_console(const char *dest)
{
	int fd;

	if (strcmp(dest, "stdio") == 0)
		return STDOUT_FILENO;
	fd = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		log_err("cannot open console file '%s': %s", dest, strerror(errno));
	return fd;
}

int main(int argc, char **argv)
{
	struct boot_files boot = {.kernel_fd = -1, .initrd_fd = -1};
	struct options o;
	struct serial *serial = NULL;
	struct power *power = NULL;
	struct virtio_rng *rng = NULL;
	struct vsock_dev *vsock = NULL;
	struct virtio_blk *disks[MAX_DISKS] = {NULL};
	struct blk_images images = {0};
	struct vm_restore rs = {.base.fd = -1};
	struct virtio_net *net = NULL;
	struct netstack *netstack = NULL;
	struct control *control = NULL;
	struct vm vm = {.vm_fd = -1, .stop_fd = -1};
	const char *kvm_path = getenv("HUSK_KVM_DEVICE");
	char *cmdline = NULL;
	struct guest_mem mem;
	struct keyring keys = {.disks.v = keys.disk};
	char kerr[160];
	int kvm_fd = -1, console_fd = -1, status, ret;

	/*
	 * One malloc arena: glibc opens /proc/sys/vm/overcommit_memory when a
	 * thread's first allocation makes an arena of its own, and a vCPU or
	 * lazy-restore thread's seccomp role has no business opening files.
	 */
	mallopt(M_ARENA_MAX, 1);
	/*
	 * libslirp gives each TCP connection two buffers of 128-192 KiB. Above
	 * glibc's first mmap threshold (128 KiB) each would be an mmap, a
	 * munmap and fresh pages to fault in, connection after connection (a
	 * third of the network thread's time per connect, measured nested);
	 * from the heap they reuse freed pages. Setting the threshold stops
	 * glibc's own adjusting of the trim threshold too: free heap kept up
	 * to 2 MiB.
	 */
	mallopt(M_MMAP_THRESHOLD, 512 << 10);
	mallopt(M_TRIM_THRESHOLD, 2 << 20);
	status = parse_args(argc, argv, &o);
	if (status)
		return status;
	if (log_max_level >= LOG_DEBUG) {
		/* To line the timed lines up with huskd's log. */
		struct timespec wall;

		clock_gettime(CLOCK_REALTIME, &wall);
		log_debug("wall clock %lld.%03ld", (long long)wall.tv_sec, wall.tv_nsec / 1000000);
	}
	if (o.extract) {
		char err[512] = "";

		if (memfile_extract(o.restore, o.extract, 2, err, sizeof(err))) {
			log_err("cannot extract guest memory: %s", err);
			return VM_EXIT_USAGE;
		}
		return VM_EXIT_OK;
	}
	status = VM_EXIT_USAGE;
	/*
	 * Only a VMM given keys starts OpenSSL now, before any thread confines
	 * itself or opens a disk; one handed a key later over the control socket
	 * starts it then (snap_seal_init). A VMM with none never pays for it.
	 */
	if (o.key_fd >= 0 && snap_seal_noconfig())
		log_warn(
			"OpenSSL cannot start: sealed snapshots and encrypted disks will not open");
	else if (o.key_fd >= 0 && snap_seal_init())
		log_warn("OpenSSL has no AES-256-GCM: sealed snapshots cannot be read or written");
	if (o.key_fd >= 0 && (ret = keyring_read_fd(o.key_fd, &keys, kerr, sizeof(kerr)))) {
		log_err("--key-fd %d: %s", o.key_fd, ret == -EINVAL ? kerr : strerror(-ret));
		goto out;
	}
	log_debug("OpenSSL and keys ready");
	for (unsigned i = 0; i < o.nr_disks; i++)
		o.disks[i].secrets = &keys.disks;
	if (blk_images_start(&images, o.disks, o.nr_disks))
		goto out;
	if (!o.restore && boot_open(&boot, o.kernel, o.initrd, o.mem))
		goto out;
	kvm_fd = kvm_open(kvm_path ? kvm_path : "/dev/kvm");
	if (kvm_fd < 0)
		goto out;
	if ((int)o.vcpus > kvm_max_vcpus(kvm_fd)) {
		log_err("--vcpus %u is more than this host's KVM supports (%d)", o.vcpus,
		        kvm_max_vcpus(kvm_fd));
		goto out;
	}
	console_fd = open_console(o.console);
	if (console_fd < 0)
		goto out;

	status = VM_EXIT_ERROR;
	log_debug("KVM opened");
	if (guest_mem_init(&mem, o.mem)) {
		log_err("cannot reserve %llu MiB of guest memory",
		        (unsigned long long)(o.mem >> 20));
		goto out;
	}
	if (o.restore && vm_restore_begin(&rs, &mem, o.restore, o.mem_file,
	                                  keys.has_snap ? &keys.snap : NULL, o.lazy)) {
		guest_mem_free(&mem);
		goto out;
	}
	if (!o.restore && boot_load_images_start(&boot, &mem)) {
		guest_mem_free(&mem);
		goto out;
	}
	/* The VM owns guest RAM from here; vm_destroy() frees it, after the loader. */
	ret = vm_create(&vm, kvm_fd, &mem, o.vcpus);
	log_debug("VM and vCPUs made");
	if ((!o.restore && boot_load_images_wait(&boot)) || ret)
		goto out;
	/* Parked from their first instruction, as a pause would: the control socket says paused. */
	if (o.held)
		atomic_store(&vm.pause_req, 1);
	vm.has_key = keys.has_snap;
	vm.key = keys.snap;
	log_debug("VM created and images loaded");
	serial = serial_create(&vm, PORT_COM1, PORT_COM1_IRQ, console_fd);
	if (serial)
		serial_limit(serial, CONSOLE_MAX);
	power = power_create(&vm);
	/* Entropy from the first instant, so getrandom() never blocks the guest. */
	rng = virtio_rng_create(&vm);
	if (!serial || !power || !rng)
		goto out;
	if (o.vsock_uds) {
		vsock = vsock_create(&vm, o.cid, o.vsock_uds);
		if (!vsock)
			goto out;
	}
	for (unsigned i = 0; i < o.nr_disks; i++) {
		disks[i] = virtio_blk_create(&vm, &o.disks[i], blk_images_take(&images, i));
		if (!disks[i]) {
			status = VM_EXIT_USAGE;
			goto out;
		}
	}
	/* Last, so that snapshots of guests without it keep their device order. */
	if (o.net) {
		netstack = netstack_create(&o.net_spec);
		net = netstack ? virtio_net_create(&vm, &o.net_spec, netstack_kick, netstack)
		               : NULL;
		if (!net)
			goto out;
		vm.resumed = netstack_kick;
		vm.resumed_ctx = netstack;
	}
	if (o.control && !(control = control_create(&vm, o.control, netstack)))
		goto out;
	log_debug("devices made, %u disks opened", o.nr_disks);
	/* Device announcements go before the user's part, which may override. */
	if (asprintf(&cmdline, "%s %s%s %s", base_cmdline,
	             vm.device_cmdline ? vm.device_cmdline : "", net ? " ip=dhcp" : "",
	             o.cmdline) < 0) {
		cmdline = NULL;
		goto out;
	}
	if (o.restore) {
		char err[512];

		vm.mem_file = o.mem_file;
		vm.mem.dirty_verify = o.verify_dirty;
		vm.lazy_on_demand = o.lazy_on_demand;
		vm.held = o.held;
		if (vm_snapshot_restore(&vm, &rs, 2, err, sizeof(err))) {
			log_err("cannot restore %s: %s", o.restore, err);
			status = VM_EXIT_USAGE;
			goto out;
		}
		log_info("restored %s", o.restore);
		/* A restored guest may be one of many children: it learns so before it runs. */
		if ((ret = vmgenid_restored(&vm))) {
			log_err("cannot give the restored guest a new generation id: %s",
			        strerror(-ret));
			goto out;
		}
	} else if (boot_setup(&boot, &vm, cmdline)) {
		goto out;
	} else if ((ret = vmgenid_boot(&vm))) {
		log_err("cannot give the guest a generation id: %s", strerror(-ret));
		goto out;
	}
	if (o.expose_port && (ret = netstack_expose(netstack, o.expose_port, o.expose_path))) {
		log_err("cannot expose guest port %u at %s: %s", o.expose_port, o.expose_path,
		        strerror(-ret));
		goto out;
	}
	if (netstack && netstack_start(netstack, net))
		goto out;
	if (o.held)
		log_info("restored and held: the control socket's resume starts the guest");
	log_debug("guest loaded: %u vCPUs, %llu MiB; starting", o.vcpus,
	          (unsigned long long)(o.mem >> 20));
	status = vm_run(&vm);
	if (status == VM_EXIT_OK)
		log_info("%s", vm.exit_reason);
	else
		log_err("%s", vm.exit_reason);
out:
	vm_restore_end(&rs);        /* first too: its thread may be writing guest RAM */
	boot_close(&boot);          /* first: it waits for a loader still writing guest RAM */
	netstack_destroy(netstack); /* its thread writes into the net device's queues */
	virtio_net_destroy(net);
	control_destroy(control);
	vsock_destroy(vsock);
	for (unsigned i = 0; i < MAX_DISKS; i++)
		virtio_blk_destroy(disks[i]);
	blk_images_close(&images); /* after the devices: it joins a thread still opening */
	virtio_rng_destroy(rng);
	vm_destroy(&vm);
	OPENSSL_cleanse(&vm.key, sizeof(vm.key));
	keyring_free(&keys);
	serial_destroy(serial);
	power_destroy(power);
	free(cmdline);
	if (console_fd > STDERR_FILENO)
		close(console_fd);
	if (kvm_fd >= 0)
		close(kvm_fd);
	return status;
}
