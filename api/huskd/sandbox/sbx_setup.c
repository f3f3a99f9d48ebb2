// SPDX-License-Identifier: MIT
/*
 * A guest whose agent just dialled in is made ready: after a boot the
 * workspace, the sandbox's env and the create request's files; after a
 * restore from memory, first the guest's clock and random generator
 * ("resumed"). Requests on the new session, one after another; the caller
 * is told how it went and decides what follows. A newer dial-in makes an
 * older setup moot.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sbx_int.h"
#include "sbx_setup.h"

enum { STEP_RESUMED, STEP_MKDIR, STEP_ENV, STEP_FILES, STEP_INSTALL, STEP_DONE };
static const char *const step_names[] = {"resumed", "workspace", "env", "files", "install"};

/* How long installing a create's dependencies and packages may take. */
#define INSTALL_MS (30 * 60 * 1000)

struct setup {
	struct sandbox *sb;
	int step;
	bool resumed; /* send "resumed" first */
	bool child;   /* with it, an identity of its own (a new sandbox from a snapshot) */
	bool prepare; /* the workspace, the env and the files */
	bool mkdir;   /* the workspace: not for a template's child (its maker made it) */
	void (*done)(struct sandbox *sb, const struct sbx_err *err);
};

/* Hands the outcome over, unless a newer setup or the sandbox's end made it moot. */
static void setup_end(struct setup *s, const struct sbx_err *err)
{
	struct sandbox *sb = s->sb;

	if (sb->setup == s) {
		sb->setup = NULL;
		if (sb->state != SBX_STOPPING && sb->state != SBX_GONE)
			s->done(sb, err);
	}
	sbx_drop(sb);
	free(s);
}

static void setup_fail(struct setup *s, const char *why)
{
	struct sbx_err err;

	sbx_fail(&err, SBX_INTERNAL, -EIO, "%s: %s", step_names[s->step], why);
	setup_end(s, &err);
}

static void setup_step(struct setup *s);

/*
 * Whether its agent's connection broke under the request: then the agent
 * dials in again by itself, and that dial-in starts the setup over
 * (agent_hello), within the deadline its start runs under. Seen nested, once
 * in 400 template creates: a restored guest's new connection reset under
 * "resumed" (why is not known yet). An agent that does not answer in time
 * (-ETIMEDOUT) holds its connection: that fails the setup.
 */
static bool setup_lost(struct setup *s, int rc, const struct sbx_err *err)
{
	struct sandbox *sb = s->sb;

	if (rc >= 0 || rc == -ETIMEDOUT || !err || err->fault != SBX_UNREACHABLE)
		return false;
	if (sb->setup == s) {
		log_warn(sb->id,
		         "its agent's connection ended during its setup (%s: %s); waiting for it "
		         "to dial in again",
		         step_names[s->step], err->msg);
		sb->setup = NULL;
	}
	sbx_drop(sb);
	free(s);
	return true;
}

static void step_done(void *arg, int rc, json_t *reply, const struct sbx_err *err)
{
	struct setup *s = arg;
	const char *msg = json_string_value(json_object_get(reply, "message"));
	json_t *ended;

	/*
	 * Without "resumed" the guest would run on with its siblings' random
	 * state and a stopped clock: the restore fails rather.
	 */
	if (rc > 0 && s->step == STEP_RESUMED) {
		setup_fail(s, msg ? msg
		                  : "its agent did not reseed the guest's random generator; the "
		                    "snapshot's agent may be older than this huskd: take it again");
		return;
	}
	if (setup_lost(s, rc, err))
		return;
	if (rc) {
		setup_fail(s, rc > 0 ? (msg ? msg : "refused by the agent") : err->msg);
		return;
	}
	ended = json_object_get(reply, "connectionsEnded");
	if (s->step == STEP_RESUMED && json_is_integer(ended))
		log_debug(s->sb->id,
		          "its guest took its network; %lld connections of the old ended",
		          (long long)json_integer_value(ended));
	else if (s->step == STEP_RESUMED && json_is_string(ended))
		log_warn(s->sb->id,
		         "its guest took its network, but its old connections live on: %s",
		         json_string_value(ended));
	s->step++;
	setup_step(s);
}

static const struct sbx_call_ops step_ops = {.done = step_done};

static void files_done(struct sandbox *sb, const struct sbx_err *err, void *arg)
{
	struct setup *s = arg;

	if (err) {
		setup_fail(s, err->msg);
		return;
	}
	if (s->step == STEP_FILES) {
		json_decref(sb->files);
		sb->files = NULL;
	}
	s->step++;
	setup_step(s);
}

/* A random boot id, formatted the way the kernel prints one (version 4 UUID). */
static int new_boot_id(char out[37])
{
	unsigned char u[16];

	if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u))
		return -EIO;
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
	         u[13], u[14], u[15]);
	return 0;
}

