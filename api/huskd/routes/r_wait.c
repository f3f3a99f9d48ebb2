// SPDX-License-Identifier: MIT
/*
 * Long-polls: GET /sandbox/status/{id}?waitForStatus= and GET
 * /sandbox/execution/{id}?wait=. A held request answers the moment what it
 * waits for happens (the manager tells wait_kick), when its time is up, or
 * never, if the client leaves first.
 */
#include <stdlib.h>
#include <string.h>

#include "r_int.h"

/* Clients give up after 300 s; answering before keeps their retry loop going. */
#define WAIT_CAP_MS 240000

struct waiter {
	struct routes *rt;
	struct http_req *r;
	uv_timer_t timer;
	char id[64];
	char *set; /* statuses for a sandbox; NULL: an execution's terminal ones */
	struct waiter *next;
};

static bool in_set(const char *set, const char *status)
{
	size_t n = status ? strlen(status) : 0;

	if (!status)
		return false;
	for (const char *p = set; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && !strncmp(p, status, n))
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

static void waiter_freed(uv_handle_t *h)
{
	struct waiter *w = h->data;

	free(w->set);
	free(w);
}

static void waiter_unlink(struct waiter *w)
{
	struct waiter **pp = &w->rt->waiters;

	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, waiter_freed);
}

/* Answers w if force or its condition holds; returns whether it answered. */
static bool waiter_try(struct waiter *w, bool force)
{
	json_t *data = NULL;
	bool done = false;

	if (w->set) {
		if (sbx_status(w->rt->m, w->id, &data) == 0)
			done = in_set(w->set, json_string_value(json_object_get(data, "status")));
	} else if (sbx_execution_get(w->rt->m, w->id, &data, &done)) {
		data = NULL;
	}
	if (data && !force && !done) {
		json_decref(data);
		return false;
	}
	http_on_close(w->r, NULL, NULL);
	if (data && !w->set)
		stream_sign(w->rt, data);
	if (data)
		api_ok(w->r, 200, data);
	else
		api_error(w->r, 404, w->set ? "SANDBOX_NOT_FOUND" : "EXECUTION_NOT_FOUND",
		          "%s not found", w->id);
	waiter_unlink(w);
	return true;
}

static void waiter_timeout(uv_timer_t *t)
{
	waiter_try(t->data, true);
}

static void waiter_gone(struct http_req *r, void *arg)
{
	http_respond(r, 499, "text/plain", "", 0); /* frees r: the client is gone */
	waiter_unlink(arg);
}

static void wait_add(struct routes *rt, struct http_req *r, const char *id, const char *set,
                     uint64_t ms)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	w->rt = rt;
	w->r = r;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->set = set ? strdup(set) : NULL;
	uv_timer_init(rt->cfg.loop, &w->timer);
	w->timer.data = w;
	w->next = rt->waiters;
	rt->waiters = w;
	if (waiter_try(w, ms == 0))
		return;
	uv_timer_start(&w->timer, waiter_timeout, ms > WAIT_CAP_MS ? WAIT_CAP_MS : ms, 0);
	http_on_close(r, waiter_gone, w);
}

void wait_status(struct routes *rt, struct http_req *r, const char *sandbox_id, const char *set,
                 uint64_t ms)
{
	wait_add(rt, r, sandbox_id, set && *set ? set : "", set && *set ? ms : 0);
}

void wait_execution(struct routes *rt, struct http_req *r, const char *exec_id, uint64_t ms)
{
	wait_add(rt, r, exec_id, NULL, ms);
}

void wait_kick(void *arg, const char *id)
{
	struct routes *rt = arg;
	struct waiter *w = rt->waiters, *next;

	for (; w; w = next) {
		next = w->next;
		if (!strcmp(w->id, id))
			waiter_try(w, false);
	}
}

void wait_drop_all(struct routes *rt)
{
	while (rt->waiters)
		waiter_try(rt->waiters, true);
}
