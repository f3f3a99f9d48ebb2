// SPDX-License-Identifier: MIT
/* huskd's command line (huskd_opts.h). */
#include "huskd_opts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "huskd_log.h"
#include "net_policy.h"
#include "routes.h"
#include "store.h"

void huskd_usage(FILE *f)
{
	fprintf(f,
	        "usage: huskd [--port N] [--listen ADDR] [--unix PATH] [--state DIR] [--images "
	        "DIR]\n"
	        "             [--vmm PATH] [--public-url URL] [--output-limit SIZE] [--durable]\n"
	        "             [--on-idle pause|terminate] [--max-guest-memory SIZE] [--log-level "
	        "L]\n"
	        "             [--max-sandboxes N] [--max-vcpus N] [--min-free-disk SIZE]\n"
	        "             [--dns-upstream ADDR] [--public-domain DOMAIN] [--egress-rate N]\n"
	        "             [--egress-allow LIST] [--egress-deny LIST] [--apt-source LINE]\n"
	        "             [--disk-rate SIZE] [--disk-iops N] [--import-max-bytes SIZE]\n"
	        "             [--templates on|off] [--warm-pool N] [--resume-ahead N]\n"
	        "             [--stream-url-ttl DURATION]\n"
	        "             [--key-concurrency N] [--key-rate N/DURATION]\n"
	        "             [--tls-cert FILE --tls-key FILE] [--plain-http]\n"
	        "             [--seal on|off] [--kms-command PATH]\n"
	        "\n"
	        "  --port N        listen on 127.0.0.1:N (default 8371)\n"
	        "  --listen ADDR   listen on ADDR instead of 127.0.0.1 (no TLS: keep it private)\n"
	        "  --unix PATH     also listen on a Unix socket\n"
	        "  --state DIR     state folder (default ~/.local/state/husk)\n"
	        "  --images DIR    vmlinux (or bzImage), initramfs.cpio, runtimes/\n"
	        "                  (default build/images)\n"
	        "  --vmm PATH      husk-vmm (default: next to huskd)\n"
	        "  --public-url U  base of stream URLs (default: from each request's Host)\n"
	        "  --output-limit SIZE  output kept per stream of a command (default 64Mi)\n"
	        "  --durable       commit to disk before answering (for machines that get cut "
	        "off)\n"
	        "  --on-idle pause|terminate  what timeout.idle does (default terminate; pause\n"
	        "                  writes the sandbox to disk, the next request resumes it)\n"
	        "  --max-guest-memory SIZE  guest memory all running sandboxes may be given\n"
	        "                  (default: no cap; creates are refused while the host's free\n"
	        "                  memory is short either way)\n"
	        "  --max-sandboxes N  sandboxes running at once (default: one per 128 MiB of\n"
	        "                  the host's memory)\n"
	        "  --max-vcpus N   vCPUs all running sandboxes may have (default: 8 per CPU)\n"
	        "  --min-free-disk SIZE  creates are refused while less is free under the\n"
	        "                  state folder (default 1Gi)\n"
	        "  --disk-rate SIZE  bytes per second each sandbox may read, and write, on the\n"
	        "                  state folder's disk (default: no limit)\n"
	        "  --disk-iops N   reads, and writes, per second each sandbox may make there\n"
	        "                  (default: no limit)\n"
	        "  --import-max-bytes SIZE  the largest image husk runtime import takes, as\n"
	        "                  sent and as unpacked (default 16Gi)\n"
	        "  --templates on|off  a create restores its runtime's template (a guest booted\n"
	        "                  once per shape, made at the first create) instead of\n"
	        "                  booting (default on)\n"
	        "  --warm-pool N   per template and org, N guests restored ahead with their\n"
	        "                  vCPUs parked: a create takes one instead of starting a VMM\n"
	        "                  (0-8, default 1)\n"
	        "  --resume-ahead N  up to N paused sandboxes keep their next VMM restored with\n"
	        "                  its vCPUs parked: a resume only sets them going (0-64,\n"
	        "                  default 4; none for a sandbox with a network)\n"
	        "  --stream-url-ttl D  how long an output stream URL works after it is given\n"
	        "                  out (signed; default 24h; a reader that began reads on)\n"
	        "  --key-concurrency N  requests one API key may have in flight (long-polls\n"
	        "                  count; default 256, 0: no limit); past it: 429\n"
	        "  --key-rate N/D  requests one API key may make per duration D, in bursts of\n"
	        "                  up to N (default 6000/1m, 0: no limit); past it: 429 with\n"
	        "                  Retry-After\n"
	        "  --seal on|off   a pause seals the guest's memory (AES-256-GCM) with a key\n"
	        "                  of its own, kept wrapped by its org's key (default on)\n"
	        "  --kms-command PATH  org keys live in a key service PATH talks to, not in\n"
	        "                  STATE/keys: run as PATH wrap|unwrap|delete ORG (README)\n"
	        "  --tls-cert FILE, --tls-key FILE  serve HTTPS with this certificate chain and\n"
	        "                  key (PEM)\n"
	        "  --plain-http    allow --listen on a non-loopback address without TLS (only\n"
	        "                  where something else encrypts that network)\n"
	        "  --print-routes  print the API's routes as JSON lines (method, pattern, whose\n"
	        "                  they are) and exit\n"
	        "  --log-level L   error, warn, info (default) or debug (debug also logs each\n"
	        "                  request's method, path, status and time, and times each\n"
	        "                  step of every VMM in its sandbox's vmm.log)\n"
	        "  --dns-upstream ADDR  the IPv4 resolver sandboxes' DNS is forwarded to\n"
	        "                  (default: the first nameserver of /etc/resolv.conf)\n"
	        "  --public-domain D  sandbox urls by name: http://sbx-<id>-<port>.D/ (a wildcard\n"
	        "                  DNS name for huskd's address); default: by path, "
	        "<base>/p/<id>/\n"
	        "  --egress-rate N  bytes per second a sandbox may send (K, M, G: powers of 1000)\n"
	        "  --egress-allow LIST, --egress-deny LIST  comma-separated addresses, CIDRs and\n"
	        "                  names added to every networked sandbox's allow or deny list\n"
	        "  --apt-source LINE  the sources.list line apt uses for create's dependencies\n"
	        "                  (a mirror; default: the runtime's own sources)\n"
	        "API keys: HUSK_API_KEY=key[,key...], else STATE/api-keys (made on first "
	        "start).\n");
}

