// SPDX-License-Identifier: MIT
/*
 * The YAML build file into jansson values, parsed by libyaml (Debian's
 * libyaml-dev). libyaml resolves no types: every scalar is text, so the
 * plain ones are typed here with the few rules a build file needs
 * (YAML 1.2's core schema without floats: a number like 1.5 stays the
 * string it was written as, since env and metadata want strings anyway).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "cli_snap.h"

/* Anchors let a small file name a node many times over (or inside itself). */
#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 100000

struct conv {
	yaml_document_t *doc;
	size_t nodes;
	char *err;
	size_t errlen;
};

static int conv_fail(struct conv *v, const yaml_node_t *n, const char *why, const char *what)
{
	snprintf(v->err, v->errlen, "line %zu, column %zu: %s%s", n->start_mark.line + 1,
	         n->start_mark.column + 1, why, what);
	return -EINVAL;
}

/* An integer as written canonically: no sign but '-', no leading zeros (so 0755 stays text). */
static bool canonical_int(const char *s, size_t n, long long *out)
{
	size_t i = s[0] == '-';

	if (n == i || n - i > 18 || (s[i] == '0' && n - i > 1) || (i && s[i] == '0'))
		return false;
	for (size_t k = i; k < n; k++)
		if (s[k] < '0' || s[k] > '9')
			return false;
	*out = strtoll(s, NULL, 10); /* digits only, at most 18: no overflow */
	return true;
}

static bool one_of(const char *s, size_t n, const char *const *words)
{
	for (; *words; words++)
		if (strlen(*words) == n && !memcmp(*words, s, n))
			return true;
	return false;
}

/*
 * libyaml gives untagged scalars the default str tag, the same as an
 * explicit !!str: so plain text is typed by its look, quoted text stays text,
 * and !!int, !!bool, !!null demand their type.
 */
static int scalar(struct conv *v, const yaml_node_t *n, json_t **out)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
	static const char *const trues[] = {"true", "True", "TRUE", NULL};
	static const char *const falses[] = {"false", "False", "FALSE", NULL};
	const char *s = (const char *)n->data.scalar.value, *tag = (const char *)n->tag;
	size_t len = n->data.scalar.length;
	bool str = !tag || !strcmp(tag, YAML_STR_TAG);
	long long i;

	if (str && n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		*out = json_stringn(s, len);
	else if ((str || !strcmp(tag, YAML_NULL_TAG)) && one_of(s, len, nulls))
		*out = json_null();
	else if ((str || !strcmp(tag, YAML_BOOL_TAG)) && one_of(s, len, trues))
		*out = json_true();
	else if ((str || !strcmp(tag, YAML_BOOL_TAG)) && one_of(s, len, falses))
		*out = json_false();
	else if ((str || !strcmp(tag, YAML_INT_TAG)) && canonical_int(s, len, &i))
		*out = json_integer(i);
	else if (str)
		*out = json_stringn(s, len);
	else
		return conv_fail(v, n,
		                 "a value that is not what its tag says, or a tag other than "
		                 "!!str, !!int, !!bool, !!null: ",
		                 tag);
	return *out ? 0 : conv_fail(v, n, "not valid UTF-8", "");
}

static int node(struct conv *v, yaml_node_t *n, int depth, json_t **out);

static int mapping(struct conv *v, yaml_node_t *n, int depth, json_t **out)
{
	json_t *obj = json_object();
	int rc = 0;

	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     !rc && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(v->doc, p->key);
		yaml_node_t *val = yaml_document_get_node(v->doc, p->value);
		json_t *jv = NULL;
		char key[256];

		if (!k || k->type != YAML_SCALAR_NODE) {
			rc = conv_fail(v, k ? k : n, "a key must be text, not a list or mapping",
			               "");
			break;
		}
		snprintf(key, sizeof(key), "%.*s", (int)k->data.scalar.length,
		         (const char *)k->data.scalar.value);
		if (strlen(key) != k->data.scalar.length)
			rc = conv_fail(v, k, "a key longer than 255 bytes or with a NUL", "");
		else if (json_object_get(obj, key))
			rc = conv_fail(v, k, "a second value for the key ", key);
		if (!rc)
			rc = node(v, val, depth + 1, &jv);
		if (!rc && json_object_set_new(obj, key, jv))
			rc = conv_fail(v, k, "a key that is not valid UTF-8", "");
	}
	if (rc)
		json_decref(obj);
	*out = rc ? NULL : obj;
	return rc;
}

static int node(struct conv *v, yaml_node_t *n, int depth, json_t **out)
{
	json_t *arr, *item;

	*out = NULL;
	if (!n)
		return -EINVAL; /* libyaml's own document: cannot happen */
	if (depth > YAML_MAX_DEPTH)
		return conv_fail(v, n, "nested too deep (an alias inside itself?)", "");
	if (++v->nodes > YAML_MAX_NODES)
		return conv_fail(v, n, "more than 100000 values (aliases repeated too often?)", "");
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return scalar(v, n, out);
	case YAML_MAPPING_NODE:
		return mapping(v, n, depth, out);
	case YAML_SEQUENCE_NODE:
		arr = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     i < n->data.sequence.items.top; i++) {
			int rc = node(v, yaml_document_get_node(v->doc, *i), depth + 1, &item);

			if (rc) {
				json_decref(arr);
				return rc;
			}
			json_array_append_new(arr, item);
		}
		*out = arr;
		return 0;
	default:
		return conv_fail(v, n, "an empty node", "");
	}
}

/* libyaml's error: where (1-based) and what; reader errors have only a byte offset. */
static void parser_error(const yaml_parser_t *p, const char *text, char *err, size_t errlen)
{
	yaml_mark_t m = p->problem_mark;
	int n;

	if (p->error == YAML_READER_ERROR) {
		m = (yaml_mark_t){0};
		for (size_t i = 0; i < p->problem_offset && text[i]; i++) {
			m.line += text[i] == '\n';
			m.column = text[i] == '\n' ? 0 : m.column + 1;
		}
	}
	n = snprintf(err, errlen, "line %zu, column %zu: %s", m.line + 1, m.column + 1,
	             p->problem ? p->problem : "not YAML");
	if (p->context && n > 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - (size_t)n, " (%s at line %zu, column %zu)", p->context,
		         p->context_mark.line + 1, p->context_mark.column + 1);
}

int snap_yaml_parse(const char *text, size_t len, json_t **out, char *err, size_t errlen)
{
	yaml_parser_t p;
	yaml_document_t doc, next;
	struct conv v = {.doc = &doc, .err = err, .errlen = errlen};
	yaml_node_t *root;
	int rc = 0;

	*out = NULL;
	if (!yaml_parser_initialize(&p)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &doc)) {
		parser_error(&p, text, err, errlen);
		yaml_parser_delete(&p);
		return -EINVAL;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		snprintf(err, errlen, "line 1, column 1: the file is empty");
		rc = -EINVAL;
	} else {
		rc = node(&v, root, 0, out);
	}
	/* A second document ("---" again) would be silently ignored: say so instead. */
	if (!rc && !yaml_parser_load(&p, &next)) {
		parser_error(&p, text, err, errlen);
		rc = -EINVAL;
	} else if (!rc) {
		root = yaml_document_get_root_node(&next);
		if (root)
			rc = conv_fail(&v, root, "a second YAML document; a build file is one", "");
		yaml_document_delete(&next);
	}
	if (rc) {
		json_decref(*out);
		*out = NULL;
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return rc;
}
