/*
 * pyenv.h -- a Python environment the kernel runs in: what a path names (an interpreter, a virtual
 * environment's folder, a conda-style prefix), its MAJOR.MINOR, and whether that is the CPython pyc-kernel
 * embeds.
 *
 * The kernel embeds one libpython (configure: PYC_PYTHON_VERSION).  An environment of the same MAJOR.MINOR is
 * entered by starting the interpreter with that environment's python as sys.executable (PYC_PYTHON_EXE): the
 * site module then reads its pyvenv.cfg and gives sys.prefix, site-packages and
 * include-system-site-packages exactly as `python -i` there would.  An environment of another version cannot
 * work (its site-packages hold extension modules for another ABI, its stdlib is another's): it is refused
 * with a sentence that says how to build pyc for it.
 *
 * A virtual environment is a folder with pyvenv.cfg ("version = 3.11.2", or "version_info = 3.11.2.final.0"
 * from uv and virtualenv); a conda-style prefix has no pyvenv.cfg and its own lib/pythonX.Y.  No file is
 * executed: versions are read from these files and names, so a broken environment is told apart from a
 * mismatched one without running anything.
 */
#ifndef PYC_PYENV_H
#define PYC_PYENV_H

#include <limits.h>
#include <stdbool.h>

#include "error.h"

typedef struct pyc_pyenv {
    char prefix[PATH_MAX];       /* the environment's folder */
    char python[PATH_MAX];       /* its interpreter: PREFIX/bin/python3 (or the file given) */
    int major, minor;            /* its version; 0 when none could be read */
    bool venv;                   /* it has a pyvenv.cfg */
    bool system_site;            /* pyvenv.cfg says include-system-site-packages = true */
} pyc_pyenv_t;

/* Reads the environment that path names: an environment's folder, or an interpreter inside one (PREFIX/bin/
 * python*).  Returns 0, or -1 with err when path names no Python environment. */
int pyc_pyenv_read(const char *path, pyc_pyenv_t *out, pyc_error_t *err);

/* The environment the caller's shell is in: $VIRTUAL_ENV, else $CONDA_PREFIX, else the virtual environment
 * that the `python3` first on $PATH lives in.  Returns 1 with *out filled, 0 when there is none, -1 with err
 * when one is named but cannot be read. */
int pyc_pyenv_active(pyc_pyenv_t *out, pyc_error_t *err);

/* The environment that a command's --python and --no-env choose: python's when given, none with no_env,
 * else the active one (pyc_pyenv_active).  Returns 1 with *out filled, 0 for none, -1 with err (also when
 * both python and no_env are given). */
int pyc_pyenv_choose(const char *python, bool no_env, pyc_pyenv_t *out, pyc_error_t *err);

/* Whether env is the embedded version (want: "MAJOR.MINOR").  Returns 0, or -1 with err: the sentence names
 * the environment, both versions, and how to build pyc for the environment's. */
int pyc_pyenv_check(const pyc_pyenv_t *env, const char *want, pyc_error_t *err);

#endif
