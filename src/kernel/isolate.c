/*
 * isolate.c -- fork-isolated cells (README, "Fork-isolated cells"): a cell runs in a forked child of the
 * kernel; its output streams as usual with the request as parent, the names it bound that pickle are merged
 * back, and an interrupt or its deadline kills only the child (SIGKILL), leaving the kernel's state as it
 * was -- even for a C loop that never checks for signals.
 *
 * The child talks to the parent over a pipe in record.h's format: RELAY records are iopub messages the
 * parent sends on (counted against the cell's output cap), one DONE record ends the cell with frames
 * [JSON outcome, pickle of the names the cell bound].  Output written at the fd level goes straight to the
 * parent's capture pipes, which the parent drains before each relayed message, so order is kept.
 */
#include "kernelint.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "record.h"

enum { ISO_RELAY = 1, ISO_DONE = 2 };

typedef struct iso_io {
    pyc_io_t io;                 /* first: the child's kernel sends through it */
    int fd;
} iso_io_t;

/* The child's io: iopub messages go to the parent, which relays them; nothing else leaves the child. */
static int
iso_send(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n)
{
    iso_io_t *iso = (iso_io_t *)io;
    int rc = 0;
    if (chan == PYC_CHAN_IOPUB) {
        pyc_frame_t *f = malloc(n * sizeof *f);
        if (f == NULL) {
            rc = -1;
        } else {
            for (size_t i = 0; i < n; i++)
                f[i] = (pyc_frame_t){frames[i].data, frames[i].size};
            rc = pyc_record_write(iso->fd, ISO_RELAY, (uint32_t)chan, f, n);
            free(f);
        }
    }
    for (size_t i = 0; i < n; i++)
        pyc_outframe_drop(&frames[i]);
    return rc;
}

static pyc_msg_t *
iso_no_msg(pyc_io_t *io)
{
    (void)io;
    return NULL;
}

static pyc_msg_t *
iso_no_stdin(pyc_io_t *io, int timeout_ms)
{
    (void)io;
    (void)timeout_ms;
    return NULL;
}

/* The child's side: runs the cell, sends the outcome and exits without finalizing Python (the parent owns
 * the session; atexit handlers belong to it). */
static void
iso_child(pyc_kernel_t *k, int fd, const char *code, const pyc_py_exec_opts_t *opts)
{
    static iso_io_t iso;
    pyc_error_t err;
    char *blob = NULL;
    size_t blen = 0;
    json_t *merged = NULL, *skipped = NULL;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* The kernel's SIGTERM handler would end the copy of the kernel this process is not: a SIGTERM here
     * ends the process, as its parent expects of a cell's. */
    signal(SIGTERM, SIG_DFL);
    iso.io.send = iso_send;
    iso.io.next_pending = iso_no_msg;
    iso.io.recv_stdin = iso_no_stdin;
    iso.fd = fd;
    k->io = &iso.io;
    k->journal = NULL;           /* the parent journals what it relays; its lock may be held at the fork */
    pyc__snapshots_off(k);       /* a snapshot is the kernel's, never an isolated cell's (%snapshot refuses) */
    k->allow_stdin = false;
    /* The parent counts what it relays (relay_admitted): no cap here, not even the session's budget of
     * output between cells, which the child's copy would otherwise apply to the cell's displays. */
    pyc_outgate_set(&k->out, false, 0, 0);
    pyc_outgate_set_session_caps(&k->out, 0, 0);
    pyc_streams_set_passthrough(k->streams);

    pyc_py_exec_result_t res = {0};
    pyc_py_exec_opts_t o = *opts;
    o.allow_stdin = false;
    pyc_py_enter();
    if (pyc_py_isolate_snapshot(&err) < 0)
        pyc_log("isolated cell: %s", err.text);
    pyc_py_execute(code, &o, &res);
    if (pyc_py_isolate_collect(&blob, &blen, &merged, &skipped, &err) < 0) {
        merged = json_array();
        skipped = json_pack("{s:s}", "*", err.text);
    }
    json_t *out = json_pack("{s:b, s:o, s:o, s:o, s:o, s:o}", "ok", res.ok, "error",
                            res.error != NULL ? res.error : json_null(), "user_expressions",
                            res.user_expressions != NULL ? res.user_expressions : json_object(), "payload",
                            res.payload != NULL ? res.payload : json_array(), "merged", merged, "skipped", skipped);
    char *text = json_dumps(out, JSON_COMPACT);
    pyc_frame_t frames[2] = {{text != NULL ? text : "{}", text != NULL ? strlen(text) : 2},
                             {blob != NULL ? blob : "", blen}};
    pyc_streams_flush(k->streams);           /* the last partial line, before the outcome */
    fflush(NULL);
    pyc_record_write(fd, ISO_DONE, 0, frames, 2);
    _exit(0);
}

