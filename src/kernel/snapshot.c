/*
 * snapshot.c -- time travel (README, "Time travel"): the kernel's table of snapshots, the comm target
 * pyc.snapshot, and restores.  A snapshot is a parked copy-on-write fork of the kernel (kernel/timetravel.c
 * makes and wakes them, through the config's snapshot callbacks); restoring one makes its state the live
 * kernel's, on the same ports, key and kernel pid.
 *
 * The table lists the snapshots this kernel may restore, oldest first: their names, processes, and the
 * execution count they hold.  A restore happens once the request that asked for it has been handled: the
 * kernel hands its ports to the snapshot, which goes on with the table, the execution count and the inputs
 * (In) of the cells run since, so that counts and history continue, and sends that request's answer (its
 * reply and idle, held back: handover.c).  The snapshot restored stays in the table: it left a parked copy
 * of itself before it took over.
 */
#include "kernelint.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "checkpoint.h"
#include "clock.h"
#include "log.h"
#include "proc.h"
#include "py.h"
#include "wire.h"

/* The snapshot named name, or -1. */
static int
find(const pyc_kernel_t *k, const char *name)
{
    for (int i = 0; i < k->tt.n_snaps; i++) {
        if (strcmp(k->tt.snaps[i].name, name) == 0)
            return i;
    }
    return -1;
}

/* Forgets entry i (its process is not touched). */
static void
forget(pyc_kernel_t *k, int i)
{
    pthread_mutex_lock(&k->usage_lock);
    free(k->tt.snaps[i].name);
    json_decref(k->tt.snaps[i].not_carried);
    memmove(&k->tt.snaps[i], &k->tt.snaps[i + 1], (size_t)(k->tt.n_snaps - i - 1) * sizeof k->tt.snaps[0]);
    k->tt.n_snaps--;
    pthread_mutex_unlock(&k->usage_lock);
}

/* Appends a record (name copied, not_carried stolen).  Returns 0, or -1 when out of memory. */
static int
add(pyc_kernel_t *k, const char *name, pid_t pid, int count, double taken, bool automatic, json_t *not_carried)
{
    char *n = strdup(name);
    pthread_mutex_lock(&k->usage_lock);
    pyc__snapshot_t *grown = n != NULL ? realloc(k->tt.snaps, (size_t)(k->tt.n_snaps + 1) * sizeof *grown) : NULL;
    if (grown != NULL) {
        k->tt.snaps = grown;
        k->tt.snaps[k->tt.n_snaps++] = (pyc__snapshot_t){n, pid, count, taken, automatic,
                                                   not_carried != NULL ? not_carried : json_array()};
    }
    pthread_mutex_unlock(&k->usage_lock);
    if (grown == NULL) {
        free(n);
        json_decref(not_carried);
        return -1;
    }
    return 0;
}

/* The bytes the snapshots hold of their own, together. */
static unsigned long long
held_bytes(const pyc_kernel_t *k)
{
    unsigned long long total = 0, uss;
    for (int i = 0; i < k->tt.n_snaps; i++) {
        if (pyc_proc_private(k->tt.snaps[i].pid, &uss) == 0)
            total += uss;
    }
    return total;
}

json_t *
pyc__snapshot_usage(pyc_kernel_t *k)
{
    pthread_mutex_lock(&k->usage_lock);
    int n = k->tt.n_snaps;
    unsigned long long total = held_bytes(k);
    pthread_mutex_unlock(&k->usage_lock);
    return json_pack("{s:i, s:I}", "count", n, "bytes", (json_int_t)total);
}

static json_t *
record_json(const pyc__snapshot_t *s, bool with_memory)
{
    json_t *j = json_pack("{s:s, s:i, s:i, s:f, s:b, s:O}", "name", s->name, "pid", (int)s->pid,
                          "execution_count", s->execution_count, "taken", s->taken, "automatic", s->automatic,
                          "not_carried", s->not_carried);
    unsigned long long uss;
    if (with_memory && j != NULL)
        json_object_set_new(j, "bytes", pyc_proc_private(s->pid, &uss) == 0 ? json_integer((json_int_t)uss)
                                                                              : json_null());
    return j;
}

