// SPDX-License-Identifier: MIT
/*
 * A sandbox's network as the manager sees it: the host's networking set up
 * at first use, a veth slot and the sandbox's allow and deny lists held
 * while a VMM of its runs, the resolver that VMM is shown.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "jail.h"
#include "net_host.h"
#include "net_policy.h"
#include "sbx_int.h"

struct net_host *sbx_net(struct sbx_mgr *m)
{
	if (!m->net_tried) {
		m->net_tried = true;
		if (net_host_open(m->loop, m->cfg.dns_port ? m->cfg.dns_port : 10053,
		                  m->cfg.dns_upstream, &m->net, m->net_why, sizeof(m->net_why)))
			log_warn(NULL, "sandboxes get no network: %s", m->net_why);
		else
			log_info(NULL,
			         "sandbox networking set up (nftables table inet husk, IPv4 "
			         "forwarding on%s)",
			         net_host_ipv6(m->net)
			                 ? ", IPv6 forwarding on"
			                 : "; no IPv6 here: sandboxes get IPv4 alone");
	}
	return m->net;
}

bool sbx_can_network(struct sbx_mgr *m)
{
	return m->cfg.jail && sbx_net(m);
}

static int list_from_json(json_t *arr, const char *field, struct net_list *list,
                          struct sbx_err *err)
{
	char why[300];
	size_t i;
	json_t *v;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.%s must be an array of strings such as [\"example.com\", "
		                "\"203.0.113.0/24\"]",
		                field);
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v))
			return sbx_fail(
				err, SBX_BAD_INPUT, -EINVAL,
				"network.%s[%zu] must be a string (an address, CIDR or name)",
				field, i);
		if (net_policy_add(list, json_string_value(v), why, sizeof(why)))
			return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "network.%s[%zu]: %s", field,
			                i, why);
	}
	return 0;
}

/* huskd's own entries (--egress-allow, --egress-deny), checked when it started. */
static void list_defaults(const char *const *d, struct net_list *list)
{
	char why[300];

	for (; d && *d; d++)
		if (net_policy_add(list, *d, why, sizeof(why)))
			log_warn(NULL, "huskd's network list entry left out: %s", why);
}

int sbx_net_policy(struct sandbox *sb, json_t *allow, json_t *deny, struct sbx_err *err)
{
	struct net_policy *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
	rc = list_from_json(allow, "allow", &p->allow, err);
	if (!rc)
		rc = list_from_json(deny, "deny", &p->deny, err);
	if (!rc) {
		list_defaults(sb->m->cfg.egress_allow, &p->allow);
		list_defaults(sb->m->cfg.egress_deny, &p->deny);
	}
	if (rc) {
		free(p);
		return rc;
	}
	free(sb->net_policy);
	sb->net_policy = NULL;
	if (net_policy_any(p))
		sb->net_policy = p;
	else
		free(p);
	return 0;
}

int sbx_net_set(struct sbx_mgr *m, const char *id, json_t *body, json_t **out, struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);
	json_t *allow = json_object_get(body, "allow"), *deny = json_object_get(body, "deny");
	struct net_policy *old;
	char why[300];
	int rc;

	if (!sb)
		return -ENOENT;
	if (!json_is_object(body))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "the body must be an object such as {\"allow\": [\"example.com\"], "
		                "\"deny\": []}");
	if (!sb->net)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "sandbox %s has no network (create it with network.enabled: true)",
		                id);
	old = sb->net_policy;
	sb->net_policy = NULL;
	rc = sbx_net_policy(sb, allow, deny, err);
	if (rc) {
		sb->net_policy = old;
		return rc;
	}
	/* A running VMM's rules change at once; a paused one gets them when it resumes. */
	if (sb->net_slot >= 0 &&
	    net_host_policy_set(m->net, (unsigned)sb->net_slot, sb->net_policy, why, sizeof(why))) {
		free(sb->net_policy);
		sb->net_policy = old;
		if (net_host_policy_set(m->net, (unsigned)sb->net_slot, old, why, sizeof(why)))
			log_error(sb->id, "cannot put its earlier network lists back: %s", why);
		return sbx_fail(err, SBX_UNAVAILABLE, -EIO, "%s", why);
	}
	free(old);
	sbx_save(sb, json_pack("{sOsO}", "netAllow", allow ? allow : json_null(), "netDeny",
	                       deny ? deny : json_null()));
	*out = json_pack("{sssoso}", "sandboxId", sb->id, "allow",
	                 json_is_array(allow) ? json_incref(allow) : json_array(), "deny",
	                 json_is_array(deny) ? json_incref(deny) : json_array());
	return *out ? 0 : -ENOMEM;
}