static bool loopback(const char *host)
{
	return !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strcmp(host, "localhost");
}

/* TLS given whole and loadable; plain HTTP off loopback only when asked for. 0 or 2. */
static int tls_options(struct options *o)
{
	char why[300];

	if (!o->http.tls_cert != !o->http.tls_key) {
		fprintf(stderr, "huskd: give both --tls-cert and --tls-key (PEM files)\n");
		return 2;
	}
	if (o->http.tls_cert &&
	    http_tls_check(o->http.tls_cert, o->http.tls_key, why, sizeof(why))) {
		fprintf(stderr, "huskd: TLS: %s\n", why);
		return 2;
	}
	if (!o->http.tls_cert && !o->plain_http && o->http.tcp_host &&
	    !loopback(o->http.tcp_host)) {
		fprintf(stderr,
		        "huskd: --listen %s is not a loopback address, and API keys would cross "
		        "the "
		        "network in the clear: give --tls-cert and --tls-key, or --plain-http if "
		        "something else encrypts that network\n",
		        o->http.tcp_host);
		return 2;
	}
	return 0;
}

/* --key-concurrency N, --key-rate N/DURATION into o; 0, or -EINVAL said on stderr. */
static int key_option(int c, const char *arg, struct options *o)
{
	char *end;
	unsigned long long n = strtoull(arg, &end, 10);

	if (c == 'K' && end != arg && !*end && n <= 1000000) {
		o->keys.max_inflight = (unsigned)n;
		return 0;
	}
	if (c == 'Z' && end != arg && !strcmp(arg, "0")) {
		o->keys.count = 0;
		return 0;
	}
	if (c == 'Z' && end != arg && *end == '/' && n > 0 && n <= 1000000000 &&
	    !parse_duration_ms(end + 1, &o->keys.per_ms) && o->keys.per_ms > 0) {
		o->keys.count = n;
		return 0;
	}
	if (c == 'K')
		fprintf(stderr, "huskd: --key-concurrency '%s': give a number, 0 for no limit\n",
		        arg);
	else
		fprintf(stderr,
		        "huskd: --key-rate '%s': give COUNT/DURATION, e.g. 6000/1m or 10/1s (0: "
		        "no limit)\n",
		        arg);
	return -EINVAL;
}

