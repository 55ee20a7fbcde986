/*
 * pyenv.c -- see pyenv.h.
 */
#include "pyenv.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool
is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* pyvenv.cfg: its version (version, or version_info) and include-system-site-packages.  Returns 0 when the
 * file was read. */
static int
read_cfg(pyc_pyenv_t *env)
{
    char path[PATH_MAX + 16], line[512];
    snprintf(path, sizeof path, "%s/pyvenv.cfg", env->prefix);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    env->venv = true;
    while (fgets(line, sizeof line, f) != NULL) {
        char *eq = strchr(line, '=');
        if (eq == NULL)
            continue;
        char *key = line, *val = eq + 1;
        *eq = '\0';
        while (*key == ' ')
            key++;
        for (char *e = eq - 1; e >= key && isspace((unsigned char)*e); e--)
            *e = '\0';
        while (isspace((unsigned char)*val))
            val++;
        if ((strcmp(key, "version") == 0 || strcmp(key, "version_info") == 0) && env->major == 0)
            sscanf(val, "%d.%d", &env->major, &env->minor);
        else if (strcmp(key, "include-system-site-packages") == 0)
            env->system_site = strncmp(val, "true", 4) == 0;
    }
    fclose(f);
    return 0;
}

/* A conda-style prefix: the version of its lib/pythonX.Y.  Returns 0 when there is exactly one. */
static int
read_lib(pyc_pyenv_t *env)
{
    char lib[PATH_MAX + 8];
    snprintf(lib, sizeof lib, "%s/lib", env->prefix);
    DIR *d = opendir(lib);
    int found = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int maj, min;
        char rest;
        if (sscanf(e->d_name, "python%d.%d%c", &maj, &min, &rest) == 2) {
            env->major = maj;
            env->minor = min;
            found++;
        }
    }
    closedir(d);
    return found == 1 ? 0 : -1;
}

int
pyc_pyenv_read(const char *path, pyc_pyenv_t *out, pyc_error_t *err)
{
    memset(out, 0, sizeof *out);
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return pyc_error_set(err, "%s: path too long", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    if (!is_dir(buf)) {
        /* An interpreter: PREFIX/bin/pythonX[.Y] */
        if (access(buf, X_OK) != 0)
            return pyc_error_set(err, "%s is neither a Python environment's folder nor an interpreter", path);
        snprintf(out->python, sizeof out->python, "%s", buf);
        char *slash = strrchr(buf, '/');
        if (slash == NULL)
            return pyc_error_set(err, "%s: give the interpreter's full path", path);
        *slash = '\0';
        slash = strrchr(buf, '/');
        if (slash == NULL || strcmp(slash + 1, "bin") != 0)
            return pyc_error_set(err, "%s is not in the bin/ folder of a Python environment", path);
        *slash = '\0';
    }
    snprintf(out->prefix, sizeof out->prefix, "%s", buf[0] != '\0' ? buf : "/");
    if (out->python[0] == '\0') {
        if (strlen(out->prefix) + 13 > sizeof out->python)
            return pyc_error_set(err, "%s: path too long", path);
        memcpy(out->python, out->prefix, strlen(out->prefix));
        memcpy(out->python + strlen(out->prefix), "/bin/python3", 13);
        if (access(out->python, X_OK) != 0)
            return pyc_error_set(err, "%s has no bin/python3: not a Python environment", out->prefix);
    }
    if (read_cfg(out) < 0 && read_lib(out) < 0)
        return pyc_error_set(err, "%s is not a Python environment (no pyvenv.cfg, and not one lib/pythonX.Y)",
                             out->prefix);
    if (out->major == 0)
        return pyc_error_set(err, "%s/pyvenv.cfg does not say which Python version it was made with", out->prefix);
    return 0;
}

int
pyc_pyenv_active(pyc_pyenv_t *out, pyc_error_t *err)
{
    const char *v = getenv("VIRTUAL_ENV");
    if (v == NULL || v[0] == '\0')
        v = getenv("CONDA_PREFIX");
    if (v != NULL && v[0] != '\0')
        return pyc_pyenv_read(v, out, err) < 0 ? -1 : 1;
    const char *path = getenv("PATH");
    if (path == NULL)
        return 0;
    while (*path != '\0') {
        const char *colon = strchr(path, ':');
        size_t len = colon != NULL ? (size_t)(colon - path) : strlen(path);
        char exe[PATH_MAX], cfg[PATH_MAX];
        if (len > 0 && len < sizeof exe - 16) {
            snprintf(exe, sizeof exe, "%.*s/python3", (int)len, path);
            if (access(exe, X_OK) == 0) {
                /* The first python3 decides; it is a virtual environment's when ../pyvenv.cfg exists. */
                snprintf(cfg, sizeof cfg, "%.*s/../pyvenv.cfg", (int)len, path);
                if (access(cfg, R_OK) != 0)
                    return 0;
                return pyc_pyenv_read(exe, out, err) < 0 ? -1 : 1;
            }
        }
        path += len + (colon != NULL);
    }
    return 0;
}

int
pyc_pyenv_choose(const char *python, bool no_env, pyc_pyenv_t *out, pyc_error_t *err)
{
    if (python != NULL && no_env)
        return pyc_error_set(err, "--python and --no-env say opposite things");
    if (python != NULL)
        return pyc_pyenv_read(python, out, err) < 0 ? -1 : 1;
    return no_env ? 0 : pyc_pyenv_active(out, err);
}

int
pyc_pyenv_check(const pyc_pyenv_t *env, const char *want, pyc_error_t *err)
{
    int maj = 0, min = 0;
    sscanf(want, "%d.%d", &maj, &min);
    if (env->major == maj && env->minor == min)
        return 0;
    return pyc_error_set(err, "%s is Python %d.%d, and this pyc-kernel embeds Python %s: an environment of another "
                              "version cannot be entered (its packages are built for another interpreter).  Make "
                              "the environment with Python %s, or build pyc for %d.%d: ./configure PYTHON=%s "
                              "(it needs Python %d.%d's python-%d.%d-embed pkg-config file, e.g. Debian's "
                              "python%d.%d-dev)",
                         env->prefix, env->major, env->minor, want, want, env->major, env->minor, env->python,
                         env->major, env->minor, env->major, env->minor, env->major, env->minor);
}
