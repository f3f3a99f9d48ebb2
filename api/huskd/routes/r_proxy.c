// SPDX-License-Identifier: MIT
/*
 * A sandbox's exposed port (network.port) at its url, through huskd's own
 * listener: by host name (sbx-<rand>-<port>.<public domain>, or E2B's
 * <port>-<sandbox id>.<public domain>, with huskd --public-domain) or by path
 * (/p/<sandbox-id>/... or /p/<sandbox-id>:<port>/...), which needs no DNS and
 * crosses wherever huskd's port does. A sandbox made with network.allPorts
 * serves any port named; others their network.port. The first request is rewritten
 * (the path prefix dropped, X-Forwarded-* added) and the connection is
 * then handed to a byte tunnel to the VMM's socket for that port: HTTP
 * keep-alive, streaming and WebSocket upgrades pass as they are. A path
 * request carries "Connection: close" upstream (the next request on the
 * connection may be for another path), an upgrade excepted. A sandbox made
 * with network.urlToken takes only requests that carry its url's token
 * (X-Husk-Url-Token, or ?husk_token= which the guest's server never sees): the
 * first request of a connection is checked, and the connection is its.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "http_tunnel.h"
#include "r_int.h"
#include "r_target.h"

#define NO_ANSWER                                                                    \
	"HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nConnection: " \
	"close\r\nContent-Length: %zu\r\n\r\n%s"
#define NO_ANSWER_BODY                                                                  \
	"{\"success\":false,\"code\":\"SANDBOX_UNREACHABLE\",\"message\":\"nothing in " \
	"sandbox %s answered on port %u: start a server listening on 0.0.0.0:%u\"}"

struct proxy {
	struct routes *rt;
	struct http_req *r;
	bool gone; /* the client went away while the sandbox was being readied */
	struct proxy_target t;
};

static bool skip_header(const char *name, bool by_path, bool upgrade)
{
	static const char *const hop[] = {"Content-Length",    "Transfer-Encoding",
	                                  "X-Forwarded-For",   "X-Forwarded-Host",
	                                  "X-Forwarded-Proto", NULL};

	for (const char *const *h = hop; *h; h++)
		if (!strcasecmp(name, *h))
			return true;
	return by_path && !upgrade &&
	       (!strcasecmp(name, "Connection") || !strcasecmp(name, "Keep-Alive"));
}

/* The request as the guest's server gets it; NULL if it does not fit. */
static char *upstream_head(struct proxy *px, struct http_req *r, size_t body_len, size_t *len)
{
	const char *up = http_header(r, "Upgrade");
	bool upgrade = up && *up;
	size_t cap = 16384, n = 0;
	char *buf = malloc(cap);
	int w;

	if (!buf)
		return NULL;
#define PUT(...)                                             \
	do {                                                 \
		w = snprintf(buf + n, cap - n, __VA_ARGS__); \
		if (w < 0 || (size_t)w >= cap - n) {         \
			free(buf);                           \
			return NULL;                         \
		}                                            \
		n += (size_t)w;                              \
	} while (0)
	PUT("%s %s HTTP/1.1\r\n", http_method(r), px->t.path);
	for (size_t i = 0; i < http_header_count(r); i++) {
		const char *name, *value;

		http_header_at(r, i, &name, &value);
		if (!skip_header(name, px->t.by_path, upgrade))
			PUT("%s: %s\r\n", name, value);
	}
	PUT("X-Forwarded-For: %.*s\r\n", (int)strcspn(http_peer(r), "]:"),
	    http_peer(r)[0] == '[' ? http_peer(r) + 1 : http_peer(r));
	if (http_header(r, "Host"))
		PUT("X-Forwarded-Host: %s\r\n", http_header(r, "Host"));
	PUT("X-Forwarded-Proto: http\r\n");
	if (px->t.by_path && !upgrade)
		PUT("Connection: close\r\n");
	if (body_len || !strcmp(http_method(r), "POST") || !strcmp(http_method(r), "PUT"))
		PUT("Content-Length: %zu\r\n", body_len);
	PUT("\r\n");
#undef PUT
	*len = n;
	return buf;
}

