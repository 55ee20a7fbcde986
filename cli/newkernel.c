/*
 * newkernel.c -- what the kernel of `pyc new` gets besides our own environment: the variables of a kernelspec
 * (--kernel SPEC), of the Python environment it runs in (--python, --no-env, the active one) and PYC_SESSION,
 * and its options: the limit flags and --replay, checked here by the kernel's own parser, and the default idle
 * timeout, lifetime and cell deadline (see new.c).
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "pyenv.h"
#include "units.h"

/* The idle timeout of a session whose maker did not choose one (README, "Limits of a session"): a day, so that
 * a session left behind by an agent or a closed terminal ends within one, while one a person comes back to
 * after a night's sleep is still there; its checkpoint (pyc new --replay) brings an ended one back. */
#define DEFAULT_IDLE "24h"

/* The other bounds of a session whose maker did not choose them, so that every `pyc new` session is bounded
 * (README, "Limits of a session"): a lifetime of a week, after which even a session used every day ends (its
 * checkpoint brings its cells back), and a deadline of an hour per cell, past which an agent's cell is far
 * more likely stuck (a lost network peer, a wait on input that never comes) than busy; a longer job says so
 * (--cell-timeout 0 or a longer one; a cell's own --timeout can only be shorter).  The output cap is the
 * kernel's own default (32 MiB a cell), which every kernel has. */
#define DEFAULT_LIFETIME "168h"
#define DEFAULT_CELL_TIMEOUT "1h"

/* What the kernel's environment gets besides ours: "NAME=VALUE" strings (owned), from --python and a
 * kernelspec's env; and whether PYC_PYTHON_EXE is to be dropped (--no-env). */
static char **extra_env;
static size_t n_extra_env;
static bool drop_python_exe;

/* The kernel's command line after "-f CONNECTION_FILE": options made by kernel_options (owned). */
char *cli_new_kernel_opts[CLI_NEW_MAX_KERNEL_OPTS];
size_t cli_new_n_kernel_opts;

/* Sets NAME=VALUE in extra_env; a later setting of a name replaces an earlier one (--python after a
 * kernelspec's env). */
int
cli_new_add_env(const char *name, const char *value)
{
    char *kv = NULL;
    if (asprintf(&kv, "%s=%s", name, value) < 0) {
        cli_err("out of memory");
        return -1;
    }
    size_t len = strlen(name);
    for (size_t i = 0; i < n_extra_env; i++) {
        if (strncmp(extra_env[i], kv, len + 1) == 0) {
            free(extra_env[i]);
            extra_env[i] = kv;
            return 0;
        }
    }
    char **grown = realloc(extra_env, (n_extra_env + 1) * sizeof *grown);
    if (grown == NULL) {
        free(kv);
        cli_err("out of memory");
        return -1;
    }
    extra_env = grown;
    extra_env[n_extra_env++] = kv;
    return 0;
}

/* True when environ entry e sets a variable that extra_env sets (or that --no-env drops). */
static bool
overridden(const char *e)
{
    size_t len = strcspn(e, "=");
    if (drop_python_exe && len == 14 && strncmp(e, "PYC_PYTHON_EXE", 14) == 0)
        return true;
    for (size_t i = 0; i < n_extra_env; i++) {
        if (strncmp(extra_env[i], e, len + 1) == 0)
            return true;
    }
    return false;
}

/* The environment of the kernel: ours without JPY_PARENT_PID (the kernel would end with the process it
 * names, and it must outlive us), with extra_env.  Made before fork, so that the child calls only
 * async-signal-safe functions until it execs, as the child of a process with threads must (pyc makes none
 * today).  NULL when memory runs out. */
char **
cli_new_environ(void)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = malloc((n + n_extra_env + 1) * sizeof *env);
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "JPY_PARENT_PID=", 15) != 0 && !overridden(environ[i]))
            env[k++] = environ[i];
    }
    for (size_t i = 0; i < n_extra_env; i++)
        env[k++] = extra_env[i];
    env[k] = NULL;
    return env;
}

