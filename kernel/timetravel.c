/*
 * timetravel.c -- the processes behind snapshots (README, "Time travel"): a snapshot is a parked fork of the
 * kernel, and a restore hands the kernel's ports over to one.  The kernel's side (the table of snapshots,
 * the comm target, the magics) is src/kernel/snapshot.c; this file is the program's, since it rebinds the
 * sockets as app.c wires them.
 *
 * A parked snapshot is forked from the live kernel between requests (pyc_kernel_fork, so it inherits no lock
 * held by another thread).  It leaves the kernel's process group (an interrupt sent to the kernel's group does
 * not reach it), ignores SIGINT, closes the kernel's sockets it inherited, starts no thread, and waits in
 * poll(2) on a listening Unix socket in the abstract namespace, "\0pyc-snapshot-ROOT-PID", where the live
 * kernel sends it orders, and on a pidfd of the root process (the one Jupyter started), whose end ends it.
 * It costs only the pages that either side writes after the fork (copy-on-write).
 *
 * A restore, from the live kernel L to the snapshot S, once L has handled the request that asked for it (whose
 * answer L holds back: S sends it, src/kernel/handover.c): L closes its sockets (what is queued gets its
 * second to leave), connects to S and sends GO with the state that carries over (snapshot.c's).  S first
 * forks a parked copy of itself, which keeps the snapshot for another restore, then binds the same ports with
 * the same key, starts its threads and answers READY.  L then leaves the stage: the root process execs the
 * keeper (pyc_keeper_main), which keeps the pid Jupyter knows and passes signals on; a kernel that is itself a
 * restored snapshot tells the keeper which process is live now, and exits.  When S does not answer READY, L
 * binds its ports again and goes on: the restore failed, and nothing is lost (the held answer and the
 * requests passed on are L's again).
 *
 * Orders on a connection to a snapshot's socket, one record.h record each; the peer must run as our user:
 *   SNAP_GO    one frame, the state (JSON)  -> SNAP_READY {"pid"} once serving, or SNAP_FAILED {"error"}
 *   SNAP_DROP  no frame                     -> the snapshot exits
 */
#include "timetravel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fork.h"
#include "limit.h"
#include "log.h"
#include "msg.h"
#include "proc.h"
#include "record.h"

enum { SNAP_GO = 1, SNAP_DROP = 2, SNAP_READY = 3, SNAP_FAILED = 4, SNAP_PARKED = 5, KEEPER_ACTIVE = 6,
       KEEPER_ACK = 7 };

/* How long a restore waits for the snapshot to serve, and for the ports the live kernel let go: 10 s, or
 * PYC_RESTORE_TIMEOUT (a duration, at least 100 ms: the tests' shorter wait for a snapshot that never answers). */
#define READY_TIMEOUT_MS ready_timeout_ms()
static int
ready_timeout_ms(void)
{
    static int ms = 0;
    if (ms == 0) {
        double s = 10;
        const char *v = getenv("PYC_RESTORE_TIMEOUT");
        pyc_error_t err;
        if (v != NULL && v[0] != '\0' && pyc_limits_parse_seconds(v, &s, &err) < 0) {
            pyc_log("PYC_RESTORE_TIMEOUT: %s; 10 s it is", err.text);
            s = 10;
        }
        ms = s < 0.1 ? 100 : s > 3600 ? 3600000 : (int)(s * 1000);
    }
    return ms;
}
#define BIND_RETRY_MS 3000

/* The root process: the one Jupyter started, whose pid the kernel manager knows.  Set on the first snapshot
 * (the kernel's own pid then) and inherited by every fork. */
static pid_t root_pid;

void
pyc_tt_forget_root(void)
{
    root_pid = 0;
}

pid_t
pyc_tt_root(void)
{
    return root_pid != 0 ? root_pid : getpid();
}

/* "\0pyc-snapshot-ROOT-PID" or "\0pyc-keeper-ROOT" as a sockaddr_un of the abstract namespace. */
static socklen_t
address(struct sockaddr_un *sa, const char *what, pid_t root, pid_t pid)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = pid > 0 ? snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "pyc-%s-%ld-%ld", what, (long)root,
                               (long)pid)
                    : snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "pyc-%s-%ld", what, (long)root);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* A Unix stream socket listening on, or connected to, that address; -1 with errno. */
