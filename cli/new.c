/*
 * new.c -- `pyc new`: a named session made by starting a detached kernel.
 *
 * `new` holds the name's lock from its first look at pyc-NAME.json until the kernel answers, so of two `new`
 * of one name exactly one starts a kernel and the other, once it gets the lock, finds a live session and is
 * refused (PYC_EXIT_EXISTS).  The kernel is started detached: its own session (setsid), stdin from /dev/null,
 * stdout and stderr to pyc-NAME.log, no JPY_PARENT_PID (it must outlive us).  The connection file is written
 * by us twice: first as a registration file (protocol 5.6, handshake.c), before the kernel is allowed to exec
 * (the child waits on a pipe for it); then, once the kernel has bound ports of its own choosing and reported
 * them, as the session file with those ports and the kernel's pid.  No port is picked, released and raced
 * for, as jupyter_client's classic start does (`new` picked them that way before, and tried again after a
 * kernel lost one; a kernel that still exits saying "Address already in use" is tried again, up to
 * START_TRIES times).
 *
 * Ctrl-C: `new` gives up while it waits for the lock, and checks again before each step that cannot be
 * undone (ending the session it replaces, starting a kernel), so that an interrupted `new` leaves nothing
 * half done.  pyc-NAME.log is made afresh by each `new`; after a failed start it is kept only when the
 * kernel wrote something into it (its error, whose path is then printed), and `kill NAME` removes it.
 *
 * Limits (--idle, --lifetime, --cell-timeout, --cell-cpu, --output-limit, --memory, --open-files) and --replay
 * become the kernel's own options (--idle-timeout=S ...), which win over its PYC_* environment; each value is
 * checked here first by the kernel's own parser (units.h), so that a bad one is a usage error
 * (PYC_EXIT_USAGE), not a kernel that will not start.  A session is never left to live for ever by default:
 * without --idle, --lifetime and --cell-timeout, and without their PYC_* variables in our environment or the
 * kernelspec's, the kernel gets the defaults (newkernel.c, which makes the kernel's environment and options).
 * The kernel gets PYC_SESSION=NAME in its environment: it is that session in the event log (events.c).
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paths.h"
#include "pyenv.h"
#include "random.h"
#include "units.h"
#include "zmtp_curve.h"

#define START_TRIES 3
#define DEFAULT_START_TIMEOUT 60.0

/* Finds the pyc-kernel to run: --kernel, else $PYC_KERNEL, else the pyc-kernel beside this program, else the
 * first on PATH.  Writes its path into out; prints the problem and returns -1. */
static int
find_kernel(const char *opt, char *out, size_t cap)
{
    const char *given = opt != NULL ? opt : getenv("PYC_KERNEL");
    if (given != NULL && given[0] != '\0') {
        if (access(given, X_OK) < 0) {
            cli_err("cannot run the kernel %s: %s", given, strerror(errno));
            return -1;
        }
        snprintf(out, cap, "%s", given);
        return 0;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        if ((size_t)snprintf(out, cap, "%s/pyc-kernel", dirname(self)) < cap && access(out, X_OK) == 0)
            return 0;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        const char *colon = strchr(path, ':');
        size_t len = colon != NULL ? (size_t)(colon - path) : strlen(path);
        if (len > 0 && (size_t)snprintf(out, cap, "%.*s/pyc-kernel", (int)len, path) < cap && access(out, X_OK) == 0)
            return 0;
        path += len + (colon != NULL);
    }
    cli_err("cannot find pyc-kernel (not beside pyc, not on PATH); name it with --kernel PATH or PYC_KERNEL");
    return -1;
}

/* Reads the last cap - 1 bytes of the kernel's log into buf (NUL-terminated); returns their count. */
static size_t
log_tail(const char *log, char *buf, size_t cap)
{
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    buf[0] = '\0';
    if (fd < 0)
        return 0;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)cap - 1 ? end - (off_t)cap + 1 : 0;
    ssize_t n = pread(fd, buf, cap - 1, from);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return (size_t)n;
}

