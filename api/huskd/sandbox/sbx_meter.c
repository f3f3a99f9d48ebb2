// SPDX-License-Identifier: MIT
/*
 * What a sandbox consumed (API.md §5.1 cpuTimeMs, memoryByteSec), from its
 * cgroup: cpu.stat's usage_usec is the cgroup's own running total of CPU
 * time (its VMMs', across pauses and huskd restarts: the cgroup lives as
 * long as the sandbox); memory.current is sampled - at every VMM start and
 * end, whenever the sandbox is looked at, and every METER_TICK_MS while a
 * VMM runs - and integrated over time (the mean of two samples times the
 * time between). The figures go into the sandbox's record at each VMM end
 * and tick, so the record holds them after the sandbox has ended. Without
 * cgroups there are no figures (the fields are left out, not zero).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_int.h"

#define METER_TICK_MS 30000

/* A number from a cgroup file: the whole file, or the value of line "key N"; -1 if none. */
static int64_t cg_read(const char *dir, const char *file, const char *key)
{
	char path[4200], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!key)
		return strtoll(buf, NULL, 10);
	for (p = buf; p; p = strchr(p, '\n')) {
		p += *p == '\n';
		if (!strncmp(p, key, strlen(key)) && p[strlen(key)] == ' ')
			return strtoll(p + strlen(key) + 1, NULL, 10);
	}
	return -1;
}

/*
 * Brings sb's figures up to now. ended: its VMM has just gone (its memory is
 * freed already): the last sample held until now, and nothing from here on.
 */
static void sample(struct sandbox *sb, int64_t now, bool ended)
{
	int64_t mem, cpu;

	if (!sb->cgroup)
		return;
	mem = ended     ? (int64_t)sb->meter_mem
	      : sb->vmm ? cg_read(sb->cgroup, "memory.current", NULL)
	                : 0;
	if (mem < 0)
		mem = 0;
	if (sb->meter_at && now > sb->meter_at)
		sb->mem_byte_sec += (uint64_t)(((unsigned __int128)(sb->meter_mem + (uint64_t)mem) *
		                                (uint64_t)(now - sb->meter_at)) /
		                               2000);
	sb->meter_mem = ended ? 0 : (uint64_t)mem;
	sb->meter_at = now;
	cpu = cg_read(sb->cgroup, "cpu.stat", "usage_usec");
	/* A cgroup made again (it was removed under us) starts at 0: never go back. */
	if (cpu >= 0 && (uint64_t)cpu / 1000 > sb->cpu_ms)
		sb->cpu_ms = (uint64_t)cpu / 1000;
	sb->metered = true;
}

static void record(struct sandbox *sb)
{
	json_t *pub, *priv;

	if (!sb->metered || !sb->stored)
		return;
	pub = json_pack("{sIsI}", "cpuTimeMs", (json_int_t)sb->cpu_ms, "memoryByteSec",
	                (json_int_t)sb->mem_byte_sec);
	priv = json_pack("{sIsI}", "cpuMs", (json_int_t)sb->cpu_ms, "memByteSec",
	                 (json_int_t)sb->mem_byte_sec);
	if (!pub || !priv || store_sandbox_update(sb->m->store, sb->id, pub, priv, NULL))
		log_warn(sb->id, "cannot record its cpu and memory figures");
	json_decref(pub);
	json_decref(priv);
}

void sbx_meter_vmm_started(struct sandbox *sb)
{
	sample(sb, sbx_now_ms(), false);
}

void sbx_meter_vmm_ended(struct sandbox *sb)
{
	sample(sb, sbx_now_ms(), true);
	record(sb);
}

void sbx_meter_flush(struct sbx_mgr *m)
{
	int64_t now = sbx_now_ms();

	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		if (sb->cgroup) {
			sample(sb, now, false);
			record(sb);
		}
}

void sbx_meter_restore(struct sandbox *sb, json_t *priv)
{
	sb->cpu_ms = (uint64_t)json_integer_value(json_object_get(priv, "cpuMs"));
	sb->mem_byte_sec = (uint64_t)json_integer_value(json_object_get(priv, "memByteSec"));
}

void sbx_meter_fields(struct sandbox *sb, json_t *info)
{
	sample(sb, sbx_now_ms(), false);
	if (!sb->metered)
		return;
	json_object_set_new(info, "cpuTimeMs", json_integer((json_int_t)sb->cpu_ms));
	json_object_set_new(info, "memoryByteSec", json_integer((json_int_t)sb->mem_byte_sec));
}

/* Every running VMM's figures into its record (a paused or ended one's are there already). */
static void tick(uv_timer_t *t)
{
	struct sbx_mgr *m = t->data;
	int64_t now = sbx_now_ms();

	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		if (sb->vmm && sb->cgroup) {
			sample(sb, now, false);
			record(sb);
		}
}

int sbx_meter_start(struct sbx_mgr *m)
{
	if (!m->cfg.cgroup_dir)
		return 0;
	m->meter = calloc(1, sizeof(*m->meter));
	if (!m->meter || uv_timer_init(m->loop, m->meter)) {
		free(m->meter);
		m->meter = NULL;
		return -ENOMEM;
	}
	m->meter->data = m;
	uv_timer_start(m->meter, tick, METER_TICK_MS, METER_TICK_MS);
	uv_unref((uv_handle_t *)m->meter);
	return 0;
}

static void meter_closed(uv_handle_t *h)
{
	free(h);
}

void sbx_meter_stop(struct sbx_mgr *m)
{
	if (!m->meter)
		return;
	/* The VMMs run on, to be adopted: their figures so far go into their records. */
	tick(m->meter);
	uv_timer_stop(m->meter);
	uv_close((uv_handle_t *)m->meter, meter_closed);
	m->meter = NULL;
}
