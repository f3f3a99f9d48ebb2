// SPDX-License-Identifier: MIT
/*
 * Long-polls: GET /sandbox/status/{id}?waitForStatus= and GET
 * /sandbox/execution/{id}?wait=. A held request answers the moment what it
 * waits for happens (wait_kick), when its time is up, or never, if the
 * client leaves first.
 */
#include <stdlib.h>
#include <string.h>

#include "huskd.h"
#include "json_resp.h"

/* Clients give up after 300 s; answering before keeps their retry loop going. */
#define WAIT_CAP_MS 240000

struct waiter {
	struct huskd *d;
	struct http_req *r;
	uv_timer_t timer;
	char id[STORE_ID_LEN];
	char *set; /* statuses for a sandbox; NULL: an execution's terminal ones */
	struct waiter *next;
};

static bool in_set(const char *set, const char *status)
{
	size_t n = strlen(status);

	for (const char *p = set; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && !strncmp(p, status, n))
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

static bool exec_terminal(const char *status)
{
	return status && (!strcmp(status, "completed") || !strcmp(status, "failed") ||
	                  !strcmp(status, "timeout") || !strcmp(status, "cancelled"));
}

/* The answer for a sandbox status poll, or NULL if the sandbox is unknown. */
static json_t *status_answer(struct huskd *d, const char *id, const char **status)
{
	json_t *info = NULL, *out;

	if (store_sandbox_get(d->store, id, &info, NULL))
		return NULL;
	out = json_pack("{sssO}", "sandboxId", id, "status", json_object_get(info, "status"));
	if (json_object_get(info, "exitCode"))
		json_object_set(out, "exitCode", json_object_get(info, "exitCode"));
	*status = json_string_value(json_object_get(out, "status"));
	json_decref(info);
	return out;
}

static void waiter_freed(uv_handle_t *h)
{
	struct waiter *w = h->data;

	free(w->set);
	free(w);
}

static void waiter_unlink(struct waiter *w)
{
	struct waiter **pp = &w->d->waiters;

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
	const char *status = NULL;
	json_t *data = NULL;

	if (w->set) {
		data = status_answer(w->d, w->id, &status);
		if (data && !force && !in_set(w->set, status)) {
			json_decref(data);
			return false;
		}
	} else if (!store_execution_get(w->d->store, w->id, &data, NULL)) {
		status = json_string_value(json_object_get(data, "status"));
		if (!force && !exec_terminal(status)) {
			json_decref(data);
			return false;
		}
	}
	http_on_close(w->r, NULL, NULL);
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

static void wait_add(struct huskd *d, struct http_req *r, const char *id, const char *set,
                     uint64_t ms)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return;
	}
	w->d = d;
	w->r = r;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->set = set ? strdup(set) : NULL;
	uv_timer_init(d->loop, &w->timer);
	w->timer.data = w;
	w->next = d->waiters;
	d->waiters = w;
	if (waiter_try(w, ms == 0))
		return;
	uv_timer_start(&w->timer, waiter_timeout, ms > WAIT_CAP_MS ? WAIT_CAP_MS : ms, 0);
	http_on_close(r, waiter_gone, w);
}

void wait_status(struct huskd *d, struct http_req *r, const char *sandbox_id, const char *set,
                 uint64_t ms)
{
	wait_add(d, r, sandbox_id, set && *set ? set : "", set && *set ? ms : 0);
}

void wait_execution(struct huskd *d, struct http_req *r, const char *exec_id, uint64_t ms)
{
	wait_add(d, r, exec_id, NULL, ms);
}

void wait_kick(struct huskd *d, const char *id)
{
	struct waiter *w = d->waiters, *next;

	for (; w; w = next) {
		next = w->next;
		if (!strcmp(w->id, id))
			waiter_try(w, false);
	}
}

void wait_drop_all(struct huskd *d)
{
	while (d->waiters)
		waiter_try(d->waiters, true);
}