/* Drops entries whose process is gone (killed from outside, or ended with a root that is gone). */
static void
prune(pyc_kernel_t *k)
{
    for (int i = 0; i < k->tt.n_snaps;) {
        if (kill(k->tt.snaps[i].pid, 0) < 0 || pyc_proc_start(k->tt.snaps[i].pid) == 0)
            forget(k, i);
        else
            i++;
    }
}

json_t *
pyc__snapshot_list(pyc_kernel_t *k)
{
    prune(k);
    json_t *a = json_array();
    for (int i = 0; i < k->tt.n_snaps; i++)
        json_array_append_new(a, record_json(&k->tt.snaps[i], true));
    return a;
}

int
pyc__snapshot_drop(pyc_kernel_t *k, const char *name)
{
    int i = find(k, name);
    if (i < 0)
        return -1;
    if (k->tt.snapshot_drop != NULL)
        k->tt.snapshot_drop(k->tt.snaps[i].pid);
    forget(k, i);
    return 0;
}

/* The number of cells that the user's In holds up to now, from count+1 on: sent to a restored snapshot. */
static json_t *
inputs_since(int count)
{
    json_t *args = json_pack("[i]", count);
    json_t *r = args != NULL ? pyc_py_support_call("pyc._shell", "inputs_since", args) : NULL;
    json_decref(args);
    return r != NULL ? r : json_array();
}

/* The name a snapshot is taken under: name, or a new "snapshot-N" (auto-N) when it is NULL or empty, written
 * into buf (at least 64 bytes).  NULL with err when name is too long. */
static const char *
snapshot_name(pyc_kernel_t *k, const char *name, bool automatic, char *buf, size_t cap, pyc_error_t *err)
{
    if (name == NULL || name[0] == '\0') {
        snprintf(buf, cap, "%s%d", automatic ? "auto-" : "snapshot-", ++k->tt.snap_seq);
        return buf;
    }
    if (strlen(name) > 200) {
        pyc_error_code(err, PYC_EINVAL, "a snapshot's name has at most 200 bytes");
        return NULL;
    }
    return name;
}

/* Whether one more snapshot taken by name may be held: a name not held yet needs room under max_snapshots (a
 * name taken again replaces its snapshot).  Returns 0, or -1 with err. */
static int
named_room(pyc_kernel_t *k, const char *name, pyc_error_t *err)
{
    int named = 0;
    for (int i = 0; i < k->tt.n_snaps; i++)
        named += !k->tt.snaps[i].automatic;
    if (find(k, name) >= 0 || named < k->tt.max_snapshots)
        return 0;
    return pyc_error_code(err, PYC_EINVAL, "%d snapshots taken by name are held, the most this kernel keeps "
                          "(PYC_MAX_SNAPSHOTS): drop one first (%%snapshot -d NAME, or the pyc.snapshot comm's "
                          "drop)", named);
}

int
pyc__snapshot_take(pyc_kernel_t *k, const char *name, bool automatic, json_t **answer, pyc_error_t *err)
{
    *answer = NULL;
    if (k->tt.snapshot_take == NULL)
        return pyc_error_code(err, PYC_EINVAL, "this kernel cannot take snapshots");
    char autoname[64];
    if ((name = snapshot_name(k, name, automatic, autoname, sizeof autoname, err)) == NULL)
        return -1;
    int old = find(k, name);
    if (!automatic && named_room(k, name, err) < 0)
        return -1;
    if (old >= 0)
        pyc__snapshot_drop(k, name);      /* a name taken again is the newer state */
    /* Under a memory cap, the snapshots' own pages count: together they may hold as much as the cap. */
    unsigned long long held = k->limits.memory > 0 ? held_bytes(k) : 0;
    if (k->limits.memory > 0 && held >= (unsigned long long)k->limits.memory)
        return pyc_error_code(err, PYC_EINVAL, "the snapshots hold %llu MiB of their own, as much as the kernel's "
                              "memory limit (%llu MiB): drop one first", held >> 20,
                              (unsigned long long)k->limits.memory >> 20);
    /* What the snapshot will not hold, named now (the live kernel's threads and connections). */
    json_t *lost = pyc__not_carried(k, "the snapshot", "after a restore");
    pid_t pid = -1;
    json_t *state = NULL;
    pyc__checkpoint(k);          /* made now, so that a restored snapshot shares it (its token) */
    int rc = k->tt.snapshot_take(k->tt.snapshot_ctx, &pid, &state, err);
    if (rc != 0)
        json_decref(lost);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        /* This process is the snapshot, now restored: it carries on with the state of the restorer. */
        pyc__snapshot_resumed(k, state, pid);
        json_decref(state);
        return 1;
    }
    double taken = (double)time(NULL);
    if (add(k, name, pid, k->execution_count, taken, automatic, lost) < 0) {
        if (k->tt.snapshot_drop != NULL)
            k->tt.snapshot_drop(pid);
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    }
    *answer = record_json(&k->tt.snaps[k->tt.n_snaps - 1], false);
    return 0;
}

