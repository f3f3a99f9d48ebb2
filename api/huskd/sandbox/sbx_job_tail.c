// SPDX-License-Identifier: MIT
/*
 * Jobs' output streams: a job's stdout and stderr are followed (the agent's
 * job.output with "follow") into the stream files its stdoutStreamUrl and
 * stderrStreamUrl serve, live and after. A follow lasts as long as the
 * agent's connection: a pause or a lost connection breaks it, and it starts
 * again from where it was once the sandbox is up (sbx_job_tails_up) - after
 * a huskd restart too, from what the file holds. It ends with the job's
 * output (the pipe closed), or with the sandbox.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbuf.h"
#include "proto.h"
#include "sbx_int.h"

struct sbx_job_tail {
	struct sbx_job_tail *next;
	struct sandbox *sb;
	char job[STORE_ID_LEN];
	char agent_job[32];
	int which;               /* 0 stdout, 1 stderr */
	struct outbuf *ob;       /* the tail's reference */
	uint64_t off;            /* bytes of the job's output taken so far */
	struct agent_call *call; /* the follow, while in flight */
	bool ended;              /* the sandbox ended: freed at the call's done() */
};

static const char *const names[] = {"stdout", "stderr"};

static void tail_free(struct sbx_job_tail *t)
{
	for (struct sbx_job_tail **pp = &t->sb->tails; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	outbuf_unref(t->ob);
	free(t);
}

/* The job's output is complete: recorded, so a restart does not follow it again. */
static void tail_complete(struct sbx_job_tail *t)
{
	char key[32];
	json_t *patch;

	outbuf_close(t->ob);
	snprintf(key, sizeof(key), "%sDone", names[t->which]);
	patch = json_pack("{sb}", key, 1);
	if (!patch || store_job_update(t->sb->m->store, t->job, NULL, NULL, patch, NULL))
		log_warn(t->sb->id, "cannot record the end of %s's %s", t->job, names[t->which]);
	json_decref(patch);
	tail_free(t);
}

static bool tail_data(void *arg, uint8_t type, const void *p, size_t len)
{
	struct sbx_job_tail *t = arg;

	if (type == FRAME_DATA) {
		outbuf_append(t->ob, p, len);
		t->off += len;
	}
	return false;
}

static void tail_done(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct sbx_job_tail *t = arg;

	(void)reply;
	t->call = NULL;
	if (t->ended) {
		tail_free(t);
		return;
	}
	/* Broken with the connection: on again once the sandbox is up. */
	if (rc < 0 && err->fault == SBX_UNREACHABLE)
		return;
	if (rc > 0)
		log_info(t->sb->id, "%s's %s: the agent has no more of it (%s)", t->job,
		         names[t->which], json_string_value(json_object_get(reply, "message")));
	tail_complete(t);
}

static const struct sbx_call_ops tail_ops = {
	.data = tail_data, .done = tail_done, .no_deadline = true};

static void tail_follow(struct sbx_job_tail *t)
{
	json_t *req = json_pack("{sssssssIsb}", "op", "job.output", "id", t->agent_job, "stream",
	                        names[t->which], "offset", (json_int_t)t->off, "follow", 1);
	struct agent_call *call;

	if (!req)
		return; /* tried again at the next up */
	/* NULL: done() ran already (and may have freed t). */
	call = sbx_call_now(t->sb, req, NULL, &tail_ops, t);
	if (call)
		t->call = call;
	json_decref(req);
}

static struct sbx_job_tail *tail_new(struct sandbox *sb, const char *job, const char *agent_job,
                                     int which, struct outbuf *ob)
{
	struct sbx_job_tail *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	*t = (struct sbx_job_tail){.sb = sb, .which = which, .ob = ob, .next = sb->tails};
	snprintf(t->job, sizeof(t->job), "%s", job);
	snprintf(t->agent_job, sizeof(t->agent_job), "%s", agent_job);
	t->off = outbuf_len(ob);
	sb->tails = t;
	return t;
}

void sbx_job_tails_start(struct sandbox *sb, const char *job, const char *agent_job,
                         struct outbuf *out[2])
{
	for (int i = 0; i < 2; i++) {
		struct sbx_job_tail *t;

		/* One stream for both (the same user stream): followed once, stdout first. */
		if (!out[i] || (i == 1 && out[1] == out[0]))
			continue;
		outbuf_ref(out[i]);
		t = tail_new(sb, job, agent_job, i, out[i]);
		if (!t) {
			log_warn(sb->id, "%s: out of memory for its %s", job, names[i]);
			outbuf_close(out[i]);
			outbuf_unref(out[i]);
			continue;
		}
		tail_follow(t);
	}
}

static bool tailed(struct sandbox *sb, const char *job, int which)
{
	for (struct sbx_job_tail *t = sb->tails; t; t = t->next)
		if (!strcmp(t->job, job) && t->which == which)
			return true;
	return false;
}

/* After a huskd restart: the jobs whose output was being followed, followed again. */
static void tails_load(struct sandbox *sb)
{
	json_t *list = NULL, *rec, *priv;
	size_t i;

	if (store_job_list(sb->m->store, sb->id, 0, &list))
		return;
	json_array_foreach(json_object_get(list, "jobs"), i, rec)
	{
		const char *job = json_string_value(json_object_get(rec, "jobId"));

		priv = NULL;
		if (!job || store_job_get(sb->m->store, sb->id, job, NULL, &priv))
			continue;
		for (int w = 0; w < 2; w++) {
			char key[32];
			const char *sid, *aj = json_string_value(json_object_get(priv, "agentJob"));
			struct outbuf *ob;

			snprintf(key, sizeof(key), "%sStream", names[w]);
			sid = json_string_value(json_object_get(priv, key));
			snprintf(key, sizeof(key), "%sDone", names[w]);
			if (!sid || !aj || json_is_true(json_object_get(priv, key)) ||
			    tailed(sb, job, w) ||
			    (w == 1 && json_equal(json_object_get(priv, "stdoutStream"),
			                          json_object_get(priv, "stderrStream"))))
				continue;
			if (outbuf_reopen(sb->m->streams, sid, sb->m->cfg.output_limit, &ob))
				continue;
			if (!tail_new(sb, job, aj, w, ob))
				outbuf_unref(ob);
		}
		json_decref(priv);
	}
	json_decref(list);
}

void sbx_job_tails_up(struct sandbox *sb)
{
	if (!sb->tails_loaded) {
		sb->tails_loaded = true;
		tails_load(sb);
	}
	for (struct sbx_job_tail *t = sb->tails, *next; t; t = next) {
		next = t->next;
		if (!t->call && !t->ended)
			tail_follow(t);
	}
}

void sbx_job_tails_end(struct sandbox *sb, bool complete)
{
	for (struct sbx_job_tail *t = sb->tails, *next; t; t = next) {
		next = t->next;
		if (complete)
			outbuf_close(t->ob);
		if (t->call)
			t->ended = true;
		else
			tail_free(t);
	}
}

struct outbuf *sbx_job_tail_live(struct sbx_mgr *m, const char *stream_id)
{
	for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
		for (struct sbx_job_tail *t = sb->tails; t; t = t->next)
			if (!strcmp(outbuf_id(t->ob), stream_id) && !outbuf_closed(t->ob))
				return t->ob;
	return NULL;
}
