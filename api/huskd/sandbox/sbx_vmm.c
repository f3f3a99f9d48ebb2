// SPDX-License-Identifier: MIT
/*
 * A sandbox's husk-vmm process and its guest agent's connection. huskd
 * listens on dir/vsock.sock_53 before a VMM starts; the guest's agent dials
 * host port 53 after every boot and restore (husk.dial=53), the VMM connects
 * that to the socket, and the accepted connection becomes the sandbox's one
 * agent session: its HELLO is the sign the guest is up. A VMM's exit comes
 * through its pidfd, in one place (vmm_exit). What either means is decided
 * above (sbx_life.c): this file reports through the hooks.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx_cgroup.h"
#include "sbx_int.h"
#include "vmm_proc.h"

/* ---- the agent's dial-in ---- */

static void session_hello(void *arg, json_t *hello)
{
	struct sandbox *sb = arg;

	log_debug(sb->id, "agent dialled in (dial %lld)",
	          (long long)json_integer_value(json_object_get(hello, "dial")));
	sbx_hold(sb);
	sb->m->hooks->agent_hello(sb);
	sbx_drop(sb);
}

static void session_closed(void *arg, int rc)
{
	struct sandbox *sb = arg;
	struct agent_session *s = sb->session;

	sb->session = NULL;
	agent_session_close(s);
	/* Expected while its VMM pauses or stops; otherwise the agent dials again. */
	if (sb->state == SBX_IDLE || sb->state == SBX_RUNNING)
		log_warn(sb->id,
		         "its agent's connection ended (%s); waiting for it to dial in again",
		         rc ? strerror(-rc) : "closed");
	sbx_session_changed(sb);
}

static const struct agent_session_ops session_ops = {
	.hello = session_hello,
	.closed = session_closed,
};

static void dial_in(uv_stream_t *server, int status)
{
	struct sandbox *sb = server->data;
	struct agent_session *s = NULL;
	int rc;

	if (status < 0) {
		log_warn(sb->id, "its agent's dial-in failed: %s", uv_strerror(status));
		return;
	}
	rc = agent_session_accept(server, &session_ops, sb, &s);
	if (rc) {
		log_error(sb->id, "cannot take its agent's connection: %s", strerror(-rc));
		return;
	}
	/* A new dial replaces the old connection (the guest restarted or was restored). */
	if (sb->session)
		agent_session_close(sb->session);
	sb->session = s;
	sbx_session_changed(sb);
}

static void dial_path(const struct sandbox *sb, char *out, size_t len)
{
	snprintf(out, len, "%s/vsock.sock_%d", sb->dir, DIAL_PORT);
}

int sbx_dial_listen(struct sandbox *sb)
{
	char path[4200];
	int rc;

	if (sb->dial)
		return 0;
	sb->dial = calloc(1, sizeof(*sb->dial));
	if (!sb->dial)
		return -ENOMEM;
	dial_path(sb, path, sizeof(path));
	unlink(path); /* a stale socket from before a restart */
	rc = uv_pipe_init(sb->m->loop, sb->dial, 0);
	if (rc) {
		free(sb->dial);
		sb->dial = NULL;
		return rc;
	}
	sb->dial->data = sb;
	rc = uv_pipe_bind(sb->dial, path);
	if (!rc)
		rc = uv_listen((uv_stream_t *)sb->dial, 4, dial_in);
	if (rc) {
		log_error(sb->id, "cannot listen on %s: %s", path, uv_strerror(rc));
		sbx_dial_close(sb);
	}
	return rc;
}

static void dial_closed(uv_handle_t *h)
{
	free(h);
}

static void dial_unlisten(struct sandbox *sb)
{
	char path[4200];

	if (sb->dial) {
		uv_close((uv_handle_t *)sb->dial, dial_closed);
		sb->dial = NULL;
		dial_path(sb, path, sizeof(path));
		unlink(path);
	}
}

void sbx_dial_close(struct sandbox *sb)
{
	if (sb->session) {
		struct agent_session *s = sb->session;

		sb->session = NULL;
		agent_session_close(s);
	}
	dial_unlisten(sb);
}

/* ---- the VMM ---- */

