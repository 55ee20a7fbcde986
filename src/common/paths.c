/*
 * paths.c -- Jupyter's per-user directories; see paths.h.
 */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "random.h"

/* getenv, with "" counting as unset. */
static const char *
env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static int
fits(char *out, size_t cap, int n)
{
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return -1;
    }
    return 0;
}

int
pyc_jupyter_data_dir(char *out, size_t cap)
{
    const char *v;
    if ((v = env("JUPYTER_DATA_DIR")) != NULL)
        return fits(out, cap, snprintf(out, cap, "%s", v));
    if ((v = env("XDG_DATA_HOME")) != NULL)
        return fits(out, cap, snprintf(out, cap, "%s/jupyter", v));
    const char *home = env("HOME");
    if (home == NULL) {
        struct passwd *pw = getpwuid(getuid());
        home = pw != NULL && pw->pw_dir != NULL && pw->pw_dir[0] != '\0' ? pw->pw_dir : NULL;
    }
    if (home == NULL)
        return fits(out, cap, -1);
    return fits(out, cap, snprintf(out, cap, "%s/.local/share/jupyter", home));
}

int
pyc_jupyter_runtime_dir(char *out, size_t cap)
{
    const char *v = env("JUPYTER_RUNTIME_DIR");
    if (v != NULL)
        return fits(out, cap, snprintf(out, cap, "%s", v));
    char data[4096];
    if (pyc_jupyter_data_dir(data, sizeof data) < 0)
        return fits(out, cap, -1);
    return fits(out, cap, snprintf(out, cap, "%s/runtime", data));
}

/* mkdir that counts an existing directory as success.  For a directory that exists, mkdir reports EEXIST,
 * EACCES or EROFS depending on the file system, so the verdict is stat's. */
static int
mkdir_one(const char *path, mode_t mode)
{
    if (mkdir(path, mode) == 0)
        return 0;
    int e = errno;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    errno = e == EEXIST ? ENOTDIR : e;
    return -1;
}

int
pyc_mkdirs(const char *dir, mode_t mode)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir_one(path, mode) < 0)
            return -1;
        *p = '/';
    }
    return mkdir_one(path, mode);
}

int
pyc_open_tmp(const char *path, const char *infix, mode_t mode, char *tmp, size_t cap)
{
    for (int tries = 0; tries < 100; tries++) {
        char hex[17];
        if (pyc_random_hex(hex, 8, NULL) < 0) {
            errno = errno != 0 ? errno : EIO;
            tmp[0] = '\0';
            return -1;
        }
        int n = snprintf(tmp, cap, "%s%s%s", path, infix, hex);
        if (n < 0 || (size_t)n >= cap) {
            if (cap > 0)
                tmp[0] = '\0';
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0 || errno != EEXIST) {
            if (fd < 0) {
                int e = errno;
                tmp[0] = '\0';
                errno = e;
            }
            return fd;
        }
    }
    tmp[0] = '\0';
    errno = EEXIST;
    return -1;
}
