// SPDX-License-Identifier: MIT
/*
 * Checks fake-vmm itself, driving it as huskd does: its command line, its
 * control socket, and the connection its agent dials in on, so that later
 * failures of huskd's tests are huskd's. One PASS/FAIL line per check.
 * usage: fake-check FAKE_VMM DIR   (DIR: an empty scratch directory)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_io.h"
#include "img.h"

/* --disk: a real image, as husk-vmm (and so the fake) opens the disk before it boots. */
static const char *disk_arg(void)
{
	static char arg[4200];
	struct img_create_opts o = {.size = 64 << 20};
	char err[256], *p;

	if (arg[0])
		return arg;
	p = path("disk.qcow2");
	if (img_create(p, &o, err, sizeof(err))) {
		fprintf(stderr, "fake-check: %s\n", err);
		exit(1);
	}
	snprintf(arg, sizeof(arg), "%s,serial=s1", p);
	return arg;
}

/* A booted fake: its agent's first connection, on dial 1. */
static void boot_and_serve(int *lfd, pid_t *pid, char *boot_id, size_t len)
{
	char cmd[4200];
	struct reply r;
	struct peer *pr;
	int c;

	*pid = spawn(NULL, "vmm1.log", "--kernel", "/nonexistent/bzImage", "--initrd",
	             "/nonexistent/initrd", "--cmdline", "quiet husk.root=/dev/vda husk.dial=53",
	             "--mem", "256M", "--vcpus", "2", "--disk", disk_arg(), "--vsock",
	             path("vsock.sock"), "--control", path("control.sock"), "--console",
	             path("console.log"), NULL);
	c = ctl_connect(path("control.sock"));
	check(!strcmp(ctl(c, "status", WAIT_MS), "OK running"), "control_status", "no OK running");
	/* The listener only now: the fake has been retrying. */
	*lfd = listen_at(path("vsock.sock_53"));
	pr = accept_peer(*lfd, WAIT_MS);
	snprintf(boot_id, len, "%s", hello(pr, 1, "hello_dial_1"));
	if (!pr)
		exit(1);

	call(pr, 1, "{\"op\":\"info\"}", &r);
	check(r.type == FRAME_RESULT && jint(r.j, "cpus") == 2 &&
	              jint(json_object_get(r.j, "memory"), "total_bytes") == 256 << 20,
	      "info", "type %d", r.type);
	done(&r);
	call(pr, 2, "{\"op\":\"exec\",\"argv\":[\"echo\",\"hello\",\"world\"]}", &r);
	check(r.type == FRAME_RESULT && jint(r.j, "exit_code") == 0 &&
	              !strcmp(r.out, "hello world\n") &&
	              json_is_null(json_object_get(r.j, "signal")),
	      "echo", "out '%s'", r.out);
	done(&r);
	call(pr, 3, "{\"op\":\"env.set\",\"vars\":{\"GREETING\":\"hi\"}}", &r);
	done(&r);
	call(pr, 4, "{\"op\":\"exec\",\"argv\":[\"printenv\",\"GREETING\"]}", &r);
	check(r.type == FRAME_RESULT && !strcmp(r.out, "hi\n"), "printenv", "out '%s'", r.out);
	done(&r);
	request(pr, 5, "{\"op\":\"file.write\",\"path\":\"/work/a.txt\"}");
	send_frame(pr, FRAME_DATA, 0, 5, "kept across ", 12);
	send_frame(pr, FRAME_DATA, FRAME_F_END, 5, "snapshots", 9);
	collect(pr, 5, WAIT_MS, &r);
	check(r.type == FRAME_RESULT && jint(r.j, "size") == 21, "file_write", "type %d", r.type);
	done(&r);
	call(pr, 6, "{\"op\":\"file.list\",\"path\":\"/work\"}", &r);
	check(r.type == FRAME_RESULT && json_array_size(json_object_get(r.j, "entries")) == 1,
	      "file_list", "type %d", r.type);
	done(&r);

	/* Several at once: an echo answered while a sleep runs, then the sleep cancelled. */
	request(pr, 20, "{\"op\":\"exec\",\"argv\":[\"sleep\",\"600\"]}");
	call(pr, 21, "{\"op\":\"exec\",\"argv\":[\"true\"]}", &r);
	check(r.type == FRAME_RESULT, "concurrent_requests", "no answer while a sleep runs");
	done(&r);
	send_frame(pr, FRAME_CANCEL, 0, 20, NULL, 0);
	collect(pr, 20, WAIT_MS, &r);
	check(r.type == FRAME_RESULT && json_is_true(json_object_get(r.j, "cancelled")) &&
	              jint(r.j, "exit_code") == 143,
	      "sleep_cancel", "type %d", r.type);
	done(&r);
	call(pr, 22, "{\"op\":\"exec\",\"argv\":[\"yes\",\"3000000\"]}", &r);
	check(r.type == FRAME_RESULT && r.out_total == 3000000 && r.max_frame == 65536 &&
	              !strncmp(r.out, "y\ny\n", 4),
	      "yes_streams", "%llu bytes", (unsigned long long)r.out_total);
	done(&r);
	call(pr, 23, "{\"op\":\"exec\",\"argv\":[\"sleep\",\"0.05\"],\"timeout_ms\":10}", &r);
	check(r.type == FRAME_RESULT && json_is_true(json_object_get(r.j, "timed_out")),
	      "exec_timeout", "type %d", r.type);
	done(&r);
	call(pr, 24, "{\"op\":\"exec\",\"argv\":[\"nosuch\"]}", &r);
	check(r.type == FRAME_RESULT && jint(r.j, "exit_code") == 127 &&
	              !strcmp(r.err, "fake-agent: nosuch: not found\n"),
	      "not_found_127", "err '%s'", r.err);
	done(&r);
	call(pr, 25, "{\"op\":\"launch\"}", &r);
	check(r.type == FRAME_ERROR && !strcmp(jstr(r.j, "code"), "unknown_op"), "unknown_op",
	      "type %d", r.type);
	done(&r);
	send_frame(pr, FRAME_STDIN, 0, 999, "x", 1);
	collect(pr, 999, WAIT_MS, &r);
	check(r.type == FRAME_ERROR && !strcmp(jstr(r.j, "code"), "not_found"), "unknown_id",
	      "type %d", r.type);
	done(&r);
	call(pr, 26, "{\"op\":\"job.start\",\"argv\":[\"sleep\",\"600\"]}", &r);
	check(r.type == FRAME_RESULT && json_is_true(json_object_get(r.j, "running")), "job_start",
	      "type %d", r.type);
	done(&r);
	call(pr, 27, "{\"op\":\"job.stop\",\"id\":\"job-1\"}", &r);
	check(r.type == FRAME_RESULT && jint(r.j, "exit_code") == 143, "job_stop", "type %d",
	      r.type);
	done(&r);

	/* Pause: requests wait; snapshot; resume answers them; quit. */
	check(!strcmp(ctl(c, "snapshot /x", WAIT_MS), "ERR not paused"), "snapshot_needs_pause",
	      "no ERR not paused");
	check(!strcmp(ctl(c, "pause", WAIT_MS), "OK paused"), "pause", "no OK paused");
	request(pr, 30, "{\"op\":\"info\"}");
	collect(pr, 30, QUIET_MS, &r);
	check(r.type == 0, "paused_holds_requests", "answered while paused");
	done(&r);
	snprintf(cmd, sizeof(cmd), "snapshot %s", path("memory.snap"));
	check(!strncmp(ctl(c, cmd, WAIT_MS), "OK saved in ", 12) && snap_ok(path("memory.snap")),
	      "snapshot", "no OK saved, or no snapshot file");
	check(!strcmp(ctl(c, "resume", WAIT_MS), "OK running"), "resume", "no OK running");
	collect(pr, 30, WAIT_MS, &r);
	check(r.type == FRAME_RESULT, "resume_answers", "type %d", r.type);
	done(&r);
	check(!strcmp(ctl(c, "quit", WAIT_MS), "OK quitting") && wait_exit(*pid, WAIT_MS) == 0,
	      "quit_exits_0", "no clean exit");
	close(c);
	peer_close(pr);
}

