// SPDX-License-Identifier: MIT
/*
 * An import's conversion: husk-import runs as a child of huskd (it needs
 * root for umoci's file owners, as huskd has), in the import's folder. Its
 * output is a line per step ("step N/6 TEXT"), detail lines, and "done" or
 * "error TEXT" last; each becomes a progress event. At its end the runtime
 * goes in the store with its image moved under state/runtimes, and the
 * import's folder is removed - off the loop, as an unpacked tree may be big.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_import.h"
#include "sbx_int.h"

#define LINE_MAX_BYTES 2048

static void tree_gone(uv_work_t *w, int status)
{
	(void)status;
	free(w->data);
	free(w);
}

static void tree_rm(uv_work_t *w)
{
	sbx_import_rm_tree(w->data);
}

/* The folder goes in a worker thread; if none can be had, now. */
static void remove_later(struct sbx_mgr *m, const char *dir)
{
	uv_work_t *w = calloc(1, sizeof(*w));

	if (w && (w->data = strdup(dir)) && uv_queue_work(m->loop, w, tree_rm, tree_gone) == 0)
		return;
	sbx_import_rm_tree(dir);
	if (w)
		free(w->data);
	free(w);
}

/* Every mention of the upload's path in text (husk-import's words) as "the uploaded archive". */
static void unpath(const struct sbx_import *imp, char *text, size_t len)
{
	const char *file = sbx_import_file(imp);
	size_t fl = strlen(file);
	char *at;

	while ((at = strstr(text, file))) {
		static const char say[] = "the uploaded archive";
		size_t tail = strlen(at + fl) + 1;

		if ((size_t)(at - text) + sizeof(say) - 1 + tail > len)
			break;
		memmove(at + sizeof(say) - 1, at + fl, tail);
		memcpy(at, say, sizeof(say) - 1);
	}
}

static void emit(struct sbx_import *imp, json_t *event)
{
	if (!event)
		return;
	json_decref(imp->last);
	imp->last = event;
	if (imp->progress)
		imp->progress(imp->ctx, event);
}

/* line ends at its NUL inside imp->line; unpath only shortens it (a path is longer than its name).
 */
static void line_in(struct sbx_import *imp, char *line)
{
	unsigned step, of;
	int at = 0;

	unpath(imp, line, LINE_MAX_BYTES);
	if (sscanf(line, "step %u/%u %n", &step, &of, &at) == 2 && at > 0)
		emit(imp,
		     json_pack("{s:i, s:i, s:s}", "step", step, "of", of, "message", line + at));
	else if (!strncmp(line, "error ", 6))
		snprintf(imp->error, sizeof(imp->error), "%s", line + 6);
	else if (!strcmp(line, "done"))
		imp->said_done = true;
	else if (line[0])
		emit(imp, json_pack("{s:s}", "detail", line));
}

static void handle_closed(uv_handle_t *h);

static void out_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct sbx_import *imp = h->data;

	(void)hint;
	*buf = uv_buf_init(imp->line + imp->linelen, (unsigned)(LINE_MAX_BYTES - 1 - imp->linelen));
}

static void out_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct sbx_import *imp = s->data;
	char *nl;

	(void)buf;
	if (n < 0) {
		/* EOF (or an error): the pipe goes; the import ends once husk-import has too. */
		uv_read_stop(s);
		if (!uv_is_closing((uv_handle_t *)s))
			uv_close((uv_handle_t *)s, handle_closed);
		return;
	}
	imp->linelen += (size_t)n;
	imp->line[imp->linelen] = '\0';
	while ((nl = memchr(imp->line, '\n', imp->linelen))) {
		*nl = '\0';
		line_in(imp, imp->line);
		imp->linelen -= (size_t)(nl + 1 - imp->line);
		memmove(imp->line, nl + 1, imp->linelen);
		imp->line[imp->linelen] = '\0';
	}
	/* A line longer than the buffer is cut: husk-import's never are. */
	if (imp->linelen >= LINE_MAX_BYTES - 1) {
		line_in(imp, imp->line);
		imp->linelen = 0;
	}
}