static int
unix_socket(const char *what, pid_t root, pid_t pid, bool listening)
{
    struct sockaddr_un sa;
    socklen_t len = address(&sa, what, root, pid);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc = listening ? (bind(fd, (struct sockaddr *)&sa, len) < 0 ? -1 : listen(fd, 8))
                       : connect(fd, (struct sockaddr *)&sa, len);
    if (rc < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int
pyc_tt_listen(const char *what, pid_t root, pid_t pid)
{
    return unix_socket(what, root, pid, true);
}

int
pyc_tt_connect(const char *what, pid_t root, pid_t pid)
{
    return unix_socket(what, root, pid, false);
}

bool
pyc_tt_peer_ok(int fd, pid_t *pid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid())
        return false;
    if (pid != NULL)
        *pid = cred.pid;
    return true;
}

/* Waits until fd is readable, at most ms; true when it is. */
static bool
readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    return r > 0;
}

/* Sends one record of at most one JSON frame (j may be NULL; not stolen). */
static int
send_json(int fd, uint32_t type, json_t *j)
{
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    pyc_frame_t f = {text, text != NULL ? strlen(text) : 0};
    int rc = pyc_record_write(fd, type, 0, &f, text != NULL ? 1 : 0);
    free(text);
    return rc;
}

/* Reads one record within ms; returns its type (0 on failure) and its JSON frame in *j (NULL when none). */
static uint32_t
recv_json(int fd, int ms, json_t **j)
{
    *j = NULL;
    if (!readable(fd, ms))
        return 0;
    uint32_t type = 0, chan;
    pyc_outframe_t *f = NULL;
    size_t n = 0;
    if (pyc_record_read(fd, &type, &chan, &f, &n) < 0)
        return 0;
    if (n >= 1)
        *j = json_loadb(f[0].data, f[0].size, 0, NULL);
    pyc_record_free(f, n);
    return type;
}

/* The kernel's own actions for the signals a parked snapshot treats otherwise, given back when it goes live. */
static struct sigaction kernel_sigint, kernel_sigterm, kernel_sighup;

/* Closes the listening sockets a restore handed over (each -1 after). */
static void
close_fds(int *fds)
{
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (fds[c] >= 0)
            close(fds[c]);
        fds[c] = -1;
    }
}

/* Sends the kernel's listening sockets (n descriptors, -1 for none) ahead of an order: one byte, with the
 * descriptors as SCM_RIGHTS when there are. */