/* A second fake from the snapshot: dial 2, the same boot, the same files. */
static void restore(int lfd, const char *boot_id)
{
	struct reply r;
	struct peer *pr;
	pid_t pid;
	int c;

	pid = spawn(NULL, "vmm2.log", "--restore", path("memory.snap"), "--mem", "256M", "--vcpus",
	            "2", "--disk", disk_arg(), "--vsock", path("vsock.sock"), "--control",
	            path("control.sock"), "--console", path("console.log"), NULL);
	pr = accept_peer(lfd, WAIT_MS);
	check(!strcmp(hello(pr, 2, "restore_dial_2"), boot_id), "restore_same_boot_id",
	      "boot_id changed");
	if (!pr)
		exit(1);
	call(pr, 1, "{\"op\":\"file.read\",\"path\":\"/work/a.txt\"}", &r);
	check(r.type == FRAME_RESULT && !strcmp(r.out, "kept across snapshots"),
	      "restore_keeps_files", "out '%s'", r.out);
	done(&r);
	call(pr, 2, "{\"op\":\"exec\",\"argv\":[\"printenv\",\"GREETING\"]}", &r);
	check(r.type == FRAME_RESULT && !strcmp(r.out, "hi\n"), "restore_keeps_env", "out '%s'",
	      r.out);
	done(&r);
	/* The connection ends: the guest dials again. */
	peer_close(pr);
	pr = accept_peer(lfd, WAIT_MS);
	hello(pr, 3, "redial_after_close");
	peer_close(pr);
	c = ctl_connect(path("control.sock"));
	check(!strcmp(ctl(c, "quit", WAIT_MS), "OK quitting") && wait_exit(pid, WAIT_MS) == 0,
	      "restored_quit_exits_0", "no clean exit");
	close(c);
}