/*
 * The last line husk-vmm wrote that says why it ended, as ": line", or ""
 * (for the reason of a failure): not a usage error's pointer to --help (the
 * line before says what was wrong), nor debug lines (with -vv, devices
 * report their counters after the reason).
 */
static void vmm_last_words(const char *dir, char *out, size_t outlen)
{
	char path[4200], buf[4096];
	off_t end;
	ssize_t n;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/vmm.log", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, sizeof(buf) - 1,
	          end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (;;) {
		char *nl, *line;

		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = '\0';
		nl = strrchr(buf, '\n');
		line = nl ? nl + 1 : buf;
		if (!strstr(line, "Try 'husk-vmm --help'") && !strstr(line, "] debug: "))
			break;
		if (!nl)
			return;
		*nl = '\0';
		n = nl - buf;
	}
	snprintf(out, outlen, ": %.150s", strrchr(buf, '\n') ? strrchr(buf, '\n') + 1 : buf);
}

/* The one place a VMM's exit comes in (its pidfd): the manager above decides. */
static void vmm_exit(struct vmm_proc *p, int status, void *arg)
{
	struct sandbox *sb = arg;

	(void)p;
	if (sb->vmm) {
		vmm_proc_release(sb->vmm);
		sb->vmm = NULL;
	}
	sbx_net_detach(sb);
	sbx_jail_release(sb);
	sbx_hold(sb);
	sb->m->hooks->vmm_exited(sb, status);
	sbx_drop(sb);
}

void sbx_hostname(const struct sandbox *sb, char out[SBX_HOSTNAME_LEN])
{
	size_t i;

	for (i = 0; sb->id[i] && i < SBX_HOSTNAME_LEN - 1; i++)
		out[i] = sb->id[i] == '_' ? '-' : sb->id[i];
	out[i] = 0;
}

/*
 * The sandbox's cgroup, its memory and processes limited, its cpu not yet;
 * NULL where cgroups are not ours. Made for each VMM that has none: a
 * paused sandbox's goes when huskd stops or the host restarts.
 */
static char *cgroup_make(struct sandbox *sb)
{
	struct sbx_mgr *m = sb->m;
	const char *what;
	char *dir;
	int rc;

	if (!m->cfg.cgroup_dir || asprintf(&dir, "%s/%s", m->cfg.cgroup_dir, sb->id) < 0)
		return NULL;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		log_warn(sb->id, "cannot make cgroup %s (%s); cpu is not limited", dir,
		         strerror(errno));
		free(dir);
		return NULL;
	}
	/* A VMM's threads: its vCPUs, the network, lazy restore, snapshot workers. */
	rc = cgroup_limits(dir, sb->mem_mib, 256, &what);
	if (rc)
		log_warn(sb->id, "cannot set %s of cgroup %s (%s): its VMM's memory is not held",
		         what, dir, strerror(-rc));
	rc = cgroup_io(dir, &m->io, sb->vcpus, &what);
	if (rc)
		log_warn(sb->id, "cannot set %s of cgroup %s (%s): its disk I/O is not limited",
		         what, dir, strerror(-rc));
	return dir;
}

/*
 * The sockets a VMM killed outright left in its folder (one made ahead of a
 * resume, killed as huskd stopped): in the next VMM's way, which runs under
 * another jail uid and cannot tell them stale. No VMM of the sandbox runs now.
 */
static void stale_sockets_remove(const struct sandbox *sb)
{
	static const char *const names[] = {"vsock.sock", "control.sock"};
	char path[4200];
	struct stat st;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", sb->dir, names[i]);
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && unlink(path) < 0)
			log_warn(sb->id, "cannot remove the stale socket %s: %s", path,
			         strerror(errno));
	}
}

