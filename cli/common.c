/*
 * common.c -- a session as the subcommands of `pyc` meet it: its state (a kernel that is gone is recorded in
 * the event log by the first command that sees it), connecting to it (a session that ended names its
 * checkpoint), and ending it; see cli.h.  Below it are base.c (errors, Ctrl-C, options, the runtime dir, the
 * locks), eventlog.c and the checkpoints' lookup; above it every command.
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
    return cli_client_for(name, sf, sync_iopub, with_stdin, rc);
}

pyc_client_t *
cli_client_for(const char *name, pyc_session_file_t *sf, bool sync_iopub, bool with_stdin, int *rc)
{
    pyc_error_t err;
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