/* --kernel SPEC (a name without '/'): the kernelspec's program (argv[0]) into out, and its env into
 * extra_env.  Looked for as Jupyter does: $JUPYTER_PATH, the user's data dir, then /usr/local/share/jupyter
 * and /usr/share/jupyter.  Returns 1 when found, 0 when there is no such kernelspec, -1 (printed). */
int
cli_new_kernel_from_spec(const char *spec, char *out, size_t cap)
{
    char dirs[8][4096];
    int nd = 0;
    const char *jp = getenv("JUPYTER_PATH");
    while (jp != NULL && *jp != '\0' && nd < 4) {
        size_t len = strcspn(jp, ":");
        if (len > 0)
            snprintf(dirs[nd++], sizeof dirs[0], "%.*s", (int)len, jp);
        jp += len + (jp[len] == ':');
    }
    if (pyc_jupyter_data_dir(dirs[nd], sizeof dirs[0]) == 0)
        nd++;
    snprintf(dirs[nd++], sizeof dirs[0], "/usr/local/share/jupyter");
    snprintf(dirs[nd++], sizeof dirs[0], "/usr/share/jupyter");
    for (int i = 0; i < nd; i++) {
        char path[4400];
        if ((size_t)snprintf(path, sizeof path, "%.3900s/kernels/%.200s/kernel.json", dirs[i], spec) >= sizeof path)
            continue;
        json_error_t jerr;
        json_t *ks = json_load_file(path, 0, &jerr);
        if (ks == NULL)
            continue;
        const char *prog = json_string_value(json_array_get(json_object_get(ks, "argv"), 0));
        int rc = 1;
        if (prog == NULL || access(prog, X_OK) != 0) {
            cli_err("kernelspec %s (%s): its program %s cannot be run", spec, path, prog != NULL ? prog : "(none)");
            rc = -1;
        } else {
            snprintf(out, cap, "%s", prog);
            const char *k;
            json_t *v;
            json_object_foreach(json_object_get(ks, "env"), k, v) {
                if (rc == 1 && json_is_string(v) && cli_new_add_env(k, json_string_value(v)) < 0)
                    rc = -1;
            }
        }
        json_decref(ks);
        return rc;
    }
    return 0;
}

/* The Python environment of the kernel (pyenv.h): --python, else none with --no-env, else the active one.
 * Returns 0, or -1 (printed).  The kernel itself refuses one of another Python version (its log says why). */
int
cli_new_choose_environment(const char *python, bool no_env)
{
    pyc_pyenv_t env;
    pyc_error_t err;
    const char *own = getenv("PYC_PYTHON_EXE");
    if (python == NULL && !no_env && (overridden("PYC_PYTHON_EXE=") || (own != NULL && own[0] != '\0')))
        return 0;                /* a kernelspec's or the caller's own choice stands */
    int have = pyc_pyenv_choose(python, no_env, &env, &err);
    if (have < 0) {
        cli_err("%s", err.text);
        return -1;
    }
    drop_python_exe = no_env;
    return have > 0 ? cli_new_add_env("PYC_PYTHON_EXE", env.python) : 0;
}

/* True when PYC_* variable name is set (not empty) in the kernel's environment: ours, or a kernelspec's. */
static bool
kernel_env_sets(const char *name)
{
    const char *v = getenv(name);
    char probe[64];
    snprintf(probe, sizeof probe, "%s=", name);
    for (size_t i = 0; i < n_extra_env; i++) {
        if (strncmp(extra_env[i], probe, strlen(probe)) == 0)
            return extra_env[i][strlen(probe)] != '\0';
    }
    return v != NULL && v[0] != '\0';
}

/* Appends "--OPTION=VALUE" to the kernel's options.  Returns 0, or -1 (printed). */
static int
add_kernel_opt(const char *option, const char *value)
{
    char *opt = NULL;
    if (cli_new_n_kernel_opts == CLI_NEW_MAX_KERNEL_OPTS || asprintf(&opt, "--%s=%s", option, value) < 0) {
        cli_err("out of memory");
        return -1;
    }
    cli_new_kernel_opts[cli_new_n_kernel_opts++] = opt;
    return 0;
}