int
pyc__snapshot_request_restore(pyc_kernel_t *k, const char *name, pyc_error_t *err)
{
    prune(k);
    int i = -1;
    char *end = NULL;
    long back = name != NULL && name[0] == '-' ? strtol(name, &end, 10) : 0;
    if (back < 0 && end != NULL && *end == '\0')
        i = k->tt.n_snaps + (int)back;       /* -1: the newest */
    else if (name != NULL)
        i = find(k, name);
    if (i < 0 || i >= k->tt.n_snaps)
        return pyc_error_code(err, PYC_EINVAL, "no snapshot %s (%d taken)",
                              name != NULL ? name : "", k->tt.n_snaps);
    k->tt.restore_to = i + 1;
    k->tt.restore_pid = k->tt.snaps[i].pid;
    return 0;
}

void
pyc__snapshot_restore_now(pyc_kernel_t *k)
{
    k->tt.holding = false;
    /* The entry asked for, found again by its process: the request may have dropped or taken snapshots since
     * (bound_automatic, a name taken again), which moves the entries. */
    int at = -1;
    for (int i = 0; k->tt.restore_to > 0 && i < k->tt.n_snaps; i++) {
        if (k->tt.snaps[i].pid == k->tt.restore_pid)
            at = i;
    }
    k->tt.restore_to = 0;
    if (at < 0) {
        pyc_log("restore: the snapshot asked for was dropped before the request ended; nothing restored");
        free(k->tt.restore_error);
        k->tt.restore_error = strdup("the snapshot asked for was dropped before the restore");
        pyc__handover_send_held(k, false);
        return;
    }
    pyc__snapshot_t *s = &k->tt.snaps[at];
    json_t *table = json_array();
    for (int i = 0; i < k->tt.n_snaps; i++)
        json_array_append_new(table, record_json(&k->tt.snaps[i], false));
    const char *cp = pyc__checkpoint_path_if_made(k);
    json_t *state = json_pack("{s:i, s:o, s:o, s:s, s:i, s:b, s:i, s:s?}", "execution_count", k->execution_count,
                              "inputs", inputs_since(s->execution_count), "snapshots", table, "name", s->name,
                              "from", (int)getpid(), "used_up", k->tt.restore_drop, "history_session",
                              pyc__history_session_of(k),
                              "checkpoint", cp);
    json_object_set_new(state, "subscribers", json_integer(atomic_load(&k->subscriptions)));
    json_object_set_new(state, "held", k->tt.held != NULL ? json_incref(k->tt.held) : json_array());
    k->tt.restore_drop = false;
    pyc__history_write_out(k);     /* the cells run here stay in the history: written before the ports move */
    pyc_error_t err;
    pyc_log("restoring snapshot %s (process %ld, cell %d; %d iopub subscribers)", s->name, (long)s->pid,
            s->execution_count, atomic_load(&k->subscriptions));
    if (k->tt.snapshot_hand_over(k->tt.snapshot_ctx, s->pid, state, &err) < 0) {
        pyc_log("restore of %s failed: %s", s->name, err.text);
        free(k->tt.restore_error);
        k->tt.restore_error = strdup(err.text);
        pyc__handover_failed(k, state);     /* serving again: the answer and what was forwarded are ours */
    }
    json_decref(state);
}

