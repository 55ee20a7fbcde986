/*
 * crash.c -- what a kernel says when a fatal signal ends it (a segfault in a C extension, ctypes.string_at(0),
 * C recursion): the Python traceback of every thread goes to the kernel's log, the event log of a `pyc`
 * session gets the closed event (reason crashed, the signal, the traceback: lifelog.c), and -- best effort --
 * the running cell's client gets an `error` and its execute_reply (state "lost") before the process dies.
 *
 * How, without doing anything unsafe in the signal handler:
 *   1. Python's faulthandler writes the tracebacks into a memfd (it is made for exactly this: async-signal-
 *      safe writes from its own handler on its own stack), then gives the signal back to our handler.
 *   2. Our handler copies the memfd to the log fd (read/write: async-signal-safe), writes one byte to a pipe
 *      and waits up to 2 s (nanosleep) for the reporter to say it is done.
 *   3. The reporter, a thread that does nothing else, wakes on the pipe, writes the closed event, and builds,
 *      signs and sends the messages with the ordinary code, then closes the sockets so that they are
 *      written out: it runs on a healthy thread, outside the signal handler.  When the crash broke something
 *      it needs (the heap, a lock held by the crashed thread), it never finishes, and the 2 s run out.
 *   4. The handler restores the default action and raises the signal again: the process ends as it would
 *      have (its exit status and a core dump, if enabled, are the signal's).
 * A forked process that is not a kernel of its own (an isolated cell's, one of user code) dies without a
 * report of its own: its parent reports an isolated cell that died.
 */
#include "kernelint.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

static pyc_kernel_t *crash_kernel;
static int dump_fd = -1;         /* the memfd faulthandler writes into */
static int wake_pipe[2] = {-1, -1};
static atomic_int crashed_signal;
static pid_t crash_pid;          /* the process the reporter belongs to: a child of it does not report */
static atomic_int reported;

