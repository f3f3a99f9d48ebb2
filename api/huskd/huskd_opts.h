/* SPDX-License-Identifier: MIT */
#ifndef HUSK_HUSKD_OPTS_H
#define HUSK_HUSKD_OPTS_H

/* huskd's command line: what it says in --help and what it reads into struct options. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "http.h"
#include "sbx.h"
#include "tenant.h"

struct options {
	struct http_config http;
	struct sbx_config sbx;
	const char *images;
	bool durable;
	bool plain_http; /* --plain-http */
	char *state, *vmm, *kernel, *initrd, *jail, *importer;
	const char *public_url, *public_domain;
	const char *kms;      /* --kms-command */
	char *egress_text[2]; /* --egress-allow, --egress-deny: the lists' strings */
	const char **egress[2];
	uint64_t stream_ttl_ms;    /* --stream-url-ttl */
	struct tenant_limits keys; /* --key-concurrency, --key-rate */
};

void huskd_usage(FILE *f);
/* 0, 1 (--help: exit 0), or 2 (bad usage, said on stderr). */
int huskd_options(int argc, char **argv, struct options *o);

#endif