static void tunnel_activity(void *arg)
{
	struct proxy *px = arg;

	sbx_port_touch(px->rt->m, px->t.id);
}

static void tunnel_closed(void *arg)
{
	free(arg);
}

static const struct http_tunnel_ops tunnel_ops = {.activity = tunnel_activity,
                                                  .closed = tunnel_closed};

static void port_ready(void *ctx, const struct sbx_err *err, const char *sock, unsigned port)
{
	struct proxy *px = ctx;
	struct http_req *r = px->r;
	char *up, *more, *rest = NULL, no_answer[1024], body_msg[512];
	size_t head_len, body_len = 0, rest_len = 0;
	const void *body = http_body(r, &body_len);
	int fd, rc;

	if (px->gone) {
		http_respond(r, 499, "text/plain", "", 0); /* frees r: the client is gone */
		free(px);
		return;
	}
	http_on_close(r, NULL, NULL);
	if (err) {
		reply_error(r, err, S_SANDBOX);
		free(px);
		return;
	}
	px->t.port = port;
	up = upstream_head(px, r, body_len, &head_len);
	more = up ? realloc(up, head_len + body_len + 1) : NULL;
	if (!more) {
		free(up);
		api_error(r, 431, "HEADERS_TOO_LARGE",
		          "the request's head is too large to pass on");
		free(px);
		return;
	}
	up = more;
	if (body_len) /* r, and its body, go with the takeover */
		memcpy(up + head_len, body, body_len);
	rc = http_takeover(r, &fd, &rest, &rest_len);
	if (rc == -EOPNOTSUPP) {
		free(up);
		api_error(r, 501, "NOT_IMPLEMENTED",
		          "sandbox urls are not served over huskd's own TLS yet: to open them, run "
		          "huskd without --tls-cert behind a TLS proxy");
		free(px);
		return;
	}
	if (rc) {
		free(up);
		api_error(r, 503, "UNAVAILABLE", "cannot pass the request on: %s", strerror(-rc));
		free(px);
		return;
	}
	/* What the client sent after the request (a WebSocket's first frames) follows it. */
	more = rest_len ? realloc(up, head_len + body_len + rest_len) : up;
	if (!more) {
		free(up);
		free(rest);
		close(fd);
		free(px);
		return;
	}
	up = more;
	if (rest_len)
		memcpy(up + head_len + body_len, rest, rest_len);
	free(rest);
	snprintf(body_msg, sizeof(body_msg), NO_ANSWER_BODY, px->t.id, px->t.port, px->t.port);
	snprintf(no_answer, sizeof(no_answer), NO_ANSWER, strlen(body_msg), body_msg);
	px->r = NULL;
	rc = http_tunnel_start(px->rt->cfg.loop, fd, sock, up, head_len + body_len + rest_len,
	                       no_answer, &tunnel_ops, px);
	free(up);
	if (rc) {
		log_warn(px->t.id, "cannot open its port %u for a client: %s", px->t.port,
		         strerror(-rc));
		free(px);
	}
}

static void client_gone(struct http_req *r, void *arg)
{
	struct proxy *px = arg;

	(void)r;
	px->gone = true;
}