/* Prints the last lines of the kernel's log after a failed start. */
static void
show_log_tail(const char *log)
{
    char buf[2048];
    size_t n = log_tail(log, buf, sizeof buf);
    if (n > 0)
        fprintf(stderr, "--- the end of %s ---\n%s%s", log, buf, buf[n - 1] == '\n' ? "" : "\n");
}

/* The child's side of the start: waits for the parent's go, then becomes the kernel (argv, made before the
 * fork).  Never returns. */
static void
kernel_child(const char *kernel, char **argv, char **envp, int go, int report, int log)
{
    char c;
    ssize_t r;
    setsid();
    do
        r = read(go, &c, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1)
        _exit(127);              /* the parent gave up before writing the connection file */
    /* Close-on-exec, and closed once it is fd 0: the kernel must not inherit a spare descriptor. */
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || (null != 0 && dup2(null, 0) < 0) || dup2(log, 1) < 0 || dup2(log, 2) < 0)
        goto fail;
    if (null != 0)
        close(null);
    else
        fcntl(0, F_SETFD, 0);
    /* pyc catches SIGINT and ignores SIGPIPE; the kernel must start with neither. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(kernel, argv, envp);
fail: {
    int e = errno;
    ssize_t w = write(report, &e, sizeof e);
    (void)w;
    _exit(127);
}
}

/* Says on stderr when the kernel_info_reply m tells of a replay (--replay) that stopped at a failing cell: the
 * session then holds only the cells before it, and starts anyway (as the kernel does). */
static void
report_replay(const pyc_msg_t *m)
{
    json_t *r = json_object_get(json_object_get(m->content, "pyc"), "replayed");
    json_t *e = json_object_get(r, "error");
    if (!json_is_object(e))
        return;
    cli_err("the replay of %s stopped at cell %lld of %lld (%s: %s); the session holds the %lld cell%s before it",
            json_string_value(json_object_get(r, "file")) ?: "?",
            (long long)json_integer_value(json_object_get(e, "cell")),
            (long long)json_integer_value(json_object_get(r, "cells")),
            json_string_value(json_object_get(e, "ename")) ?: "?",
            json_string_value(json_object_get(e, "evalue")) ?: "",
            (long long)json_integer_value(json_object_get(r, "ran")),
            json_integer_value(json_object_get(r, "ran")) == 1 ? "" : "s");
}

/* Starts one kernel for sf (whose cf is filled but for the ports) and waits for its kernel_info_reply.
 * Returns 0; 1 when the kernel exited because a port was taken meanwhile (its log says "Address already in
 * use": worth another try); or an exit code > 1 (printed). */
