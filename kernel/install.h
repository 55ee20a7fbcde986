/*
 * install.h -- `pyc-kernel install`: writes the pyc kernelspec into a Jupyter data directory, so a user
 * without root can register the kernel with one command.
 */
#ifndef PYC_INSTALL_H
#define PYC_INSTALL_H

#include "embedded.h"

/* Runs the install subcommand with its own arguments (argv[0] is "install").  Returns the exit code. */
int pyc_install_main(int argc, char **argv);

#endif
