// SPDX-License-Identifier: MIT
/*
 * Build-time: every thread role's seccomp program (confine_rules.c), built
 * by libseccomp and printed as C (build/gen/confine_bpf.h) for confine.c to
 * load as it is. Building them in the VMM took ~20 ms nested for its first
 * thread and ~3 ms for each one after, on every start, and ~300 KiB of heap.
 * Each role twice over: killing (the default) and logging (--seccomp log);
 * and all of it again with what a sanitized build's runtime needs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "confine_rules.h"

/* One program, as a C array named confine_bpf_S_M_R; its length, or -errno. */
static long print_program(int sanitized, int logging, int role)
{
	scmp_filter_ctx ctx = seccomp_init(logging ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	FILE *f = tmpfile();
	unsigned char ins[8];
	long n = 0;
	int ret = ctx && f ? confine_rules_add(ctx, role, sanitized) : -ENOMEM;

	if (!ret)
		ret = seccomp_export_bpf(ctx, fileno(f));
	if (!ret && fseek(f, 0, SEEK_SET))
		ret = -errno;
	if (!ret) {
		printf("static const struct sock_filter confine_bpf_%d_%d_%d[] = {\n", sanitized,
		       logging, role);
		/* struct sock_filter: u16 code, u8 jt, u8 jf, u32 k, in this machine's order. */
		while (fread(ins, sizeof(ins), 1, f) == 1) {
			unsigned short code;
			unsigned int k;

			memcpy(&code, ins, 2);
			memcpy(&k, ins + 4, 4);
			printf("\t{%#x, %u, %u, %#x},\n", code, ins[2], ins[3], k);
			n++;
		}
		printf("};\n");
	}
	if (f)
		fclose(f);
	if (ctx)
		seccomp_release(ctx);
	return ret ? ret : n;
}

int main(void)
{
	long len[2][2][ROLE_COUNT];

	printf("/* Made by vmm/confine/confine_gen.c from confine_rules.c: do not edit. */\n");
	for (int s = 0; s < 2; s++)
		for (int l = 0; l < 2; l++)
			for (int r = 0; r < ROLE_COUNT; r++) {
				len[s][l][r] = print_program(s, l, r);
				if (len[s][l][r] <= 0) {
					fprintf(stderr, "confine_gen: role %d: %s\n", r,
					        strerror(len[s][l][r] ? (int)-len[s][l][r]
					                              : EINVAL));
					return 1;
				}
			}
	/* [sanitized][logging][role] */
	printf("static const struct sock_fprog confine_bpf[2][2][%d] = {\n", ROLE_COUNT);
	for (int s = 0; s < 2; s++) {
		printf("\t{\n");
		for (int l = 0; l < 2; l++) {
			printf("\t\t{\n");
			for (int r = 0; r < ROLE_COUNT; r++)
				printf("\t\t\t{%ld, (struct sock_filter *)confine_bpf_%d_%d_%d},\n",
				       len[s][l][r], s, l, r);
			printf("\t\t},\n");
		}
		printf("\t},\n");
	}
	printf("};\n");
	return fflush(stdout) ? 1 : 0;
}
