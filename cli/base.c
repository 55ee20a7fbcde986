/*
 * base.c -- the bottom of `pyc` (every other file of cli/ may use it; it uses none of them): errors, Ctrl-C,
 * the environment's timeouts, options, the runtime dir, session files' paths, and the lock of a name; see
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
