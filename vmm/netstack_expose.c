// SPDX-License-Identifier: MIT
/*
 * Guest ports served at host Unix sockets (slirp's host forwards). Asked
 * for at run time, a port is handed to the network thread, which alone may
 * call into libslirp, and the asking thread waits for its answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netstack.h"
#include "netstack_priv.h"

/* Adds the forward; on the thread once it runs. The path is already free. */
static int ns_expose_now(struct netstack *ns, unsigned port, const char *path)
{
	struct sockaddr_un host = {.sun_family = AF_UNIX};
	struct sockaddr_in guest = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

	if (ns->nr_exposed == NS_EXPOSED_MAX)
		return -ENOSPC;
	strcpy(host.sun_path, path);
	guest.sin_addr.s_addr = htonl(0x0a000200u | ns->guest_host);
	errno = 0;
	if (ns_lib.add_hostxfwd(ns->slirp, (struct sockaddr *)&host, sizeof(host),
	                        (struct sockaddr *)&guest, sizeof(guest), 0) < 0)
		return errno ? -errno : -EADDRINUSE;
	pthread_mutex_lock(&ns->lock);
	ns->exposed[ns->nr_exposed++] = (uint16_t)port;
	pthread_mutex_unlock(&ns->lock);
	return 0;
}

void ns_expose_serve(struct netstack *ns)
{
	unsigned port;
	char path[sizeof(ns->req.path)];
	int ret;

	pthread_mutex_lock(&ns->lock);
	if (!ns->req.pending || ns->req.done) {
		pthread_mutex_unlock(&ns->lock);
		return;
	}
	port = ns->req.port;
	memcpy(path, ns->req.path, sizeof(path));
	pthread_mutex_unlock(&ns->lock);
	ret = ns_expose_now(ns, port, path);
	pthread_mutex_lock(&ns->lock);
	ns->req.result = ret;
	ns->req.done = true;
	pthread_cond_signal(&ns->done_cond);
	pthread_mutex_unlock(&ns->lock);
}

static bool ns_is_exposed(struct netstack *ns, unsigned port)
{
	bool found = false;

	pthread_mutex_lock(&ns->lock);
	for (unsigned i = 0; i < ns->nr_exposed && !found; i++)
		found = ns->exposed[i] == port;
	pthread_mutex_unlock(&ns->lock);
	return found;
}

int netstack_expose(struct netstack *ns, unsigned port, const char *path)
{
	struct timespec until;
	int ret = 0;

	if (port < 1 || port > 65535 || strlen(path) >= sizeof(ns->req.path))
		return -EINVAL;
	/* Asked again (by a huskd that restarted), a port keeps its socket and connections. */
	if (ns_is_exposed(ns, port))
		return 0;
	/* A socket left by an earlier VMM of this sandbox would make the bind fail. */
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	if (!ns->started)
		return ns_expose_now(ns, port, path);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += NS_EXPOSE_WAIT_S;
	pthread_mutex_lock(&ns->lock);
	if (ns->req.pending && !ns->req.done) {
		pthread_mutex_unlock(&ns->lock);
		return -EBUSY; /* an earlier request the thread never took */
	}
	ns->req.port = port;
	strcpy(ns->req.path, path);
	ns->req.pending = true;
	ns->req.done = false;
	pthread_mutex_unlock(&ns->lock);
	netstack_kick(ns);
	pthread_mutex_lock(&ns->lock);
	while (!ns->req.done && ret == 0)
		ret = pthread_cond_timedwait(&ns->done_cond, &ns->lock, &until);
	if (ns->req.done) {
		ret = ns->req.result;
		ns->req.pending = false;
	} else {
		ret = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&ns->lock);
	return ret;
}