int sbx_net_config(struct sbx_mgr *m, const char *id, json_t **out, struct sbx_err *err)
{
	struct sandbox *sb = sbx_lookup(m, id, err);
	json_t *info = NULL, *priv = NULL, *net;

	*out = NULL;
	if (!sb)
		return -ENOENT;
	if (store_sandbox_get(m->store, id, &info, &priv))
		return sbx_fail(err, SBX_INTERNAL, -EIO, "cannot read sandbox %s's record", id);
	net = json_pack("{sb}", "enabled", sb->net);
	if (net && sb->port)
		json_object_set_new(net, "port", json_integer(sb->port));
	if (net && sb->all_ports)
		json_object_set_new(net, "allPorts", json_true());
	if (net && json_is_true(json_object_get(info, "urlTokenRequired")))
		json_object_set_new(net, "urlToken", json_true());
	if (net && sb->egress_rate && sb->egress_rate != m->cfg.egress_rate)
		json_object_set_new(net, "egressBytesPerSec",
		                    json_integer((json_int_t)sb->egress_rate));
	/* The lists as they are now (changed at run time, or as created). */
	for (const char *const *k = (const char *const[]){"allow", "deny", NULL}; net && *k; k++) {
		json_t *v = json_object_get(priv, !strcmp(*k, "allow") ? "netAllow" : "netDeny");

		if (sb->net && json_is_array(v))
			json_object_set(net, *k, v);
	}
	json_decref(info);
	json_decref(priv);
	*out = net;
	return net ? 0 : sbx_fail(err, SBX_UNAVAILABLE, -ENOMEM, "out of memory");
}

/*
 * What the VMM's slirp sees as the host's resolver: the host end of its
 * veth pair, where the table redirects DNS to huskd's forwarder (a host
 * whose own resolver is on loopback would be unreachable from there).
 */
static int write_resolv_conf(struct sandbox *sb, char *path, size_t len)
{
	char gw[24];
	FILE *f;

	snprintf(path, len, "%s/resolv.conf", sb->dir);
	JAIL_SLOT_ADDR(gw, sb->net_slot, 1);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "nameserver %s\n", gw);
	return fclose(f) ? -errno : 0;
}

int sbx_net_attach(struct sandbox *sb, char *resolv, size_t rlen, char *err, size_t errlen)
{
	struct sbx_mgr *m = sb->m;
	unsigned slot;
	int rc;

	if (!sbx_net(m) || !m->cfg.jail) {
		snprintf(err, errlen, "this huskd gives sandboxes no network: %s",
		         m->cfg.jail ? m->net_why : "husk-jail was not found beside huskd");
		return -EOPNOTSUPP;
	}
	/* Serving a port alone: a namespace of lo, no slot, nothing to count. */
	if (!sb->net)
		return 0;
	/* A VMM is starting: no slot is held (the last VMM's went with it). */
	rc = net_host_slot_take(m->net, &slot);
	if (rc) {
		snprintf(err, errlen, "every network slot of this host is taken");
		return rc;
	}
	sb->net_slot = (int)slot;
	/* The lists are in the kernel before the VMM can send anything. */
	rc = net_host_policy_set(m->net, slot, sb->net_policy, err, errlen);
	if (!rc)
		rc = net_host_count_start(m->net, slot, false, err, errlen);
	if (!rc) {
		rc = write_resolv_conf(sb, resolv, rlen);
		if (rc)
			snprintf(err, errlen, "cannot write %s: %s", resolv, strerror(-rc));
	}
	if (rc)
		sbx_net_detach(sb);
	return rc;
}

uint64_t sbx_net_egress(struct sandbox *sb)
{
	if (sb->net_slot < 0)
		return sb->egress_bytes;
	return sb->egress_bytes + net_host_count(sb->m->net, (unsigned)sb->net_slot);
}

