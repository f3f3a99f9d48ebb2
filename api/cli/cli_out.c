// SPDX-License-Identifier: MIT
/* What the CLI prints: JSON for --json, otherwise tables and "field: value" lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A cell wider than this is cut: one long command must not push every column away. */
#define CELL_MAX 60

void out_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
	putchar('\n');
}

int out_data(json_t *envelope)
{
	json_t *data = json_object_get(envelope, "data"), *rest;

	if (data) {
		out_json(data);
		return 0;
	}
	/* {success:true} and top-level answers (pause, rm's found): the fields but success. */
	rest = json_deep_copy(envelope);
	json_object_del(rest, "success");
	out_json(rest ? rest : json_object());
	json_decref(rest);
	return 0;
}

static json_t *reach(json_t *obj, const char *key)
{
	char part[64];

	while (obj && key && *key) {
		size_t n = strcspn(key, ".");

		snprintf(part, sizeof(part), "%.*s", (int)n, key);
		obj = json_object_get(obj, part);
		key = key[n] ? key + n + 1 : NULL;
	}
	return obj;
}

static void append(char *buf, size_t len, const char *s)
{
	size_t have = strlen(buf);

	snprintf(buf + have, len - have, "%s", s);
}

const char *out_cell(json_t *obj, const char *key, char *buf, size_t len)
{
	json_t *v = reach(obj, key), *e;
	size_t i;
	char *dump;

	buf[0] = '\0';
	switch (v ? json_typeof(v) : JSON_NULL) { /* json_typeof(NULL) would dereference it */
	case JSON_STRING:
		snprintf(buf, len, "%s", json_string_value(v));
		break;
	case JSON_INTEGER:
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(buf, len, "%g", json_real_value(v));
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
		break;
	case JSON_ARRAY:
		json_array_foreach(v, i, e)
		{
			char one[1024];

			if (i)
				append(buf, len, " ");
			append(buf, len, out_cell(e, NULL, one, sizeof(one)));
		}
		break;
	case JSON_OBJECT:
		dump = json_dumps(v, JSON_COMPACT);
		snprintf(buf, len, "%s", dump ? dump : "");
		free(dump);
		break;
	default:
		break;
	}
	/* One line per row: a newline in a value must not break the table. */
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	return buf;
}

void out_table(json_t *rows, const struct col *cols)
{
	int ncols = 0, w[16] = {0};
	size_t i;
	json_t *row;
	char cell[1024];

	while (cols[ncols].title && ncols < 16)
		ncols++;
	if (!json_array_size(rows)) {
		printf("(none)\n");
		return;
	}
	for (int k = 0; k < ncols; k++)
		w[k] = (int)strlen(cols[k].title);
	json_array_foreach(rows, i, row)
	{
		for (int k = 0; k < ncols; k++) {
			int n = (int)strlen(out_cell(row, cols[k].key, cell, sizeof(cell)));

			n = n > CELL_MAX ? CELL_MAX : n ? n : 1;
			if (n > w[k])
				w[k] = n;
		}
	}
	for (int k = 0; k < ncols; k++)
		printf("%-*s%s", k == ncols - 1 ? 0 : w[k], cols[k].title,
		       k == ncols - 1 ? "\n" : "  ");
	json_array_foreach(rows, i, row)
	{
		for (int k = 0; k < ncols; k++) {
			out_cell(row, cols[k].key, cell, sizeof(cell));
			if (strlen(cell) > CELL_MAX)
				strcpy(cell + CELL_MAX - 3, "...");
			printf("%-*s%s", k == ncols - 1 ? 0 : w[k], cell[0] ? cell : "-",
			       k == ncols - 1 ? "\n" : "  ");
		}
	}
}

void out_fields(json_t *obj, const struct col *fields)
{
	int w = 0;
	char cell[4096];

	for (const struct col *f = fields; f->title; f++)
		if ((int)strlen(f->title) > w)
			w = (int)strlen(f->title);
	for (const struct col *f = fields; f->title; f++)
		if (*out_cell(obj, f->key, cell, sizeof(cell)))
			printf("%-*s  %s\n", w + 1, f->title, cell);
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (n < len)
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0; /* overlong */
	else if (s[0] == 0xed)
		hi = 0x9f; /* surrogates */
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f; /* above U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

json_t *out_string_bytes(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	char *fixed;
	size_t o = 0;
	json_t *j;

	j = json_stringn(s, len);
	if (j)
		return j;
	fixed = malloc(len * 3 + 1);
	if (!fixed)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i);

		if (n) {
			memcpy(fixed + o, p + i, n);
			o += n;
			i += n;
		} else {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	j = json_stringn(fixed, o);
	free(fixed);
	return j;
}

const char *out_bytes(double n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;

	while (n >= 1024 && u < 4) {
		n /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", n, units[u]);
	return buf;
}
