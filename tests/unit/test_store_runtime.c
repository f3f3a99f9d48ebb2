// SPDX-License-Identifier: MIT
/* The runtime catalog in the state store. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_store.h"
#include "unit.h"

/* An entry as images/runtimes/build.sh writes it (build/images/runtimes/catalog.json). */
#define ENTRY(id, name, desc, file)                                                               \
	"{\"id\":\"" id "\",\"name\":\"" name "\",\"description\":\"" desc "\","                  \
	"\"url\":\"https://bun.sh/\",\"brandColor\":\"#FBF0DF\",\"tags\":[\"language\",\"bun\"]," \
	"\"requirements\":{\"memory\":\"512Mi\",\"cpu\":\"1\",\"disk\":\"1Gi\","                  \
	"\"networkEnabled\":false},"                                                              \
	"\"image\":{\"file\":\"" file "\",\"format\":\"qcow2\",\"size\":200081408,"               \
	"\"virtualSize\":402653184,\"filesystem\":\"ext4\",\"key\":\"05686b99e05e3c2b\"}}"

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int ok = f && fputs(text, f) >= 0;

	if (f && fclose(f))
		ok = 0;
	return ok ? 0 : -1;
}

UNIT_TEST(store_runtimes_follow_the_catalog)
{
	const char *catalog = tstore_path("catalog.json");
	struct store *s = tstore_open("runtimes.db");
	char err[256] = "", want[PATH_MAX], *dir_end;
	json_t *list, *rt, *priv;

	CHECK(s);
	CHECK(write_file(
		      catalog,
		      "{\"runtimes\":[" ENTRY("srt_bun1", "bun:1", "Bun", "bun-1.qcow2") "," ENTRY(
			      "srt_base", "base:latest", "Base",
			      "base-latest.qcow2") "],\"total\":2}") == 0);
	CHECK(store_runtimes_load(s, catalog, err, sizeof(err)) == 0);
	CHECK(store_runtime_list(s, NULL, false, 0, 0, &list) == 0);
	CHECK(tstore_int(list, "total") == 2);
	rt = json_array_get(json_object_get(list, "runtimes"), 0);
	CHECK(!strcmp(tstore_str(rt, "name"), "base:latest") &&
	      !strcmp(tstore_str(rt, "id"), "srt_base"));
	CHECK(!json_object_get(rt, "image"));
	CHECK(json_is_false(
		json_object_get(json_object_get(rt, "requirements"), "networkEnabled")));
	json_decref(list);
	CHECK(store_runtime_list(s, "name", true, 1, 0, &list) == 0);
	CHECK(!strcmp(tstore_str(json_array_get(json_object_get(list, "runtimes"), 0), "name"),
	              "bun:1"));
	CHECK(tstore_int(list, "total") == 2);
	json_decref(list);
	CHECK(store_runtime_list(s, "size", false, 0, 0, &list) == -EINVAL);

	/* By name or id; the image, with its absolute path, is private. */
	CHECK(store_runtime_get(s, "bun:1", &rt, &priv) == 0);
	CHECK(!strcmp(tstore_str(rt, "id"), "srt_bun1"));
	CHECK(realpath(catalog, want));
	dir_end = strrchr(want, '/');
	CHECK(dir_end);
	strcpy(dir_end + 1, "bun-1.qcow2");
	CHECK(!strcmp(tstore_str(priv, "path"), want));
	CHECK(!strcmp(tstore_str(priv, "format"), "qcow2"));
	json_decref(rt);
	json_decref(priv);
	CHECK(store_runtime_get(s, "srt_base", &rt, NULL) == 0);
	json_decref(rt);
	CHECK(store_runtime_get(s, "python:9", &rt, NULL) == -ENOENT);

	/* A new catalog replaces the old: one gone, one changed. */
	CHECK(write_file(catalog, "{\"runtimes\":[" ENTRY("srt_bun1", "bun:1", "Bun 2",
	                                                  "bun-1.qcow2") "],\"total\":1}") == 0);
	CHECK(store_runtimes_load(s, catalog, err, sizeof(err)) == 0);
	CHECK(store_runtime_get(s, "base:latest", &rt, NULL) == -ENOENT);
	CHECK(store_runtime_get(s, "bun:1", &rt, NULL) == 0);
	CHECK(!strcmp(tstore_str(rt, "description"), "Bun 2"));
	json_decref(rt);

	/* Bad catalogs change nothing and say why. */
	CHECK(write_file(catalog, "{\"runtimes\":[{\"id\":\"srt_x\"}]}") == 0);
	CHECK(store_runtimes_load(s, catalog, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "runtime 0"));
	CHECK(write_file(catalog, "{\"runtimes\":[" ENTRY("srt_a", "same", "A", "a") "," ENTRY(
					  "srt_b", "same", "B", "b") "]}") == 0);
	CHECK(store_runtimes_load(s, catalog, err, sizeof(err)) == -EEXIST);
	CHECK(strstr(err, "same"));
	CHECK(write_file(catalog, "{\"runtimes\": [") == 0);
	CHECK(store_runtimes_load(s, catalog, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, catalog));
	CHECK(store_runtimes_load(s, "/nonexistent/catalog.json", err, sizeof(err)) < 0);
	CHECK(store_runtime_list(s, NULL, false, 0, 0, &list) == 0);
	CHECK(tstore_int(list, "total") == 1);
	json_decref(list);
	store_close(s);
}
