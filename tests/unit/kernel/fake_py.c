/*
 * fake_py.c -- a scripted stand-in for the interpreter (src/py, py.h), so that the kernel's dispatch, replies
 * and outcomes can be tested without Python.
 *
 * A cell's code is a script of words separated by spaces, run in order:
 *   ok               the cell succeeds (the default)
 *   error            the cell fails with ValueError
 *   interrupted      the cell fails with KeyboardInterrupt after an interrupt reached it
 *   memory           the cell fails with MemoryError
 *   print:N          the cell writes N bytes of 'x' to stdout through the kernel's streams
 *   display          the cell publishes one display_data of 100 bytes of text/plain
 *   result           the cell publishes an execute_result (unless silent)
 * The host callbacks are those pyc_kernel_py_host gave (fake_py_set_host).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fake_py.h"

static pyc_py_host_t host;
static atomic_uint interrupts;
static int depth;                /* pyc_py_enter without pyc_py_leave, to catch unbalanced calls */
int fake_py_executed;            /* cells run since the start */

void
fake_py_set_host(const pyc_py_host_t *h)
{
    host = *h;
}

int
fake_py_depth(void)
{
    return depth;
}

void
pyc_py_enter(void)
{
    depth++;
}

void
pyc_py_leave(void)
{
    depth--;
}

const char *
pyc_py_version(void)
{
    return "3.11.0";
}

static json_t *
error_of(const char *ename)
{
    return json_pack("{s:s, s:s, s:[s]}", "ename", ename, "evalue", "scripted", "traceback", ename);
}

void
pyc_py_execute(const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res)
{
    char words[4096];
    snprintf(words, sizeof words, "%s", code);
    res->ok = true;
    res->error = NULL;
    fake_py_executed++;
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
        if (strcmp(w, "error") == 0 || strcmp(w, "memory") == 0) {
            res->ok = false;
            res->error = error_of(strcmp(w, "error") == 0 ? "ValueError" : "MemoryError");
        } else if (strcmp(w, "interrupted") == 0) {
            atomic_fetch_add(&interrupts, 1);
            res->ok = false;
            res->error = error_of("KeyboardInterrupt");
        } else if (strncmp(w, "print:", 6) == 0) {
            size_t n = strtoul(w + 6, NULL, 10);
            char *text = malloc(n + 1);
            memset(text, 'x', n);
            host.stream_write(host.ctx, 0, text, n);
            free(text);
        } else if (strcmp(w, "display") == 0) {
            char text[101];
            memset(text, 'd', 100);
            text[100] = '\0';
            host.publish(host.ctx, "display_data",
                         json_pack("{s:{s:s}, s:{}, s:{}}", "data", "text/plain", text, "metadata", "transient"));
        } else if (strcmp(w, "result") == 0 && !opts->silent) {
            host.publish(host.ctx, "execute_result", json_pack("{s:i, s:{s:s}, s:{}}", "execution_count",
                                                               opts->execution_count, "data", "text/plain", "42",
                                                               "metadata"));
        }
    }
    host.stream_flush(host.ctx);
    res->payload = json_array();
    res->user_expressions = json_object();
}

json_t *
pyc_py_complete(const char *code, long cursor_pos)
{
    return json_pack("{s:s, s:[s], s:I, s:I, s:{}}", "status", "ok", "matches", code, "cursor_start", (json_int_t)0,
                     "cursor_end", (json_int_t)cursor_pos, "metadata");
}

int fake_py_warm_ups;            /* how often the kernel warmed the completer */

void
pyc_py_complete_warm_up(void)
{
    fake_py_warm_ups++;
}

json_t *
pyc_py_inspect(const char *code, long cursor_pos, int detail_level)
{
    (void)code;
    (void)cursor_pos;
    (void)detail_level;
    return json_pack("{s:s, s:b, s:{}, s:{}}", "status", "ok", "found", 0, "data", "metadata");
}

void
pyc_py_comm(const pyc_msg_t *msg)
{
    (void)msg;
}

json_t *
pyc_py_comm_info(json_t *content)
{
    (void)content;
    return json_pack("{s:s, s:{}}", "status", "ok", "comms");
}

json_t *
pyc_py_is_complete(const char *code)
{
    return json_pack("{s:s}", "status", strchr(code, ':') != NULL ? "incomplete" : "complete");
}

unsigned
pyc_py_interrupt_count(void)
{
    return atomic_load(&interrupts);
}

bool
pyc_py_interrupt_pending(void)
{
    return false;
}

void
pyc_py_fork_prepare(void)
{
}

void
pyc_py_fork_done(pid_t pid)
{
    (void)pid;
}

void
pyc_py_warm_for_fork(void)
{
}

int
pyc_py_isolate_snapshot(pyc_error_t *err)
{
    return pyc_error_set(err, "not in the fake");
}

int
pyc_py_isolate_collect(char **blob, size_t *len, json_t **merged, json_t **skipped, pyc_error_t *err)
{
    *blob = NULL;
    *len = 0;
    *merged = NULL;
    *skipped = NULL;
    return pyc_error_set(err, "not in the fake");
}

int
pyc_py_isolate_merge(const void *blob, size_t len, json_t **merged, json_t **skipped, pyc_error_t *err)
{
    (void)blob;
    (void)len;
    *merged = NULL;
    *skipped = NULL;
    return pyc_error_set(err, "not in the fake");
}

void
pyc_py_interrupt_arm(void)
{
}

void
pyc_py_interrupt_disarm(void)
{
}

void
pyc_py_raise_memory_error(const char *message)
{
    (void)message;
}

int
pyc_py_faulthandler(int fd, pyc_error_t *err)
{
    (void)fd;
    (void)err;
    return 0;
}

json_t *
pyc_py_environment(void)
{
    return json_object();
}

bool
pyc_py_debugger_available(void)
{
    return false;
}

json_t *
pyc_py_support_call(const char *module, const char *name, json_t *args)
{
    (void)module;
    (void)name;
    (void)args;
    return NULL;                 /* as a Python helper that raised */
}

json_t *
pyc_py_debug_call(const char *func, json_t *args, pyc_error_t *err)
{
    (void)func;
    (void)args;
    pyc_error_set(err, "not in the fake");
    return NULL;
}

json_t *
pyc_py_debug_rich(json_t *which, pyc_error_t *err)
{
    (void)which;
    pyc_error_set(err, "not in the fake");
    return NULL;
}

void
pyc_py_debug_session(bool on)
{
    (void)on;
}

void
pyc_py_execute_subshell(const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res)
{
    pyc_py_execute(code, opts, res);
}

void
pyc_py_interrupt_cells(const unsigned long *tokens, size_t n)
{
    (void)tokens;
    (void)n;
}

unsigned long
pyc_py_thread_ident(void)
{
    return 1;
}

void
pyc_py_thread_parent(const char *header, size_t len)
{
    (void)header;
    (void)len;
}

pyc_py_thread_t *
pyc_py_thread_begin(void)
{
    return NULL;
}

void
pyc_py_thread_end(pyc_py_thread_t *t)
{
    (void)t;
}

int
pyc_py_preload(const char *module)
{
    (void)module;
    return 0;                    /* nothing to import: no Python here */
}