/* Counts a message an isolated cell's child published against the cell's output cap.  The frames are
 * [topic, delimiter, signature, header, parent, metadata, content, buffers...]; the topic is the type. */
static bool
relay_admitted(pyc_kernel_t *k, const pyc_outframe_t *f, size_t n)
{
    if (n < 7)
        return true;
    char type[64];
    size_t tl = f[0].size < sizeof type - 1 ? f[0].size : sizeof type - 1;
    memcpy(type, f[0].data, tl);
    type[tl] = '\0';
    if (!pyc_outgate_counts(type))
        return true;
    size_t total = 0;
    for (size_t i = 6; i < n; i++)
        total += f[i].size;
    if (pyc_outgate_admit(&k->out, total, NULL) == 0)
        return false;
    if (pyc_outgate_wants_text(&k->out)) {
        /* The cell's head, for its event: read from the content only while the head has room. */
        json_t *content = json_loadb(f[6].data, f[6].size, 0, NULL);
        pyc__keep_output_text(k, type, content);
        json_decref(content);
    }
    return true;
}

/* Merges the child's outcome (done) and the names it bound (the pickle blob) into res and the lists; what
 * fails to load here moves from merged to skipped.  GIL held. */
static void
merge_back(json_t *done, const pyc_outframe_t *blob, pyc_py_exec_result_t *res, json_t *merged, json_t *skipped)
{
    res->ok = json_is_true(json_object_get(done, "ok"));
    res->error = json_incref(json_object_get(done, "error"));
    res->user_expressions = json_incref(json_object_get(done, "user_expressions"));
    res->payload = json_incref(json_object_get(done, "payload"));
    json_array_extend(merged, json_object_get(done, "merged"));
    json_object_update(skipped, json_object_get(done, "skipped"));
    if (blob->size == 0)
        return;
    json_t *m2 = NULL, *s2 = NULL;
    pyc_error_t err;
    if (pyc_py_isolate_merge(blob->data, blob->size, &m2, &s2, &err) == 0) {
        size_t i;
        json_t *v;
        const char *name;
        json_object_foreach(s2, name, v) {
            json_array_foreach(merged, i, v) {
                if (strcmp(json_string_value(v), name) == 0) {
                    json_array_remove(merged, i);
                    break;
                }
            }
        }
        json_object_update(skipped, s2);
    } else {
        json_object_set_new(skipped, "*", json_string(err.text));
        json_array_clear(merged);
    }
    json_decref(m2);
    json_decref(s2);
}

