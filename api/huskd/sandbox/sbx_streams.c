// SPDX-License-Identifier: MIT
/*
 * User streams (API.md §6.2): POST /streams makes an empty byte stream of
 * the caller's org. One writer fills and closes it - a PUT's body as it
 * arrives, or a command whose stream.stdout / stream.stderr names it - and
 * it is read any number of times, live and after: GET /streams/ID, or a
 * command's stdin (stream.stdin). Each is an outbuf file under
 * state/streams, as an execution's output is; which org owns it and whether
 * it has had its writer is kept here, for as long as huskd runs and the
 * file's age allows (the reaper removes old files).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbuf.h"
#include "sbx_int.h"

/* Streams known at once; past it the oldest ended one makes room. */
#define STREAMS_MAX 4096
#define NAME_MAX_LEN 128
/* Without stream_max_age: as the reaper's default. */
#define AGE_DEFAULT_S (7 * 24 * 3600)

struct sbx_ustream {
	struct sbx_ustream *next;
	char id[STORE_ID_LEN];
	char org[STORE_ID_LEN];
	char name[NAME_MAX_LEN];
	struct outbuf *ob; /* the registry's reference */
	bool taken;        /* it has had its writer */
	int64_t made_ms;
};

static struct sbx_ustream *find(struct sbx_mgr *m, const char *id)
{
	for (struct sbx_ustream *u = m->ustreams; u; u = u->next)
		if (!strcmp(u->id, id))
			return u;
	return NULL;
}

/* org's stream id, or NULL with err filled (another org's is not there for it). */
static struct sbx_ustream *owned(struct sbx_mgr *m, const char *org, const char *id,
                                 struct sbx_err *err)
{
	struct sbx_ustream *u = find(m, id);

	if (u && org && !strcmp(u->org, org))
		return u;
	sbx_fail(err, SBX_NOT_FOUND, -ENOENT,
	         "stream %s not found (POST /streams makes one; a stream lasts while huskd runs)",
	         id);
	return NULL;
}

static void drop(struct sbx_mgr *m, struct sbx_ustream **pp)
{
	struct sbx_ustream *u = *pp;

	*pp = u->next;
	m->nustreams--;
	outbuf_unref(u->ob);
	free(u);
}

/* Forgets streams past their age; at the cap, the oldest ended one too. */
static void prune(struct sbx_mgr *m, int64_t now_ms)
{
	uint64_t age = m->cfg.stream_max_age ? m->cfg.stream_max_age : AGE_DEFAULT_S;
	struct sbx_ustream **pp = &m->ustreams, **oldest = NULL;

	while (*pp) {
		if (now_ms - (*pp)->made_ms > (int64_t)age * 1000) {
			drop(m, pp);
			continue;
		}
		/* Newest first: the last ended one seen is the oldest. */
		if (outbuf_closed((*pp)->ob))
			oldest = pp;
		pp = &(*pp)->next;
	}
	if (m->nustreams >= STREAMS_MAX && oldest)
		drop(m, oldest);
}

static int check_name(const char *name, struct sbx_err *err)
{
	if (strlen(name) >= NAME_MAX_LEN)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "name must be under %d characters",
		                NAME_MAX_LEN);
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
			                "name must be printable text (no control characters)");
	return 0;
}

int sbx_streams_create(struct sbx_mgr *m, const char *org, const char *name, json_t **out,
                       struct sbx_err *err)
{
	struct sbx_ustream *u;
	int rc;