/* The image into state/runtimes and the runtime into the store; 0 or -errno with err. */
static int register_runtime(struct sbx_import *imp, struct sbx_err *err)
{
	struct sbx_mgr *m = imp->m;
	char path[4300], from[4300], rtid[STORE_ID_LEN];
	json_error_t je;
	json_t *entry, *image, *priv;
	int rc;

	snprintf(path, sizeof(path), "%s/work/entry.json", imp->dir);
	entry = json_load_file(path, 0, &je);
	image = json_object_get(entry, "image");
	if (!json_is_object(image) || store_new_id("srt_", rtid)) {
		json_decref(entry);
		return sbx_fail(err, SBX_INTERNAL, -EIO,
		                "husk-import left no entry for the runtime");
	}
	snprintf(from, sizeof(from), "%s/work/image.qcow2", imp->dir);
	snprintf(path, sizeof(path), "%s/runtimes/%s.qcow2", m->cfg.state, rtid);
	priv = json_deep_copy(image);
	json_object_set_new(priv, "path", json_string(path));
	json_object_set_new(priv, "imported", json_true());
	json_object_set_new(entry, "id", json_string(rtid));
	json_object_set_new(entry, "name", json_string(imp->name));
	json_object_del(entry, "image");
	if (rename(from, path) < 0) {
		rc = sbx_fail(err, SBX_INTERNAL, -errno, "cannot keep the runtime's image: %s",
		              strerror(errno));
	} else if ((rc = store_runtime_add(m->store, entry, priv))) {
		unlink(path);
		sbx_fail(err, rc == -EEXIST ? SBX_EXISTS : SBX_INTERNAL, rc,
		         rc == -EEXIST ? "a runtime named %s was made meanwhile"
		                       : "cannot store runtime %s",
		         imp->name);
	} else {
		rc = store_runtime_get(m->store, rtid, &imp->runtime, NULL);
		if (rc)
			sbx_fail(err, SBX_INTERNAL, rc, "cannot read back runtime %s", imp->name);
	}
	json_decref(entry);
	json_decref(priv);
	return rc;
}

static void finish(struct sbx_import *imp)
{
	struct sbx_err err = {0};
	sbx_done_fn done = imp->done;
	void *ctx = imp->ctx;

	if (imp->exit_status == 0 && imp->said_done && !register_runtime(imp, &err)) {
		imp->state = IMP_DONE;
		log_info(NULL, "import %s: runtime %s is ready", imp->id, imp->name);
	} else {
		if (!err.msg[0])
			sbx_fail(&err, SBX_STEP_FAILED, -EINVAL, "%s",
			         imp->error[0]
			                 ? imp->error
			                 : "husk-import stopped without saying why (killed?)");
		snprintf(imp->error, sizeof(imp->error), "%s", err.msg);
		imp->state = IMP_FAILED;
		log_warn(NULL, "import %s of %s failed: %s", imp->id, imp->name, imp->error);
	}
	imp->touched_ms = uv_now(imp->m->loop);
	imp->progress = NULL;
	imp->done = NULL;
	remove_later(imp->m, imp->dir);
	if (done)
		done(ctx, imp->state == IMP_DONE ? NULL : &err,
		     &(struct sbx_reply){.data = imp->runtime});
	if (imp->m->closing)
		sbx_import_free(imp);
}

static void handle_closed(uv_handle_t *h)
{
	struct sbx_import *imp = h->data;

	if (--imp->handles == 0)
		finish(imp);
}

static void exited(uv_process_t *p, int64_t status, int sig)
{
	struct sbx_import *imp = p->data;

	imp->exit_status = sig ? 128 + sig : status;
	uv_close((uv_handle_t *)p, handle_closed);
}

