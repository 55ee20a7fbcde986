/*
 * children.c -- forked sessions (README, "Session fork"): the comm target pyc.fork, and the table of live
 * children, which the kernel reaps when idle and ends with itself unless they were asked to outlive it.
 * Each child's pidfd is in one epoll set, which the main loop watches beside the sockets (pyc_kernel_wait_fd),
 * so that a child that ends is reaped at once and an idle kernel wakes for nothing else; where pidfd_open
 * fails (Linux before 5.3), the main loop looks every 30 s instead (pyc_kernel_idle's answer).
 *
 * The fork itself is fork.c's (through the fork_children callback of the kernel's config), all N children of
 * a request at once; a child returns from it as a kernel of its own, and leaves the fork request, which was
 * its parent's, unanswered.
 */
#include "kernelint.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "proc.h"

static void drop_spare(pyc_kernel_t *k, int i);

bool
pyc__reap_children(pyc_kernel_t *k)
{
    int live = 0;
    bool unwatched = false;
    for (int i = 0; i < k->children.n; i++) {
        /* Looked at without reaping first (WNOWAIT): a child that ended by a signal could not remove its
         * connection file, and that file goes before the pid does, so that whoever sees the child gone never
         * finds its stale connection file (a reaped pid vanishes from /proc at once). */
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)k->children.list[i].pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0) {
            unwatched = unwatched || k->children.list[i].pidfd < 0;
            k->children.list[live++] = k->children.list[i];
        } else {
            for (int j = k->children.nspares - 1; j >= 0; j--) {
                if (k->children.spares[j].pid == k->children.list[i].pid)
                    drop_spare(k, j);        /* a spare that ended by itself */
            }
            unlink(k->children.list[i].file);
            waitpid(k->children.list[i].pid, NULL, WNOHANG);
            free(k->children.list[i].file);
            if (k->children.list[i].pidfd >= 0)
                close(k->children.list[i].pidfd);     /* which also takes it out of the epoll set */
        }
    }
    k->children.n = live;
    return unwatched;
}

int
pyc__children_fd(const pyc_kernel_t *k)
{
    return k->children.n > 0 ? k->children.epfd : -1;
}

