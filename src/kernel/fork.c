/*
 * fork.c -- see fork.h.
 *
 * Locks: the fork happens with the GIL held, and the kernel's fork handlers (kernel.c) take every lock of
 * the kernel that another thread may hold, in the order of kernel.h, so the child inherits none of them held
 * by a thread that no longer exists.  Everything else that other threads may hold (the server's queues and
 * iopub lock, ZeroMQ's internals) belongs to objects the child never touches.
 *
 * The child reports on a pipe: one record (record.h) whose one frame is the JSON report, {"pid",
 * "connection_file", "connection"}, or {"error"}.  A fan-out forks every child before it reads any report, and
 * then waits for all of them together, at most PYC_FORK_START_TIMEOUT_MS.
 */
#include "fork.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "clock.h"
#include "msg.h"
#include "record.h"

#define PYC_FORK_START_TIMEOUT_MS 10000

/* Objects a forked child inherited and must never touch (the parent's server, history connection and the
 * fork request's frames).  They stay referenced here, so that leak checkers see them as kept on purpose,
 * not lost. */
static void *inherited[16];
static int n_inherited;

void
pyc_fork_keep_inherited(void *p)
{
    if (p != NULL && n_inherited < (int)(sizeof inherited / sizeof inherited[0]))
        inherited[n_inherited++] = p;
}

/* The channel whose endpoint is fd's local address, or -1 (not a kernel socket). */
static int
kernel_channel(int fd, const pyc_connfile_t *cf)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return false;
    int port = -1;
    if (ss.ss_family == AF_INET)
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else if (ss.ss_family == AF_INET6)
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    if (port >= 0) {
        for (int c = 0; c < PYC_CHAN_COUNT; c++) {
            if (cf->ports[c] == port)
                return c;
        }
        return -1;
    }
    if (ss.ss_family == AF_UNIX) {
        /* ipc endpoints are IP-PORT paths (connfile.h) */
        const char *path = ((struct sockaddr_un *)&ss)->sun_path;
        size_t n = strlen(cf->ip);
        if (strncmp(path, cf->ip, n) != 0)
            return -1;
        long pn = path[n] == '-' ? strtol(path + n + 1, NULL, 10) : -1;
        for (int c = 0; c < PYC_CHAN_COUNT; c++) {
            if (cf->ports[c] == pn)
                return c;
        }
        return PYC_CHAN_COUNT;   /* ours by its prefix, whatever its channel */
    }
    return -1;
}

/* True when fd is a socket whose local address is one of the kernel's endpoints. */
static bool
is_kernel_socket(int fd, const pyc_connfile_t *cf)
{
    return kernel_channel(fd, cf) >= 0;
}

/* The descriptors of this process that are open sockets, but for skip (at most cap).  The directory is read
 * with getdents64 into a buffer on the stack, not with opendir: opendir mallocs 32 KiB, and in a child just
 * forked from a template that malloc consolidates the inherited heap's free chunks, a write to dozens of pages
 * shared with the template (measured: a tenth of a fresh session's private pages). */
static int
open_sockets(int *fds, int cap, int skip)
{
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    char buf[4096] __attribute__((aligned(8)));
    int n = 0;
    long got;
    while (n < cap && (got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && n < cap;) {
            const struct dirent64 *e = (const struct dirent64 *)(buf + off);
            off += e->d_reclen;
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            int fd = (int)strtol(e->d_name, NULL, 10);
            struct stat st;
            if (fd <= 2 || fd == dfd || fd == skip)
                continue;
            if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
                fds[n++] = fd;
        }
    }
    close(dfd);
    return n;
}

