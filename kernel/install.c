/*
 * install.c -- `pyc-kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]
 *                                  [--display-name TEXT] [--env NAME=VALUE]... [--handshake]
 *                                  [--template NAME [--preload CODE]] [--python PATH | --no-env]`
 *
 * --template NAME writes a kernelspec (named NAME unless --name says otherwise) whose kernels are forks of the
 * warm template NAME, through pyc_client's pyc-template-provisioner (cli/python/pyc_client/_template.py),
 * which runs CODE once in the template.
 *
 * The Python environment (pyenv.h): run from inside an active virtual environment (or conda prefix), or given
 * one with --python, the kernelspec starts the kernel in it (PYC_PYTHON_EXE in its env) and says so; an
 * environment of another Python version than the embedded one is refused with how to build pyc for it.
 *
 * Writes DIR/share/jupyter/kernels/NAME/ (or, with --user, the user's Jupyter data dir) holding kernel.json,
 * whose argv names this very program by its absolute path, and the logos compiled into the program.  The
 * user's data dir is $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter, as
 * jupyter_core computes it on Linux.
 *
 * Programs that hard-code the kernel name (agent frameworks, nbclient's default) ask for "python3", or for
 * "python", which jupyter_client's KernelManager turns into "python3" before it looks a kernelspec up: so
 * --name python installs python3 (a kernelspec named python would never be started), and after writing,
 * install says when a kernelspec of the same name earlier on Jupyter's search path (JUPYTER_PATH, the user's
 * data dir, the environment's, /usr/local, /usr) shadows the one it wrote.
 *
 * pyc_install_python_env is the other side of the kernelspec that `pip install` writes: the kernel's
 * --python-env, which finds the environment that kernelspec was installed into.
 */
#include "install.h"
#include "msg.h"
#include "paths.h"
#include "pyenv.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "buf.h"
#include "config.h"
#include "zap.h"

static int
usage(FILE *f)
{
    fprintf(f, "usage: pyc-kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]\n"
               "                          [--display-name TEXT] [--env NAME=VALUE]... [--handshake]\n"
               "                          [--template NAME [--preload CODE]]\n"
               "                          [--python PATH | --no-env]\n"
               "  --handshake  start the kernel with the protocol 5.6 handshake, through pyc_client's\n"
               "               jupyter_client provisioner (pyc-handshake-provisioner, installed with pyc)\n"
               "  --template   each kernel a fork of the warm template NAME, which ran CODE once (through\n"
               "               pyc_client's provisioner pyc-template-provisioner, installed with pyc); the\n"
               "               kernelspec is named NAME unless --name gives another name\n"
               "  --python     the Python environment the kernel runs in (a folder, or an interpreter in it);\n"
               "               default: the active one ($VIRTUAL_ENV, $CONDA_PREFIX, a venv's python3 on PATH)\n"
               "  --no-env     the embedded interpreter's own installation, whatever environment is active\n"
               "Installs the pyc kernelspec (default: --user, the user's Jupyter data dir).\n");
    return f == stderr ? 2 : 0;
}

/* True when DIR (its first len bytes)/kernels/NAME/kernel.json exists; its directory is then in cand. */
static bool
has_spec(const char *dir, size_t len, const char *name, char *cand, size_t cap)
{
    int n = snprintf(cand, cap, "%.*s/kernels/%s", (int)len, dir, name);
    char file[PATH_MAX];
    return n > 0 && (size_t)n < cap && snprintf(file, sizeof file, "%s/kernel.json", cand) < (int)sizeof file &&
           access(file, F_OK) == 0;
}

/* The kernelspec directory that jupyter_client starts for name: the first DIR/kernels/NAME/kernel.json along
 * jupyter_core's jupyter_path('kernels') on Linux, without JUPYTER_PREFER_ENV_PATH (a user's kernelspec
 * before an environment's).  env_prefix is the environment the kernelspec is for, or NULL.  Writes its real
 * path into out (PATH_MAX bytes) and returns 0, or returns -1 when none is found. */
static int
first_on_path(const char *name, const char *env_prefix, char *out)
{
    char data[PATH_MAX], env_dir[PATH_MAX], cand[PATH_MAX];
    const char *dirs[4] = {NULL, NULL, "/usr/local/share/jupyter", "/usr/share/jupyter"};
    for (const char *p = getenv("JUPYTER_PATH"); p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ":");
        if (len > 0 && has_spec(p, len, name, cand, sizeof cand))
            goto found;
        p += len + (p[len] == ':');
    }
    if (pyc_jupyter_data_dir(data, sizeof data) == 0)
        dirs[0] = data;
    if (env_prefix != NULL && snprintf(env_dir, sizeof env_dir, "%s/share/jupyter", env_prefix) < PATH_MAX)
        dirs[1] = env_dir;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (dirs[i] != NULL && has_spec(dirs[i], strlen(dirs[i]), name, cand, sizeof cand))
            goto found;
    return -1;
found:
    if (realpath(cand, out) == NULL)
        snprintf(out, PATH_MAX, "%s", cand);
    return 0;
}