uint64_t *sbx_net_egress_all(struct sbx_mgr *m)
{
	uint64_t *counts = malloc(JAIL_NET_SLOTS * sizeof(*counts));

	if (counts && net_host_counts(m->net, counts)) {
		free(counts);
		counts = NULL;
	}
	return counts;
}

void sbx_net_detach(struct sandbox *sb)
{
	unsigned slot = (unsigned)sb->net_slot;

	/* Its namespace, and the pair in it, went with the VMM; its count stays. */
	if (sb->net_slot < 0)
		return;
	sb->egress_bytes = sbx_net_egress(sb);
	sb->net_slot = -1;
	net_host_count_stop(sb->m->net, slot);
	net_host_policy_clear(sb->m->net, slot);
	net_host_slot_put(sb->m->net, slot);
	if (sb->stored) {
		json_t *pub = json_pack("{sI}", "networkEgressBytes", (json_int_t)sb->egress_bytes);
		json_t *priv = json_pack("{sI}", "netEgress", (json_int_t)sb->egress_bytes);

		if (!pub || !priv || store_sandbox_update(sb->m->store, sb->id, pub, priv, NULL))
			log_error(sb->id, "cannot record its egress count");
		json_decref(pub);
		json_decref(priv);
	}
}

void sbx_net_adopt(struct sandbox *sb, int slot)
{
	char why[300];

	if (!sbx_net(sb->m) || slot < 0 || slot >= JAIL_NET_SLOTS)
		return;
	sb->net_slot = slot;
	net_host_slot_hold(sb->m->net, (unsigned)slot);
	/* huskd's table was made anew at this start: the lists and the count go back in. */
	if (net_host_policy_set(sb->m->net, (unsigned)slot, sb->net_policy, why, sizeof(why)) ||
	    net_host_count_start(sb->m->net, (unsigned)slot, true, why, sizeof(why)))
		log_error(sb->id, "cannot restore its network lists: %s", why);
}

/* Guest addresses 10.0.2.16 to .239: below are slirp's own, above its DHCP range would end. */
#define GUEST_HOST_FIRST 16
#define GUEST_HOST_COUNT 224

static bool host_taken(struct sbx_mgr *m, const struct sandbox *self, unsigned host)
{
	for (struct sandbox *o = m->sandboxes; o; o = o->next)
		if (o != self && o->net_host == host)
			return true;
	return false;
}

void sbx_net_identity(struct sandbox *sb, json_t *priv)
{
	uint8_t r[8];
	unsigned start;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return; /* the VMM's own random MAC and 10.0.2.15, as before */
	/* Locally administered, unicast. */
	snprintf(sb->net_mac, sizeof(sb->net_mac), "02:%02x:%02x:%02x:%02x:%02x", r[0], r[1], r[2],
	         r[3], r[4]);
	/* Each stack is its own, so a shared address would work; apart, programs tell them apart.
	 */
	start = (unsigned)(r[5] | r[6] << 8) % GUEST_HOST_COUNT;
	sb->net_host = GUEST_HOST_FIRST + start;
	for (unsigned i = 0; i < GUEST_HOST_COUNT; i++) {
		unsigned h = GUEST_HOST_FIRST + (start + i) % GUEST_HOST_COUNT;

		if (!host_taken(sb->m, sb, h)) {
			sb->net_host = h;
			break;
		}
	}
	json_object_set_new(priv, "mac", json_string(sb->net_mac));
	json_object_set_new(priv, "guestHost", json_integer(sb->net_host));
}

void sbx_net_identity_adopt(struct sandbox *sb, json_t *priv)
{
	const char *mac = json_string_value(json_object_get(priv, "mac"));
	json_int_t host = json_integer_value(json_object_get(priv, "guestHost"));

	if (!mac || strlen(mac) != sizeof(sb->net_mac) - 1 || host < GUEST_HOST_FIRST ||
	    host >= GUEST_HOST_FIRST + GUEST_HOST_COUNT)
		return;
	snprintf(sb->net_mac, sizeof(sb->net_mac), "%s", mac);
	sb->net_host = (unsigned)host;
}