	*out = NULL;
	if (!name)
		name = "";
	rc = check_name(name, err);
	if (rc)
		return rc;
	prune(m, sbx_now_ms());
	if (m->nustreams >= STREAMS_MAX)
		return sbx_fail(err, SBX_UNAVAILABLE, -EAGAIN,
		                "huskd holds %d streams not yet ended, its most: write (PUT) or "
		                "end the ones made before",
		                STREAMS_MAX);
	u = calloc(1, sizeof(*u));
	if (!u || store_new_id("str_", u->id)) {
		free(u);
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	}
	snprintf(u->org, sizeof(u->org), "%s", org);
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->made_ms = sbx_now_ms();
	rc = outbuf_create(m->streams, u->id, m->cfg.output_limit, &u->ob);
	if (rc) {
		free(u);
		return sbx_fail(err, SBX_INTERNAL, rc, "cannot make the stream's file under %s: %s",
		                m->streams, strerror(-rc));
	}
	u->next = m->ustreams;
	m->ustreams = u;
	m->nustreams++;
	*out = json_pack("{sssssI}", "id", u->id, "name", u->name, "limit",
	                 (json_int_t)m->cfg.output_limit);
	return 0;
}

int sbx_streams_take(struct sbx_mgr *m, const char *org, const char *id, struct outbuf **ob,
                     struct sbx_err *err)
{
	struct sbx_ustream *u = owned(m, org, id, err);

	*ob = NULL;
	if (!u)
		return -ENOENT;
	if (u->taken)
		return sbx_fail(err, SBX_STATE, -EBUSY,
		                "stream %s has had its writer already (a PUT, or a command's "
		                "output): a stream is written once; POST /streams makes another",
		                id);
	u->taken = true;
	outbuf_ref(u->ob);
	*ob = u->ob;
	return 0;
}

int sbx_streams_input(struct sbx_mgr *m, const char *org, const char *id, struct outbuf **ob,
                      struct sbx_err *err)
{
	struct sbx_ustream *u = owned(m, org, id, err);

	*ob = NULL;
	if (!u)
		return -ENOENT;
	outbuf_ref(u->ob);
	*ob = u->ob;
	return 0;
}

/* One of stream's fields: a string (an id or "ignore") or absent. */
static int check_field(struct sbx_mgr *m, const char *org, json_t *stream, const char *key,
                       bool written, struct sbx_err *err)
{
	json_t *v = json_object_get(stream, key);
	struct sbx_ustream *u;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "stream.%s must be a stream id (POST /streams) or \"ignore\"", key);
	if (!strcmp(json_string_value(v), "ignore"))
		return 0;
	u = owned(m, org, json_string_value(v), err);
	if (!u)
		return sbx_fail(err, SBX_BAD_INPUT, -ENOENT, "stream.%s: %s", key, err->msg);
	if (written && u->taken &&
	    (strcmp(key, "stderr") ||
	     !json_equal(json_object_get(stream, "stdout"), json_object_get(stream, "stderr"))))
		return sbx_fail(err, SBX_BAD_INPUT, -EBUSY,
		                "stream.%s: stream %s has had its writer already; POST /streams "
		                "makes another",
		                key, u->id);
	return 0;
}

int sbx_streams_check(struct sbx_mgr *m, const char *org, json_t *stream, struct sbx_err *err)
{
	json_t *ts = json_object_get(stream, "timestamps");
	int rc;

	if (!stream || json_is_null(stream))
		return 0;
	if (!json_is_object(stream))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "stream must be an object {stdout?, stderr?, stdin?, timestamps?}");
	if (ts && !json_is_boolean(ts))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "stream.timestamps must be true or false");
	rc = check_field(m, org, stream, "stdin", false, err);
	if (!rc)
		rc = check_field(m, org, stream, "stdout", true, err);
	if (!rc)
		rc = check_field(m, org, stream, "stderr", true, err);
	return rc;
}

struct outbuf *sbx_streams_live(struct sbx_mgr *m, const char *id)
{
	struct sbx_ustream *u = find(m, id);

	return u && !outbuf_closed(u->ob) ? u->ob : NULL;
}

const char *sbx_streams_org(struct sbx_mgr *m, const char *id)
{
	struct sbx_ustream *u = find(m, id);

	return u ? u->org : NULL;
}

void sbx_streams_close(struct sbx_mgr *m)
{
	while (m->ustreams)
		drop(m, &m->ustreams);
}