void
pyc__snapshot_resumed(pyc_kernel_t *k, json_t *state, pid_t copy)
{
    const char *name = json_string_value(json_object_get(state, "name"));
    int held = k->execution_count;
    json_t *lost = NULL;
    if (copy > 0 && json_is_true(json_object_get(state, "used_up"))) {
        if (k->tt.snapshot_drop != NULL)
            k->tt.snapshot_drop(copy);
        copy = -1;
    }
    while (k->tt.n_snaps > 0)
        forget(k, k->tt.n_snaps - 1);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(state, "snapshots"), i, r) {
        const char *n = json_string_value(json_object_get(r, "name"));
        pid_t pid = (pid_t)json_integer_value(json_object_get(r, "pid"));
        if (n == NULL)
            continue;
        if (name != NULL && strcmp(n, name) == 0) {
            if (copy <= 0)
                continue;                 /* no copy could be made: this snapshot is used up */
            pid = copy;
        }
        add(k, n, pid, (int)json_integer_value(json_object_get(r, "execution_count")),
            json_number_value(json_object_get(r, "taken")), json_is_true(json_object_get(r, "automatic")),
            json_incref(json_object_get(r, "not_carried")));
        if (name != NULL && strcmp(n, name) == 0)
            lost = json_object_get(r, "not_carried");
    }
    k->execution_count = (int)json_integer_value(json_object_get(state, "execution_count"));
    pyc__store_resumed(k, (int)json_integer_value(json_object_get(state, "history_session")),
                       json_string_value(json_object_get(state, "checkpoint")), held);
    json_t *args = json_pack("[i, O]", held, json_object_get(state, "inputs"));
    json_decref(pyc_py_support_call("pyc._shell", "resume", args));
    json_decref(args);
    json_decref(k->tt.restored);
    k->tt.restored = json_pack("{s:s?, s:i, s:i, s:f, s:O?}", "name", name, "execution_count", held, "from",
                            (int)json_integer_value(json_object_get(state, "from")), "at", (double)time(NULL),
                            "not_carried", lost);
    for (size_t j = 0; j < json_array_size(lost); j++)
        pyc_log("restored %s without: %s", name != NULL ? name : "?", json_string_value(json_array_get(lost, j)));
    pyc__handover_resumed(k, state);
    pyc_log("restored: snapshot %s (cell %d) is the kernel now", name != NULL ? name : "?", held);
}

/* The answer to a list: the snapshots, the kernel's process, which snapshot it was restored from and why the
 * last restore failed (when one did). */
static json_t *
list_answer(pyc_kernel_t *k)
{
    json_t *r = json_pack("{s:s, s:o, s:i}", "status", "ok", "snapshots", pyc__snapshot_list(k), "pid",
                          (int)getpid());
    if (k->tt.restored != NULL)
        json_object_set(r, "restored", k->tt.restored);
    if (k->tt.restore_error != NULL)
        json_object_set_new(r, "restore_error", json_string(k->tt.restore_error));
    return r;
}

/* The answer to a restore just asked for (pyc__snapshot_request_restore succeeded). */
static json_t *
restore_answer(const pyc_kernel_t *k)
{
    const pyc__snapshot_t *s = &k->tt.snaps[k->tt.restore_to - 1];
    return json_pack("{s:s, s:s, s:i, s:i, s:O}", "status", "ok", "restoring", s->name, "pid", (int)s->pid,
                     "execution_count", s->execution_count, "not_carried", s->not_carried);
}

/* Comm target pyc.snapshot: comm_open with data {"op": "take"|"list"|"drop"|"restore", "name": ...}.  The
 * answer is one comm_msg, then comm_close: take {"status": "ok", "snapshot": {name, pid, execution_count,
 * taken, automatic}}; list {"status": "ok", "snapshots": [... with "bytes", what each really costs], "pid": the
 * kernel's process, "restored": {name, execution_count, from, at} after a restore};
 * drop {"status": "ok"}; restore {"status": "ok", "restoring": name, "pid"} (the restore follows once the
 * request is handled, and the request's idle comes from the restored kernel); an error {"status": "error",
 * "ename": "SnapshotError", "evalue"}. */