int sbx_vmm_start(struct sandbox *sb, const char *restore, const char *mem_file, const char *key,
                  char *err, size_t errlen)
{
	struct sbx_mgr *m = sb->m;
	char cmdline[128], host[SBX_HOSTNAME_LEN], resolv[4200], port[4200];
	struct sbx_jail jail;
	struct vmm_spec spec;
	/* uv_hrtime() at the start, keys, network, jail, spawn: where a start's time goes */
	uint64_t t[5] = {uv_hrtime()};
	int rc;

	if (m->cfg.cgroup_dir && (!sb->cgroup || access(sb->cgroup, F_OK) < 0)) {
		free(sb->cgroup);
		sb->cgroup = cgroup_make(sb);
		sb->cpu_limited = false;
	}
	sbx_hostname(sb, host);
	snprintf(cmdline, sizeof(cmdline), "husk.dial=%d husk.hostname=%s", DIAL_PORT, host);
	spec = (struct vmm_spec){.vmm = m->cfg.vmm,
	                         .kernel = m->cfg.kernel,
	                         .initrd = m->cfg.initrd,
	                         .dir = sb->dir,
	                         .disk = sb->layer,
	                         .serial = sb->id + strlen(sb->id) - 20,
	                         .cgroup = sb->cgroup,
	                         .mem_mib = sb->mem_mib,
	                         .vcpus = sb->vcpus,
	                         .cmdline = cmdline,
	                         .restore = restore,
	                         .mem_file = restore ? mem_file : NULL,
	                         /* a resume made ahead (sbx_ahead.c) */
	                         .held = restore && sb->ahead == SBX_AHEAD_HELD,
	                         .net_slot = -1,
	                         .key_fd = -1,
	                         /* huskd at debug: each step of its VMMs timed in vmm.log */
	                         .verbose = huskd_log_enabled(HLOG_DEBUG) ? 2 : 0};
	if (sbx_has_nic(sb) && !m->cfg.jail) {
		snprintf(err, errlen, "a network needs husk-jail beside huskd, and huskd as root");
		return -EOPNOTSUPP;
	}
	if (!restore)
		key = NULL;
	if (key || sbx_dkey_any(sb)) {
		bool disk = sbx_dkey_any(sb);
		struct sbx_dkeys dk;

		rc = disk ? sbx_dkey_open(sb, sb->layer, &dk, err, errlen) : 0;
		if (!rc) {
			rc = sbx_seal_pipe(sb, key, disk ? &dk : NULL, &spec.key_fd, err, errlen);
			if (disk)
				sbx_dkey_close(&dk);
		}
		if (rc)
			return rc;
	}
	t[1] = uv_hrtime();
	if (sbx_has_nic(sb)) {
		rc = sbx_net_attach(sb, resolv, sizeof(resolv), err, errlen);
		if (rc) {
			if (spec.key_fd >= 0)
				close(spec.key_fd);
			return rc;
		}
		spec.nic = true;
		spec.net_slot = sb->net_slot;
		spec.resolv = sb->net ? resolv : NULL;
		spec.net_rate = sb->egress_rate;
		spec.mac = sb->net_mac[0] ? sb->net_mac : NULL;
		spec.guest_host = sb->net_host;
		spec.expose = sb->port;
		snprintf(port, sizeof(port), "%s/port.sock", sb->dir);
		spec.expose_path = port;
	}
	t[2] = uv_hrtime();
	rc = sbx_dial_listen(sb);
	if (rc) {
		snprintf(err, errlen, "cannot listen for the sandbox's agent: %s", uv_strerror(rc));
	} else if (m->cfg.jail) {
		rc = sbx_jail_prepare(sb, restore, mem_file, &jail, err, errlen);
		spec.jail = rc ? NULL : &jail.spec;
	}
	t[3] = uv_hrtime();
	if (!rc) {
		stale_sockets_remove(sb);
		sb->nr_exposed = 0; /* a new VMM serves network.port alone until asked */
		rc = vmm_proc_spawn(m->loop, &spec, vmm_exit, sb, &sb->vmm, err, errlen);
		if (m->cfg.jail)
			sbx_jail_done(&jail);
	}
	t[4] = uv_hrtime();
	if (spec.key_fd >= 0)
		close(spec.key_fd);
	if (rc) {
		/* An open listener would keep huskd's loop, and so a stopping huskd, running. */
		dial_unlisten(sb);
		sbx_net_detach(sb);
		sbx_jail_release(sb);
		return rc;
	}
	/* What it runs on: its pauses are diffs over that file, its resumes map it again. */
	if (spec.mem_file != sb->mem_file) {
		free(sb->mem_file);
		sb->mem_file = spec.mem_file ? strdup(spec.mem_file) : NULL;
	}
	if (sb->stored)
		sbx_save(sb, json_pack("{sIsIsiso}", "pid", (json_int_t)vmm_proc_pid(sb->vmm),
		                       "starttime", (json_int_t)vmm_proc_starttime(sb->vmm),
		                       "netSlot", sb->net_slot, "memFile",
		                       sb->mem_file ? json_string(sb->mem_file) : json_null()));
	sbx_meter_vmm_started(sb);
	log_debug(sb->id,
	          "VMM start took %.1f ms: keys %.1f, network %.1f, jail %.1f, spawn %.1f%s, "
	          "record %.1f",
	          (double)(uv_hrtime() - t[0]) / 1e6, (double)(t[1] - t[0]) / 1e6,
	          (double)(t[2] - t[1]) / 1e6, (double)(t[3] - t[2]) / 1e6,
	          (double)(t[4] - t[3]) / 1e6,
	          vmm_proc_cloned_in_cgroup(sb->vmm) ? " (cloned into its cgroup)" : "",
	          (double)(uv_hrtime() - t[4]) / 1e6);
	return 0;
}

