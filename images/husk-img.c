// SPDX-License-Identifier: MIT
/*
 * husk-img: create, inspect, check, commit, rebase and convert disk images
 * (husk's qcow2 subset and raw). Exit status: 0 on success, 1 on failure,
 * 2 for bad usage; check exits 2 for corruption and 3 for leaks only, as
 * qemu-img does.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "img.h"

static const char usage_text[] =
	"usage: husk-img COMMAND ...\n"
	"  create [-b BACKING [-F raw|qcow2]] [-c CLUSTER_SIZE] [-K KEYFILE] FILE [SIZE]\n"
	"        new qcow2 image; SIZE takes K, M, G, T suffixes (powers of 1024) and may be\n"
	"        left out with -b (the backing file's size); a relative BACKING is relative\n"
	"        to FILE's directory; -K encrypts it (LUKS, as qemu-img's encrypt.format=luks)\n"
	"        with the first line of KEYFILE as its passphrase\n"
	"  info [--json] FILE\n"
	"        format, sizes, backing file and chain\n"
	"  check FILE\n"
	"        recount references; exit 0 clean, 2 corrupt, 3 leaked clusters only\n"
	"  commit FILE\n"
	"        write FILE's own data into its backing file (which must be writable)\n"
	"  rebase [-u] -b NEW_BACKING [-F raw|qcow2] FILE\n"
	"        change the backing file, copying what differs into FILE; -u only rewrites\n"
	"        the header; -b \"\" removes the backing file\n"
	"  convert [-f raw|qcow2] -O raw|qcow2 [-c CLUSTER_SIZE] IN OUT\n"
	"        copy what IN reads (through its chain) to a new image OUT\n"
	"Encrypted images open with HUSK_IMG_KEYS=\"IMAGE=KEYFILE ...\" (a key per image).\n";

static int usage(const char *fmt, ...)
{
	va_list ap;

	fputs("husk-img: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n", stderr);
	fputs(usage_text, stderr);
	return 2;
}

static int fail(const char *msg)
{
	fprintf(stderr, "husk-img: %s\n", msg);
	return 1;
}

/* "10G", "512", "64K": bytes, powers of 1024. */
static int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTP";
	unsigned long long v;
	const char *u;
	char *end;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end) {
		u = strchr(units, *end & ~0x20);
		if (!u || !*u || (end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B")))
			return -EINVAL;
		for (long i = 0; i <= u - units; i++) {
			if (v > UINT64_MAX / 1024)
				return -ERANGE;
			v *= 1024;
		}
	}
	*out = v;
	return 0;
}

static int parse_cluster(const char *s, unsigned *bits)
{
	uint64_t v;

	if (parse_size(s, &v))
		return -EINVAL;
	for (unsigned b = 9; b <= 21; b++) {
		if (v == 1ull << b) {
			*bits = b;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_fmt(const char *s, enum img_format *fmt)
{
	if (!strcmp(s, "qcow2"))
		*fmt = IMG_FMT_QCOW2;
	else if (!strcmp(s, "raw"))
		*fmt = IMG_FMT_RAW;
	else
		return -EINVAL;
	return 0;
}

static const char *fmt_name(enum img_format f)
{
	return f == IMG_FMT_QCOW2 ? "qcow2" : f == IMG_FMT_RAW ? "raw" : "unknown";
}

/* A passphrase from a file (its first line), or NULL; *len its length. */
static char *read_pass(const char *file, size_t *len)
{
	char buf[4096];
	FILE *f = fopen(file, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	*len = strlen(buf);
	return f && *len ? strdup(buf) : NULL;
}

/*
 * Keys of encrypted images, from HUSK_IMG_KEYS="IMAGE=KEYFILE ...": each
 * image's passphrase is the first line of its KEYFILE. NULL when unset.
 */
static const struct img_secrets *env_secrets(void)
{
	static struct img_secret v[16];
	static struct img_secrets all = {.v = v};
	static char *text;
	const char *env = getenv("HUSK_IMG_KEYS");
	char *save = NULL;

	if (!env || text)
		return text ? &all : NULL;
	text = strdup(env);
	for (char *t = text ? strtok_r(text, " ", &save) : NULL; t && all.n < 16;
	     t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');

		if (!eq)
			continue;
		*eq = '\0';
		v[all.n].path = t;
		v[all.n].pass = read_pass(eq + 1, &v[all.n].len);
		if (!v[all.n].pass)
			fprintf(stderr, "husk-img: HUSK_IMG_KEYS: no key in %s\n", eq + 1);
		else
			all.n++;
	}
	return &all;
}

/* A file the user names: qcow2 if it says so, else raw. Backing files never get this guess. */
static int open_quiet(struct img **img, const char *path, enum img_format fmt, unsigned flags,
                      char *err, size_t errlen)
{
	if (fmt == IMG_FMT_AUTO) {
		FILE *f = fopen(path, "rb");
		unsigned char m[4] = {0};

		if (!f) {
			snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
			return -errno;
		}
		fmt = fread(m, 1, 4, f) == 4 && !memcmp(m, "QFI\xfb", 4) ? IMG_FMT_QCOW2
		                                                         : IMG_FMT_RAW;
		fclose(f);
	}
	return img_open_secrets(img, path, fmt, flags, env_secrets(), err, errlen);
}

static int open_any(struct img **img, const char *path, enum img_format fmt, unsigned flags)
{
	char err[512];
	int rc = open_quiet(img, path, fmt, flags, err, sizeof(err));

	if (rc)
		fail(err);
	return rc;
}

static int cmd_create(int argc, char **argv)
{
	struct img_create_opts o = {0};
	char err[512];
	int c;

	while ((c = getopt(argc, argv, "b:F:c:K:")) != -1) {
		switch (c) {
		case 'b':
			o.backing = optarg;
			break;
		case 'K':
			o.pass = read_pass(optarg, &o.pass_len);
			if (!o.pass)
				return usage("create: no key in '%s' (its first line is the key)",
				             optarg);
			break;
		case 'F':
			if (parse_fmt(optarg, &o.backing_fmt))
				return usage("create: -F takes raw or qcow2, not '%s'", optarg);
			break;
		case 'c':
			if (parse_cluster(optarg, &o.cluster_bits))
				return usage("create: cluster size '%s' is not a power of two from "
				             "512 to 2M",
				             optarg);
			break;
		default:
			return usage("create: unknown option");
		}
	}
	if (o.backing_fmt && !o.backing)
		return usage("create: -F needs -b");
	if (optind >= argc || argc - optind > 2)
		return usage("create: give FILE and SIZE (SIZE may be left out with -b)");
	if (argc - optind == 2 && parse_size(argv[optind + 1], &o.size))
		return usage("create: bad size '%s' (examples: 10G, 512M, 1048576)",
		             argv[optind + 1]);
	if (argc - optind == 1 && !o.backing)
		return usage("create: give the SIZE of the disk (or a backing file with -b)");
	if (argc - optind == 2 && !o.size)
		return usage("create: the size must be above zero");
	o.secrets = env_secrets();
	c = img_create(argv[optind], &o, err, sizeof(err));
	free((void *)o.pass);
	if (c)
		return fail(err);
	return 0;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void human(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, "%.3g %s", d, units[u]);
}

/* The backing file's format: as opened, else as recorded; NULL if neither says. */
static const char *backing_fmt(const struct img *img)
{
	if (img_backing(img))
		return fmt_name(img_format(img_backing(img)));
	if (img_backing_format(img) == IMG_FMT_AUTO)
		return NULL;
	return fmt_name(img_backing_format(img));
}

/* Bytes of guest data the image's own layer holds. */
static int layer_data(struct img *img, uint64_t *bytes)
{
	uint64_t run;

	*bytes = 0;
	if (img_format(img) == IMG_FMT_RAW) {
		/* Every byte of a raw file is its own; what is allocated is what the host stores.
		 */
		*bytes = img_allocated(img);
		return 0;
	}
	for (uint64_t off = 0; off < img_size(img); off += run) {
		int a = img_map(img, off, &run);

		if (a < 0)
			return a;
		if (a == 1)
			*bytes += run;
	}
	return 0;
}

static int cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'}, {0}};
	int json = 0, c, rc;
	uint64_t data;
	struct img *img;
	char a[32], b[32], err[512];

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c != 'j')
			return usage("info: unknown option");
		json = 1;
	}
	if (argc - optind != 1)
		return usage("info: give one FILE");
	/* Like qemu-img, say what can be said of an image whose backing file is missing. */
	if (open_quiet(&img, argv[optind], IMG_FMT_AUTO, IMG_RDONLY, err, sizeof(err))) {
		if (open_any(&img, argv[optind], IMG_FMT_AUTO, IMG_RDONLY | IMG_NOBACKING))
			return 1;
		fprintf(stderr, "husk-img: warning: %s\n", err);
	}
	rc = layer_data(img, &data);
	if (rc) {
		fail(img_error(img));
		img_close(img);
		return 1;
	}
	if (json) {
		printf("{\n    \"filename\": ");
		json_str(img_path(img));
		printf(",\n    \"format\": \"%s\",\n    \"virtual-size\": %" PRIu64
		       ",\n    \"actual-size\": %" PRIu64 ",\n    \"allocated-bytes\": %" PRIu64,
		       fmt_name(img_format(img)), img_size(img), img_allocated(img), data);
		if (img_cluster_size(img))
			printf(",\n    \"cluster-size\": %" PRIu64, img_cluster_size(img));
		if (img_encrypted(img))
			printf(",\n    \"encrypted\": \"luks\"");
		if (img_backing_name(img)) {
			printf(",\n    \"backing-filename\": ");
			json_str(img_backing_name(img));
			if (img_backing(img)) {
				printf(",\n    \"full-backing-filename\": ");
				json_str(img_path(img_backing(img)));
			}
			if (backing_fmt(img))
				printf(",\n    \"backing-filename-format\": \"%s\"",
				       backing_fmt(img));
		}
		printf(",\n    \"chain\": [");
		for (struct img *i = img; i; i = img_backing(i)) {
			printf("%s{\"filename\": ", i == img ? "" : ", ");
			json_str(img_path(i));
			printf(", \"format\": \"%s\", \"virtual-size\": %" PRIu64 "}",
			       fmt_name(img_format(i)), img_size(i));
		}
		printf("]\n}\n");
	} else {
		human(a, sizeof(a), img_size(img));
		human(b, sizeof(b), img_allocated(img));
		printf("image: %s\nfile format: %s\nvirtual size: %s (%" PRIu64
		       " bytes)\ndisk size: %s\n",
		       img_path(img), fmt_name(img_format(img)), a, img_size(img), b);
		if (img_cluster_size(img))
			printf("cluster_size: %" PRIu64 "\n", img_cluster_size(img));
		if (img_encrypted(img))
			printf("encrypted: luks (aes-xts-plain64)\n");
		if (img_backing_name(img))
			printf("backing file: %s (actual path: %s)\nbacking file format: %s\n",
			       img_backing_name(img),
			       img_backing(img) ? img_path(img_backing(img)) : "not opened",
			       backing_fmt(img) ? backing_fmt(img) : "not recorded");
		human(a, sizeof(a), data);
		printf("data in this layer: %s (%" PRIu64 " bytes)\nchain:", a, data);
		for (struct img *i = img; i; i = img_backing(i))
			printf("%s %s (%s)", i == img ? "" : " ->", img_path(i),
			       fmt_name(img_format(i)));
		printf("\n");
	}
	img_close(img);
	return 0;
}

static void print_problem(void *opaque, const char *msg)
{
	(void)opaque;
	printf("%s\n", msg);
}

static int cmd_check(int argc, char **argv)
{
	struct img_check_result r;
	struct img *img;
	char err[512];
	int rc;

	if (getopt(argc, argv, "") != -1)
		return usage("check: unknown option");
	if (argc - optind != 1)
		return usage("check: give one FILE");
	if (open_any(&img, argv[optind], IMG_FMT_AUTO, IMG_RDONLY | IMG_NOBACKING))
		return 1;
	rc = img_check(img, &r, print_problem, NULL, err, sizeof(err));
	img_close(img);
	if (rc)
		return fail(err);
	if (r.corruptions)
		printf("\n%" PRIu64 " errors were found on the image.\nData may be corrupted, or "
		       "further writes to the image may corrupt it.\n",
		       r.corruptions);
	if (r.leaks)
		printf("\n%" PRIu64
		       " leaked clusters were found on the image.\nThis means waste of "
		       "disk space, but no harm to data.\n",
		       r.leaks);
	if (!r.corruptions && !r.leaks)
		printf("No errors were found on the image.\n");
	printf("%" PRIu64 " data clusters allocated\nImage end offset: %" PRIu64 "\n",
	       r.data_clusters, r.end_offset);
	return r.corruptions ? 2 : r.leaks ? 3 : 0;
}

static int cmd_commit(int argc, char **argv)
{
	struct img *img;
	char err[512];
	int rc;

	if (getopt(argc, argv, "") != -1)
		return usage("commit: unknown option");
	if (argc - optind != 1)
		return usage("commit: give one FILE");
	if (open_any(&img, argv[optind], IMG_FMT_AUTO, IMG_RDONLY))
		return 1;
	rc = img_commit(img, err, sizeof(err));
	img_close(img);
	if (rc)
		return fail(err);
	printf("Image committed.\n");
	return 0;
}

static int cmd_rebase(int argc, char **argv)
{
	enum img_format fmt = IMG_FMT_AUTO;
	const char *backing = NULL;
	int unsafe = 0, c, rc;
	struct img *img;
	char err[512];

	while ((c = getopt(argc, argv, "ub:F:")) != -1) {
		switch (c) {
		case 'u':
			unsafe = 1;
			break;
		case 'b':
			backing = optarg;
			break;
		case 'F':
			if (parse_fmt(optarg, &fmt))
				return usage("rebase: -F takes raw or qcow2, not '%s'", optarg);
			break;
		default:
			return usage("rebase: unknown option");
		}
	}
	if (!backing)
		return usage("rebase: give the new backing file with -b (-b \"\" for none)");
	if (argc - optind != 1)
		return usage("rebase: give one FILE");
	/* -u must work when the old backing file is gone: that is what it is for. */
	if (open_any(&img, argv[optind], IMG_FMT_QCOW2, unsafe ? IMG_NOBACKING : 0))
		return 1;
	rc = img_rebase_secrets(img, backing, fmt, unsafe, env_secrets(), err, sizeof(err));
	if (rc) {
		img_close(img);
		return fail(err);
	}
	rc = img_close(img);
	if (rc) {
		fprintf(stderr, "husk-img: %s: %s\n", argv[optind], strerror(-rc));
		return 1;
	}
	return 0;
}

static int cmd_convert(int argc, char **argv)
{
	enum img_format in_fmt = IMG_FMT_AUTO, out_fmt = IMG_FMT_AUTO;
	unsigned bits = 0;
	struct img *img;
	char err[512];
	int c, rc;

	while ((c = getopt(argc, argv, "f:O:c:")) != -1) {
		switch (c) {
		case 'f':
			if (parse_fmt(optarg, &in_fmt))
				return usage("convert: -f takes raw or qcow2, not '%s'", optarg);
			break;
		case 'O':
			if (parse_fmt(optarg, &out_fmt))
				return usage("convert: -O takes raw or qcow2, not '%s'", optarg);
			break;
		case 'c':
			if (parse_cluster(optarg, &bits))
				return usage(
					"convert: cluster size '%s' is not a power of two from "
					"512 to 2M",
					optarg);
			break;
		default:
			return usage("convert: unknown option");
		}
	}
	if (out_fmt == IMG_FMT_AUTO)
		return usage("convert: give the output format with -O raw or -O qcow2");
	if (bits && out_fmt != IMG_FMT_QCOW2)
		return usage("convert: -c applies to qcow2 output only");
	if (argc - optind != 2)
		return usage("convert: give IN and OUT");
	if (open_any(&img, argv[optind], in_fmt, IMG_RDONLY))
		return 1;
	rc = img_convert(img, argv[optind + 1], out_fmt, bits, err, sizeof(err));
	img_close(img);
	return rc ? fail(err) : 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{"create", cmd_create}, {"info", cmd_info},     {"check", cmd_check},
		{"commit", cmd_commit}, {"rebase", cmd_rebase}, {"convert", cmd_convert},
	};

	if (argc < 2)
		return usage("give a command");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	return usage("unknown command '%s'", argv[1]);
}
