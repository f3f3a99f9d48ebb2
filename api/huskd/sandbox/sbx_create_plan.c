// SPDX-License-Identifier: MIT
/*
 * POST /sandbox's request read into what the sandbox gets: its resources,
 * network, timeouts, env and files, checked (a bad one named with its fix),
 * and the SandboxInfo recorded for it (sbx_create.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sbx_create_plan.h"

#define DEFAULT_MEM (512ll << 20)
#define MAX_VCPUS 16
/* A forgotten sandbox must not hold a VM forever; timeout.idle "0s" means never. */
#define DEFAULT_IDLE_MS (10 * 60 * 1000)

/* Reads resources into what the VMM gets. */
int sbx_plan_resources(json_t *res, json_t *rt_req, int64_t *mem, int64_t *millis, int64_t *disk,
                       struct sbx_err *err)
{
	const char *m = json_string_value(json_object_get(res, "memory"));
	const char *c = json_string_value(json_object_get(res, "cpu"));
	const char *k = json_string_value(json_object_get(res, "disk"));

	*mem = DEFAULT_MEM;
	*millis = 1000;
	*disk = 0;
	if (!m)
		m = json_string_value(json_object_get(rt_req, "memory"));
	if (m && (store_parse_bytes(m, mem) || *mem < (64ll << 20) || *mem > (64ll << 30)))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "resources.memory '%s': give a size from 64Mi to 64Gi, e.g. 512Mi",
		                m);
	if (*mem < (256ll << 20))
		*mem = 256ll << 20; /* below this a runtime's language does not start reliably */
	if (c && (store_parse_cpu(c, millis) || *millis < 100 || *millis > MAX_VCPUS * 1000))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "resources.cpu '%s': give millicores (500m) or cores (2), up to %d",
		                c, MAX_VCPUS);
	if (k && (store_parse_bytes(k, disk) || *disk <= 0 || *disk > (1ll << 40)))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "resources.disk '%s': give a size such as 2Gi", k);
	return 0;
}

/*
 * network: {enabled, port, allPorts, urlToken, allow, deny, egressBytesPerSec}; a network this
 * host cannot give is refused here, not at boot.
 */
int sbx_plan_network(struct sbx_mgr *m, json_t *body, struct sandbox *sb, struct sbx_err *err)
{
	json_t *net = json_object_get(body, "network");
	json_t *on = json_object_get(net, "enabled"), *port = json_object_get(net, "port");
	json_t *rate = json_object_get(net, "egressBytesPerSec");
	json_t *token = json_object_get(net, "urlToken"), *all = json_object_get(net, "allPorts");

	sb->egress_rate = m->cfg.egress_rate;
	if (!net || json_is_null(net))
		return 0;
	if (!json_is_object(net) || (on && !json_is_boolean(on)))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network must be an object such as {\"enabled\": true}");
	if (port && !json_is_null(port) &&
	    (!json_is_integer(port) || json_integer_value(port) < 1024 ||
	     json_integer_value(port) > 65535))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.port must be a number from 1024 to 65535");
	sb->port = json_is_integer(port) ? (unsigned)json_integer_value(port) : 0;
	if (all && !json_is_boolean(all))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.allPorts must be true or false (true: every guest TCP "
		                "port is served at the sandbox's url forms)");
	sb->all_ports = json_is_true(all);
	if (token &&
	    (!json_is_boolean(token) || (json_is_true(token) && !sb->port && !sb->all_ports)))
		return sbx_fail(
			err, SBX_BAD_INPUT, -EINVAL,
			"network.urlToken must be true or false, and true needs network.port "
			"or network.allPorts (it guards their urls)");
	if (rate && (!json_is_integer(rate) || json_integer_value(rate) < 1000))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.egressBytesPerSec must be a number of bytes per second, "
		                "1000 or more");
	/* A sandbox may ask for less than huskd's limit, never more. */
	if (rate && (!sb->egress_rate || (uint64_t)json_integer_value(rate) < sb->egress_rate))
		sb->egress_rate = (uint64_t)json_integer_value(rate);
	sb->net = json_is_true(on);
	if ((json_object_get(net, "allow") || json_object_get(net, "deny")) && !sb->net)
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "network.allow and network.deny need network.enabled: true");
	if (sb->net &&
	    sbx_net_policy(sb, json_object_get(net, "allow"), json_object_get(net, "deny"), err))
		return -EINVAL;
	if (sbx_has_nic(sb) && (!m->cfg.jail || !sbx_net(m)))
		return sbx_fail(err, SBX_UNAVAILABLE, -EOPNOTSUPP,
		                "%s: this huskd gives sandboxes no network (%s)",
		                sb->net    ? "network.enabled"
		                : sb->port ? "network.port"
		                           : "network.allPorts",
		                m->cfg.jail ? m->net_why : "husk-jail was not found beside huskd");
	return 0;
}

