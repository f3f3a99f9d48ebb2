/* SPDX-License-Identifier: MIT */
#ifndef HUSK_SBX_EXEC_IO_H
#define HUSK_SBX_EXEC_IO_H

/* Inside the manager: an execution's streams (sbx_exec_io.c), for sbx_exec.c and sbx_jobs.c. */
#include "sbx_int.h"

struct exec_io {
	struct outbuf *out[2]; /* out[1] may be out[0] (both routed to one user stream) */
	struct outbuf *in;     /* stream.stdin's, read from in_fd at in_off as it is written */
	int in_fd;
	uint64_t in_off;
	bool stamps;             /* stream.timestamps: each output line begins with its time */
	bool mid[2];             /* stamps: the last byte kept was not a line's end */
	struct agent_call *call; /* the exec request, while in flight: woken for more stdin */
};
/* req's streams (stream.*): stdin opened, outputs made or taken; URLs in info, ids in priv. */
int sbx_exec_io_open(struct exec_io *io, struct sandbox *sb, const struct sbx_exec_req *req,
                     json_t *info, json_t *priv, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* stream's stdout and stderr (a command's, a job's): made or taken; URLs in info, ids in priv. */
int sbx_exec_io_outputs(struct sandbox *sb, json_t *stream, const char *base, struct outbuf *out[2],
                        json_t *info, json_t *priv, struct sbx_err *err)
	__attribute__((warn_unused_result));
/* An output frame's bytes (FRAME_STDOUT / FRAME_STDERR) into its stream. */
void sbx_exec_io_output(struct exec_io *io, uint8_t type, const void *p, size_t len);
/* The exec request's input (buf filled), or NULL without stdin. */
const struct agent_input *sbx_exec_io_input(struct exec_io *io, struct agent_input *buf);
/* The command ended: its outputs are complete. */
void sbx_exec_io_end(struct exec_io *io);
bool sbx_exec_io_truncated(const struct exec_io *io);
void sbx_exec_io_free(struct exec_io *io);

#endif
