// SPDX-License-Identifier: MIT
/*
 * Spare layers (api/huskd/sandbox/sbx_spare.c): a create leaves a layer made
 * for the next create over the same base, size and org, which that create
 * takes with its key. The fake VMM opens each sandbox's disk with the keys
 * huskd gives it, so a spare whose file and key did not belong together
 * would fail its sandbox's start. Taken only for the same org, over the
 * same base file (not one remade at its path), with a key that still opens.
 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keystore.h"
#include "sbx_spare.h"
#include "sbx_test.h"

static bool one_ready(void *arg)
{
	(void)arg;
	return sbx_spare_count(T.m, true) == 1;
}

/*
 * The spare found last, held open: once huskd drops it, ext4 would give its
 * inode number to the next file made (the next create's layer), and an
 * inode comparison would take that layer for the spare.
 */
static int held = -1;

/* The one spare's file and its inode; false unless there is exactly one. */
static bool the_spare(char *path, size_t len, ino_t *ino)
{
	char dir[300];
	struct dirent *e;
	struct stat st;
	unsigned n = 0;
	DIR *d;

	if (!t_wait(one_ready, NULL, T_WAIT_MS))
		return false;
	snprintf(dir, sizeof(dir), "%s/state/spares", T.root);
	d = opendir(dir);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && ++n == 1)
			snprintf(path, len, "%s/%s", dir, e->d_name);
	if (d)
		closedir(d);
	if (held >= 0)
		close(held);
	held = n == 1 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (held < 0 || fstat(held, &st) < 0)
		return false;
	*ino = st.st_ino;
	return true;
}

static ino_t ino_of(const char *path)
{
	struct stat st;

	return path && stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Creates from body and waits until it is idle: its layer's inode, 0 if it did not start. */
static ino_t started(const char *body, char id[STORE_ID_LEN], char *err, size_t errlen)
{
	const char *made = t_create(body, NULL, err, errlen);

	snprintf(id, STORE_ID_LEN, "%s", made ? made : "");
	return made && t_wait_state(id, SBX_IDLE) ? ino_of(t_sb(id)->layer) : 0;
}

static bool spares_empty(void)
{
	char dir[300];
	struct dirent *e;
	bool empty = true;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/state/spares", T.root);
	d = opendir(dir);
	while (d && (e = readdir(d)))
		empty = empty && e->d_name[0] == '.';
	if (d)
		closedir(d);
	return d && empty;
}

static bool all_ready(void *arg)
{
	(void)arg;
	return sbx_spare_count(T.m, false) == sbx_spare_count(T.m, true);
}

static void destroy(char *const *ids)
{
	for (; *ids; ids++)
		if ((*ids)[0])
			t_destroy(*ids);
}

void t_spares(void)
{
	char a[STORE_ID_LEN], b[STORE_ID_LEN], c[STORE_ID_LEN], d[STORE_ID_LEN], e[STORE_ID_LEN],
		f[STORE_ID_LEN], err[512] = "", path[600], base[4200] = "";
	ino_t spare = 0, got;

	/* From none: a fresh manager. */
	t_close();
	t_open();
	got = started("{}", a, err, sizeof(err));
	t_check("spare_made_after_create", got && the_spare(path, sizeof(path), &spare), "%s",
	        got ? "no spare appeared" : err);
	got = started("{}", b, err, sizeof(err));
	t_check("spare_taken_by_next_create", got && got == spare && access(path, F_OK) < 0,
	        "layer inode %lu, spare %lu: %s", (unsigned long)got, (unsigned long)spare, err);
	/* The spare's master key, known from making it, opens it at its first start. */
	t_check("spare_opened_by_its_master_key",
	        got && !strcmp(t_keys_given(b, err, sizeof(err)), "0 passphrases, 1 master keys"),
	        "'%s'", err);

	/* Another org's create makes its own: this org's spare waits for this org's next. */
	if (!the_spare(path, sizeof(path), &spare))
		spare = 0;
	got = started("{\"org\":{\"id\":\"org_spare\"}}", c, err, sizeof(err));
	t_check("spare_not_for_another_org",
	        spare && got && got != spare && access(path, F_OK) == 0, "%s", err);

	/* The base remade at its path (here: its time changed): the spare is not over it. */
	t_wait(all_ready, NULL, T_WAIT_MS);
	if (t_sb(a))
		snprintf(base, sizeof(base), "%s", t_sb(a)->base);
	got = base[0] && utimensat(AT_FDCWD, base, NULL, 0) == 0
	              ? started("{}", d, err, sizeof(err))
	              : 0;
	t_check("spare_not_over_a_remade_base",
	        spare && got && got != spare && access(path, F_OK) < 0, "base %s: %s", base, err);
	t_wait(all_ready, NULL, T_WAIT_MS);
	destroy((char *const[]){a, b, c, d, NULL});
	t_close();
	t_check("spares_gone_at_stop", spares_empty(), "state/spares still holds files");
	t_open();

	/* Its org's key shredded: the spare's key no longer opens; the create makes its own. */
	err[0] = '\0';
	if (!started("{}", e, err, sizeof(err)) || !the_spare(path, sizeof(path), &spare) ||
	    keystore_shred(T.cfg.keys, STORE_DEFAULT_ORG, err, sizeof(err)))
		spare = 0;
	got = spare ? started("{}", f, err, sizeof(err)) : 0;
	t_check("spare_not_after_its_key_shredded",
	        spare && got && got != spare && access(path, F_OK) < 0,
	        "layer inode %lu, spare %lu, spare file %s: %s", (unsigned long)got,
	        (unsigned long)spare, access(path, F_OK) ? "gone" : "still there", err);
	destroy((char *const[]){e, f, NULL});
	close(held);
	held = -1;
}