void
pyc__run_isolated(pyc_kernel_t *k, const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res,
                  json_t **md_out)
{
    const char *outcome = "ok";
    json_t *merged = json_array(), *skipped = json_object();
    json_t *done = NULL;
    pyc_outframe_t *df = NULL;
    size_t dn = 0;
    int p[2];
    char why[256] = "";

    res->ok = false;
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(why, sizeof why, "pipe: %s", strerror(errno));
        outcome = "died";
        goto out;
    }
    pyc_streams_flush(k->streams);
    int saved;
    pid_t pid = pyc_kernel_fork(k, &saved);
    if (pid == 0) {
        close(p[0]);
        iso_child(k, p[1], code, opts);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        snprintf(why, sizeof why, "fork: %s", strerror(saved));
        outcome = "died";
        goto out;
    }

    atomic_store(&k->iso_stop, 0);
    atomic_store(&k->iso_pid, (int)pid);
    pyc_py_interrupt_arm();
    atomic_store(&k->executing, 1);
    for (;;) {
        if (pyc_py_interrupt_pending() || atomic_load(&k->quit)) {
            outcome = "interrupted";
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        uint32_t type, chan;
        pyc_outframe_t *f;
        size_t n;
        if (pyc_record_read(p[0], &type, &chan, &f, &n) < 0) {
            outcome = "died";
            break;
        }
        if (type == ISO_RELAY) {
            pyc_streams_flush(k->streams);   /* the child's earlier output, from the fd pipes, goes first */
            if (relay_admitted(k, f, n)) {
                if (n >= 7) {
                    char mtype[64];
                    size_t tl = f[0].size < sizeof mtype - 1 ? f[0].size : sizeof mtype - 1;
                    memcpy(mtype, f[0].data, tl);
                    mtype[tl] = '\0';
                    pyc_journal_tap(k->journal, mtype, f[4].data, f[4].size, NULL, f[6].data, f[6].size);
                    if (pyc_outgate_counts(mtype))
                        atomic_store(&k->last_output_ns, pyc_now_ns());
                }
                k->io->send(k->io, PYC_CHAN_IOPUB, f, n);
                free(f);
            } else {
                pyc_record_free(f, n);
            }
            continue;
        }
        df = f;
        dn = n;
        break;
    }
    atomic_store(&k->executing, 0);
    if (df == NULL)
        kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    atomic_store(&k->iso_pid, 0);
    /* Killed by the kernel (interrupt_request, its deadline): an interrupt, not a death. */
    if (df == NULL && atomic_load(&k->iso_stop) != 0)
        outcome = "interrupted";
    close(p[0]);
    pyc_streams_flush(k->streams);
    if (strcmp(outcome, "died") == 0 && WIFSIGNALED(status))
        snprintf(why, sizeof why, "its process was killed by signal %d", WTERMSIG(status));

    if (df != NULL && dn == 2) {
        json_error_t jerr;
        done = json_loadb(df[0].data, df[0].size, 0, &jerr);
    }
    pyc_py_enter();
    pyc_py_interrupt_disarm();
    if (done != NULL) {
        merge_back(done, &df[1], res, merged, skipped);
        if (!res->ok)
            outcome = "error";
    }
    pyc_py_leave();
out:
    if (done == NULL) {
        const char *ename = strcmp(outcome, "interrupted") == 0 ? "KeyboardInterrupt" : "IsolatedCellDied";
        char evalue[512];
        if (strcmp(outcome, "interrupted") == 0)
            snprintf(evalue, sizeof evalue, "the isolated cell was interrupted: its process was killed; the "
                                            "kernel's state is as it was before the cell");
        else
            snprintf(evalue, sizeof evalue, "the isolated cell's process ended without a result (%s); the "
                                            "kernel's state is as it was before the cell",
                     why[0] ? why : "no report");
        res->error = json_pack("{s:s, s:s, s:[s]}", "ename", ename, "evalue", evalue, "traceback", evalue);
        res->user_expressions = json_object();
        res->payload = json_array();
    }
    /* No "state" here: pyc_outcome_metadata says it, from whether the kernel goes on (an isolated cell that
     * died leaves the kernel intact; a lifetime that ends during it does not). */
    *md_out = json_pack("{s:s, s:s, s:o, s:o}", "isolated", "fork", "outcome", outcome, "merged", merged,
                        "skipped", skipped);
    json_decref(done);
    pyc_record_free(df, dn);
}