/* The kernel's options from the limit flags and --replay, each checked first (see the top of this file),
 * and the defaults of the idle timeout, the lifetime and the cell deadline (each unless its flag, or its
 * PYC_* variable in our environment or the kernelspec's, says otherwise).  Returns 0, or -1 (printed: a
 * usage error). */
int
cli_new_kernel_options(const cli_args_t *a)
{
    static const struct {
        int flag;
        const char *name;        /* as typed */
        const char *option;      /* the kernel's */
        enum { SECONDS, BYTES, FILES } unit;
        size_t max;              /* the most the kernel takes (0: no bound), said before anything starts */
    } limits[] = {
        {CLI_NEW_IDLE, "--idle", "idle-timeout", SECONDS, 0},
        {CLI_NEW_LIFETIME, "--lifetime", "lifetime", SECONDS, 0},
        {CLI_NEW_CELL_TIMEOUT, "--cell-timeout", "cell-timeout", SECONDS, 0},
        {CLI_NEW_CELL_CPU, "--cell-cpu", "cell-cpu", SECONDS, 0},
        {CLI_NEW_OUTPUT_LIMIT, "--output-limit", "output-limit", BYTES, 0},
        {CLI_NEW_MEMORY, "--memory", "memory-limit", BYTES, 0},
        {CLI_NEW_OPEN_FILES, "--open-files", "open-files", FILES, 0},
        {CLI_NEW_EVENT_OUTPUT, "--event-output", "event-output", BYTES, CLI_EVENT_OUTPUT_MAX},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        const char *v = a->value[limits[i].flag];
        pyc_error_t err;
        double secs;
        size_t n;
        if (v == NULL)
            continue;
        int rc = limits[i].unit == SECONDS ? pyc_units_seconds(v, &secs, &err)
                 : limits[i].unit == BYTES ? pyc_units_bytes(v, &n, &err)
                                           : pyc_units_count(v, PYC_UNITS_MAX_FILES, &n, &err);
        if (rc < 0) {
            cli_err("new: %s: %s", limits[i].name, err.text);
            return -1;
        }
        if (limits[i].max > 0 && n > limits[i].max) {
            cli_err("new: %s: at most %zu bytes", limits[i].name, limits[i].max);
            return -1;
        }
        if (add_kernel_opt(limits[i].option, v) < 0)
            return -1;
    }
    static const struct {
        int flag;
        const char *env, *option, *value;
    } defaults[] = {
        {CLI_NEW_IDLE, "PYC_IDLE_TIMEOUT", "idle-timeout", DEFAULT_IDLE},
        {CLI_NEW_LIFETIME, "PYC_LIFETIME", "lifetime", DEFAULT_LIFETIME},
        {CLI_NEW_CELL_TIMEOUT, "PYC_CELL_TIMEOUT", "cell-timeout", DEFAULT_CELL_TIMEOUT},
    };
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        if (a->value[defaults[i].flag] == NULL && !kernel_env_sets(defaults[i].env) &&
            add_kernel_opt(defaults[i].option, defaults[i].value) < 0)
            return -1;
    }
    const char *replay = a->value[CLI_NEW_REPLAY];
    char *newest = NULL;
    if (replay != NULL && replay[0] == '\0') {
        /* --replay alone: the newest checkpoint of this name that holds a cell, said on stderr. */
        long cells = 0;
        if ((newest = cli_checkpoint_newest(a->pos[0], &cells)) == NULL) {
            cli_err("new: --replay: no checkpoint of session %s holds a cell (give the file: --replay FILE)",
                    a->pos[0]);
            return -1;
        }
        cli_err("new: --replay: %s, the newest checkpoint of %s (%ld cell%s)", newest, a->pos[0], cells,
                cells == 1 ? "" : "s");
        replay = newest;
    }
    if (replay != NULL) {
        struct stat st;
        const char *bad = NULL;
        if (stat(replay, &st) < 0 || access(replay, R_OK) < 0)
            bad = strerror(errno);
        else if (!S_ISREG(st.st_mode))
            bad = "not a file";
        int rc = bad == NULL ? add_kernel_opt("replay", replay) : -1;
        if (bad != NULL)
            cli_err("new: --replay %s: %s", replay, bad);
        free(newest);
        return rc;
    }
    return 0;
}