static int
write_file(const char *dir, const char *name, const void *data, size_t size)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (pyc_write_all(fd, data, size) < 0) {
        close(fd);
        return -1;
    }
    return close(fd);
}

int
pyc_install_main(int argc, char **argv)
{
    const char *prefix = NULL, *name = "pyc", *display = "Python 3 (pyc)";
    json_t *env = json_object();
    bool handshake = false, no_env = false;
    const char *python = NULL, *template = NULL, *preload = NULL;
    bool named = false;
    char base[PATH_MAX], dir[PATH_MAX], self[PATH_MAX];
    int rc = 1;

    enum { OPT_USER, OPT_SYS_PREFIX, OPT_PREFIX, OPT_NAME, OPT_DISPLAY_NAME, OPT_ENV, OPT_HANDSHAKE, OPT_PYTHON,
           OPT_NO_ENV, OPT_TEMPLATE, OPT_PRELOAD };
    static const pyc_argspec_t specs[] = {
        {"user", false, 0},   {"sys-prefix", false, 0},   {"prefix", true, 0},
        {"name", true, 0},    {"display-name", true, 0},  {"env", true, 0},
        {"handshake", false, 0}, {"python", true, 0},     {"no-env", false, 0},
        {"template", true, 0},   {"preload", true, 0},
    };
    pyc_argiter_t it;
    pyc_error_t err;
    pyc_args_begin(&it, argc - 1, argv + 1, specs, (int)(sizeof specs / sizeof specs[0]));
    for (;;) {
        const char *v, *eq;
        int k = pyc_args_next(&it, &v, &err);
        if (k == PYC_ARG_END)
            break;
        switch (k) {
        case PYC_ARG_HELP:
            rc = usage(stdout);
            goto out;
        case PYC_ARG_ERROR:
            fprintf(stderr, "pyc-kernel: install: %s\n", err.text);
            rc = usage(stderr);
            goto out;
        case PYC_ARG_POSITIONAL:
            fprintf(stderr, "pyc-kernel: install: unknown argument '%s'\n", v);
            rc = usage(stderr);
            goto out;
        case OPT_USER:
            prefix = NULL;
            break;
        case OPT_SYS_PREFIX:
            prefix = "/usr/local";
            break;
        case OPT_PREFIX:
            prefix = v;
            break;
        case OPT_NAME:
            name = v;
            named = true;
            break;
        case OPT_TEMPLATE:
            template = v;
            break;
        case OPT_PRELOAD:
            preload = v;
            break;
        case OPT_DISPLAY_NAME:
            display = v;
            break;
        case OPT_HANDSHAKE:
            handshake = true;
            break;
        case OPT_PYTHON:
            python = v;
            break;
        case OPT_NO_ENV:
            no_env = true;
            break;
        case OPT_ENV:
            eq = strchr(v, '=');
            if (eq == NULL || eq == v) {
                fprintf(stderr, "pyc-kernel: install: --env wants NAME=VALUE, got '%s'\n", v);
                goto out;
            }
            json_object_setn_new(env, v, (size_t)(eq - v), json_string(eq + 1));
            break;
        }
    }
    if (preload != NULL && template == NULL) {
        fprintf(stderr, "pyc-kernel: install: --preload is the start-up code of a --template\n");
        goto out;
    }
    if (template != NULL && handshake) {
        fprintf(stderr, "pyc-kernel: install: --template and --handshake are two ways of starting a kernel: "
                        "choose one (a template session binds its own ports: it has no port race either)\n");
        goto out;
    }
    /* A template's name is also what `pyc new NAME --from TEMPLATE` takes: a pyc session name. */
    if (template != NULL && (template[0] == '\0' || strlen(template) > 80 ||
                             strspn(template, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(template))) {
        fprintf(stderr, "pyc-kernel: install: a template's name is 1 to 80 of a-z, 0-9, '_' and '-' (a pyc "
                        "session name): '%s'\n", template);
        goto out;
    }
    if (template != NULL && !named)
        name = template;
    if (strcmp(name, "python") == 0) {
        printf("jupyter_client starts the kernelspec python3 for the name python: installing it as python3\n");
        name = "python3";
    }
    if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(name) ||
        name[0] == '\0') {
        fprintf(stderr, "pyc-kernel: install: invalid kernel name '%s'\n", name);
        goto out;
    }
    pyc_pyenv_t penv;
    int have_env = pyc_pyenv_choose(python, no_env, &penv, &err);
    if (have_env < 0 || (have_env > 0 && pyc_pyenv_check(&penv, PYC_PYTHON_VERSION, &err) < 0)) {
        fprintf(stderr, "pyc-kernel: install: %s\n", err.text);
        goto out;
    }
    if (have_env > 0) {
        json_object_set_new(env, "PYC_PYTHON_EXE", json_string(penv.python));
        printf("The kernel will run in the Python environment %s (Python %d.%d%s); --no-env for none\n",
               penv.prefix, penv.major, penv.minor, penv.system_site ? ", with the system's site-packages" : "");
    }
    if (prefix != NULL) {
        snprintf(base, sizeof base, "%s/share/jupyter", prefix);
    } else if (pyc_jupyter_data_dir(base, sizeof base) < 0) {
        fprintf(stderr, "pyc-kernel: install: HOME is not set; use --prefix\n");
        goto out;
    }
    if (snprintf(dir, sizeof dir, "%s/kernels/%s", base, name) >= (int)sizeof dir) {
        fprintf(stderr, "pyc-kernel: install: path too long\n");
        goto out;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "pyc-kernel: install: cannot find this program's path: %s\n", strerror(errno));
        goto out;
    }
    self[n] = '\0';
    if (pyc_mkdirs(dir, 0755) < 0) {
        fprintf(stderr, "pyc-kernel: install: cannot create %s: %s\n", dir, strerror(errno));
        goto out;
    }
    json_t *spec = json_pack("{s:[s,s,s], s:s, s:s, s:s, s:s, s:{s:b}}", "argv", self, "-f", "{connection_file}",
                             "display_name", display, "language", "python", "interrupt_mode", "signal",
                             "kernel_protocol_version", PYC_PROTOCOL_VERSION, "metadata", "debugger", 1);
    /* The provisioner must be importable by the launcher's Python (jupyter_client refuses a kernelspec whose
     * provisioner it cannot find): only when asked. */
    if (spec != NULL && handshake)
        json_object_set_new(json_object_get(spec, "metadata"), "kernel_provisioner",
                            json_pack("{s:s, s:{}}", "provisioner_name", "pyc-handshake-provisioner", "config"));
    if (spec != NULL && template != NULL)
        json_object_set_new(json_object_get(spec, "metadata"), "kernel_provisioner",
                            json_pack("{s:s, s:{s:s, s:s}}", "provisioner_name", "pyc-template-provisioner", "config",
                                      "template", template, "preload", preload != NULL ? preload : ""));
    /* jupyter_client >= 8.9 gives CURVE keys only to kernels whose spec says they take them (JEP 145). */
    if (spec != NULL && pyc_zap_has_curve())
        json_object_set_new(json_object_get(spec, "metadata"), "supported_encryption", json_pack("[s]", "curve"));
    if (json_object_size(env) > 0)
        json_object_set(spec, "env", env);
    char *text = json_dumps(spec, JSON_INDENT(1));
    json_decref(spec);
    int wrc = text != NULL ? write_file(dir, "kernel.json", text, strlen(text)) : -1;
    free(text);
    for (const pyc_embedded_file_t *f = pyc_embedded_files; wrc == 0 && f->name != NULL; f++)
        wrc = write_file(dir, f->name, f->data, f->size);
    if (wrc < 0) {
        fprintf(stderr, "pyc-kernel: install: cannot write into %s: %s\n", dir, strerror(errno));
        goto out;
    }
    printf("Installed kernelspec %s in %s\n", name, dir);
    char first[PATH_MAX], mine[PATH_MAX];
    if (realpath(dir, mine) != NULL && first_on_path(name, have_env > 0 ? penv.prefix : NULL, first) == 0 &&
        strcmp(first, mine) != 0)
        printf("Note: the kernelspec %s in %s comes first on Jupyter's path, so clients asking for %s get that one;\n"
               "      install with --user, or put %s first on JUPYTER_PATH\n",
               name, first, name, base);
    rc = 0;