void
pyc__on_snapshot(pyc_kernel_t *k, const pyc_msg_t *msg)
{
    json_t *content = msg->content;
    const char *comm_id = json_string_value(json_object_get(content, "comm_id"));
    json_t *data = json_object_get(content, "data");
    const char *op = json_string_value(json_object_get(data, "op"));
    const char *name = json_string_value(json_object_get(data, "name"));
    json_t *result = NULL;
    pyc_error_t err = {0};
    if (comm_id == NULL) {
        pyc_log("pyc.snapshot: comm_open without a comm_id");
        return;
    }
    if (op == NULL || strcmp(op, "list") == 0) {
        result = list_answer(k);
    } else if (strcmp(op, "take") == 0) {
        json_t *snap = NULL;
        int rc = pyc__snapshot_take(k, name, false, &snap, &err);
        if (rc == 1) {
            k->just_forked = true;    /* the request and its idle are the kernel's that took the snapshot */
            return;
        }
        if (rc == 0)
            result = json_pack("{s:s, s:o}", "status", "ok", "snapshot", snap);
    } else if (strcmp(op, "drop") == 0) {
        if (name == NULL || pyc__snapshot_drop(k, name) < 0)
            pyc_error_set(&err, "no snapshot %s", name != NULL ? name : "(give a name)");
        else
            result = json_pack("{s:s}", "status", "ok");
    } else if (strcmp(op, "restore") == 0) {
        if (pyc__snapshot_request_restore(k, name, &err) == 0)
            result = restore_answer(k);
    } else {
        pyc_error_set(&err, "unknown op %s (take, list, drop, restore)", op);
    }
    if (result == NULL)
        result = json_pack("{s:s, s:s, s:s}", "status", "error", "ename", "SnapshotError", "evalue", err.text);
    pyc__publish(k, msg, "comm_msg", json_pack("{s:s, s:o}", "comm_id", comm_id, "data", result));
    pyc__publish(k, msg, "comm_close", json_pack("{s:s, s:{}}", "comm_id", comm_id, "data"));
}

/* The automatic snapshots, oldest first, are dropped until at most k->tt.auto_snapshots are left and together
 * they hold at most k->tt.snapshot_budget bytes (0: no budget); the newest is always kept. */
static void
bound_automatic(pyc_kernel_t *k)
{
    for (;;) {
        int n = 0, oldest = -1;
        unsigned long long bytes = 0, uss;
        for (int i = 0; i < k->tt.n_snaps; i++) {
            if (!k->tt.snaps[i].automatic)
                continue;
            n++;
            if (oldest < 0)
                oldest = i;
            if (k->tt.snapshot_budget > 0 && pyc_proc_private(k->tt.snaps[i].pid, &uss) == 0)
                bytes += uss;
        }
        bool over = n > k->tt.auto_snapshots || (k->tt.snapshot_budget > 0 && bytes > k->tt.snapshot_budget);
        if (n <= 1 || !over)
            return;
        if (k->tt.snapshot_budget > 0)
            pyc_log("snapshots: dropping %s (%d automatic hold %llu MiB; at most %d and %llu MiB)",
                    k->tt.snaps[oldest].name, n, bytes >> 20, k->tt.auto_snapshots, k->tt.snapshot_budget >> 20);
        pyc__snapshot_drop(k, k->tt.snaps[oldest].name);
    }
}

int
pyc__snapshot_before_cell(pyc_kernel_t *k, const pyc_execreq_t *req)
{
    k->tt.txn = false;
    /* Nothing for a request that will not run (refused: nothing to undo) or runs silently. */
    if (k->tt.snapshot_take == NULL || k->aborting || req == NULL || req->refused != NULL || req->silent)
        return 0;
    json_t *snap = req->snapshot;
    bool txn = req->transaction;
    bool automatic = k->tt.auto_snapshots > 0 && req->store_history;
    if (!txn && !automatic && snap == NULL)
        return 0;
    /* Automatic only when nothing else asked for it: a transaction's or the request's own is not dropped by
     * the automatic ones' bounds. */
    bool is_auto = !txn && automatic && snap == NULL;
    char name[256];
    if (txn)
        snprintf(name, sizeof name, "transaction-%d", k->execution_count + 1);
    else if (json_is_string(snap))
        snprintf(name, sizeof name, "%.200s", json_string_value(snap));
    else
        snprintf(name, sizeof name, "%s%d", is_auto ? "auto-before-" : "before-", k->execution_count + 1);
    json_t *answer = NULL;
    pyc_error_t err;
    int rc = pyc__snapshot_take(k, name, is_auto, &answer, &err);
    if (rc == 1)
        return 1;
    json_decref(answer);
    if (rc < 0) {
        pyc_log("snapshot before the cell: %s%s", err.text, txn ? " (the transaction cannot be undone)" : "");
        return 0;
    }
    k->tt.txn = txn;
    snprintf(k->tt.txn_name, sizeof k->tt.txn_name, "%s", name);
    bound_automatic(k);
    return 0;
}