int
pyc_fork_listening_fds(const pyc_connfile_t *cf, int *out)
{
    int fds[1024], n = open_sockets(fds, 1024, -1), found = 0;
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        out[c] = -1;
    for (int i = 0; i < n; i++) {
        int listening = 0;
        socklen_t len = sizeof listening;
        int c = kernel_channel(fds[i], cf);
        if (c < 0 || c >= PYC_CHAN_COUNT || out[c] >= 0 ||
            getsockopt(fds[i], SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening)
            continue;
        out[c] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
        found += out[c] >= 0;
    }
    if (found == PYC_CHAN_COUNT)
        return 0;
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (out[c] >= 0)
            close(out[c]);
        out[c] = -1;
    }
    return -1;
}

void
pyc_fork_close_kernel_sockets(const pyc_connfile_t *cf, int keep)
{
    int fds[1024], n = open_sockets(fds, 1024, keep);
    for (int i = 0; i < n; i++) {
        if (is_kernel_socket(fds[i], cf))
            close(fds[i]);
    }
}

enum { FORK_REPORT = 1, FORK_FAILED = 2 };

/* Writes a report or an error (one JSON frame) to the parent. */
static void
report(int fd, int type, json_t *j)
{
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    pyc_frame_t f = {text != NULL ? text : "{\"error\":\"out of memory\"}",
                     text != NULL ? strlen(text) : strlen("{\"error\":\"out of memory\"}")};
    pyc_record_write(fd, (uint32_t)type, 0, &f, 1);
    free(text);
}

/* The first steps of every forked child, a spare's too: dies with parent when asked (exits at once if the
 * parent died before that took effect), leaves the parent's process group, reseeds its message ids and closes
 * the parent's kernel sockets, all but keep (its report pipe). */
static void
child_leave_parent(const pyc_fork_spec_t *spec, pid_t parent, int keep, bool die_with_parent)
{
    if (die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
    }
    setpgid(0, 0);
    pyc_msg_reseed();
    pyc_fork_close_kernel_sockets(spec->cf, keep);
}

/* A child that could not become a kernel: reports why on fd and exits. */
static void
child_failed(int fd, const char *why)
{
    json_t *e = json_pack("{s:s}", "error", why);
    report(fd, FORK_FAILED, e);
    json_decref(e);
    _exit(1);
}

/* The child's side: becomes a kernel of its own, then reports on fd.  Never returns on failure. */
static void
child_start(pyc_kernel_t *k, const pyc_fork_spec_t *spec, const pyc_fork_opts_t *opts, pid_t parent, int fd)
{
    pyc_error_t err;
    child_leave_parent(spec, parent, fd, !opts->outlive && opts->watch <= 0);
    json_t *rep = NULL;
    if (opts->has_cwd && chdir(opts->cwd) < 0)
        pyc_error_set(&err, "cannot enter %s: %s", opts->cwd, strerror(errno));
    else
        rep = spec->become(spec->ctx, opts, parent, &err);
    if (rep == NULL)
        child_failed(fd, err.text);
    report(fd, FORK_REPORT, rep);
    json_decref(rep);
    close(fd);
    pyc_kernel_starting(k);
}

/* One child forked by pyc_fork_children whose report has not come yet. */
typedef struct pending {
    pid_t pid;
    int fd;                      /* the read end of its report pipe; -1 once read */
} pending_t;

/* Forks one child.  In the parent returns its pid and sets *fd to the read end of its report pipe, without
 * waiting for the report; in the child closes the report pipes of its elder siblings (earlier[0..n_earlier),
 * which are the parent's), becomes a kernel and returns 0; returns -1 with err when pipe or fork failed. */
pid_t
pyc_fork_piped(pyc_kernel_t *k, int p[2], pyc_error_t *err)
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return pyc_error_set(err, "pipe: %s", strerror(errno));
    int saved;
    pid_t pid = pyc_kernel_fork(k, &saved);
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return pyc_error_set(err, "fork: %s", strerror(saved));
    }
    return pid;
}

