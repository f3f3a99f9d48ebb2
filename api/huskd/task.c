// SPDX-License-Identifier: MIT
/* Tasks on their own threads, finished on the loop through one uv_async. */
#include "task.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct task {
	struct task_runner *r;
	void (*work)(void *arg);
	void (*done)(void *arg);
	void *arg;
	struct task *next;
};

struct task_runner {
	uv_async_t async;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct task *finished; /* done() still to run, newest first */
	unsigned running;      /* threads not yet finished */
	int closing;
};

static void runner_drain(uv_async_t *a)
{
	struct task_runner *r = a->data;
	struct task *list, *rev = NULL;

	pthread_mutex_lock(&r->lock);
	list = r->finished;
	r->finished = NULL;
	pthread_mutex_unlock(&r->lock);
	/* Oldest first, so done() calls keep the order the work ended in. */
	while (list) {
		struct task *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		struct task *t = rev;
		rev = t->next;
		if (t->done)
			t->done(t->arg);
		free(t);
	}
}

static void *task_thread(void *p)
{
	struct task *t = p;
	struct task_runner *r = t->r;

	t->work(t->arg);
	pthread_mutex_lock(&r->lock);
	t->next = r->finished;
	r->finished = t;
	r->running--;
	if (!r->closing)
		uv_async_send(&r->async);
	pthread_cond_broadcast(&r->idle);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int task_runner_create(uv_loop_t *loop, struct task_runner **out)
{
	struct task_runner *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->idle, NULL);
	ret = uv_async_init(loop, &r->async, runner_drain);
	if (ret) {
		free(r);
		return ret;
	}
	r->async.data = r;
	*out = r;
	return 0;
}

static void runner_free(uv_handle_t *h)
{
	struct task_runner *r = h->data;

	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->idle);
	free(r);
}

void task_runner_destroy(struct task_runner *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->closing = 1;
	while (r->running)
		pthread_cond_wait(&r->idle, &r->lock);
	while (r->finished) {
		struct task *t = r->finished;
		r->finished = t->next;
		free(t);
	}
	pthread_mutex_unlock(&r->lock);
	uv_close((uv_handle_t *)&r->async, runner_free);
}

int task_run(struct task_runner *r, void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
	struct task *t = calloc(1, sizeof(*t));
	pthread_attr_t attr;
	pthread_t th;
	int ret;

	if (!t)
		return -ENOMEM;
	*t = (struct task){.r = r, .work = work, .done = done, .arg = arg};
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The agent client and image code keep little on the stack. */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_mutex_lock(&r->lock);
	r->running++;
	pthread_mutex_unlock(&r->lock);
	ret = pthread_create(&th, &attr, task_thread, t);
	pthread_attr_destroy(&attr);
	if (ret) {
		pthread_mutex_lock(&r->lock);
		r->running--;
		pthread_mutex_unlock(&r->lock);
		free(t);
		return -ret;
	}
	return 0;
}
