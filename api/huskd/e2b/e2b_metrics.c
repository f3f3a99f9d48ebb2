// SPDX-License-Identifier: MIT
/*
 * GET /sandboxes/{id}/metrics (API.md §11.1): one sample, now, from the
 * guest's agent (its info): memory and disk used and in all, and the CPU's
 * busy share since the previous sample huskd took of this sandbox (since the
 * guest booted, the first time). A paused sandbox has no samples: [] (it is
 * not resumed for them). huskd keeps no history, so start and end filter
 * only the sample taken now.
 */
#include <stdlib.h>
#include <string.h>

#include "e2b_int.h"
#include "e2b_routes.h"

/* Samples kept at most (one per sandbox; the oldest go first). */
#define CPU_SAMPLES_MAX 4096

struct metrics_call {
	struct routes *rt;
	struct http_req *r;
	char id[STORE_ID_LEN];
	long long start, end; /* seconds; 0: open */
};

/* The busy percentage since the sandbox's last sample, which busy/total then replace. */
static double cpu_share(struct e2b *e, const char *id, int64_t busy, int64_t total)
{
	struct e2b_cpu *c, **pp, **oldest = NULL;
	unsigned n = 0;
	double pct;

	for (pp = &e->cpu; (c = *pp); pp = &c->next, n++) {
		if (!strcmp(c->id, id))
			break;
		if (!oldest || c->at_ms < (*oldest)->at_ms)
			oldest = pp;
	}
	if (!c && n >= CPU_SAMPLES_MAX && oldest) {
		c = *oldest;
		*oldest = c->next;
		free(c);
		c = NULL;
	}
	pct = total > 0 ? 100.0 * (double)busy / (double)total : 0;
	if (c && total > c->total_ms && busy >= c->busy_ms)
		pct = 100.0 * (double)(busy - c->busy_ms) / (double)(total - c->total_ms);
	if (!c && (c = calloc(1, sizeof(*c)))) {
		snprintf(c->id, sizeof(c->id), "%s", id);
		c->next = e->cpu;
		e->cpu = c;
	}
	if (c) {
		c->busy_ms = busy;
		c->total_ms = total;
		c->at_ms = sbx_now_ms();
	}
	return pct;
}

static void sampled(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct metrics_call *mc = ctx;
	json_t *in = reply ? reply->data : NULL, *mem = json_object_get(in, "memory");
	json_t *disk = json_object_get(in, "disk"), *cpu = json_object_get(in, "cpu"), *out;
	json_int_t mt = json_integer_value(json_object_get(mem, "total_bytes"));
	json_int_t dt = json_integer_value(json_object_get(disk, "total_bytes"));
	char when[STORE_ISO_LEN];
	int64_t now = sbx_now_ms();

	if (err) {
		e2b_reply_error(mc->r, err);
		free(mc);
		return;
	}
	out = json_array();
	if ((!mc->start || now / 1000 >= mc->start) && (!mc->end || now / 1000 <= mc->end))
		json_array_append_new(
			out,
			json_pack("{sssfsOsIsIsIsIsI}", "timestamp", store_iso8601(now, when),
		                  "cpuUsedPct",
		                  cpu_share(mc->rt->e2b, mc->id,
		                            json_integer_value(json_object_get(cpu, "busy_ms")),
		                            json_integer_value(json_object_get(cpu, "total_ms"))),
		                  "cpuCount", json_object_get(in, "cpus"), "memUsed",
		                  mt - json_integer_value(json_object_get(mem, "free_bytes")),
		                  "memTotal", mt, "memCache", (json_int_t)0, "diskUsed",
		                  dt - json_integer_value(json_object_get(disk, "free_bytes")),
		                  "diskTotal", dt));
	http_respond_json(mc->r, 200, out);
	free(mc);
}

ROUTE(e2b_metrics)
{
	struct routes *rt = ctx;
	const char *st = e2b_live(rt, r, p[0], NULL);
	struct metrics_call *mc;

	if (!st)
		return;
	if (!strcmp(st, "paused")) {
		http_respond_json(r, 200, json_array());
		return;
	}
	mc = calloc(1, sizeof(*mc));
	if (!mc) {
		e2b_error(r, 503, "out of memory");
		return;
	}
	*mc = (struct metrics_call){
		.rt = rt, .r = r, .start = query_int(r, "start", 0), .end = query_int(r, "end", 0)};
	snprintf(mc->id, sizeof(mc->id), "%s", p[0]);
	sbx_info(rt->m, p[0], sampled, mc);
}
