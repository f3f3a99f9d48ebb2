/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_IMPORT_H
#define HUSK_SBX_IMPORT_H

/* Inside the manager: one import of an image as a runtime (sbx_import.c, sbx_import_run.c). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "sbx.h"
#include "store.h"

enum imp_state { IMP_UPLOADING, IMP_CONVERTING, IMP_DONE, IMP_FAILED };

struct sbx_import {
	struct sbx_mgr *m;
	char id[STORE_ID_LEN];
	char name[128];
	char source[1024]; /* docker://... ; "" when uploaded */
	char dir[4200];    /* state/imports/<id> */
	enum imp_state state;
	uint64_t declared, received;
	bool sized;   /* declared was given */
	bool writing; /* an upload part is being written */
	int fd;       /* the upload, while UPLOADING */
	uint64_t touched_ms;
	/* CONVERTING: husk-import and its standard output, read line by line. */
	uv_process_t proc;
	uv_pipe_t out;
	unsigned handles; /* of proc and out, not yet closed */
	int64_t exit_status;
	bool said_done;
	char line[2048];
	size_t linelen;
	sbx_progress_fn progress; /* NULL once its client went away */
	sbx_done_fn done;
	void *ctx;
	json_t *last; /* the last progress event */
	char error[512];
	json_t *runtime; /* DONE: the runtime as listed */
	struct sbx_import *next;
};

struct sbx_import *sbx_import_find(struct sbx_mgr *m, const char *id);
/* The upload's file in the import's folder. */
const char *sbx_import_file(const struct sbx_import *imp);
uint64_t sbx_import_max(const struct sbx_mgr *m);
/* Removes dir and everything under it (no link followed). */
void sbx_import_rm_tree(const char *dir);
void sbx_import_free(struct sbx_import *imp);

#endif