/* Timeouts and the other fields the sandbox keeps; the request's shape checked. */
int sbx_plan_limits(json_t *body, struct sandbox *sb, struct sbx_err *err)
{
	json_t *cmd = json_object_get(body, "command"), *env = json_object_get(body, "env");
	json_t *timeout = json_object_get(body, "timeout");
	const char *dur, *mode;

	if (env && !json_is_object(env))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL, "env must be an object of strings");
	if (cmd && !json_is_array(json_object_get(cmd, "exec")))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "command.exec must be an array of strings");
	sb->idle_ms = DEFAULT_IDLE_MS;
	if (timeout && (dur = json_string_value(json_object_get(timeout, "execution"))) &&
	    parse_duration_ms(dur, &sb->exec_timeout_ms))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "timeout.execution '%s' is not a duration such as 30s or 5m", dur);
	if (timeout && (dur = json_string_value(json_object_get(timeout, "idle"))) &&
	    parse_duration_ms(dur, &sb->idle_ms))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "timeout.idle '%s' is not a duration such as 10m or 1h (0s: never)",
		                dur);
	if (timeout && (dur = json_string_value(json_object_get(timeout, "paused"))) &&
	    parse_duration_ms(dur, &sb->paused_ms))
		return sbx_fail(err, SBX_BAD_INPUT, -EINVAL,
		                "timeout.paused '%s' is not a duration such as 30m or 24h (0s: "
		                "never)",
		                dur);
	mode = cmd ? json_string_value(json_object_get(cmd, "mode")) : NULL;
	sb->oneshot = mode && !strcmp(mode, "oneshot");
	if (env)
		json_object_update(sb->env, env);
	sb->files = json_array();
	if (json_is_array(json_object_get(cmd, "files")))
		json_array_extend(sb->files, json_object_get(cmd, "files"));
	if (json_is_array(json_object_get(body, "files")))
		json_array_extend(sb->files, json_object_get(body, "files"));
	if (!json_array_size(sb->files)) {
		json_decref(sb->files);
		sb->files = NULL;
	}
	return 0;
}

/* The SandboxInfo to record: what the request asked for, as the sandbox gets it. */
json_t *sbx_plan_info(json_t *body, struct sandbox *sb, json_t *rt, int64_t mem)
{
	json_t *cmd = json_object_get(body, "command"), *timeout = json_object_get(body, "timeout");
	json_t *pub;

	json_t *org = json_object_get(body, "org");

	pub = json_pack(
		"{sssss{ssss}s{ssss}s{sosos{}}sssssb}", "sandboxId", sb->id, "status", "creating",
		"runtime", "id", json_string_value(json_object_get(rt, "id")), "name",
		json_string_value(json_object_get(rt, "name")), "org", "id", sbx_info_org(body),
		"name", json_string_value(json_object_get(org, "name")) ?: STORE_DEFAULT_ORG_NAME,
		"resources", "memory", json_sprintf("%lldMi", (long long)(mem >> 20)), "cpu",
		json_sprintf("%lldm", (long long)sb->cpu_millis), "disk", "region", "local", "mode",
		sb->oneshot ? "oneshot" : "interactive", "networkEnabled", sb->net);
	if (!pub)
		return NULL;
	if (sb->port)
		json_object_set_new(pub, "networkPort", json_integer(sb->port));
	/* The routes give and check the token (an HMAC of the id); the record says it is needed. */
	if (sb->all_ports)
		json_object_set_new(pub, "networkAllPorts", json_true());
	if ((sb->port || sb->all_ports) &&
	    json_is_true(json_object_get(json_object_get(body, "network"), "urlToken")))
		json_object_set_new(pub, "urlTokenRequired", json_true());
	for (const char *const *k =
	             (const char *const[]){"name", "description", "metadata", "projectId",
	                                   "dependencies", "packages", NULL};
	     *k; k++)
		if (json_object_get(body, *k))
			json_object_set(pub, *k, json_object_get(body, *k));
	if (timeout)
		json_object_set(pub, "timeout", timeout);
	if (cmd)
		json_object_set_new(pub, "command",
		                    json_pack("{sOss}", "exec", json_object_get(cmd, "exec"),
		                              "mode", sb->oneshot ? "oneshot" : "interactive"));
	return pub;
}
