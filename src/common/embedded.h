/*
 * embedded.h -- files compiled into the pyc-kernel program by kernel/embed.sh: the kernelspec logos (for
 * `pyc-kernel install`) and the in-interpreter Python package `pyc` (served to `import` by a finder that
 * src/py/init.c installs), so the program needs no data files next to it.
 */
#ifndef PYC_EMBEDDED_H
#define PYC_EMBEDDED_H

#include <stddef.h>

typedef struct {
    const char *name;            /* basename for logos; "pyc/__init__.py"-style paths for Python */
    const unsigned char *data;
    size_t size;
} pyc_embedded_file_t;

/* Each table ends with an entry whose name is NULL. */
extern const pyc_embedded_file_t pyc_embedded_files[];
extern const pyc_embedded_file_t pyc_python_files[];

#endif
