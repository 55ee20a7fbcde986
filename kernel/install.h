/*
 * install.h -- `pyc-kernel install`: writes the pyc kernelspec into a Jupyter data directory, so a user
 * without root can register the kernel with one command.
 */
#ifndef PYC_INSTALL_H
#define PYC_INSTALL_H

#include <stddef.h>

/* A file compiled into the program (kernel/logos.c, made by kernel/embed.sh). */
typedef struct {
    const char *name;
    const unsigned char *data;
    size_t size;
} pyc_embedded_file_t;

/* Terminated by an entry whose name is NULL. */
extern const pyc_embedded_file_t pyc_embedded_files[];

/* Runs the install subcommand with its own arguments (argv[0] is "install").  Returns the exit code. */
int pyc_install_main(int argc, char **argv);

#endif