/* A pidfd for a new child, in the epoll set (made on first use); -1 when either cannot be had. */
static int
watch_child(pyc_kernel_t *k, pid_t pid)
{
    if (k->children.epfd < 0)
        k->children.epfd = epoll_create1(EPOLL_CLOEXEC);
    int fd = k->children.epfd >= 0 ? pyc_proc_pidfd(pid) : -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (fd >= 0 && epoll_ctl(k->children.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Records a new child and its connection file. */
static void
add_child(pyc_kernel_t *k, pid_t pid, const char *file, bool outlive)
{
    char *f = strdup(file != NULL ? file : "");
    pyc__child_t *grown = f != NULL ? realloc(k->children.list, (size_t)(k->children.n + 1) * sizeof *grown) : NULL;
    if (grown == NULL) {
        free(f);
        pyc_log("fork: out of memory: child %ld will not be reaped", (long)pid);
        return;
    }
    k->children.list = grown;
    k->children.list[k->children.n++] = (pyc__child_t){pid, f, outlive, watch_child(k, pid)};
}

void
pyc__end_children(pyc_kernel_t *k)
{
    for (int i = 0; i < k->children.n; i++) {
        if (k->children.list[i].outlive)
            continue;
        kill(k->children.list[i].pid, SIGKILL);
        unlink(k->children.list[i].file);
    }
}

void
pyc__forget_children(pyc_kernel_t *k)
{
    for (int i = 0; i < k->children.n; i++) {
        free(k->children.list[i].file);
        if (k->children.list[i].pidfd >= 0)
            close(k->children.list[i].pidfd);
    }
    for (int i = 0; i < k->children.nspares; i++) {
        close(k->children.spares[i].report_fd);
        close(k->children.spares[i].adopt_fd);
    }
    k->children.nspares = 0;
    k->children.want_spares = 0;
    if (k->children.epfd >= 0)
        close(k->children.epfd);
    k->children.epfd = -1;
    free(k->children.list);
    k->children.list = NULL;
    k->children.n = 0;
}

/* In a new child of a session that writes the event log: the child writes under the name the request gave
 * it (`pyc fork` names each child), else under PARENT-fork-PID, the name `pyc ls` lists it by. */
static void
name_child(pyc_kernel_t *k, json_t *given)
{
    const char *parent = pyc__lifelog_session(k);
    char from[128], own[160];
    if (parent == NULL)
        return;
    snprintf(from, sizeof from, "%s", parent);
    const char *name = json_string_value(given);
    if (name == NULL) {
        snprintf(own, sizeof own, "%.100s-fork-%ld", from, (long)getpid());
        name = own;
    }
    pyc__lifelog_forked(k, name, from);
}

json_t *
pyc__not_carried(pyc_kernel_t *k, const char *into, const char *gpu_after)
{
    json_t *ports = json_array();
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        json_array_append_new(ports, json_integer(k->cf.ports[c]));
    json_t *args = json_pack("[o, s, s]", ports, into, gpu_after);
    json_t *lost = args != NULL ? pyc_py_support_call("pyc._timetravel", "losses", args) : NULL;
    json_decref(args);
    if (!json_is_array(lost)) {
        json_decref(lost);
        lost = json_array();
    }
    return lost;
}

/* Drops spare i: it is killed (its pipes closed, it is reaped as any child). */
static void
drop_spare(pyc_kernel_t *k, int i)
{
    pyc_fork_spare_t *s = &k->children.spares[i];
    kill(s->pid, SIGKILL);
    close(s->report_fd);
    close(s->adopt_fd);
    k->children.spares[i] = k->children.spares[--k->children.nspares];
}

/* Drops the spares forked from a state other than now's, and those beyond keep. */
static void
drop_stale_spares(pyc_kernel_t *k, unsigned now, int keep)
{
    for (int i = k->children.nspares - 1; i >= 0; i--) {
        if (k->children.spares[i].generation != now || i >= keep)
            drop_spare(k, i);
    }
}

void
pyc__state_may_change(pyc_kernel_t *k)
{
    atomic_fetch_add(&k->children.generation, 1);
}

int
pyc__fill_spares(pyc_kernel_t *k)
{
    unsigned now = atomic_load(&k->children.generation);
    drop_stale_spares(k, now, k->children.want_spares);
    /* None while the kernel ends: the fork would find the interpreter finalized. */
    if (k->children.nspares >= k->children.want_spares || k->fork_spare == NULL ||
        k->children.n >= k->children.max || atomic_load(&k->quit) != 0)
        return 0;
    pyc_fork_spare_t spare = {0};
    json_t *names = NULL;
    char file[4400];
    int r = k->fork_spare(k->fork_ctx, &spare, file, sizeof file, &names);
    if (r == 1) {
        /* This process is the spare, now handed a request: its session's name, as a forked child's; its idle
         * clock starts now; and 1, so that the main loop looks at the process it must now watch before it
         * waits. */
        name_child(k, json_array_get(names, 0));
        json_decref(names);
        pyc_guard_activity(k->guard);
        return 1;
    }
    if (r < 0) {
        k->children.want_spares = 0;      /* no more tries until a request asks again */
        return 0;
    }
    spare.generation = now;
    k->children.spares[k->children.nspares++] = spare;
    add_child(k, spare.pid, file, false);
    return 1;
}

/* A spare for a request of one child that leaves the connection to the child (and the address, or gives this
 * kernel's), taken off the spares: its report, or NULL when there is none ready. */
static json_t *
take_spare(pyc_kernel_t *k, json_int_t n, const pyc_fork_opts_t *opts, json_t *names)
{
    if (n != 1 || opts->has_key || opts->has_ports || (opts->has_ip && strcmp(opts->ip, k->cf.ip) != 0) ||
        k->adopt_spare == NULL)
        return NULL;
    drop_stale_spares(k, atomic_load(&k->children.generation), PYC_MAX_SPARES);
    if (k->children.nspares == 0)
        return NULL;
    pyc_fork_spare_t spare = k->children.spares[--k->children.nspares];
    json_t *report = k->adopt_spare(k->fork_ctx, &spare, opts, names);
    if (json_object_get(report, "error") != NULL) {
        /* It died before or while it was handed the request: the request gets a fork of its own. */
        pyc_log("pyc.fork: %s; forking instead", json_string_value(json_object_get(report, "error")));
        json_decref(report);
        return NULL;
    }
    /* It is a child of ours from now on like any other (its connection file is in the table since it was
     * forked): outliving us when the request said so. */
    for (int i = 0; i < k->children.n; i++) {
        if (k->children.list[i].pid == spare.pid)
            k->children.list[i].outlive = opts->outlive || opts->watch > 0;
    }
    return report;
}

/* The options of a pyc.fork request beyond "n" (README, "Session fork"): "outlive", "watch" (a pid), "cwd" and
 * "connection" (an object: "ip", "key", the five ports, all or none and only for one child; "transport",
 * "signature_scheme" and "kernel_name" are taken when they are the parent's, so that a connection jupyter_client
 * holds can be given back as it is).  Returns NULL with *o filled in, or why the request is refused (a new
 * string), before anything is forked. */
static json_t *
fork_opts(const pyc_kernel_t *k, json_t *data, json_int_t n, pyc_fork_opts_t *o)
{
    static const char *const port_names[PYC_CHAN_COUNT] = {
        [PYC_CHAN_SHELL] = "shell_port", [PYC_CHAN_IOPUB] = "iopub_port", [PYC_CHAN_STDIN] = "stdin_port",
        [PYC_CHAN_CONTROL] = "control_port", [PYC_CHAN_HB] = "hb_port"};
    memset(o, 0, sizeof *o);
    o->outlive = json_is_true(json_object_get(data, "outlive"));
    o->spares = -1;
    json_t *sp = json_object_get(data, "spares");
    if (sp != NULL && !json_is_null(sp)) {
        json_int_t want = json_is_integer(sp) ? json_integer_value(sp) : -1;
        if (want < 0 || want > PYC_MAX_SPARES)
            return json_sprintf("spares must be a whole number from 0 to %d", PYC_MAX_SPARES);
        o->spares = (int)want;
    }
    json_t *w = json_object_get(data, "watch");
    if (w != NULL && !json_is_null(w)) {
        json_int_t pid = json_is_integer(w) ? json_integer_value(w) : 0;
        if (pid <= 1 || pid > 0x3fffffff)
            return json_string("watch must be the pid of a live process");
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            return json_sprintf("watch: there is no process %lld", (long long)pid);
        o->watch = (pid_t)pid;
    }
    json_t *d = json_object_get(data, "cwd");
    if (d != NULL && !json_is_null(d)) {
        struct stat st;
        const char *cwd = json_string_value(d);
        if (cwd == NULL || cwd[0] != '/' || strlen(cwd) >= sizeof o->cwd)
            return json_string("cwd must be an absolute path of at most 4095 bytes");
        if (stat(cwd, &st) < 0 || !S_ISDIR(st.st_mode))
            return json_sprintf("cwd: %s is not a directory", cwd);
        snprintf(o->cwd, sizeof o->cwd, "%s", cwd);
        o->has_cwd = true;
    }
    json_t *c = json_object_get(data, "connection");
    if (c == NULL || json_is_null(c))
        return NULL;
    if (!json_is_object(c))
        return json_string("connection must be an object");
    const char *key;
    json_t *v;
    int ports = 0;
    json_object_foreach(c, key, v) {
        const char *text = json_string_value(v);
        int chan = -1;
        for (int i = 0; i < PYC_CHAN_COUNT; i++)
            chan = strcmp(key, port_names[i]) == 0 ? i : chan;
        if (chan >= 0) {
            json_int_t port = json_is_integer(v) ? json_integer_value(v) : -1;
            if (port < 1 || port > 65535)
                return json_sprintf("connection: %s must be a port number from 1 to 65535", key);
            o->ports[chan] = (int)port;
            ports++;
        } else if (strcmp(key, "ip") == 0) {
            if (text == NULL || text[0] == '\0' || strlen(text) >= sizeof o->ip)
                return json_string("connection: ip must be an address of at most 255 characters");
            snprintf(o->ip, sizeof o->ip, "%s", text);
            o->has_ip = true;
        } else if (strcmp(key, "key") == 0) {
            if (text == NULL || strlen(text) >= sizeof o->key)
                return json_string("connection: key must be a string of at most 256 characters");
            snprintf(o->key, sizeof o->key, "%s", text);
            o->has_key = true;
        } else if (strcmp(key, "transport") == 0 || strcmp(key, "signature_scheme") == 0) {
            const char *ours = key[0] == 't' ? k->cf.transport : k->cf.signature_scheme;
            if (text == NULL || strcmp(text, ours) != 0)
                return json_sprintf("connection: a forked session keeps its parent's %s (%s)", key, ours);
        } else if (strcmp(key, "kernel_name") != 0) {
            return json_sprintf("connection: unknown field %s", key);
        }
    }
    if (strcmp(k->cf.transport, "tcp") != 0 && (o->has_ip || ports > 0))
        return json_string("connection: ip and ports can be given only to the children of a tcp kernel");
    if (ports != 0 && (ports != PYC_CHAN_COUNT || n != 1))
        return json_string("connection: give all five ports or none, and only for one child (n = 1)");
    o->has_ports = ports == PYC_CHAN_COUNT;
    return NULL;
}

/* Comm target pyc.fork: {"n": N, "outlive": false, "names": [...], "watch": PID, "connection": {...}} forks N
 * children at once from the state after the last finished request (names, optional, are the children's
 * session names in the event log; watch and connection: fork_opts);
 * the answer is one comm_msg {"status": "ok", "children": [{pid, connection_file, connection}...],
 * "not_carried": [sentence...]}, then comm_close.  not_carried names what the children do not have of the
 * parent (pyc__not_carried: its other threads, network connections, GPU contexts), [] when nothing.  When
 * some children could not start, the answer is {"status": "error", "ename": "ForkError", "evalue": how many
 * and why, "children": those that did start (live, and this kernel's to reap), "failed": [{"pid"?,
 * "error"}...], "not_carried"}; when none could be asked for, {"status": "error", "ename", "evalue"}. */
void
pyc__on_fork(pyc_kernel_t *k, const pyc_msg_t *msg)
{
    json_t *content = msg->content;
    const char *comm_id = json_string_value(json_object_get(content, "comm_id"));
    json_t *data = json_object_get(content, "data");
    json_t *nv = json_object_get(data, "n");
    json_int_t n = json_is_integer(nv) ? json_integer_value(nv) : nv == NULL ? 1 : -1;
    pyc_fork_opts_t opts;
    json_t *result = NULL, *refused = NULL;

    pyc__reap_children(k);
    if (comm_id == NULL) {
        pyc_log("pyc.fork: comm_open without a comm_id");
        return;
    }
    int room = k->children.max - k->children.n;
    if (k->fork_children == NULL) {
        result = json_pack("{s:s, s:s, s:s}", "status", "error", "ename", "ForkError", "evalue",
                           "this kernel cannot fork");
    } else if (n < 1 || n > room) {
        result = json_pack("{s:s, s:s, s:o}", "status", "error", "ename", "ForkError", "evalue",
                           json_sprintf("n must be a whole number from 1 to %d (at most %d live children; "
                                        "PYC_MAX_CHILDREN sets it)", room, k->children.max));
    } else if ((refused = fork_opts(k, data, n, &opts)) != NULL) {
        result = json_pack("{s:s, s:s, s:o}", "status", "error", "ename", "ForkError", "evalue", refused);
    } else {
        json_t *reports = NULL;
        int index = 0;
        /* Named before the fork, in the parent, whose threads and connections these are. */
        /* "not_carried": false (a template's provisioner, which has no one to tell) spares the look, a few
         * milliseconds of reading /proc on a busy machine, and leaves it out of the answer. */
        json_t *lost = json_is_false(json_object_get(data, "not_carried"))
                           ? NULL
                           : pyc__not_carried(k, "the forked sessions", "in them");
        if (opts.spares >= 0)
            k->children.want_spares = opts.spares;
        json_t *spare = take_spare(k, n, &opts, json_object_get(data, "names"));
        if (spare != NULL) {
            reports = json_pack("[o]", spare);
        } else if (k->fork_children(k->fork_ctx, (int)n, &opts, &reports, &index) == 1) {
            json_decref(lost);
            /* the child: the parent answers this request, not us */
            k->just_forked = true;
            name_child(k, json_array_get(json_object_get(data, "names"), (size_t)index));
            return;
        }
        json_t *children = json_array(), *failed = json_array();
        const char *why = NULL;
        size_t i;
        json_t *r;
        json_array_foreach(reports, i, r) {
            const char *e = json_string_value(json_object_get(r, "error"));
            if (e != NULL) {
                why = why != NULL ? why : e;
                json_array_append(failed, r);
                continue;
            }
            if (spare == NULL)       /* a spare is in the table already (take_spare) */
                add_child(k, (pid_t)json_integer_value(json_object_get(r, "pid")),
                          json_string_value(json_object_get(r, "connection_file")), opts.outlive || opts.watch > 0);
            json_array_append(children, r);
        }
        if (json_array_size(failed) == 0)
            result = json_pack("{s:s, s:o, s:o*}", "status", "ok", "children", children, "not_carried", lost);
        else
            result = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o*}", "status", "error", "ename", "ForkError", "evalue",
                               json_sprintf("%zu of %lld children did not start (%s)", json_array_size(failed),
                                            (long long)n, why),
                               "children", children, "failed", failed, "not_carried", lost);
        if (json_array_size(failed) == 0)
            json_decref(failed);
        json_decref(reports);
    }
    if (result == NULL)
        return;
    pyc__publish(k, msg, "comm_msg", json_pack("{s:s, s:o}", "comm_id", comm_id, "data", result));
    pyc__publish(k, msg, "comm_close", json_pack("{s:s, s:{}}", "comm_id", comm_id, "data"));
}