static int
send_fds(int sock, const int *fds, int n)
{
    char byte = (char)(fds != NULL && n > 0 && fds[0] >= 0 ? 'F' : '-');
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * PYC_CHAN_COUNT)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (byte == 'F') {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* Receives what send_fds sent: 1 with fds[0..PYC_CHAN_COUNT) filled, 0 when none came, -1 on failure. */
static int
recv_fds(int sock, int *fds)
{
    char byte;
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * PYC_CHAN_COUNT)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        fds[c] = -1;
    if (!readable(sock, 5000) || recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return 0;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    memcpy(fds, CMSG_DATA(c), sizeof(int) * (n < PYC_CHAN_COUNT ? n : PYC_CHAN_COUNT));
    if (n != PYC_CHAN_COUNT) {
        close_fds(fds);
        return 0;
    }
    return 1;
}

/* Binds the same ports again, waiting for a live kernel that just closed them, and starts the server. */
static int
serve(pyc_app_t *a, int *fds, pyc_error_t *err)
{
    /* Sockets handed over are served once (pyc_server_new_on takes them, also on failure); ports alone are
     * tried again until the kernel that held them has let go. */
    bool given = fds != NULL && fds[0] >= 0;
    uint64_t t0 = pyc_now_ns();
    for (;;) {
        a->use_fds = given ? fds : NULL;
        int rc = a->bind(a, err);
        a->use_fds = NULL;
        if (rc == 0)
            return 0;
        pyc_server_destroy(&a->srv);
        pyc_auth_destroy(&a->auth);
        pthread_sigmask(SIG_SETMASK, &a->saved_mask, NULL);
        if (given || pyc_ms_since(t0) >= BIND_RETRY_MS)
            return -1;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* In a snapshot that was told to go: becomes the live kernel on the connection's ports. */
static int
go_live(pyc_app_t *a, int *fds, pyc_error_t *err)
{
    /* The objects of the kernel that forked us: never used here (their threads do not exist). */
    pyc_fork_keep_inherited(a->srv);
    pyc_fork_keep_inherited(a->auth);
    a->srv = NULL;
    a->auth = NULL;
    sigaction(SIGINT, &kernel_sigint, NULL);
    sigaction(SIGTERM, &kernel_sigterm, NULL);
    sigaction(SIGHUP, &kernel_sighup, NULL);
    if (serve(a, fds, err) < 0 ||
        pyc_kernel_become_child(a->kernel, pyc_server_io(a->srv), a->auth, &a->cf, NULL, err) < 0 ||
        a->start(a, err) < 0)
        return -1;
    a->forked_session = true;    /* it ends as a fork does: with _exit, leak-checked in the root only */
    return 0;
}

/* Waits in a parked snapshot until it is told to go (returns the state, a new reference) or to end. */
static json_t *
park(pyc_app_t *a, int report_fd, int *conn, int *fds)
{
    pid_t root = pyc_tt_root();
    int lfd = pyc_tt_listen("snapshot", root, getpid());
    int rfd = pyc_proc_pidfd(root);
    if (lfd < 0 || (rfd < 0 && getpid() != root)) {
        if (report_fd >= 0)
            send_json(report_fd, SNAP_FAILED, NULL);
        _exit(1);
    }
    if (report_fd >= 0) {
        send_json(report_fd, SNAP_PARKED, NULL);
        close(report_fd);
    }
    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = rfd, .events = POLLIN}};
        if (poll(p, rfd >= 0 ? 2 : 1, -1) < 0)
            continue;
        if (p[1].revents != 0)
            _exit(0);            /* the kernel this snapshot belongs to is gone */
        if (p[0].revents == 0)
            continue;
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        json_t *state = NULL;
        uint32_t type = pyc_tt_peer_ok(c, NULL) && recv_fds(c, fds) >= 0 ? recv_json(c, 5000, &state) : 0;
        if (type == SNAP_DROP)
            _exit(0);
        if (type != SNAP_GO || state == NULL) {
            json_decref(state);
            close_fds(fds);
            close(c);
            continue;
        }
        close(lfd);
        if (rfd >= 0)
            close(rfd);
        *conn = c;
        return state;
    }
}

/* Makes the process wait as a parked snapshot: closes what it must not hold and sets its signals. */
static void
become_parked(pyc_app_t *a, int keep)
{
    setpgid(0, 0);
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGINT, &ign, &kernel_sigint);
    sigaction(SIGTERM, &dfl, &kernel_sigterm);
    sigaction(SIGHUP, &dfl, &kernel_sighup);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    pyc_fork_close_kernel_sockets(&a->cf, keep);
}

/* In a snapshot told to go: serves the connection's ports, answers READY on conn, and once the kernel that
 * handed over is gone, dies with the root.  Returns 0, or -1 (FAILED was answered). */
static int
take_stage(pyc_app_t *a, int conn, int *fds)
{
    pyc_error_t err;
    if (go_live(a, fds, &err) < 0) {
        json_t *e = json_pack("{s:s}", "error", err.text);
        send_json(conn, SNAP_FAILED, e);
        json_decref(e);
        close(conn);
        return -1;
    }
    json_t *r = json_pack("{s:i}", "pid", (int)getpid());
    send_json(conn, SNAP_READY, r);
    json_decref(r);
    /* The kernel that handed over closes the connection when it is gone (exec or exit); our parent is then
     * the root (the keeper), whose end must end us. */
    readable(conn, READY_TIMEOUT_MS);
    close(conn);
    pid_t root = pyc_tt_root();
    for (int i = 0; i < 2000 && getppid() != root; i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != root)
        pyc_log("restore: the keeper %ld is not this kernel's parent: it will not end with it", (long)root);
    return 0;
}

