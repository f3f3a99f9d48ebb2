/* SPDX-License-Identifier: MIT */
#ifndef HUSK_VMM_PROC_H
#define HUSK_VMM_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/*
 * One husk-vmm process per sandbox, as huskd sees it. VMMs run in their own
 * session, so they outlive a huskd restart; the new huskd adopts them by
 * pid, checking the process start time so a reused pid is never mistaken
 * for the VMM. Exits are watched through a pidfd on the event loop, for
 * children and adopted processes alike.
 */
struct vmm_proc;

struct vmm_spec {
	const char *vmm;    /* the husk-vmm binary */
	const char *kernel; /* vmlinux or bzImage */
	const char *initrd;
	const char
		*dir; /* the sandbox's state folder: vsock.sock, console.log, vmm.log live here */
	const char *disk;   /* the sandbox's layer */
	const char *serial; /* the disk's serial (the sandbox id) */
	const char *cgroup; /* a cgroup v2 folder to run in, or NULL */
	uint64_t mem_mib;
	unsigned vcpus;
	const char *cmdline;  /* extra kernel command line, or NULL */
	const char *restore;  /* a snapshot to start from instead of booting, or NULL */
	const char *mem_file; /* with restore: its memory, mapped from this file */
	bool held;            /* with restore: the vCPUs wait for the control socket's resume */
	const char *extract;  /* with restore: only write its RAM to this file (a tool run) */
	const struct vmm_jail *jail; /* confined by husk-jail, or NULL: as huskd's child */
	bool nic;                    /* with jail: the guest gets a NIC (libslirp) */
	int net_slot;                /* with jail: the veth slot, -1 for a namespace of lo alone */
	const char *resolv;          /* with jail: the resolv.conf the VMM sees */
	uint64_t net_rate;   /* with nic: bytes per second the guest may send, 0: no limit */
	const char *mac;     /* with nic: the NIC's MAC, NULL: the VMM picks one */
	unsigned guest_host; /* with nic: the guest is 10.0.2.<guest_host>, 0: the VMM's default */
	unsigned expose;     /* with nic: a guest TCP port served at expose_path, 0: none */
	const char *expose_path;
	int key_fd;       /* with restore: a pipe holding its key (--key-fd), -1: none */
	unsigned verbose; /* -v given this many times (2: timed debug lines in vmm.log) */
};

/*
 * What husk-jail confines a VMM to (api/jail/jail.h): its uid, a root made
 * on an empty folder, the paths it reads (its kernel, initrd, disk bases,
 * snapshot) and the folder it writes, the devices it opens, how large a
 * file it may write. The VMM is the first process of a PID namespace.
 */
#define VMM_JAIL_PATHS 24
struct vmm_jail {
	const char *exe; /* husk-jail */
	const char *root;
	unsigned uid;
	const char *ro[VMM_JAIL_PATHS];
	unsigned nro;
	const char *rw; /* the sandbox's folder */
	const char *dev[4];
	unsigned ndev;
	uint64_t fsize;
};

/* An adopted VMM is not huskd's child: its exit status cannot be known. */
#define VMM_STATUS_UNKNOWN (-1)
/* status: the VMM's exit status (0 poweroff, 3 guest crash ...), or VMM_STATUS_UNKNOWN. */
typedef void (*vmm_exit_fn)(struct vmm_proc *p, int status, void *arg);

/* Starts a VMM. Returns 0, or -errno with a message in err. */
int vmm_proc_spawn(uv_loop_t *loop, const struct vmm_spec *s, vmm_exit_fn on_exit, void *arg,
                   struct vmm_proc **out, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * Watches a VMM started by an earlier huskd. -ESRCH if pid is gone or now
 * names another process (start time differs from starttime).
 */
int vmm_proc_adopt(uv_loop_t *loop, pid_t pid, uint64_t starttime, vmm_exit_fn on_exit, void *arg,
                   struct vmm_proc **out) __attribute__((warn_unused_result));

pid_t vmm_proc_pid(const struct vmm_proc *p);
/* The kernel's start time of the process (clock ticks since boot), for adoption later. */
uint64_t vmm_proc_starttime(const struct vmm_proc *p);
/* It started in its cgroup (clone3), not moved there after: for the start's debug line. */
bool vmm_proc_cloned_in_cgroup(const struct vmm_proc *p);

/* Sends sig to the VMM (its whole session: the VMM has no helpers of its own today). */
int vmm_proc_kill(struct vmm_proc *p, int sig);

/* Stops watching and frees (the process keeps running); on_exit is not called after this. */
void vmm_proc_release(struct vmm_proc *p);
/* For a VMM known to have exited (a zombie): reaps it, then vmm_proc_release(). */
void vmm_proc_reap_release(struct vmm_proc *p);

/* Start time of pid from /proc, or 0 if it is gone. */
uint64_t proc_starttime(pid_t pid);

#endif