void sbx_vmm_stop(struct sandbox *sb)
{
	int rc = sb->vmm ? vmm_proc_kill(sb->vmm, SIGKILL) : 0;

	if (rc)
		log_warn(sb->id, "cannot kill its VMM: %s", strerror(-rc));
}

static void file_tail(struct sandbox *sb, const char *name, char *out, size_t len)
{
	char path[4200];
	off_t end;
	ssize_t n;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", sb->dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	n = pread(fd, out, len - 1, end > (off_t)len - 1 ? end - (off_t)len + 1 : 0);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	/* One line for the log: the console's own line ends become "|". */
	for (char *p = out; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = '|';
		else if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
}

void sbx_vmm_console_tail(struct sandbox *sb, char *out, size_t len)
{
	file_tail(sb, "console.log", out, len);
}

void sbx_vmm_log_tail(struct sandbox *sb, char *out, size_t len)
{
	file_tail(sb, "vmm.log", out, len);
}

int sbx_vmm_adopt(struct sandbox *sb, pid_t pid, uint64_t starttime, int net_slot)
{
	int rc = vmm_proc_adopt(sb->m->loop, pid, starttime, vmm_exit, sb, &sb->vmm);

	if (rc)
		return rc;
	/* The slot its running VMM's namespace holds, as recorded when it started. */
	if (sb->net && net_slot >= 0)
		sbx_net_adopt(sb, net_slot);
	if (sb->m->cfg.jail && (rc = sbx_jail_adopt(sb, pid)))
		log_warn(sb->id, "cannot find or own its VMM's jail uid: %s", strerror(-rc));
	/* Its agent dials the socket again once it sees the old huskd gone. */
	rc = sbx_dial_listen(sb);
	if (!rc && sb->jail_uid && sbx_jail_own(sb))
		log_warn(sb->id, "cannot hand its folder to its VMM's uid %u", sb->jail_uid);
	if (rc) {
		vmm_proc_release(sb->vmm);
		sb->vmm = NULL;
	} else {
		sbx_meter_vmm_started(sb);
	}
	return rc;
}

void sbx_vmm_exit_reason(struct sandbox *sb, int status, char *out, size_t len)
{
	char last[160];

	vmm_last_words(sb->dir, last, sizeof(last));
	if (status == VMM_STATUS_UNKNOWN)
		snprintf(out, len,
		         "husk-vmm ended (adopted after a restart: its exit status is "
		         "unknown)%s",
		         last);
	else if (status == 3)
		snprintf(out, len, "the guest crashed (husk-vmm exit status 3)%s", last);
	else if (status == 128 + SIGSYS)
		snprintf(out, len,
		         "husk-vmm made a system call outside its seccomp allowlist and was "
		         "killed (SIGSYS; the kernel log names the call)%s",
		         last);
	else if (status == 128 + SIGXFSZ)
		snprintf(out, len, "husk-vmm wrote a file past its jail's size limit (SIGXFSZ)%s",
		         last);
	else if (status >= 128)
		snprintf(out, len, "husk-vmm was killed by signal %d%s", status - 128, last);
	else
		snprintf(out, len, "husk-vmm exited unexpectedly (status %d)%s", status, last);
}