/* A url made with network.urlToken without its token: true after a 401. */
static bool token_refused(struct routes *rt, struct http_req *r, struct proxy_target *t)
{
	char want[ROUTES_TOKEN_HEX + 1], given[ROUTES_TOKEN_HEX + 2] = "";
	/* E2B's SDK sends a sandbox's trafficAccessToken (the same token) under its own name. */
	const char *h =
		http_header(r, "X-Husk-Url-Token") ?: http_header(r, "E2b-Traffic-Access-Token");
	struct sbx_err err;
	json_t *info = NULL;
	bool needed;

	/* Taken out of the query always: the guest's server never sees it. */
	if (proxy_take_token(t, given, sizeof(given)) < 0)
		given[0] = '\0';
	if (h)
		snprintf(given, sizeof(given), "%s", h);
	needed = sbx_get(rt->m, t->id, &info, &err) == 0 &&
	         json_is_true(json_object_get(info, "urlTokenRequired"));
	json_decref(info);
	if (!needed)
		return false;
	routes_token(rt, "url", t->id, want);
	if (strlen(given) == ROUTES_TOKEN_HEX && CRYPTO_memcmp(given, want, ROUTES_TOKEN_HEX) == 0)
		return false;
	api_error(r, 401, "URL_TOKEN_REQUIRED",
	          "sandbox %s's url needs its token (urlToken in its create and get answers): "
	          "send it as the X-Husk-Url-Token header or the husk_token query parameter",
	          t->id);
	return true;
}

bool proxy_route(struct routes *rt, struct http_req *r)
{
	struct proxy *px;
	struct proxy_target t;
	int rc = proxy_target(http_header(r, "Host"), http_path(r), http_query(r),
	                      rt->cfg.public_domain, &t);

	if (rc == 0)
		return false;
	if (rc < 0) {
		api_error(r, 414, "URI_TOO_LONG", "the path and query are too long to pass on");
		return true;
	}
	px = malloc(sizeof(*px));
	if (!px) {
		api_error(r, 503, "UNAVAILABLE", "out of memory");
		return true;
	}
	*px = (struct proxy){.rt = rt, .r = r, .t = t};
	if (token_refused(rt, r, &px->t)) {
		free(px);
		return true;
	}
	http_on_close(r, client_gone, px);
	sbx_port_open(rt->m, px->t.id, px->t.port, port_ready, px);
	return true;
}

/*
 * A url of sandbox id's port: "<scheme>://sbx-<rand>-<port>.<domain>/", or
 * by path "<base>/p/<id>/" (its network.port) or "<base>/p/<id>:{port}/".
 */
static int url_for(struct routes *rt, struct http_req *r, const char *id, const char *port,
                   char *out, size_t outlen)
{
	const char *pub = rt->cfg.public_url;
	bool any = !strcmp(port, "{port}");
	char base[512];
	int n;

	if (rt->cfg.public_domain)
		n = snprintf(out, outlen, "%s://sbx-%s-%s.%s/",
		             pub && !strncmp(pub, "https:", 6) ? "https" : "http", id + 4, port,
		             rt->cfg.public_domain);
	else if (base_url(rt, r, base, sizeof(base)) == 0)
		n = snprintf(out, outlen, "%s" PROXY_PATH_PREFIX "%s%s%s/", base, id,
		             any ? ":" : "", any ? port : "");
	else
		return -ENAMETOOLONG;
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int proxy_url(struct routes *rt, struct http_req *r, json_t *info)
{
	const char *id = json_string_value(json_object_get(info, "sandboxId"));
	json_t *port = json_object_get(info, "networkPort");
	char url[1024], num[16];

	if (!id || strlen(id) < 5)
		return 0;
	/* Any port: the url with "{port}" for the client to fill in. */
	if (json_is_true(json_object_get(info, "networkAllPorts"))) {
		if (url_for(rt, r, id, "{port}", url, sizeof(url)))
			return -ENAMETOOLONG;
		json_object_set_new(info, "portUrl", json_string(url));
	}
	if (json_is_integer(port)) {
		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(port));
		if (url_for(rt, r, id, num, url, sizeof(url)))
			return -ENAMETOOLONG;
		json_object_set_new(info, "url", json_string(url));
	}
	if (json_is_true(json_object_get(info, "urlTokenRequired"))) {
		char tok[ROUTES_TOKEN_HEX + 1];

		routes_token(rt, "url", id, tok);
		json_object_set_new(info, "urlToken", json_string(tok));
	}
	return 0;
}