static void failure_modes(void)
{
	char want[4200];
	struct peer *pr;
	pid_t pid;
	int c, lfd, st;

	pid = spawn("crash-at-start", "crash.log", "--kernel", "k", NULL);
	st = wait_exit(pid, WAIT_MS);
	check(st == 3 && !strcmp(last_line("crash.log"), "fake: crashing at start"),
	      "crash_at_start", "status %d", st);
	pid = spawn(NULL, "badsnap.log", "--restore", path("nosuch.snap"), NULL);
	st = wait_exit(pid, WAIT_MS);
	snprintf(want, sizeof(want), "husk-vmm: %s: not a snapshot", path("nosuch.snap"));
	check(st == 2 && !strcmp(last_line("badsnap.log"), want), "bad_snapshot", "status %d, '%s'",
	      st, last_line("badsnap.log"));
	pid = spawn(NULL, "usage.log", "--kernel", "k", "--bogus", NULL);
	st = wait_exit(pid, WAIT_MS);
	check(st == 2, "unknown_option", "status %d", st);

	pid = spawn("snapshot-fails", "snapfail.log", "--kernel", "k", "--control", path("c2.sock"),
	            NULL);
	c = ctl_connect(path("c2.sock"));
	ctl(c, "pause", WAIT_MS);
	check(!strcmp(ctl(c, "snapshot /tmp/x.snap", WAIT_MS),
	              "ERR cannot write /tmp/x.snap: No space left on device"),
	      "snapshot_fails", "no ERR");
	ctl(c, "quit", WAIT_MS);
	close(c);
	wait_exit(pid, WAIT_MS);

	pid = spawn("hang-control", "hang.log", "--kernel", "k", "--control", path("c3.sock"),
	            NULL);
	c = ctl_connect(path("c3.sock"));
	check(c >= 0 && !strcmp(ctl(c, "status", QUIET_MS), ""), "hang_control", "answered");
	kill(pid, SIGTERM);
	check(wait_exit(pid, WAIT_MS) == 128 + SIGTERM, "sigterm_ends_it", "still running");
	close(c);

	lfd = listen_at(path("vsock.sock_54"));
	pid = spawn("exit-on-exec", "exec.log", "--kernel", "k", "--cmdline", "husk.dial=54",
	            "--vsock", path("vsock.sock"), NULL);
	pr = accept_peer(lfd, WAIT_MS);
	hello(pr, 1, "exit_on_exec_dials");
	if (pr)
		request(pr, 1, "{\"op\":\"exec\",\"argv\":[\"true\"]}");
	st = wait_exit(pid, WAIT_MS);
	check(st == 1, "exit_on_exec", "status %d", st);
	peer_close(pr);

	pid = spawn("nodial", "nodial.log", "--kernel", "k", "--cmdline", "husk.dial=54", "--vsock",
	            path("vsock.sock"), "--control", path("c4.sock"), NULL);
	c = ctl_connect(path("c4.sock"));
	pr = accept_peer(lfd, QUIET_MS);
	check(c >= 0 && !pr, "nodial", "it dialled");
	peer_close(pr);
	ctl(c, "quit", WAIT_MS);
	close(c);
	wait_exit(pid, WAIT_MS);
	close(lfd);
}

int main(int argc, char **argv)
{
	char boot_id[64];
	pid_t pid;
	int lfd;

	if (argc != 3) {
		fprintf(stderr, "usage: fake-check FAKE_VMM DIR\n");
		return 2;
	}
	fake = argv[1];
	dir = argv[2];
	signal(SIGPIPE, SIG_IGN);
	atexit(kill_children);
	boot_and_serve(&lfd, &pid, boot_id, sizeof(boot_id));
	restore(lfd, boot_id);
	close(lfd);
	failure_modes();
	return failed;
}