const char *
pyc__snapshot_after_cell(pyc_kernel_t *k, bool ok)
{
    if (!k->tt.txn)
        return NULL;
    k->tt.txn = false;
    if (ok) {
        pyc__snapshot_drop(k, k->tt.txn_name);
        return "committed";
    }
    pyc_error_t err;
    if (pyc__snapshot_request_restore(k, k->tt.txn_name, &err) < 0) {
        pyc_log("transaction: %s", err.text);
        return "failed";
    }
    k->tt.restore_drop = true;          /* the transaction's snapshot is used up by its rollback */
    return "rolled_back";
}

json_t *
pyc__kernel_call(void *ctx, const char *op, json_t *args)
{
    pyc_kernel_t *k = ctx;
    const char *name = json_string_value(json_object_get(args, "name"));
    pyc_error_t err = {0};
    if (!pthread_equal(pthread_self(), k->main_thread) || k->tt.snapshot_take == NULL)
        return json_pack("{s:s, s:s}", "status", "error", "evalue",
                         "snapshots are taken and restored from the kernel's main shell only");
    if (strcmp(op, "snapshot.list") == 0)
        return list_answer(k);
    if (strcmp(op, "snapshot.take") == 0) {
        char autoname[64];
        if ((name = snapshot_name(k, name, false, autoname, sizeof autoname, &err)) != NULL &&
            named_room(k, name, &err) == 0) {
            free(k->tt.take_after);
            k->tt.take_after = strdup(name);
            return json_pack("{s:s, s:s}", "status", "ok", "name", name);
        }
    } else if (strcmp(op, "snapshot.drop") == 0) {
        if (name != NULL && pyc__snapshot_drop(k, name) == 0)
            return json_pack("{s:s}", "status", "ok");
        pyc_error_set(&err, "no snapshot %s", name != NULL ? name : "(give a name)");
    } else if (strcmp(op, "snapshot.restore") == 0) {
        if (pyc__snapshot_request_restore(k, name, &err) == 0)
            return restore_answer(k);
    } else {
        pyc_error_set(&err, "unknown operation %s", op);
    }
    return json_pack("{s:s, s:s}", "status", "error", "evalue", err.text);
}

int
pyc__snapshot_after_request(pyc_kernel_t *k)
{
    /* The cell just run wrote pages the newest automatic snapshot now holds alone: the bounds again. */
    if (k->tt.auto_snapshots > 0 && k->tt.n_snaps > 1)
        bound_automatic(k);
    if (k->tt.take_after != NULL) {
        char *name = k->tt.take_after;
        k->tt.take_after = NULL;
        json_t *answer = NULL;
        pyc_error_t err;
        int rc = pyc__snapshot_take(k, name, false, &answer, &err);
        if (rc < 0)
            pyc_log("%%snapshot %s: %s", name, err.text);
        json_decref(answer);
        free(name);
        if (rc == 1)
            return 1;
    }
    if (k->tt.restore_to > 0)
        pyc__snapshot_restore_now(k);
    return 0;
}

void
pyc__snapshots_end(pyc_kernel_t *k)
{
    while (k->tt.n_snaps > 0)
        forget(k, k->tt.n_snaps - 1);
    free(k->tt.snaps);
    k->tt.snaps = NULL;
    k->tt.n_snaps = 0;
    free(k->tt.restore_error);
    k->tt.restore_error = NULL;
    free(k->tt.take_after);
    k->tt.take_after = NULL;
    json_decref(k->tt.restored);
    k->tt.restored = NULL;
    pyc__handover_end(k);
}

bool
pyc__snapshot_in_transaction(const pyc_kernel_t *k)
{
    return k->tt.txn;
}

void
pyc__snapshots_off(pyc_kernel_t *k)
{
    k->tt.snapshot_take = NULL;
}
