// SPDX-License-Identifier: MIT
/*
 * zip for the files API: the guest's tar speaks tar.gz only, so a download
 * as zip is the tar.gz converted, and a zip upload is converted to a tar
 * before the guest's tar takes it (zipconv.c, on libuv's thread pool; the
 * archives wait in unlinked files under state/streams, not in memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_int.h"
#include "zipconv.h"

struct zip_job {
	uv_work_t req;
	struct sbx_mgr *m;
	char id[STORE_ID_LEN];
	char path[4096];
	sbx_done_fn done;
	void *ctx;
	const void *zip; /* upload: the client's zip */
	size_t zip_len;
	int in_fd;  /* download: the guest's tar.gz */
	int out_fd; /* the converted archive */
	void *map;  /* upload: out_fd mapped for the guest's tar */
	size_t map_len;
	int rc;
	char err[400];
};

static void job_free(struct zip_job *z)
{
	if (z->in_fd >= 0)
		close(z->in_fd);
	if (z->out_fd >= 0)
		close(z->out_fd);
	if (z->map)
		munmap(z->map, z->map_len);
	free(z);
}

static struct zip_job *job_new(struct sbx_mgr *m, const char *id, const char *path,
                               sbx_done_fn done, void *ctx)
{
	struct zip_job *z = calloc(1, sizeof(*z));
	struct sbx_err err;

	if (!z) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
		done(ctx, &err, NULL);
		return NULL;
	}
	*z = (struct zip_job){.m = m, .done = done, .ctx = ctx, .in_fd = -1};
	snprintf(z->id, sizeof(z->id), "%s", id);
	snprintf(z->path, sizeof(z->path), "%s", path);
	z->req.data = z;
	z->out_fd = open(m->streams, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (z->out_fd < 0) {
		sbx_fail(&err, SBX_UNAVAILABLE, -errno,
		         "cannot make room for the archive under %s: %s", m->streams,
		         strerror(errno));
		done(ctx, &err, NULL);
		job_free(z);
		return NULL;
	}
	return z;
}

/* The conversion's failure as the files API's error: a bad archive is the client's. */
static void conv_failed(struct zip_job *z)
{
	struct sbx_err err;

	sbx_fail(&err,
	         z->rc == -EFBIG    ? SBX_TOO_LARGE
	         : z->rc == -EINVAL ? SBX_STEP_FAILED
	                            : SBX_INTERNAL,
	         z->rc, "%s", z->err);
	z->done(z->ctx, &err, NULL);
}

static void to_zip(uv_work_t *req)
{
	struct zip_job *z = req->data;

	z->rc = zipconv_to_zip(z->in_fd, z->out_fd, ARCHIVE_MAX, z->err, sizeof(z->err));
}

static void zip_made(uv_work_t *req, int status)
{
	struct zip_job *z = req->data;
	struct sbx_reply reply = {.has_fd = true, .fd = z->out_fd};
	struct stat st;

	if (status == UV_ECANCELED)
		z->rc = -ECANCELED;
	if (!z->rc && fstat(z->out_fd, &st))
		z->rc = -errno;
	if (z->rc) {
		if (!z->err[0])
			snprintf(z->err, sizeof(z->err), "cannot make the zip: %s",
			         strerror(-z->rc));
		conv_failed(z);
	} else {
		reply.len = (size_t)st.st_size;
		z->done(z->ctx, NULL, &reply);
	}
	job_free(z);
}

/* The folder came as tar.gz: now to zip, off the loop. */
static void downloaded(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct zip_job *z = ctx;
	int rc;

	if (err) {
		z->done(z->ctx, err, NULL);
		job_free(z);
		return;
	}
	z->in_fd = fcntl(reply->fd, F_DUPFD_CLOEXEC, 0); /* reply's is closed after this call */
	rc = z->in_fd < 0 ? -errno : uv_queue_work(z->m->loop, &z->req, to_zip, zip_made);
	if (rc) {
		z->rc = rc;
		zip_made(&z->req, 0);
	}
}

void sbx_fs_download_zip(struct sbx_mgr *m, const char *id, const char *path, sbx_done_fn done,
                         void *ctx)
{
	struct zip_job *z = job_new(m, id, path, done, ctx);

	if (z)
		sbx_fs_download(m, id, path, downloaded, z);
}

static void to_tar(uv_work_t *req)
{
	struct zip_job *z = req->data;

	z->rc = zipconv_to_tar(z->zip, z->zip_len, z->out_fd, ARCHIVE_MAX, z->err, sizeof(z->err));
}

static void uploaded(void *ctx, const struct sbx_err *err, const struct sbx_reply *reply)
{
	struct zip_job *z = ctx;

	z->done(z->ctx, err, reply);
	job_free(z);
}

/* The zip is a tar now: the guest's tar unpacks it from the mapped file. */
static void tar_made(uv_work_t *req, int status)
{
	struct zip_job *z = req->data;
	struct stat st;

	if (status == UV_ECANCELED)
		z->rc = -ECANCELED;
	if (!z->rc && fstat(z->out_fd, &st))
		z->rc = -errno;
	if (!z->rc) {
		z->map_len = (size_t)st.st_size;
		z->map = mmap(NULL, z->map_len, PROT_READ, MAP_PRIVATE, z->out_fd, 0);
		if (z->map == MAP_FAILED) {
			z->map = NULL;
			z->rc = -errno;
		}
	}
	if (z->rc) {
		if (!z->err[0])
			snprintf(z->err, sizeof(z->err), "cannot convert the zip: %s",
			         strerror(-z->rc));
		conv_failed(z);
		job_free(z);
		return;
	}
	sbx_fs_upload(z->m, z->id, z->path, z->map, z->map_len, false, uploaded, z);
}

void sbx_fs_upload_zip(struct sbx_mgr *m, const char *id, const char *path, const void *zip,
                       size_t len, sbx_done_fn done, void *ctx)
{
	struct zip_job *z = job_new(m, id, path, done, ctx);
	int rc;

	if (!z)
		return;
	z->zip = zip;
	z->zip_len = len;
	rc = uv_queue_work(m->loop, &z->req, to_tar, tar_made);
	if (rc) {
		z->rc = rc;
		tar_made(&z->req, 0);
	}
}