int
pyc_tt_take(pyc_app_t *a, pid_t *pid_out, json_t **state, pyc_error_t *err)
{
    if (root_pid == 0) {
        root_pid = getpid();
        /* Processes that outlive the kernel that forked them (a snapshot restored, then left by that kernel)
         * come back to the root, which the keeper then is. */
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    }
    int p[2], saved;
    pid_t pid = pyc_fork_piped(a->kernel, p, err);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(p[0]);
        become_parked(a, p[1]);
        pyc_msg_reseed();
        int conn = -1, fds[PYC_CHAN_COUNT];
        *state = park(a, p[1], &conn, fds);
        /* Told to go.  A parked copy keeps the snapshot for another restore; if that copy is told to go one
         * day, it comes back here and makes its own copy.  The process is single-threaded here. */
        for (;;) {
            pid_t copy = pyc_kernel_fork(a->kernel, &saved);
            if (copy != 0) {
                *pid_out = copy;     /* -1: no copy (the snapshot is used up) */
                break;
            }
            close(conn);
            close_fds(fds);
            json_decref(*state);
            setpgid(0, 0);
            pyc_msg_reseed();
            *state = park(a, -1, &conn, fds);
        }
        if (take_stage(a, conn, fds) < 0)
            _exit(1);
        return 1;
    }
    close(p[1]);
    json_t *j = NULL;
    uint32_t type = recv_json(p[0], READY_TIMEOUT_MS, &j);
    json_decref(j);
    close(p[0]);
    if (type != SNAP_PARKED) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return pyc_error_set(err, "the snapshot process %ld did not start", (long)pid);
    }
    *pid_out = pid;
    return 0;
}

int
pyc_tt_drop(pid_t pid)
{
    int fd = pyc_tt_connect("snapshot", pyc_tt_root(), pid);
    if (fd < 0)
        return -1;
    int rc = send_fds(fd, NULL, 0) == 0 ? send_json(fd, SNAP_DROP, NULL) : -1;
    close(fd);
    /* Reaped here when it is our child (the snapshot exits at once); a snapshot that came back to the root
     * is the keeper's to reap. */
    int pfd = pyc_proc_pidfd(pid);
    if (pfd >= 0) {
        readable(pfd, 1000);
        close(pfd);
    }
    waitpid(pid, NULL, WNOHANG);
    return rc;
}

/* The root's way out of the stage: it becomes the keeper of the pid Jupyter knows (pyc_keeper_main), with
 * nothing of the kernel left in it. */