static pid_t
fork_one(pyc_kernel_t *k, const pyc_fork_spec_t *spec, const pyc_fork_opts_t *opts, const pending_t *earlier,
         int n_earlier, int *fd, pyc_error_t *err)
{
    int p[2];
    pid_t parent = getpid();
    pid_t pid = pyc_fork_piped(k, p, err);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(p[0]);
        for (int i = 0; i < n_earlier; i++)
            close(earlier[i].fd);
        child_start(k, spec, opts, parent, p[1]);
        return 0;
    }
    close(p[1]);
    *fd = p[0];
    return pid;
}

/* Reads the report of one child whose pipe is readable (or ended): its report, or {"pid", "error"} after
 * which the child is ended and reaped. */
static json_t *
read_report(pending_t *c)
{
    json_t *rep = NULL;
    uint32_t type = 0, chan;
    pyc_outframe_t *f = NULL;
    size_t n = 0;
    if (pyc_record_read(c->fd, &type, &chan, &f, &n) == 0 && n == 1) {
        json_error_t jerr;
        rep = json_loadb(f[0].data, f[0].size, 0, &jerr);
    }
    pyc_record_free(f, n);
    close(c->fd);
    c->fd = -1;
    if (type == FORK_REPORT && rep != NULL && json_object_get(rep, "pid") != NULL)
        return rep;
    const char *why = json_string_value(json_object_get(rep, "error"));
    json_t *e = json_pack("{s:i, s:o}", "pid", (int)c->pid, "error",
                          json_sprintf("child %ld did not start: %s", (long)c->pid,
                                       why != NULL ? why : "it ended without a report"));
    json_decref(rep);
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    return e;
}

/* A child whose report did not come within PYC_FORK_START_TIMEOUT_MS: it is ended (not left half started)
 * and reaped, and its entry says so. */
static json_t *
no_report(pending_t *c)
{
    close(c->fd);
    c->fd = -1;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    return json_pack("{s:i, s:o}", "pid", (int)c->pid, "error",
                     json_sprintf("child %ld did not start: no report within %d s", (long)c->pid,
                                  PYC_FORK_START_TIMEOUT_MS / 1000));
}

