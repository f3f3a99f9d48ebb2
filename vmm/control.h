/* SPDX-License-Identifier: MIT */
#ifndef HUSK_CONTROL_H
#define HUSK_CONTROL_H

/*
 * The VMM's control socket (--control PATH): a Unix stream socket that takes
 * one-line commands and answers one line each, "OK ..." or "ERR reason":
 *   status  → "OK running" or "OK paused"
 *   pause   → "OK paused": every vCPU parked (see vm_pause)
 *   resume  → "OK running"
 *   snapshot FILE → "OK saved in N ms": the paused VM written to FILE
 *             (vm_snapshot_save; disks flushed first)
 *   snapshot-diff FILE → the same, as a diff over the memory file the VM was
 *             restored from (--mem-file): only what differs from it is
 *             written; "ERR" for a VM that runs on no memory file
 *   expose PORT PATH → "OK exposed": connections to the Unix socket PATH
 *             reach the guest's TCP PORT from now on (netstack_expose; a
 *             port exposed already stays as it is); "ERR" without --net
 *   quit    → "OK quitting": the VMM ends, exit status 0
 * A connection may send several commands. huskd pauses sandboxes with it.
 */
struct vm;
struct control;
struct netstack;

/*
 * Listens on path (a stale socket file is replaced); net (may be NULL) is
 * the guest's network, for expose. NULL after logging why.
 */
struct control *control_create(struct vm *vm, const char *path, struct netstack *net);
void control_destroy(struct control *c);

#endif
