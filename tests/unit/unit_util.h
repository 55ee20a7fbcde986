/*
 * unit_util.h -- what the cmocka programs share: a fresh temporary directory per test (cmocka's setup and
 * teardown), removed with everything in it even when the test fails, so that no run leaves anything in
 * $TMPDIR (default /tmp).  Header-only: each program includes it once.
 */
#ifndef PYC_UNIT_UTIL_H
#define PYC_UNIT_UTIL_H

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* cmocka setup: *state becomes a malloc'd path of a new directory "$TMPDIR/pyc-test-XXXXXX". */
static inline int
unit_tmpdir_setup(void **state)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    char *dir = malloc(PATH_MAX);
    if (dir == NULL)
        return -1;
    if ((size_t)snprintf(dir, PATH_MAX, "%s/pyc-test-XXXXXX", tmp) >= PATH_MAX || mkdtemp(dir) == NULL) {
        free(dir);
        return -1;
    }
    *state = dir;
    return 0;
}

static inline int
unit_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        chmod(path, 0700);       /* a test may have made a directory read-only */
    return remove(path);
}

/* cmocka teardown: removes the directory tree and frees the path. */
static inline int
unit_tmpdir_teardown(void **state)
{
    char *dir = *state;
    int rc = nftw(dir, unit_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
    return rc == 0 ? 0 : -1;
}

#endif
