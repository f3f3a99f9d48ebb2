// SPDX-License-Identifier: MIT
/*
 * libslirp, loaded by a VMM given a network (--net) and by no other: linked
 * outright, it and the glib and pcre2 it needs were 0.7 MiB of every VMM's
 * resident memory and a sixth of its dynamic loading (0.35 ms natively, 10
 * nested), network or not. Loaded before the VMM confines itself: dlopen
 * opens and maps files, which no seccomp role allows.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "netstack_priv.h"

struct netstack_lib ns_lib;

int netstack_lib_load(char *err, size_t errlen)
{
	static void *handle;
	void *h;

	if (handle)
		return 0;
	h = dlopen("libslirp.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen,
		         "cannot load libslirp (Debian: apt-get install libslirp0): %s", dlerror());
		return -ENOENT;
	}
	/* Each pointer has the type of libslirp.h's own declaration. */
#define NS_SYM(f) (ns_lib.f = (__typeof__(ns_lib.f))dlsym(h, "slirp_" #f))
	if (!NS_SYM(new) || !NS_SYM(cleanup) || !NS_SYM(input) || !NS_SYM(pollfds_fill) ||
	    !NS_SYM(pollfds_poll) || !NS_SYM(handle_timer) || !NS_SYM(add_hostxfwd)) {
		snprintf(err, errlen,
		         "libslirp.so.0 lacks a call husk-vmm makes: it wants 4.5 or later");
		dlclose(h);
		return -ENOSYS;
	}
#undef NS_SYM
	handle = h;
	return 0;
}