out:
    json_decref(env);
    return rc;
}

/* path with its "." and "NAME/.." components taken out by name, as a shell's `cd` reads it, into out (cap
 * bytes).  Returns 0, or -1 when path is not absolute or does not fit. */
static int
lexical_path(const char *path, char *out, size_t cap)
{
    size_t n = 0;
    if (path[0] != '/' || strlen(path) >= cap)
        return -1;
    for (const char *p = path; *p != '\0';) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[--n] != '/')
                continue;
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return 0;
}

/* DIR is named as given, with "." and ".." taken out by name, when that is the same folder: realpath(3) would
 * also resolve the links that the path of a virtual environment may go through, and sys.prefix would then not
 * be the path its user knows.  Otherwise (a link among the components that ".." goes back over) by its real
 * path, which is where the kernel's own program was found. */
int
pyc_install_python_env(const char *dir, pyc_error_t *err)
{
    char real[PATH_MAX], lex[PATH_MAX], lex_real[PATH_MAX], cfg[PATH_MAX + 16];
    if (realpath(dir, real) == NULL)
        return pyc_error_set(err, "%s: %s", dir, strerror(errno));
    const char *use = real;
    if (lexical_path(dir, lex, sizeof lex) == 0 && realpath(lex, lex_real) != NULL && strcmp(lex_real, real) == 0)
        use = lex;
    pyc_pyenv_t env;
    if (pyc_pyenv_read(use, &env, err) == 0)
        return setenv("PYC_PYTHON_EXE", env.python, 1) == 0 ? 0 : pyc_error_set(err, "setenv: %s", strerror(errno));
    snprintf(cfg, sizeof cfg, "%s/pyvenv.cfg", use);
    return access(cfg, F_OK) == 0 ? -1 : 0;
}
