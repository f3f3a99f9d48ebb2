// SPDX-License-Identifier: MIT
/*
 * Admission: whether the host takes one more sandbox. A create past the
 * budget is refused (SBX_FULL: 503) with a message naming the limit and
 * the flag that moves it, rather than started into the OOM killer or a full
 * disk where it would take a neighbour down with it.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sbx_int.h"

#define BOOT_FOOTPRINT_MIB 128
#define HOST_RESERVE_MIB 256

/* Budgets the host gives when no flag does: from the machine. */
static unsigned default_sandboxes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	/* Each running guest holds at least its boot footprint. */
	if (pages <= 0 || size <= 0)
		return 64;
	return (unsigned)((uint64_t)pages * (uint64_t)size / (BOOT_FOOTPRINT_MIB << 20));
}

static unsigned default_vcpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	/* Guests mostly wait: vCPUs are overcommitted, but not without bound. */
	return n > 0 ? (unsigned)n * 8 : 16;
}

static int admit_memory(struct sbx_mgr *m, uint64_t mem_mib, uint64_t promised, unsigned n,
                        struct sbx_err *err)
{
	unsigned long long kib = 0;
	char line[256];
	uint64_t need;
	FILE *f;

	if (m->cfg.memory_mib && promised + mem_mib > m->cfg.memory_mib)
		return sbx_fail(err, SBX_FULL, -ENOSPC,
		                "the host is full: its sandboxes hold %llu MiB of the %llu MiB of "
		                "guest memory it may hand out (huskd --max-guest-memory), and this "
		                "one asks for %llu MiB; end or pause some, or ask for less memory",
		                (unsigned long long)promised, (unsigned long long)m->cfg.memory_mib,
		                (unsigned long long)mem_mib);
	f = fopen("/proc/meminfo", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	need = HOST_RESERVE_MIB + (mem_mib < BOOT_FOOTPRINT_MIB ? mem_mib : BOOT_FOOTPRINT_MIB);
	if (kib && kib / 1024 < need)
		return sbx_fail(err, SBX_FULL, -ENOSPC,
		                "the host is out of memory for another sandbox: %llu MiB available "
		                "with %u sandboxes running, a new one needs about %llu MiB; end or "
		                "pause some and try again",
		                kib / 1024, n, (unsigned long long)need);
	return 0;
}

/* Bytes free for huskd under its state folder; as good as unlimited if it cannot tell. */
static uint64_t disk_free(struct sbx_mgr *m)
{
	struct statvfs fs;

	return statvfs(m->cfg.state, &fs) == 0 ? (uint64_t)fs.f_bavail * fs.f_frsize : UINT64_MAX;
}

int sbx_admit(struct sbx_mgr *m, uint64_t mem_mib, unsigned vcpus, struct sbx_err *err)
{
	unsigned n = 0, running = 0, vcpus_used = 0;
	unsigned max_sbx = m->cfg.max_sandboxes ? m->cfg.max_sandboxes : default_sandboxes();
	unsigned max_vcpus = m->cfg.max_vcpus ? m->cfg.max_vcpus : default_vcpus();
	uint64_t promised = 0, min_free = m->cfg.min_free_disk ? m->cfg.min_free_disk : 1ULL << 30;
	struct rlimit nofile;
	uint64_t avail;
	int rc;

	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next) {
		n++;
		/* Warm VMMs make way: a create takes one or they are few (huskd --warm-pool). */
		if (sb->state == SBX_PAUSED || sb->state == SBX_GONE || sb->pool.on)
			continue;
		running++;
		promised += sb->mem_mib;
		vcpus_used += sb->vcpus;
	}
	rc = admit_memory(m, mem_mib, promised, running, err);
	if (rc)
		return rc;
	if (running + 1 > max_sbx)
		return sbx_fail(err, SBX_FULL, -EAGAIN,
		                "the host is full: %u sandboxes run, the most it takes (huskd "
		                "--max-sandboxes %u); end or pause one and try again",
		                running, max_sbx);
	if (vcpus_used + vcpus > max_vcpus)
		return sbx_fail(err, SBX_FULL, -EAGAIN,
		                "the host is full: its sandboxes run %u vCPUs of the %u it gives "
		                "out (huskd --max-vcpus), and this one asks for %u; end or pause "
		                "some, or ask for less cpu",
		                vcpus_used, max_vcpus, vcpus);
	/* Layers, snapshots and streams grow on this file system; memory files are caches. */
	avail = disk_free(m);
	if (avail < min_free && sbx_memfile_evict(m))
		avail = disk_free(m);
	if (avail < min_free)
		return sbx_fail(err, SBX_FULL, -ENOSPC,
		                "the host's disk is full: %llu MiB free under %s, less than the "
		                "%llu MiB huskd keeps free (huskd --min-free-disk); delete "
		                "sandboxes or snapshots and try again",
		                (unsigned long long)(avail >> 20), m->cfg.state,
		                (unsigned long long)(min_free >> 20));
	/* Each sandbox holds a few descriptors in huskd (its session, listener, pidfd, streams). */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)(n + 1) * 8 + 64 > nofile.rlim_cur)
		return sbx_fail(err, SBX_FULL, -EMFILE,
		                "the host is full: %u sandboxes use huskd's %llu file descriptors "
		                "(raise huskd's RLIMIT_NOFILE to run more)",
		                n, (unsigned long long)nofile.rlim_cur);
	return 0;
}