/* --egress-rate, --egress-allow, --egress-deny into o; 0, or -EINVAL said on stderr. */
static int net_option(int c, const char *arg, struct options *o)
{
	struct sbx_config *cfg = &o->sbx;
	int k = c == 'A' ? 0 : 1;
	struct net_list check = {0};
	char why[300], *copy, *save = NULL, *tok;
	const char **list = NULL;
	size_t n = 0;

	if (c == 'R') {
		char *end;
		unsigned long long v = strtoull(arg, &end, 10), mul = 1;

		mul = *end == 'K' ? 1000 : *end == 'M' ? 1000000 : *end == 'G' ? 1000000000 : 1;
		if (end == arg || (mul > 1 ? end[1] : end[0]) || v * mul < 1000) {
			fprintf(stderr,
			        "huskd: --egress-rate '%s': give bytes per second, 1000 or "
			        "more (e.g. 10M)\n",
			        arg);
			return -EINVAL;
		}
		cfg->egress_rate = v * mul;
		return 0;
	}
	free(o->egress_text[k]);
	free(o->egress[k]);
	o->egress[k] = NULL;
	o->egress_text[k] = copy = strdup(arg);
	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		const char **more = realloc(list, (n + 2) * sizeof(*list));

		if (!more || net_policy_add(&check, tok, why, sizeof(why))) {
			fprintf(stderr, "huskd: --egress-%s: %s\n", c == 'A' ? "allow" : "deny",
			        more ? why : "out of memory");
			o->egress[k] = more ? more : list;
			return -EINVAL;
		}
		o->egress[k] = list = more;
		list[n++] = tok;
		list[n] = NULL;
	}
	if (c == 'A')
		cfg->egress_allow = list;
	else
		cfg->egress_deny = list;
	return 0;
}

static int count(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v < 1 || v > 1000000)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* A number from 0 to max into *out: 0, or -1. */
static int up_to(const char *s, unsigned max, unsigned *out)
{
	unsigned v;

	if (!strcmp(s, "0")) {
		*out = 0;
		return 0;
	}
	if (count(s, &v) || v > max)
		return -1;
	*out = v;
	return 0;
}

