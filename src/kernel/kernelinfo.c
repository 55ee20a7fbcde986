/*
 * kernelinfo.c -- the kernel_info document (made once at start, again in a forked child: kernel_info_reply
 * sends it as made) and the status "starting" that announces a kernel.  Called by the program at start and by
 * fork.c in a new session; reads the interpreter, the limits, the checkpoint and the memory enforcement.
 */
#include "kernelint.h"

#include <stdio.h>
#include <stdlib.h>

#include "config.h"

void
pyc_kernel_starting(pyc_kernel_t *k)
{
    char banner[256];
    snprintf(banner, sizeof banner, "Python %s (pyc %s) -- a Jupyter kernel for Python, written in C",
             pyc_py_version(), PACKAGE_VERSION);
    json_t *info = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s}, s:s, s:[{s:s, s:s}], s:b}",
        "status", "ok", "protocol_version", PYC_PROTOCOL_VERSION, "implementation", "pyc",
        "implementation_version", PACKAGE_VERSION, "language_info", "name", "python", "version",
        pyc_py_version(), "mimetype", "text/x-python", "file_extension", ".py", "pygments_lexer", "ipython3",
        "codemirror_mode", "name", "ipython", "version", 3, "nbconvert_exporter", "python", "banner", banner,
        "help_links", "text", "Python Reference", "url", "https://docs.python.org/3/", "debugger",
        pyc_py_debugger_available());
    json_t *features = json_array();
    if (pyc_py_debugger_available())
        json_array_append_new(features, json_string("debugger"));
    if (k->io->route_shell != NULL)
        json_array_append_new(features, json_string("kernel subshells"));
    json_object_set_new(info, "supported_features", features);
    pyc_checkpoint_t *cp = pyc__checkpoint(k);
    json_t *pyc = json_pack("{s:o, s:o, s:o, s:o}", "limits", pyc_limits_to_json(&k->limits), "checkpoint",
                            cp != NULL ? json_string(pyc_checkpoint_path(cp)) : json_null(), "memory_enforcement",
                            pyc__memory_enforcement(k), "environment", pyc_py_environment());
    if (k->replayed != NULL)
        json_object_set(pyc, "replayed", k->replayed);
    json_object_set_new(info, "pyc", pyc);
    free(k->kernel_info);        /* a forked child makes it again */
    k->kernel_info = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    pyc__status(k, NULL, "starting");
}
