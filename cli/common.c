/*
 * common.c -- what the subcommands of `pyc` share, but for printing (output.c): errors, Ctrl-C, options, the
 * runtime dir, session files and their states, connecting, the lock of a name, and ending a session; see
 * cli.h.
 *
 * The lock of a name is flock(2) on pyc-NAME.lock, not the existence of a file: a lock held by a process
 * that dies is released by the kernel, so a crashed `pyc new` never leaves a name locked for good.  The lock
 * file is removed only by its holder; a process that waited for the lock checks after getting it that the
 * path still names the file it locked (same inode), and starts over when not, so two processes can never
 * both hold "the" lock of a name.  Its holder writes what it is doing ("new", "fork" or "kill", and its pid)
 * into the file, so that `pyc ls` can tell a session being made from one being ended.
 *
 * Files in the runtime dir are opened without following symbolic links, and the dir itself must be a
 * directory of ours that group and others cannot write (cli_runtime_dir): nobody else can plant a link or a
 * FIFO there, and a link we made by mistake is refused rather than followed.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"

volatile sig_atomic_t cli_sigint_count;

/* The last line cli_err printed, without "pyc: ", for the --json outcome line (cli_outcome_line). */
static char last_err[1024];

void
cli_err(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
    fputs("pyc: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *
cli_last_err(void)
{
    return last_err[0] != '\0' ? last_err : NULL;
}

/* The write end of the signal pipe: the handler puts a byte there, which every client wait watches. */
static int sigint_pipe_w = -1;

static void
on_sigint(int sig)
{
    (void)sig;
    cli_sigint_count++;
    if (sigint_pipe_w >= 0) {
        int saved = errno;
        ssize_t w = write(sigint_pipe_w, "", 1);
        (void)w;
        errno = saved;
    }
}

void
cli_catch_sigint(void)
{
    int p[2];
    if (sigint_pipe_w < 0 && pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
        sigint_pipe_w = p[1];
        pyc_client_set_signal_fd(p[0]);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;             /* no SA_RESTART: a blocked poll or read returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}

/* The milliseconds in the environment variable var (a whole number from 1 to 3600000), else dflt. */
static int
env_ms(const char *var, int dflt)
{
    const char *text = getenv(var);
    char *end = NULL;
    errno = 0;
    long v = text != NULL && text[0] != '\0' ? strtol(text, &end, 10) : 0;
    return end != NULL && *end == '\0' && errno == 0 && v >= 1 && v <= 3600000 ? (int)v : dflt;
}

int
cli_connect_ms(void)
{
    static int ms;               /* 0 until the environment was read */
    if (ms == 0)
        ms = env_ms("PYC_CLI_CONNECT_MS", CLI_CONNECT_MS);
    return ms;
}

int
cli_hb_ms(void)
{
    static int ms;               /* 0 until the environment was read */
    if (ms == 0)
        ms = env_ms("PYC_CLI_HB_MS", CLI_HB_MS);
    return ms;
}

int
cli_recv_failed(const pyc_error_t *err)
{
    cli_err("%s", err->text);
    return err->code == PYC_EGONE ? PYC_EXIT_LOST : err->code == PYC_EAUTH ? PYC_EXIT_PROTOCOL : PYC_EXIT_CONNECTION;
}

/* ---- options --------------------------------------------------------------------------------------------- */

int
cli_parse(const char *cmd, int argc, char **argv, const cli_optspec_t *specs, int nspecs, cli_args_t *out)
{
    pyc_error_t err;
    if (pyc_args_parse(argc, argv, specs, nspecs, out, &err) < 0) {
        cli_err("%s: %s (see pyc %s --help)", cmd, err.text, cmd);
        return -1;
    }
    return 0;
}

int
cli_seconds(const char *opt, const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (text[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0) {
        cli_err("%s wants a positive number of seconds, not '%s'", opt, text);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- sessions -------------------------------------------------------------------------------------------- */

/* Finds, creates and checks the runtime dir into dir (4096 bytes).  Prints the problem and returns -1. */
static int
runtime_dir_check(char *dir, size_t cap)
{
    struct stat st;
    if (pyc_jupyter_runtime_dir(dir, cap) < 0) {
        cli_err("cannot tell where Jupyter's runtime dir is (set JUPYTER_RUNTIME_DIR or HOME)");
        return -1;
    }
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
        dir[n - 1] = '\0';      /* "dir/" would make lstat follow a link */
    if (pyc_mkdirs(dir, 0700) < 0) {
        cli_err("cannot create the runtime dir %s: %s", dir, strerror(errno));
        return -1;
    }
    if (lstat(dir, &st) < 0) {
        cli_err("cannot use the runtime dir %s: %s", dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        cli_err("the runtime dir %s is a symbolic link; pyc keeps sessions only in a real directory "
                "(point JUPYTER_RUNTIME_DIR at one)", dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        cli_err("the runtime dir %s is not a directory", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        cli_err("the runtime dir %s belongs to uid %lu, not to you (uid %lu); pyc will not keep its keys there",
                dir, (unsigned long)st.st_uid, (unsigned long)geteuid());
        return -1;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        cli_err("the runtime dir %s can be written by group or others (mode %04o), who could plant files in it; "
                "refused (chmod go-w %s)", dir, (unsigned)(st.st_mode & 07777), dir);
        return -1;
    }
    return 0;
}

int
cli_runtime_dir(char *out, size_t cap)
{
    /* Checked once per process (the verdict, and its one message, are kept). */
    static char dir[4096];
    static int verdict;          /* 0 not yet, 1 fine, -1 refused */
    if (verdict == 0)
        verdict = runtime_dir_check(dir, sizeof dir) == 0 ? 1 : -1;
    if (verdict < 0)
        return -1;
    if ((size_t)snprintf(out, cap, "%s", dir) >= cap) {
        cli_err("the runtime dir's path is too long");
        return -1;
    }
    return 0;
}

int
cli_session_path(char *out, size_t cap, const char *name, const char *suffix)
{
    char dir[4096];
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return -1;
    if (pyc_session_path(out, cap, dir, name, suffix) < 0) {
        cli_err("the path of session %s is too long", name);
        return -1;
    }
    return 0;
}

cli_state_t
cli_silent_state(const pyc_session_file_t *sf)
{
    /* Without a pid (a file pyc did not write) nothing tells a stopped kernel from a gone one, and nothing
     * could be killed: stale, as before. */
    return sf->pid > 0 && pyc_proc_is(sf->pid, sf->pid_start) ? CLI_UNRESPONSIVE : CLI_STALE;
}

/* cli_session_state without noticing a kernel that is gone. */
static cli_state_t
judge(const char *name, pyc_session_file_t *sf, int hb_ms, pyc_error_t *err)
{
    char path[4096];
    pyc_error_t lerr = {0};
    memset(sf, 0, sizeof *sf);
    if (cli_session_path(path, sizeof path, name, ".json") < 0) {
        pyc_error_set(err, "no runtime dir");
        return CLI_BROKEN;
    }
    if (pyc_session_file_load(path, sf, &lerr) < 0) {
        if (err != NULL)
            *err = lerr;
        return lerr.code == PYC_ENOENT ? CLI_MISSING : CLI_BROKEN;
    }
    if (sf->pid > 0 && !pyc_proc_is(sf->pid, sf->pid_start))
        return CLI_STALE;
    if (hb_ms > 0) {
        const pyc_connfile_t *cfs[1] = {&sf->cf};
        bool alive = false;
        /* A heartbeat that could not be asked (memory) counts as silent: never a reason to end a kernel
         * that may be well. */
        if (pyc_client_heartbeat(cfs, 1, hb_ms, &alive, err) < 0 || !alive)
            return cli_silent_state(sf);
    }
    return CLI_LIVE;
}

cli_state_t
cli_session_state(const char *name, pyc_session_file_t *sf, int hb_ms, pyc_error_t *err)
{
    cli_state_t st = judge(name, sf, hb_ms, err);
    if (st == CLI_STALE)
        cli_notice_gone(name, sf);   /* the first pyc to see it gone records it (events.c) */
    return st;
}

pyc_client_t *
cli_connect(const char *name, pyc_session_file_t *sf, bool sync_iopub, bool with_stdin, int *rc)
{
    pyc_error_t err;
    if (pyc_session_name_check(name, &err) < 0) {
        cli_err("%s", err.text);
        *rc = PYC_EXIT_USAGE;
        return NULL;
    }
    switch (cli_session_state(name, sf, 0, &err)) {
    case CLI_MISSING: {
        cli_err("no session named %s (pyc ls lists them; pyc new %s makes it)", name, name);
        char *cp = cli_checkpoint_newest(name, NULL);   /* a session of that name that ended: its work */
        if (cp != NULL)
            cli_checkpoint_hint(name, cp);
        free(cp);
        *rc = PYC_EXIT_NOSESSION;
        return NULL;
    }
    case CLI_BROKEN:
        cli_err("session %s: %s (pyc kill %s removes it)", name, err.text, name);
        *rc = PYC_EXIT_NOSESSION;
        return NULL;
    case CLI_STALE: {
        /* What ended it, when the event log says (a crash, an idle timeout...). */
        json_t *closed = cli_event_closing(name, sf->pid);
        char how[64];
        cli_closed_state(closed, how, sizeof how);
        if (closed != NULL && strcmp(how, "stale") != 0)
            cli_err("session %s is stale: its kernel (pid %ld) is gone: %s (pyc events %s; pyc kill %s removes it)",
                    name, sf->pid, how, name, name);
        else
            cli_err("session %s is stale: its kernel (pid %ld) is gone (pyc kill %s removes it)", name, sf->pid,
                    name);
        json_decref(closed);
        char *cp = cli_checkpoint_of(name, sf->pid);
        if (cp != NULL)
            cli_checkpoint_hint(name, cp);
        free(cp);
        pyc_session_file_clear(sf);
        *rc = PYC_EXIT_NOSESSION;
        return NULL;
    }
    case CLI_LIVE:
    case CLI_UNRESPONSIVE:       /* not asked for here (no heartbeat): the request itself will tell */
        break;
    }
    pyc_client_t *cl = pyc_client_new(&sf->cf, with_stdin, &err);
    if (cl == NULL) {
        cli_err("session %s: %s", name, err.text);
        pyc_session_file_clear(sf);
        *rc = PYC_EXIT_CONNECTION;
        return NULL;
    }
    if (sf->pid > 0)
        pyc_client_watch(cl, sf->pid, sf->pid_start);
    pyc_client_watch_heartbeat(cl, cli_hb_ms());
    if (sync_iopub) {
        int r;
        err.text[0] = '\0';
        while ((r = pyc_client_sync_iopub(cl, cli_connect_ms(), &err)) == PYC_RECV_SIGNAL) {
            if (cli_sigint_count > 0)
                break;
        }
        if (r != PYC_RECV_MSG) {
            if (r == PYC_RECV_SIGNAL)
                cli_err("interrupted");
            else if (r == PYC_RECV_TIMEOUT)
                cli_err("session %s: the kernel does not answer (no kernel_info_reply within %g s)", name,
                        cli_connect_ms() / 1000.0);
            else
                cli_err("session %s: %s", name, err.text);
            pyc_client_destroy(&cl);
            pyc_session_file_clear(sf);
            *rc = r == PYC_RECV_SIGNAL                          ? PYC_EXIT_INTERRUPTED
                  : r == PYC_RECV_ERROR && err.code == PYC_EAUTH ? PYC_EXIT_PROTOCOL
                                                                 : PYC_EXIT_CONNECTION;
            return NULL;
        }
    }
    return cl;
}

/* The names whose locks this process holds, so that a gone kernel found while holding one is recorded
 * (cli_notice_gone).  A command holds a few at most (fork: one per new name, up to CLI_MAX_POS). */
static char held_names[CLI_MAX_POS + 1][PYC_SESSION_NAME_MAX + 1];

static void
hold(const char *name, bool on)
{
    for (size_t i = 0; i < sizeof held_names / sizeof held_names[0]; i++) {
        if (on ? held_names[i][0] == '\0' : strcmp(held_names[i], name) == 0) {
            snprintf(held_names[i], sizeof held_names[i], "%s", on ? name : "");
            return;
        }
    }
}

bool
cli_lock_is_ours(const char *name)
{
    for (size_t i = 0; i < sizeof held_names / sizeof held_names[0]; i++) {
        if (held_names[i][0] != '\0' && strcmp(held_names[i], name) == 0)
            return true;
    }
    return false;
}

int
cli_lock(const char *name, int timeout_ms, const char *why, int *lock_fd)
{
    char path[4096];
    *lock_fd = -1;
    if (cli_session_path(path, sizeof path, name, ".lock") < 0)
        return PYC_EXIT_NOPERM;
    uint64_t t0 = pyc_now_ns();
    for (;;) {
        /* Ctrl-C while waiting gives up before anything was done (the caller catches SIGINT first). */
        if (cli_sigint_count > 0) {
            cli_err("interrupted while waiting for another pyc working on session %s; nothing was done", name);
            return PYC_EXIT_INTERRUPTED;
        }
        int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        struct stat a, b;
        if (fd < 0) {
            if (errno == ELOOP)
                cli_err("%s is a symbolic link, not a lock file of pyc's; refused (remove it)", path);
            else
                cli_err("cannot open %s: %s", path, strerror(errno));
            return PYC_EXIT_NOPERM;
        }
        if (fstat(fd, &a) < 0 || !S_ISREG(a.st_mode) || a.st_uid != geteuid()) {
            cli_err("%s is not a regular file of yours; refused (remove it)", path);
            close(fd);
            return PYC_EXIT_NOPERM;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (lstat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
                char note[64];
                int n = snprintf(note, sizeof note, "%s %ld\n", why, (long)getpid());
                if (ftruncate(fd, 0) == 0 && n > 0 && pwrite(fd, note, (size_t)n, 0) < 0)
                    cli_err("cannot write %s: %s", path, strerror(errno));   /* only `ls` reads it */
                *lock_fd = fd;
                hold(name, true);
                return 0;
            }
            close(fd);           /* removed by its last holder meanwhile: lock the new one */
            continue;
        }
        int e = errno;
        close(fd);
        if (e != EWOULDBLOCK && e != EINTR) {
            cli_err("cannot lock %s: %s", path, strerror(e));
            return PYC_EXIT_OSERR;
        }
        long waited = pyc_ms_since(t0);
        if (waited >= timeout_ms) {
            cli_err("another pyc has been working on session %s for %ld s; try again later", name, waited / 1000);
            return PYC_EXIT_CONNECTION;
        }
        usleep(5000);
    }
}

bool
cli_locked(const char *name, char *why, size_t cap)
{
    char path[4096];
    if (cap > 0)
        why[0] = '\0';
    if (cli_session_path(path, sizeof path, name, ".lock") < 0)
        return false;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool held = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_SH | LOCK_NB) < 0 &&
                errno == EWOULDBLOCK;
    if (held && cap > 1) {
        ssize_t n = pread(fd, why, cap - 1, 0);
        why[n > 0 ? n : 0] = '\0';
        why[strcspn(why, " \n")] = '\0';
    }
    close(fd);
    return held;
}

void
cli_unlock(const char *name, int fd, bool remove)
{
    char path[4096];
    if (fd < 0)
        return;
    /* The lock file of a name without a session is clutter: its holder removes it, whatever the caller
     * asked. */
    if (!remove && cli_session_path(path, sizeof path, name, ".json") == 0 && access(path, F_OK) < 0)
        remove = true;
    if (remove && cli_session_path(path, sizeof path, name, ".lock") == 0)
        unlink(path);
    close(fd);
    hold(name, false);
}

/* Waits up to ms for process pid (started at start) to end. */
static bool
wait_gone(long pid, unsigned long long start, int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (!pyc_proc_is(pid, start))
            return true;
        usleep(10000);
    }
    return !pyc_proc_is(pid, start);
}

/* Ends the session; replaced says that `new --replace` does it (see cli_session_replace). */
static int
session_end(const char *name, pyc_session_file_t *sf, cli_state_t state, int grace_ms, bool replaced)
{
    char path[4096];
    bool ended = true;
    /* An unresponsive kernel (alive, heartbeat silent: stopped, or stuck) could not act on a
     * shutdown_request: it gets SIGKILL at once. */
    if (state == CLI_LIVE) {
        pyc_error_t err;
        pyc_client_t *cl = pyc_client_new(&sf->cf, false, &err);
        if (cl != NULL) {
            pyc_msg_t *reply = NULL;
            json_t *content = replaced ? json_pack("{s:b, s:{s:s}}", "restart", 0, "pyc", "reason", "replaced")
                                       : json_pack("{s:b}", "restart", 0);
            if (sf->pid > 0)
                pyc_client_watch(cl, sf->pid, sf->pid_start);
            if (content != NULL)
                pyc_client_request(cl, PYC_CHAN_CONTROL, "shutdown_request", content, grace_ms, &reply, &err);
            json_decref(content);
            pyc_msg_destroy(&reply);
            pyc_client_destroy(&cl);
        }
    }
    if (sf->pid > 0 && !wait_gone(sf->pid, sf->pid_start, state == CLI_LIVE ? grace_ms : 0)) {
        /* Only the very process that was recorded is killed: pyc_proc_is compared its start tick. */
        if (kill((pid_t)sf->pid, SIGKILL) < 0 && errno != ESRCH) {
            cli_err("cannot kill the kernel of %s (pid %ld): %s", name, sf->pid, strerror(errno));
            ended = false;
        } else if (!wait_gone(sf->pid, sf->pid_start, 5000)) {
            cli_err("the kernel of %s (pid %ld) survives SIGKILL", name, sf->pid);
            ended = false;
        } else {
            /* We hold the name's lock, so nobody took it for vanished meanwhile. */
            cli_event_closed(name, sf->pid, replaced ? "replaced" : "killed");
        }
    }
    if (!ended)
        return -1;
    if (cli_session_path(path, sizeof path, name, ".json") == 0)
        unlink(path);
    if (cli_session_path(path, sizeof path, name, ".log") == 0)
        unlink(path);
    /* The connection file the kernel wrote for itself in the handshake (kernel-pyc-NAME.json), which a kernel
     * that was killed could not remove. */
    char dir[4096];
    if (cli_runtime_dir(dir, sizeof dir) == 0 && (size_t)snprintf(path, sizeof path, "%s/kernel-pyc-%s.json", dir,
                                                                   name) < sizeof path)
        unlink(path);
    return 0;
}

int
cli_session_end(const char *name, pyc_session_file_t *sf, cli_state_t state, int grace_ms)
{
    return session_end(name, sf, state, grace_ms, false);
}

int
cli_session_replace(const char *name, pyc_session_file_t *sf, cli_state_t state, int grace_ms)
{
    return session_end(name, sf, state, grace_ms, true);
}