void sbx_import_run(struct sbx_mgr *m, const char *id, sbx_progress_fn progress, sbx_done_fn done,
                    void *ctx)
{
	struct sbx_import *imp = sbx_import_find(m, id), *i;
	char work[4300], maxb[32], *file = NULL;
	struct sbx_err err;
	bool piped;
	int rc;

	for (i = m->imports; i; i = i->next)
		if (i->state == IMP_CONVERTING)
			break;
	if (!imp) {
		sbx_fail(&err, SBX_NOT_FOUND, -ENOENT, "import %s not found", id);
	} else if (imp->state != IMP_UPLOADING || imp->writing) {
		sbx_fail(&err, SBX_STATE, -EBUSY, "import %s is %s", id,
		         imp->writing ? "still taking an upload part" : "not waiting to convert");
	} else if (i) {
		sbx_fail(&err, SBX_BUSY, -EBUSY,
		         "huskd converts one image at a time and %s is under way; try again when "
		         "it ends",
		         i->id);
	} else if (!imp->source[0] &&
	           (!imp->received || (imp->sized && imp->received != imp->declared))) {
		sbx_fail(&err, SBX_BAD_INPUT, -EINVAL,
		         "the upload has %llu of the %llu bytes announced; send the rest first",
		         (unsigned long long)imp->received, (unsigned long long)imp->declared);
	} else if (!m->cfg.importer) {
		sbx_fail(&err, SBX_INTERNAL, -ENOENT, "husk-import is not beside huskd");
	} else {
		snprintf(work, sizeof(work), "%s/work", imp->dir);
		snprintf(maxb, sizeof(maxb), "%llu", (unsigned long long)sbx_import_max(m));
		file = strdup(imp->source[0] ? imp->source : sbx_import_file(imp));
		char *args[] = {(char *)m->cfg.importer, "--work", work, "--name", imp->name,
		                "--max-bytes",           maxb,     file, NULL};
		uv_stdio_container_t stdio[3] = {
			{.flags = UV_IGNORE},
			{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
		         .data.stream = (uv_stream_t *)&imp->out},
			{.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO},
		};
		/* A process group of its own: stopping it stops skopeo, umoci and mkfs too. */
		uv_process_options_t o = {.file = m->cfg.importer,
		                          .args = args,
		                          .exit_cb = exited,
		                          .stdio = stdio,
		                          .stdio_count = 3,
		                          .flags = UV_PROCESS_DETACHED};

		if (imp->fd >= 0)
			close(imp->fd);
		imp->fd = -1;
		rc = mkdir(work, 0700) < 0 && errno != EEXIST ? -errno : 0;
		piped = !rc && (rc = uv_pipe_init(m->loop, &imp->out, 0)) == 0;
		imp->out.data = imp;
		imp->proc.data = imp;
		if (!rc && (rc = uv_spawn(m->loop, &imp->proc, &o)) == 0) {
			imp->handles = 2;
			imp->state = IMP_CONVERTING;
			imp->progress = progress;
			imp->done = done;
			imp->ctx = ctx;
			uv_read_start((uv_stream_t *)&imp->out, out_alloc, out_read);
			log_info(NULL, "import %s of %s: converting", imp->id, imp->name);
			free(file);
			return;
		}
		if (piped)
			uv_close((uv_handle_t *)&imp->out, NULL);
		free(file);
		sbx_fail(&err, SBX_INTERNAL, rc, "cannot run husk-import: %s", uv_strerror(rc));
	}
	done(ctx, &err, NULL);
}

void sbx_import_detach(struct sbx_mgr *m, const char *id)
{
	struct sbx_import *imp = sbx_import_find(m, id);

	if (imp) {
		imp->progress = NULL;
		imp->done = NULL;
	}
}

void sbx_import_close(struct sbx_mgr *m)
{
	struct sbx_import *imp, *next;

	for (imp = m->imports; imp; imp = next) {
		next = imp->next;
		imp->progress = NULL;
		imp->done = NULL;
		if (imp->state == IMP_CONVERTING) {
			/* Its folder is swept at the next start; it must not outlive huskd's
			 * handles. */
			uv_kill(-imp->proc.pid, SIGKILL);
			continue;
		}
		/* A part being written is freed by its callback (part_written). */
		if (!imp->writing)
			sbx_import_free(imp);
	}
}
