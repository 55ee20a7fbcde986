/*
 * install.h -- `pyc-kernel install`: writes the pyc kernelspec into a Jupyter data directory, so a user
 * without root can register the kernel with one command.
 */
#ifndef PYC_INSTALL_H
#define PYC_INSTALL_H

#include "embedded.h"
#include "error.h"

/* Runs the install subcommand with its own arguments (argv[0] is "install").  Returns the exit code. */
int pyc_install_main(int argc, char **argv);

/* The kernel's --python-env DIR.  The kernelspec that `pip install` writes (pybuild/pyc_build.py) starts the
 * kernel with the prefix it was installed under, "{resource_dir}/../../../..": one wheel may be installed into
 * several environments, so it cannot hold an absolute path made when it was built.  When DIR is a Python
 * environment (pyenv.h: a virtual environment, or a conda-style prefix with its bin/python3), the kernel is to
 * run in it: this sets PYC_PYTHON_EXE=DIR/bin/python3 (the option wins over the variable).  A DIR that is no
 * environment (pip install --user's ~/.local, /usr/local) leaves the interpreter as it was.  Returns 0, or -1
 * with err when DIR does not exist or has a pyvenv.cfg that cannot be used. */
int pyc_install_python_env(const char *dir, pyc_error_t *err);

#endif