/*
 * The "resumed" request: the wall clock now and 32 fresh bytes for the CRNG;
 * for a new sandbox from a snapshot (child), a machine-id, host name and
 * boot id of its own too.
 */
static json_t *resumed_req(const struct sandbox *sb, bool child)
{
	unsigned char seed[32], mid[16];
	char mhex[2 * sizeof(mid) + 1], host[SBX_HOSTNAME_LEN], boot[37];
	char hex[2 * sizeof(seed) + 1];
	struct timespec ts;
	json_t *req;

	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		return NULL;
	for (size_t i = 0; i < sizeof(seed); i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	clock_gettime(CLOCK_REALTIME, &ts);
	req = json_pack("{sssIss}", "op", "resumed", "time_ns",
	                (json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec, "seed", hex);
	if (req && child) {
		if (getrandom(mid, sizeof(mid), 0) != (ssize_t)sizeof(mid) || new_boot_id(boot)) {
			json_decref(req);
			return NULL;
		}
		for (size_t i = 0; i < sizeof(mid); i++)
			snprintf(mhex + 2 * i, 3, "%02x", mid[i]);
		sbx_hostname(sb, host);
		json_object_set_new(req, "machine_id", json_string(mhex));
		json_object_set_new(req, "hostname", json_string(host));
		json_object_set_new(req, "boot_id", json_string(boot));
	}
	/* Its own MAC and address, the link reset, the old stack's connections ended. */
	if (req && sbx_has_nic(sb) && sb->net_mac[0] && sb->net_host)
		json_object_set_new(req, "net",
		                    json_pack("{sssoss}", "mac", sb->net_mac, "address",
		                              json_sprintf("10.0.2.%u/24", sb->net_host), "gateway",
		                              "10.0.2.2"));
	explicit_bzero(hex, sizeof(hex));
	explicit_bzero(seed, sizeof(seed));
	return req;
}

static void setup_step(struct setup *s)
{
	struct sandbox *sb = s->sb;
	json_t *req = NULL;

	/* Moot: the sandbox stopped, or a newer dial-in took over. */
	if (sb->setup != s || sb->state == SBX_STOPPING || sb->state == SBX_GONE) {
		setup_end(s, NULL);
		return;
	}
	if (s->step == STEP_RESUMED && !s->resumed)
		s->step++;
	if (s->step == STEP_MKDIR && !s->prepare)
		s->step = STEP_DONE;
	if (s->step == STEP_MKDIR && !s->mkdir)
		s->step++;
	if (s->step == STEP_ENV && !json_object_size(sb->env))
		s->step++;
	if (s->step == STEP_FILES && !json_array_size(sb->files))
		s->step++;
	if (s->step == STEP_INSTALL && !sb->deps && !sb->packages)
		s->step++;
	switch (s->step) {
	case STEP_RESUMED:
		req = resumed_req(sb, s->child);
		break;
	case STEP_MKDIR:
		req = json_pack("{sssssb}", "op", "file.mkdir", "path", sbx_workspace(sb),
		                "parents", 1);
		break;
	case STEP_ENV:
		req = json_pack("{sssO}", "op", "env.set", "vars", sb->env);
		break;
	case STEP_FILES:
		sbx_files_write(sb, sb->files, true, files_done, s);
		return;
	case STEP_INSTALL:
		/* Downloads: bounded by the installers, not by the agent's readiness limit. */
		sbx_setup_longer(sb, INSTALL_MS);
		sbx_deps_install(sb, files_done, s);
		return;
	default:
		setup_end(s, NULL);
		return;
	}
	if (!req) {
		setup_fail(s, "out of memory");
		return;
	}
	sbx_call_now(sb, req, NULL, &step_ops, s);
	json_decref(req);
}

void sbx_setup_start(struct sandbox *sb, enum sbx_setup_kind kind,
                     void (*done)(struct sandbox *sb, const struct sbx_err *err))
{
	struct setup *s = calloc(1, sizeof(*s));
	struct sbx_err err;

	if (!s) {
		sbx_fail(&err, SBX_UNAVAILABLE, -ENOMEM, "out of memory for its setup");
		done(sb, &err);
		return;
	}
	*s = (struct setup){.sb = sb,
	                    .step = STEP_RESUMED,
	                    .resumed = kind != SETUP_BOOTED,
	                    .child = kind != SETUP_RESUMED,
	                    .prepare = kind != SETUP_RESUMED && kind != SETUP_WARM,
	                    .mkdir = kind == SETUP_BOOTED || kind == SETUP_RESTORED,
	                    .done = done};
	/* A warm VMM's guest got it before it was parked: once, for the create that took it. */
	if ((kind == SETUP_RESTORED || kind == SETUP_TEMPLATE) && sb->pool.primed) {
		s->resumed = false;
		sb->pool.primed = false;
	}
	sbx_hold(sb);
	sb->setup = s;
	setup_step(s);
}
