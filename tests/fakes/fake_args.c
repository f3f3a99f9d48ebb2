// SPDX-License-Identifier: MIT
/*
 * fake-vmm's command line: husk-vmm's options (those huskd gives), the
 * failure modes of FAKE_VMM, and husk.dial=PORT on the kernel command line.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "guest_mem.h"

#define MAX_VCPUS 255

static const char usage_line[] =
	"usage: husk-vmm (--kernel KERNEL [--initrd FILE] [--cmdline TEXT] | --restore FILE)\n"
	"                [--mem SIZE] [--vcpus N] [--disk PATH,serial=ID]... [--vsock PATH]\n"
	"                [--control PATH] [--console PATH]   (fake-vmm; FAKE_VMM=nodial,\n"
	"                crash-at-start,hang-control,snapshot-fails,exit-on-exec,no-diff,\n"
	"                mute-reads,endless-reads)\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "husk-vmm: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage_line);
	return EXIT_USAGE;
}

int parse_fail_modes(const char *s, unsigned *out)
{
	static const struct {
		const char *name;
		unsigned bit;
	} modes[] = {{"nodial", FAIL_NODIAL},
	             {"crash-at-start", FAIL_CRASH_AT_START},
	             {"hang-control", FAIL_HANG_CONTROL},
	             {"snapshot-fails", FAIL_SNAPSHOT},
	             {"exit-on-exec", FAIL_EXIT_ON_EXEC},
	             {"no-diff", FAIL_NO_DIFF},
	             {"mute-reads", FAIL_MUTE_READS},
	             {"endless-reads", FAIL_ENDLESS_READS},
	             {"drop-resumed", FAIL_DROP_RESUMED},
	             {"mute-resumed", FAIL_MUTE_RESUMED}};

	*out = 0;
	while (s && *s) {
		size_t n = strcspn(s, ","), i;

		for (i = 0; n && i < sizeof(modes) / sizeof(modes[0]); i++)
			if (strlen(modes[i].name) == n && !strncmp(s, modes[i].name, n))
				break;
		if (n && i == sizeof(modes) / sizeof(modes[0])) {
			fprintf(stderr, "husk-vmm: FAKE_VMM: unknown mode '%.*s'\n", (int)n, s);
			return -EINVAL;
		}
		if (n)
			*out |= modes[i].bit;
		s += n + (s[n] == ',');
	}
	return 0;
}

int parse_args(int argc, char **argv, struct fake_opts *o)
{
	static const struct option longopts[] = {
		{"kernel", required_argument, NULL, 'k'},
		{"initrd", required_argument, NULL, 'i'},
		{"cmdline", required_argument, NULL, 'c'},
		{"mem", required_argument, NULL, 'm'},
		{"vcpus", required_argument, NULL, 'n'},
		{"console", required_argument, NULL, 'o'},
		{"vsock", required_argument, NULL, 's'},
		{"disk", required_argument, NULL, 'd'},
		{"control", required_argument, NULL, 'x'},
		{"restore", required_argument, NULL, 'r'},
		{"mem-file", required_argument, NULL, 'W'},
		{"extract-memory", required_argument, NULL, 'Z'},
		{"key-fd", required_argument, NULL, 'K'},
		/* husk-vmm's options that mean nothing to the fake. */
		{"cid", required_argument, NULL, 'C'},
		{"net", required_argument, NULL, 'C'},
		{"expose", required_argument, NULL, 'C'},
		{"lazy", no_argument, NULL, 'L'},
		{"eager", no_argument, NULL, 'L'},
		{"held", no_argument, NULL, 'H'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	long n;
	int c;

	*o = (struct fake_opts){.cmdline = "", .mem = 256ULL << 20, .vcpus = 1, .key_fd = -1};
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
		case 'L':
		case 'v':
			break;
		case 'h':
			fputs(usage_line, stdout);
			exit(0);
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
		case 's':
			o->vsock = optarg;
			break;
		case 'd':
			o->disk = optarg;
			break;
		case 'x':
			o->control = optarg;
			break;
		case 'r':
			o->restore = optarg;
			break;
		case 'W':
			o->mem_file = optarg;
			break;
		case 'H':
			o->held = true;
			break;
		case 'Z':
			o->extract = optarg;
			break;
		case 'K':
			n = strtol(optarg, &end, 10);
			if (*end || n < 3 || n > 1023)
				return usage_error(
					"--key-fd '%s' must be a descriptor from 3 to 1023",
					optarg);
			o->key_fd = (int)n;
			break;
		case 'm':
			if (guest_mem_parse_size(optarg, &o->mem) || o->mem < (32ULL << 20) ||
			    o->mem % (2ULL << 20))
				return usage_error(
					"--mem '%s' must be a multiple of 2M, at least 32M",
					optarg);
			o->mem_set = true;
			break;
		case 'n':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 1 || n > MAX_VCPUS)
				return usage_error("--vcpus '%s' must be a number from 1 to 255",
				                   optarg);
			o->vcpus = (unsigned)n;
			o->vcpus_set = true;
			break;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->kernel == !o->restore)
		return usage_error("%s", "give --kernel (boot) or --restore (resume), one of them");
	if ((o->mem_file || o->extract) && !o->restore)
		return usage_error("%s", "--mem-file and --extract-memory go with --restore");
	if (o->held && (!o->restore || !o->control))
		return usage_error("%s", "--held goes with --restore and --control");
	return 0;
}

unsigned dial_port(const char *cmdline)
{
	unsigned port = 0;

	for (const char *p = cmdline; (p = strstr(p, "husk.dial=")); p++) {
		char *end;
		unsigned long v;

		if (p != cmdline && p[-1] != ' ')
			continue;
		errno = 0;
		v = strtoul(p + 10, &end, 10);
		port = !errno && (*end == ' ' || !*end) && v && v < UINT32_MAX ? (unsigned)v : 0;
	}
	return port;
}

int key_fingerprint(const char *hex, size_t len, char out[17])
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (len && (hex[len - 1] == '\n' || hex[len - 1] == '\r'))
		len--;
	if (len != 64 || strspn(hex, "0123456789abcdefABCDEF") < 64)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)hex[i]) * 0x100000001b3ULL;
	snprintf(out, 17, "%016llx", (unsigned long long)h);
	return 0;
}
