/*
 * kernelinfo.c -- the kernel_info document (made once at start, again in a forked child: kernel_info_reply
 * sends it as made) and the status "starting" that announces a kernel.  Called by the program at start and by
 * fork.c in a new session; reads the interpreter, the limits, the checkpoint and the memory enforcement.
 */
#include "kernelint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* The kernel_info document is made in two steps.  The form is everything but the checkpoint file's path, which
 * is each session's own: made once, by the first kernel of a line of forks, and inherited by its forked
 * sessions.  Each fills it in with its own checkpoint.  A forked session used to make the whole document anew,
 * and the few dozen small blocks that took, each landing on another page of the heap it shares with its
 * parent, cost it 200 KB of private memory (issue 32).  Nothing else in the document differs between a kernel
 * and its forks: the interpreter, the limits, the memory enforcement and the environment are inherited. */
static const char GAP[] = "\"@pyc-checkpoint@\"";

static int
make_form(pyc_kernel_t *k)
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
    json_t *pyc = json_pack("{s:o, s:s, s:o, s:o}", "limits", pyc_limits_to_json(&k->limits), "checkpoint",
                            "@pyc-checkpoint@", "memory_enforcement", pyc__memory_enforcement(k), "environment",
                            pyc_py_environment());
    if (k->replayed != NULL)
        json_object_set(pyc, "replayed", k->replayed);
    json_object_set_new(info, "pyc", pyc);
    free(k->kernel_info_form);
    k->kernel_info_form = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    char *gap = k->kernel_info_form != NULL ? strstr(k->kernel_info_form, GAP) : NULL;
    if (gap == NULL) {
        free(k->kernel_info_form);
        k->kernel_info_form = NULL;
        return -1;
    }
    k->kernel_info_gap = (size_t)(gap - k->kernel_info_form);
    return 0;
}

void
pyc_kernel_starting(pyc_kernel_t *k)
{
    if (k->kernel_info_form == NULL || k->replayed != NULL)
        make_form(k);
    char *info = NULL;
    if (k->kernel_info_form != NULL) {
        /* The checkpoint's path as a JSON value (null when checkpoints are off), written without a block of
         * its own but the document. */
        pyc_checkpoint_t *cp = pyc__checkpoint(k);
        json_t *path = cp != NULL ? json_string(pyc_checkpoint_path(cp)) : json_null();
        char value[4096 * 6 + 3];
        size_t n = path != NULL ? json_dumpb(path, value, sizeof value, JSON_ENCODE_ANY) : 0;
        json_decref(path);
        if (n == 0 || n > sizeof value) {
            memcpy(value, "null", 4);
            n = 4;
        }
        size_t form = strlen(k->kernel_info_form), rest = form - k->kernel_info_gap - (sizeof GAP - 1);
        info = malloc(k->kernel_info_gap + n + rest + 1);
        if (info != NULL) {
            memcpy(info, k->kernel_info_form, k->kernel_info_gap);
            memcpy(info + k->kernel_info_gap, value, n);
            memcpy(info + k->kernel_info_gap + n, k->kernel_info_form + form - rest, rest + 1);
        }
    }
    /* Made whole, then put in place at once: a forked child's control thread, running already, may answer a
     * kernel_info_request meanwhile, with the document it inherited.  That one is not freed: it is the
     * parent's (on pages shared with it), and the control thread may be copying it. */
    if (info != NULL)
        atomic_store(&k->kernel_info, info);
    pyc__status(k, NULL, "starting");
}