static int
start_once(const char *name, const char *kernel, pyc_session_file_t *sf, double timeout, bool last_try)
{
    char path[4096], log[4096];
    pyc_error_t err;
    int go[2] = {-1, -1}, report[2] = {-1, -1}, logfd = -1, lfd = -1, rc = PYC_EXIT_CONNECTION, reg_port;
    pid_t pid = -1;
    pyc_client_t *cl = NULL;
    bool file_written = false;
    char **envp = NULL;

    if (cli_sigint_count > 0) {
        cli_err("interrupted; no kernel was started");
        return PYC_EXIT_INTERRUPTED;
    }
    if (cli_session_path(path, sizeof path, name, ".json") < 0 || cli_session_path(log, sizeof log, name, ".log") < 0)
        return PYC_EXIT_CONNECTION;
    if ((lfd = cli_registration_listen(&reg_port)) < 0)
        return PYC_EXIT_CONNECTION;
    /* A fresh log: whatever has the name (an old log, a link) is removed, and the new file is created
     * exclusively, so no link is ever followed. */
    if (unlink(log) < 0 && errno != ENOENT) {
        cli_err("cannot remove the old %s: %s", log, strerror(errno));
        return PYC_EXIT_CONNECTION;
    }
    logfd = open(log, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) {
        cli_err("cannot create %s: %s", log, strerror(errno));
        close(lfd);
        return PYC_EXIT_CONNECTION;
    }
    if ((envp = cli_new_environ()) == NULL) {
        cli_err("out of memory");
        goto out;
    }
    /* The kernel's argv, made before fork like its environment: -f, the connection file, its options. */
    char *argv[3 + CLI_NEW_MAX_KERNEL_OPTS + 1] = {(char *)kernel, (char *)"-f", path};
    for (size_t i = 0; i < cli_new_n_kernel_opts; i++)
        argv[3 + i] = cli_new_kernel_opts[i];
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0) {
        cli_err("pipe: %s", strerror(errno));
        goto out;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        cli_err("fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        close(go[1]);
        close(report[0]);
        kernel_child(kernel, argv, envp, go[0], report[1], logfd);
    }
    close(go[0]);
    go[0] = -1;
    close(report[1]);
    report[1] = -1;

    /* The kernel's id in the handshake is the session file's name: its checkpoints and forks are named after
     * it, as when it was given the session file itself. */
    char kernel_id[300];
    snprintf(kernel_id, sizeof kernel_id, "pyc-%s", name);
    if (cli_registration_write(path, kernel_id, &sf->cf, reg_port, &err) < 0) {
        cli_err("%s", err.text);
        goto out;
    }
    file_written = true;
    if (write(go[1], "g", 1) != 1) {
        cli_err("cannot start the kernel: %s", strerror(errno));
        goto out;
    }
    close(go[1]);
    go[1] = -1;
    int e;
    ssize_t got;
    do
        got = read(report[0], &e, sizeof e);
    while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof e) {
        cli_err("cannot run %s: %s", kernel, strerror(e));
        goto out;
    }
    double deadline = pyc_now_s() + timeout;
    int reg = cli_registration_wait(lfd, kernel_id, &sf->cf, pid, deadline, &err);
    if (reg == 1) {
        pid = -1;                /* reaped there */
        cli_err("the kernel exited before it reported its ports");
        show_log_tail(log);
        goto out;
    }
    if (reg < 0) {
        if (cli_sigint_count > 0) {
            cli_err("interrupted; the kernel is stopped");
            rc = PYC_EXIT_INTERRUPTED;
            goto out;
        }
        cli_err("%s", err.text);
        show_log_tail(log);
        goto out;
    }
    sf->pid = pid;
    sf->pid_start = pyc_proc_start(pid);
    sf->created = pyc_wall_s();
    if (pyc_session_file_write(path, sf, &err) < 0) {
        cli_err("%s", err.text);
        goto out;
    }

    cl = pyc_client_new(&sf->cf, false, &err);
    char id[PYC_MSG_ID_LEN + 1];
    if (cl == NULL ||
        pyc_client_send(cl, PYC_CHAN_SHELL, "kernel_info_request", NULL, NULL, NULL, NULL, 0, id, &err) < 0) {
        cli_err("%s", err.text);
        goto out;
    }
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            pid = -1;            /* reaped: nothing to kill */
            char tail[2048];
            bool port_race = WIFEXITED(status) && WEXITSTATUS(status) == 1 && log_tail(log, tail, sizeof tail) > 0 &&
                             strstr(tail, "Address already in use") != NULL;
            if (port_race && !last_try) {
                rc = 1;
                goto out;
            }
            if (WIFEXITED(status))
                cli_err("the kernel exited with status %d before it answered", WEXITSTATUS(status));
            else
                cli_err("the kernel died of signal %d before it answered", WTERMSIG(status));
            show_log_tail(log);
            goto out;
        }
        if (cli_sigint_count > 0) {
            cli_err("interrupted; the kernel is stopped");
            rc = PYC_EXIT_INTERRUPTED;
            goto out;
        }
        if (pyc_now_s() > deadline) {
            cli_err("the kernel did not answer within %g s", timeout);
            show_log_tail(log);
            goto out;
        }
        pyc_msg_t *m;
        int chan;
        int r = pyc_client_recv(cl, 50, &m, &chan, &err);
        if (r == PYC_RECV_ERROR) {
            cli_err("%s", err.text);
            goto out;
        }
        if (r == PYC_RECV_MSG) {
            bool ready = chan == PYC_CHAN_SHELL && pyc_client_is_child_of(m, id);
            if (ready)
                report_replay(m);
            pyc_msg_destroy(&m);
            if (ready)
                break;
        }
    }
    rc = 0;
    pid = -1;                    /* it runs: leave it be */