/* 0, 1 (--help: exit 0), or 2 (bad usage, said on stderr). */
int huskd_options(int argc, char **argv, struct options *o)
{
	static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
	                                     {"listen", required_argument, NULL, 'l'},
	                                     {"unix", required_argument, NULL, 'u'},
	                                     {"state", required_argument, NULL, 's'},
	                                     {"images", required_argument, NULL, 'i'},
	                                     {"vmm", required_argument, NULL, 'v'},
	                                     {"public-url", required_argument, NULL, 'P'},
	                                     {"output-limit", required_argument, NULL, 'o'},
	                                     {"durable", no_argument, NULL, 'D'},
	                                     {"on-idle", required_argument, NULL, 'I'},
	                                     {"max-guest-memory", required_argument, NULL, 'M'},
	                                     {"log-level", required_argument, NULL, 'L'},
	                                     {"dns-upstream", required_argument, NULL, 'U'},
	                                     {"public-domain", required_argument, NULL, 'O'},
	                                     {"egress-rate", required_argument, NULL, 'R'},
	                                     {"egress-allow", required_argument, NULL, 'A'},
	                                     {"egress-deny", required_argument, NULL, 'Y'},
	                                     {"apt-source", required_argument, NULL, 'S'},
	                                     {"max-sandboxes", required_argument, NULL, 'n'},
	                                     {"max-vcpus", required_argument, NULL, 'c'},
	                                     {"min-free-disk", required_argument, NULL, 'F'},
	                                     {"disk-rate", required_argument, NULL, 'b'},
	                                     {"disk-iops", required_argument, NULL, 'q'},
	                                     {"import-max-bytes", required_argument, NULL, 'X'},
	                                     {"templates", required_argument, NULL, 'T'},
	                                     {"warm-pool", required_argument, NULL, 'w'},
	                                     {"resume-ahead", required_argument, NULL, 'a'},
	                                     {"stream-url-ttl", required_argument, NULL, 'W'},
	                                     {"key-concurrency", required_argument, NULL, 'K'},
	                                     {"key-rate", required_argument, NULL, 'Z'},
	                                     {"print-routes", no_argument, NULL, 'J'},
	                                     {"tls-cert", required_argument, NULL, 'C'},
	                                     {"tls-key", required_argument, NULL, 'k'},
	                                     {"plain-http", no_argument, NULL, 'H'},
	                                     {"seal", required_argument, NULL, 'E'},
	                                     {"kms-command", required_argument, NULL, 'G'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	enum huskd_log_level level;
	int64_t bytes;
	int c;

	o->sbx.templates = true;
	o->sbx.warm_pool = 1;
	o->sbx.resume_ahead = 4;
	o->sbx.seal = true;
	o->stream_ttl_ms = 24 * 3600 * 1000ull;
	o->keys = (struct tenant_limits){.max_inflight = 256, .count = 6000, .per_ms = 60000};
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'K':
		case 'Z':
			if (key_option(c, optarg, o))
				return 2;
			break;
		case 'W':
			if (parse_duration_ms(optarg, &o->stream_ttl_ms) ||
			    o->stream_ttl_ms < 1000) {
				fprintf(stderr,
				        "huskd: --stream-url-ttl '%s': give a duration of 1s or "
				        "more, "
				        "e.g. 24h or 30m\n",
				        optarg);
				return 2;
			}
			break;
		case 'T':
		case 'E':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "huskd: --%s '%s': give on or off\n",
				        c == 'T' ? "templates" : "seal", optarg);
				return 2;
			}
			*(c == 'T' ? &o->sbx.templates : &o->sbx.seal) = !strcmp(optarg, "on");
			break;
		case 'G':
			if (optarg[0] != '/' || access(optarg, X_OK)) {
				fprintf(stderr,
				        "huskd: --kms-command '%s': give the absolute path of an "
				        "executable\n",
				        optarg);
				return 2;
			}
			o->kms = optarg;
			break;
		case 'p':
			o->http.tcp_port = atoi(optarg);
			break;
		case 'l':
			o->http.tcp_host = optarg;
			break;
		case 'u':
			o->http.unix_path = optarg;
			break;
		case 's':
			o->state = strdup(optarg);
			break;
		case 'i':
			o->images = optarg;
			break;
		case 'v':
			o->vmm = strdup(optarg);
			break;
		case 'P':
			o->public_url = optarg;
			break;
		case 'D':
			o->durable = true;
			break;
		case 'I':
			if (strcmp(optarg, "pause") && strcmp(optarg, "terminate")) {
				fprintf(stderr, "huskd: --on-idle '%s': give pause or terminate\n",
				        optarg);
				return 2;
			}
			o->sbx.idle_pause = !strcmp(optarg, "pause");
			break;
		case 'o':
			if (store_parse_bytes(optarg, &bytes) || bytes < 1024) {
				fprintf(stderr,
				        "huskd: --output-limit '%s': give a size of at least 1Ki, "
				        "e.g. "
				        "64Mi\n",
				        optarg);
				return 2;
			}
			o->sbx.output_limit = (uint64_t)bytes;
			break;
		case 'U':
			if (inet_pton(AF_INET, optarg, &(struct in_addr){0}) != 1) {
				fprintf(stderr,
				        "huskd: --dns-upstream '%s': give an IPv4 address such as "
				        "192.0.2.53\n",
				        optarg);
				return 2;
			}
			o->sbx.dns_upstream = optarg;
			break;
		case 'M':
			if (store_parse_bytes(optarg, &bytes) || bytes < (256ll << 20)) {
				fprintf(stderr,
				        "huskd: --max-guest-memory '%s': give a size of at least "
				        "256Mi, "
				        "e.g. 16Gi\n",
				        optarg);
				return 2;
			}
			o->sbx.memory_mib = (uint64_t)bytes >> 20;
			break;
		case 'w':
		case 'a':
			if (up_to(optarg, c == 'w' ? 8 : 64,
			          c == 'w' ? &o->sbx.warm_pool : &o->sbx.resume_ahead)) {
				fprintf(stderr, "huskd: --%s '%s': give a number from 0 to %d\n",
				        c == 'w' ? "warm-pool" : "resume-ahead", optarg,
				        c == 'w' ? 8 : 64);
				return 2;
			}
			break;
		case 'n':
		case 'c':
			if (count(optarg, c == 'n' ? &o->sbx.max_sandboxes : &o->sbx.max_vcpus)) {
				fprintf(stderr,
				        "huskd: --max-%s '%s': give a number from 1 to 1000000\n",
				        c == 'n' ? "sandboxes" : "vcpus", optarg);
				return 2;
			}
			break;
		case 'F':
			if (store_parse_bytes(optarg, &bytes) || bytes < 0) {
				fprintf(stderr,
				        "huskd: --min-free-disk '%s': give a size, e.g. 2Gi\n",
				        optarg);
				return 2;
			}
			/* 0 asks for no reserve: one byte stands for it. */
			o->sbx.min_free_disk = bytes ? (uint64_t)bytes : 1;
			break;
		case 'X':
			if (store_parse_bytes(optarg, &bytes) || bytes < (1 << 20)) {
				fprintf(stderr,
				        "huskd: --import-max-bytes '%s': give a size, at least "
				        "1Mi, "
				        "e.g. 4Gi\n",
				        optarg);
				return 2;
			}
			o->sbx.import_max_bytes = (uint64_t)bytes;
			break;
		case 'b':
			if (store_parse_bytes(optarg, &bytes) || bytes < (1 << 20)) {
				fprintf(stderr,
				        "huskd: --disk-rate '%s': give bytes per second, at least "
				        "1Mi, e.g. 100Mi\n",
				        optarg);
				return 2;
			}
			o->sbx.disk_bps = (uint64_t)bytes;
			break;
		case 'q': {
			unsigned iops;

			if (count(optarg, &iops) || iops < 10) {
				fprintf(stderr,
				        "huskd: --disk-iops '%s': give a number from 10 to "
				        "1000000\n",
				        optarg);
				return 2;
			}
			o->sbx.disk_iops = iops;
			break;
		}
		case 'L':
			if (huskd_log_parse_level(optarg, &level)) {
				fprintf(stderr,
				        "huskd: --log-level '%s': give error, warn, info or "
				        "debug\n",
				        optarg);
				return 2;
			}
			huskd_log_set_level(level);
			break;
		case 'O':
			if (!*optarg || strpbrk(optarg, "/ ")) {
				fprintf(stderr,
				        "huskd: --public-domain '%s': give a name such as "
				        "sandboxes.example.com\n",
				        optarg);
				return 2;
			}
			o->public_domain = optarg;
			break;
		case 'S':
			if (!*optarg || strchr(optarg, '\n')) {
				fprintf(stderr,
				        "huskd: --apt-source: give one sources.list line, "
				        "e.g. 'deb http://deb.debian.org/debian trixie main'\n");
				return 2;
			}
			o->sbx.apt_source = optarg;
			break;
		case 'R':
		case 'A':
		case 'Y':
			if (net_option(c, optarg, o))
				return 2;
			break;
		case 'h':
			huskd_usage(stdout);
			return 1;
		case 'J':
			routes_print(stdout);
			return 1;
		case 'C':
			o->http.tls_cert = optarg;
			break;
		case 'k':
			o->http.tls_key = optarg;
			break;
		case 'H':
			o->plain_http = true;
			break;
		default:
			huskd_usage(stderr);
			return 2;
		}
	}
	return tls_options(o);
}