/* The tracebacks faulthandler wrote, as text (malloc'd; NULL when none). */
static char *
read_dump(void)
{
    off_t size = lseek(dump_fd, 0, SEEK_END);
    if (size <= 0 || size > (1 << 20))
        return NULL;
    char *text = malloc((size_t)size + 1);
    if (text == NULL)
        return NULL;
    ssize_t n = pread(dump_fd, text, (size_t)size, 0);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

/* The reporter thread: waits for a crash, then records it in the event log and tells the running cell's
 * client. */
static void *
reporter_main(void *arg)
{
    (void)arg;
    char b;
    while (read(wake_pipe[0], &b, 1) < 0 && errno == EINTR)
        ;
    pyc_kernel_t *k = crash_kernel;
    int sig = atomic_load(&crashed_signal);
    const pyc_msg_t *msg = k != NULL ? k->current : NULL;
    if (k != NULL && sig > 0 && pyc__lifelog_session(k) != NULL) {
        /* First the event log (a few microseconds, and its lock is waited for at most 300 ms): it is what
         * `pyc ls`, `pyc events` and a later `pyc run` have of the crash once the process is gone. */
        char *dump = read_dump();
        pyc__lifelog_crashed(k, sig, dump);
        free(dump);
    }
    if (msg != NULL && sig > 0) {
        char evalue[256];
        snprintf(evalue, sizeof evalue, "the kernel died of signal %d (%s) while running this request; its "
                 "state is lost (the Python traceback of every thread is in the kernel's log and below)", sig,
                 strsignal(sig));
        json_t *tb = json_array();
        json_array_append_new(tb, json_sprintf("KernelDied: %s", evalue));
        char *dump = read_dump();
        char *save = NULL;
        for (char *line = dump != NULL ? strtok_r(dump, "\n", &save) : NULL; line != NULL;
             line = strtok_r(NULL, "\n", &save))
            json_array_append_new(tb, json_string(line));
        free(dump);
        json_t *err = json_pack("{s:s, s:s, s:o}", "ename", "KernelDied", "evalue", evalue, "traceback", tb);
        if (strcmp(msg->msg_type, "execute_request") == 0) {
            pyc__publish(k, msg, "error", json_deep_copy(err));
            json_t *md = pyc__reply_metadata("error");
            json_object_set_new(md, "pyc", json_pack("{s:s, s:s, s:b, s:i}", "outcome", "died", "state", "lost",
                                                     "kernel_ending", 1, "signal", sig));
            pyc__reply(k, k->cell.chan, msg, "execute_reply", md,
                       pyc__execute_error_content(err, k->cell.count, NULL, NULL));
        }
        json_decref(err);
        pyc__status(k, msg, "idle");
        /* The messages are queued in ZeroMQ, whose I/O thread writes them out; the process dies as soon as
         * `reported` is set, so they are flushed first (closing the sockets waits up to their linger of a
         * second for that).  Without this, a loaded machine lost them: `pyc run` saw the kernel gone and
         * nothing else. */
        if (k->flush_io != NULL)
            k->flush_io(k->flush_io_ctx);
    }
    atomic_store(&reported, 1);
    return NULL;
}

static void
on_fatal(int sig)
{
    /* Only async-signal-safe calls from here on. */
    int expected = 0;
    if (getpid() == crash_pid && atomic_compare_exchange_strong(&crashed_signal, &expected, sig)) {
        static const char head[] = "pyc-kernel: fatal signal; the Python traceback of every thread:\n";
        ssize_t w = write(pyc_log_fd(), head, sizeof head - 1);
        char buf[4096];
        off_t off = 0;
        ssize_t n;
        while (dump_fd >= 0 && (n = pread(dump_fd, buf, sizeof buf, off)) > 0) {
            w = write(pyc_log_fd(), buf, (size_t)n);
            off += n;
        }
        (void)w;
        if (wake_pipe[1] >= 0 && crash_kernel != NULL) {
            w = write(wake_pipe[1], "!", 1);
            for (int i = 0; i < 200 && !atomic_load(&reported); i++) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Sets up the memfd, the pipe, the reporter thread and, when handlers is true, the signal handlers;
 * *faulthandler_fd is the memfd.  A forked child keeps the handlers it inherited: Python's faulthandler,
 * enabled after ours, holds ours as the one to call after its dump, and installing ours again would put it in
 * the place of faulthandler's (whose enable() does nothing when it is enabled already), so that a crash in a
 * forked session came without its Python traceback. */
static int
install(pyc_kernel_t *k, int *faulthandler_fd, bool handlers, pyc_error_t *err)
{
    crash_kernel = k;
    crash_pid = getpid();
    *faulthandler_fd = -1;
    if (dump_fd < 0 && (dump_fd = memfd_create("pyc-fault", MFD_CLOEXEC)) < 0)
        return pyc_error_set(err, "crash reports are off: memfd_create: %s", strerror(errno));
    if (wake_pipe[0] < 0 && pipe2(wake_pipe, O_CLOEXEC) < 0)
        return pyc_error_set(err, "crash reports are off: pipe: %s", strerror(errno));
    pthread_attr_t attr;
    pthread_t th;
    sigset_t all, old;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals are the main thread's */
    int rc = pthread_create(&th, &attr, reporter_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return pyc_error_set(err, "crash reports are off: cannot start the reporter thread: %s", strerror(rc));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER | SA_ONSTACK;
    for (size_t i = 0; handlers && i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        sigaction(fatal_signals[i], &sa, NULL);
    *faulthandler_fd = dump_fd;
    return 0;
}

/* Points Python's faulthandler at the memfd (with the GIL). */
static int
faulthandler_to(int fd, pyc_error_t *err)
{
    pyc_py_enter();
    int rc = pyc_py_faulthandler(fd, err);
    pyc_py_leave();
    return rc;
}

int
pyc_kernel_crash_reports(pyc_kernel_t *k, pyc_error_t *err)
{
    int fd;
    if (install(k, &fd, true, err) < 0)
        return -1;
    return faulthandler_to(fd, err);
}

int
pyc__crash_restart_in_child(pyc_kernel_t *k, pyc_error_t *err)
{
    /* A forked session: the reporter thread is the parent's; the memfd and pipe are shared with it, so a
     * child gets its own.  Its memfd takes the descriptor number of the parent's, which Python's faulthandler
     * (inherited, enabled) writes to: the handlers stay as they are, and faulthandler need not be asked again
     * (Python code run in a just-forked child writes to pages it shares with its parent). */
    for (int i = 0; i < 2; i++) {
        if (wake_pipe[i] >= 0)
            close(wake_pipe[i]);
        wake_pipe[i] = -1;
    }
    atomic_store(&crashed_signal, 0);
    atomic_store(&reported, 0);
    int inherited = dump_fd;
    dump_fd = -1;
    if (inherited >= 0) {
        int fresh = memfd_create("pyc-fault", MFD_CLOEXEC);
        if (fresh >= 0 && dup3(fresh, inherited, O_CLOEXEC) == inherited) {
            close(fresh);
            dump_fd = inherited;
            int fd;
            return install(k, &fd, false, err);
        }
        if (fresh >= 0)
            close(fresh);
        close(inherited);
    }
    /* No descriptor to take over: a memfd of its own, and faulthandler told of it (it keeps its handlers). */
    int fd;
    if (install(k, &fd, false, err) < 0)
        return -1;
    return faulthandler_to(fd, err);
}