static void
exec_keeper(pid_t active)
{
    char self[4096], arg[32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        snprintf(self, sizeof self, "/proc/self/exe");
    else
        self[n] = '\0';
    snprintf(arg, sizeof arg, "%ld", (long)active);
    int log = pyc_log_fd();
    dup2(log, 1);
    dup2(log, 2);
    /* Everything else goes: the keeper holds no descriptor of the kernel's. */
    for (int fd = 3; fd < 65536; fd++) {
        if (fcntl(fd, F_GETFD) >= 0)
            close(fd);
        if (fd > 4096 && fd % 4096 == 0 && fcntl(fd, F_GETFD) < 0)
            break;
    }
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    execl(self, "pyc-kernel", "--keeper", arg, (char *)NULL);
    pyc_log("restore: cannot start the keeper (%s): the kernel's process ends here", strerror(errno));
    _exit(1);
}

int
pyc_tt_hand_over(pyc_app_t *a, pid_t to, json_t *state, pyc_error_t *err)
{
    int fd = pyc_tt_connect("snapshot", pyc_tt_root(), to);
    if (fd < 0)
        return pyc_error_set(err, "the snapshot process %ld does not answer: %s", (long)to, strerror(errno));
    /* The listening sockets go to the snapshot as they are (copies of them: ZeroMQ closes its own), so that
     * the ports are never free and a client that connects meanwhile waits in the backlog; where they cannot
     * be found, the snapshot binds the ports again once they are free. */
    int fds[PYC_CHAN_COUNT];
    if (pyc_fork_listening_fds(&a->cf, fds) < 0)
        pyc_log("restore: the listening sockets were not found; the snapshot binds the ports again");
    /* Requests that came after the one that asked for the restore are the restored kernel's to answer; then
     * our sockets close (what is queued leaves, up to a second), which drops the clients' connections: they
     * reconnect by themselves, to the snapshot.  (Not zmq_unbind first: it drops the connections made
     * through the listener at once, with what they held unread.) */
    json_object_set_new(state, "forwarded", pyc_kernel_take_pending(a->kernel));
    pyc_server_close(a->srv);
    json_t *answer = NULL;
    int sent = send_fds(fd, fds, PYC_CHAN_COUNT);
    close_fds(fds);
    uint32_t type = sent == 0 && send_json(fd, SNAP_GO, state) == 0 ? recv_json(fd, READY_TIMEOUT_MS, &answer) : 0;
    if (type != SNAP_READY) {
        const char *why = json_string_value(json_object_get(answer, "error"));
        pyc_error_set(err, "the snapshot did not take over: %s", why != NULL ? why : "no answer");
        json_decref(answer);
        close(fd);
        kill(to, SIGKILL);
        /* Serving again, as before the attempt. */
        pyc_server_t *old = a->srv;
        pyc_auth_t *old_auth = a->auth;
        a->srv = NULL;
        a->auth = NULL;
        pyc_error_t berr;
        if (serve(a, NULL, &berr) < 0 || (pyc_kernel_rebind(a->kernel, pyc_server_io(a->srv), a->auth),
                                    a->start(a, &berr) < 0)) {
            pyc_log("restore: the ports cannot be bound again (%s): the kernel ends", berr.text);
            _exit(1);
        }
        pyc_server_destroy(&old);
        pyc_auth_destroy(&old_auth);
        return -1;
    }
    json_decref(answer);
    pid_t root = pyc_tt_root();
    if (getpid() == root)
        exec_keeper(to);         /* does not return; the connection closes with the exec */
    /* A restored kernel hands the stage on: the keeper learns who is live now, then this process ends. */
    int kfd = pyc_tt_connect("keeper", root, 0);
    json_t *j = json_pack("{s:i}", "pid", (int)to), *ack = NULL;
    if (kfd < 0 || send_json(kfd, KEEPER_ACTIVE, j) < 0 || recv_json(kfd, 5000, &ack) != KEEPER_ACK)
        pyc_log("restore: the keeper %ld did not acknowledge the new kernel %ld", (long)root, (long)to);
    json_decref(j);
    json_decref(ack);
    close(fd);
    _exit(0);
}

/* Sends sig to the live kernel's process group (it leads one), or to the process alone if that fails. */
static void
pass_on(pid_t active, int sig)
{
    if (killpg(active, sig) < 0)
        kill(active, sig);
}

int
pyc_keeper_main(pid_t active)
{
    root_pid = getpid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t set;
    sigemptyset(&set);
    static const int passed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++)
        sigaddset(&set, passed[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int lfd = pyc_tt_listen("keeper", root_pid, 0);
    if (sfd < 0 || lfd < 0) {
        pyc_log("keeper: %s", strerror(errno));
        return 1;
    }
    for (;;) {
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
            if (p != active)
                continue;        /* a snapshot, or a kernel that handed over */
            close(lfd);
            if (WIFSIGNALED(st)) {
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                signal(WTERMSIG(st), SIG_DFL);
                raise(WTERMSIG(st));
                return 128 + WTERMSIG(st);
            }
            return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        }
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0)
            continue;
        if (pf[0].revents != 0) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if ((int)si.ssi_signo != SIGCHLD)
                    pass_on(active, (int)si.ssi_signo);
            }
        }
        if (pf[1].revents != 0) {
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            pid_t from = 0;
            json_t *j = NULL;
            if (c >= 0 && pyc_tt_peer_ok(c, &from) && from == active && recv_json(c, 5000, &j) == KEEPER_ACTIVE &&
                json_integer_value(json_object_get(j, "pid")) > 0) {
                active = (pid_t)json_integer_value(json_object_get(j, "pid"));
                send_json(c, KEEPER_ACK, NULL);
            }
            json_decref(j);
            if (c >= 0)
                close(c);
        }
    }
}

int
pyc_app_snapshot_take(void *ctx, pid_t *pid, json_t **state, pyc_error_t *err)
{
    return pyc_tt_take(ctx, pid, state, err);
}

int
pyc_app_snapshot_hand_over(void *ctx, pid_t to, json_t *state, pyc_error_t *err)
{
    return pyc_tt_hand_over(ctx, to, state, err);
}