out:
    pyc_client_destroy(&cl);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    if (rc != 0 && file_written)
        unlink(path);
    if (rc != 0) {
        /* The log stays only when it holds what the kernel said about its failure (not after a port race,
         * whose next try writes a new one, nor after Ctrl-C). */
        struct stat ls;
        if (rc != 1 && rc != PYC_EXIT_INTERRUPTED && fstat(logfd, &ls) == 0 && ls.st_size > 0)
            cli_err("the kernel's output is kept in %s (pyc kill %s removes it)", log, name);
        else
            unlink(log);
    }
    for (int i = 0; i < 2; i++) {
        if (go[i] >= 0)
            close(go[i]);
        if (report[i] >= 0)
            close(report[i]);
    }
    close(logfd);
    if (lfd >= 0)
        close(lfd);
    free(envp);
    return rc;
}

int
cli_new(const cli_args_t *a)
{
    pyc_error_t err;
    double timeout = DEFAULT_START_TIMEOUT;
    char kernel[4096], path[4096];
    char key[65];
    pyc_session_file_t sf, old;
    int rc = PYC_EXIT_CONNECTION;

    const char *name = a->pos[0];
    bool replace = a->value[CLI_NEW_REPLACE] != NULL;
    if (pyc_session_name_check(name, &err) < 0) {
        cli_err("%s", err.text);
        return PYC_EXIT_USAGE;
    }
    if (a->value[CLI_NEW_FROM] != NULL) {
        /* A fork has its source's kernel, environment and limits: the options that choose those do not apply. */
        for (int o = 0; o < CLI_NEW_NOPTS; o++) {
            if (o != CLI_NEW_FROM && o != CLI_NEW_REPLACE && o != CLI_NEW_JSON && a->value[o] != NULL) {
                cli_err("new --from makes %s a fork of %s, with its kernel, environment and limits: it takes only "
                        "--replace and --json", name, a->value[CLI_NEW_FROM]);
                return PYC_EXIT_USAGE;
            }
        }
        return cli_new_from(a->value[CLI_NEW_FROM], name, replace, a->value[CLI_NEW_JSON] != NULL);
    }
    if (a->value[CLI_NEW_TIMEOUT] != NULL && cli_seconds("--timeout", a->value[CLI_NEW_TIMEOUT], &timeout) < 0)
        return PYC_EXIT_USAGE;
    const char *kopt = a->value[CLI_NEW_KERNEL];
    int spec = kopt != NULL && strchr(kopt, '/') == NULL ? cli_new_kernel_from_spec(kopt, kernel, sizeof kernel) : 0;
    if (spec < 0 || (spec == 0 && find_kernel(kopt, kernel, sizeof kernel) < 0))
        return PYC_EXIT_CONNECTION;
    if (cli_new_choose_environment(a->value[CLI_NEW_PYTHON], a->value[CLI_NEW_NO_ENV] != NULL) < 0 ||
        cli_new_kernel_options(a) < 0)
        return PYC_EXIT_USAGE;
    /* The kernel is session NAME of the event log (README, "pyc events"): it writes ready, its cells and
     * how it ended there. */
    if (cli_new_add_env("PYC_SESSION", name) < 0)
        return PYC_EXIT_CONNECTION;
    if (cli_session_path(path, sizeof path, name, ".json") < 0)
        return PYC_EXIT_CONNECTION;
    cli_catch_sigint();

    int lock;
    if ((rc = cli_lock(name, CLI_LOCK_WAIT_MS, "new", &lock)) != 0)
        return rc;
    cli_state_t st = cli_session_state(name, &old, 1000, &err);
    if (st == CLI_LIVE && !replace) {
        cli_err("session %s already exists (kernel pid %ld); it is left as it is (pyc new --replace %s discards it)",
                name, old.pid, name);
        pyc_session_file_clear(&old);
        cli_unlock(name, lock, false);
        return PYC_EXIT_EXISTS;
    }
    if (st == CLI_UNRESPONSIVE && !replace) {
        cli_err("session %s already exists, but its kernel (pid %ld) does not answer its heartbeat (is it "
                "stopped?); it is left as it is (pyc kill %s ends it; pyc new --replace %s discards it)",
                name, old.pid, name, name);
        pyc_session_file_clear(&old);
        cli_unlock(name, lock, false);
        return PYC_EXIT_EXISTS;
    }
    if (cli_sigint_count > 0) {
        cli_err("interrupted; nothing was done");
        pyc_session_file_clear(&old);
        cli_unlock(name, lock, false);
        return PYC_EXIT_INTERRUPTED;
    }
    if (st == CLI_BROKEN)
        cli_err("session %s: %s; replacing it", name, err.text);
    /* A live or unresponsive kernel is replaced (its closed event says so); a stale or broken one is only
     * cleaned. */
    bool replacing = st == CLI_LIVE || st == CLI_UNRESPONSIVE;
    if (st != CLI_MISSING && (replacing ? cli_session_replace(name, &old, st, 5000)
                                        : cli_session_end(name, &old, st, 5000)) < 0) {
        pyc_session_file_clear(&old);
        cli_unlock(name, lock, false);
        return PYC_EXIT_CONNECTION;
    }
    pyc_session_file_clear(&old);

    memset(&sf, 0, sizeof sf);
    pyc_error_t rerr;
    if (pyc_random_hex(key, 32, &rerr) < 0) {
        cli_err("%s", rerr.text);
        cli_unlock(name, lock, true);
        return PYC_EXIT_CONNECTION;
    }
    snprintf(sf.cf.transport, sizeof sf.cf.transport, "tcp");
    snprintf(sf.cf.ip, sizeof sf.cf.ip, "127.0.0.1");
    snprintf(sf.cf.signature_scheme, sizeof sf.cf.signature_scheme, "hmac-sha256");
    snprintf(sf.cf.kernel_name, sizeof sf.cf.kernel_name, "pyc");
    sf.cf.key = key;             /* not owned: sf is never cleared */
    sf.cf.keylen = 64;
    /* --curve: CURVE keys of the session's own, so that its traffic is encrypted (README, "Encryption"). */
    if (a->value[CLI_NEW_CURVE] != NULL &&
        pyc_zmtp_curve_keypair(sf.cf.curve_publickey, sf.cf.curve_secretkey, &rerr) < 0) {
        cli_err("%s", rerr.text);
        cli_unlock(name, lock, true);
        return PYC_EXIT_CONNECTION;
    }
    for (int t = 1; t <= START_TRIES; t++) {
        rc = start_once(name, kernel, &sf, timeout, t == START_TRIES);
        if (rc != 1)
            break;
    }
    if (rc != 0) {
        cli_unlock(name, lock, true);
        return rc;
    }
    cli_unlock(name, lock, false);
    if (a->value[CLI_NEW_JSON] != NULL) {
        json_t *j = json_pack("{s:s, s:I, s:s}", "name", name, "pid", (json_int_t)sf.pid, "connection_file", path);
        cli_print_json_line(j);
        json_decref(j);
    } else {
        puts(path);
    }
    return PYC_EXIT_OK;
}