int
pyc_fork_spare(pyc_kernel_t *k, const pyc_fork_spec_t *spec, pyc_fork_spare_t *spare, json_t **names,
               pyc_error_t *err)
{
    int a[2], p[2];
    if (pipe2(a, O_CLOEXEC) < 0)
        return pyc_error_set(err, "pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t pid = pyc_fork_piped(k, p, err);
    if (pid < 0) {
        close(a[0]);
        close(a[1]);
        return -1;
    }
    if (pid > 0) {
        close(p[1]);
        close(a[0]);
        *spare = (pyc_fork_spare_t){.pid = pid, .report_fd = p[0], .adopt_fd = a[1]};
        return 0;
    }
    /* The spare: a kernel of its own now, dying with its parent until it is handed a request. */
    close(p[0]);
    close(a[1]);
    child_leave_parent(spec, parent, p[1], true);
    pyc_fork_opts_t own = {.spares = -1};
    pyc_error_t cerr;
    json_t *rep = spec->become(spec->ctx, &own, parent, &cerr);
    uint32_t type = 0, chan;
    pyc_outframe_t *f = NULL;
    size_t nf = 0;
    int got = pyc_record_read(a[0], &type, &chan, &f, &nf);
    json_t *adopt = got == 0 && nf == 1 ? json_loadb(f[0].data, f[0].size, 0, NULL) : NULL;
    pyc_record_free(f, nf);
    close(a[0]);
    if (adopt == NULL)
        _exit(0);                /* dropped (its state went stale), or the parent is gone */
    const char *cwd = json_string_value(json_object_get(adopt, "cwd"));
    pid_t watch = (pid_t)json_integer_value(json_object_get(adopt, "watch"));
    bool outlive = json_is_true(json_object_get(adopt, "outlive"));
    if (rep == NULL || (cwd != NULL && chdir(cwd) < 0))
        child_failed(p[1], rep == NULL ? cerr.text : "cannot enter the working directory");
    if (outlive || watch > 0)
        prctl(PR_SET_PDEATHSIG, 0);
    spec->adopted(spec->ctx, watch > 0 ? watch : outlive ? 0 : parent);
    *names = json_incref(json_object_get(adopt, "names"));
    json_decref(adopt);
    report(p[1], FORK_REPORT, rep);
    json_decref(rep);
    close(p[1]);
    pyc_kernel_starting(k);
    return 1;
}

json_t *
pyc_fork_adopt(pyc_fork_spare_t *spare, const pyc_fork_opts_t *opts, json_t *names)
{
    json_t *a = json_pack("{s:I, s:b}", "watch", (json_int_t)opts->watch, "outlive", opts->outlive);
    if (opts->has_cwd)
        json_object_set_new(a, "cwd", json_string(opts->cwd));
    if (json_is_array(names))
        json_object_set(a, "names", names);
    report(spare->adopt_fd, 1, a);
    json_decref(a);
    close(spare->adopt_fd);
    spare->adopt_fd = -1;
    pending_t c = {spare->pid, spare->report_fd};
    struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
    int ready;
    while ((ready = poll(&pfd, 1, PYC_FORK_START_TIMEOUT_MS)) < 0 && errno == EINTR)
        ;
    spare->report_fd = -1;
    return ready > 0 ? read_report(&c) : no_report(&c);
}

int
pyc_fork_children(pyc_kernel_t *k, const pyc_fork_spec_t *spec, int n, const pyc_fork_opts_t *opts,
                  json_t **reports, int *index)
{
    pending_t *kids = calloc((size_t)(n > 0 ? n : 1), sizeof *kids);
    struct pollfd *pfds = calloc((size_t)(n > 0 ? n : 1), sizeof *pfds);
    json_t **got = calloc((size_t)(n > 0 ? n : 1), sizeof *got);
    json_t *out = json_array();
    *reports = NULL;
    if (kids == NULL || pfds == NULL || got == NULL || out == NULL) {
        free(kids);
        free(pfds);
        free(got);
        json_decref(out);
        *reports = json_pack("[{s:s}]", "error", "out of memory");
        return 0;
    }
    /* All the forks first: each child starts (binds its ports, starts its threads) while the parent forks
     * the next, so the n start-ups overlap instead of adding up. */
    int started = 0;
    pyc_error_t err = {0};
    for (; started < n; started++) {
        pid_t pid = fork_one(k, spec, opts, kids, started, &kids[started].fd, &err);
        if (pid == 0) {
            free(kids);
            free(pfds);
            free(got);
            json_decref(out);
            *index = started;
            return 1;
        }
        if (pid < 0)
            break;
        kids[started].pid = pid;
    }
    /* Then the reports, in whatever order they come, within PYC_FORK_START_TIMEOUT_MS for all of them. */
    uint64_t t0 = pyc_now_ns();
    int left = started;
    while (left > 0) {
        int np = 0;
        for (int i = 0; i < started; i++) {
            if (kids[i].fd >= 0)
                pfds[np++] = (struct pollfd){.fd = kids[i].fd, .events = POLLIN};
        }
        uint64_t spent = pyc_ms_since(t0);
        if (spent >= PYC_FORK_START_TIMEOUT_MS)
            break;
        int ready = poll(pfds, (nfds_t)np, (int)(PYC_FORK_START_TIMEOUT_MS - spent));
        if (ready < 0 && errno != EINTR)
            break;
        for (int i = 0, j = 0; ready > 0 && i < started; i++) {
            if (kids[i].fd < 0)
                continue;
            if (pfds[j++].revents != 0) {
                got[i] = read_report(&kids[i]);
                left--;
            }
        }
    }
    for (int i = 0; i < started; i++) {
        if (got[i] == NULL)
            got[i] = no_report(&kids[i]);
        json_array_append_new(out, got[i]);
    }
    for (int i = started; i < n; i++)
        json_array_append_new(out, json_pack("{s:s}", "error", err.text));
    free(kids);
    free(pfds);
    free(got);
    *reports = out;
    return 0;
}
