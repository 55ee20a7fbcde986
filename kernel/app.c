/*
 * app.c -- see app.h.
 */
#include "app.h"

#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork.h"
#include "log.h"
#include "py.h"
#include "random.h"
#include "register.h"
#include "timetravel.h"
#include "zap.h"

/* True for an address only this machine can reach: ipc, 127.0.0.0/8, ::1, localhost. */
static bool
loopback(const pyc_connfile_t *cf)
{
    return strcmp(cf->transport, "ipc") == 0 || strncmp(cf->ip, "127.", 4) == 0 || strcmp(cf->ip, "::1") == 0 ||
           strcmp(cf->ip, "localhost") == 0;
}

int
pyc_app_bind(pyc_app_t *a, pyc_error_t *err)
{
    /* An empty key turns signatures off (the messaging spec allows it): anyone who can connect can run code.
     * Only on an address no other machine reaches, and never silently. */
    if (a->cf.keylen == 0) {
        const char *insecure = getenv("PYC_INSECURE_NO_KEY");
        if (!loopback(&a->cf) && (insecure == NULL || strcmp(insecure, "1") != 0))
            return pyc_error_code(err, PYC_EINVAL, "the connection file has an empty key, so messages would "
                                  "not be signed, and the kernel would listen on %s, which other machines may "
                                  "reach: refused (give a key, or set PYC_INSECURE_NO_KEY=1)", a->cf.ip);
        pyc_log("warning: the connection file has an empty key: messages are not signed, and anyone who can "
                "connect to %s can run code in this kernel", a->cf.ip);
    }
    /* CURVE keys that cannot work are the connection file's fault: refused before anything is bound. */
    if (pyc_zap_check(&a->cf, err) < 0)
        return -1;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &a->saved_mask);
    a->auth = pyc_auth_new(a->cf.signature_scheme, a->cf.key, a->cf.keylen, 0, err);
    if (a->auth == NULL)
        return -1;
    a->srv = pyc_server_new_on(&a->cf, a->auth, a->use_fds, err);
    return a->srv != NULL ? 0 : -1;
}

/* Tells the cells' Python where this kernel's connection is (_pyc.connection(), which %connect_info and
 * %qtconsole read): the file a client would connect with -- the one this process wrote for itself when it
 * wrote one (a registered kernel, a forked session), else the one it was started with -- and its
 * contents. */
static void
tell_python_connection(pyc_app_t *a)
{
    pyc_py_set_connection(a->own_connection_file != NULL ? a->own_connection_file : a->connection_file,
                          a->connection_json != NULL ? json_incref(a->connection_json)
                                                     : pyc_connfile_to_json(&a->cf));
}

int
pyc_app_start(pyc_app_t *a, pyc_error_t *err)
{
    pyc_server_callbacks_t cb = {.on_control = pyc_kernel_control, .on_subscribe = pyc_kernel_subscribed,
                                 .on_unsubscribe = pyc_kernel_unsubscribed,
                                 .ctx = a->kernel};
    if (pyc_server_start(a->srv, &cb, err) < 0)
        return -1;
    /* The mask the process was started with, but SIGINT and SIGTERM always reach the main thread: a launcher
     * that had them blocked (a Python thread that blocked SIGINT around a fork, a supervisor) hands the mask
     * on to the kernel through exec, and an interrupt would then wait forever. */
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, SIGINT);
    sigaddset(&ours, SIGTERM);
    pthread_sigmask(SIG_SETMASK, &a->saved_mask, NULL);
    pthread_sigmask(SIG_UNBLOCK, &ours, NULL);
    tell_python_connection(a);
    return 0;
}

void
pyc_app_remove_own_file(pyc_app_t *a)
{
    struct stat st;
    if (a->own_connection_file == NULL)
        return;
    if (a->own_ino == 0 ||
        (stat(a->own_connection_file, &st) == 0 && st.st_ino == a->own_ino && st.st_dev == a->own_dev))
        unlink(a->own_connection_file);
    free(a->own_connection_file);
    a->own_connection_file = NULL;
}

int
pyc_app_register(pyc_app_t *a, pyc_error_t *err)
{
    char dir[4096], id[256], path[4600];
    snprintf(dir, sizeof dir, "%s", a->connection_file);
    size_t n = 0;
    for (const char *p = a->cf.kernel_id; *p != '\0' && n + 1 < sizeof id; p++)
        id[n++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                                 *p == '-' || *p == '_' || *p == '.'
                             ? *p
                             : '_');
    id[n] = '\0';
    snprintf(path, sizeof path, "%s/kernel-%s.json", dirname(dir), id);
    if (strcmp(path, a->connection_file) == 0)
        snprintf(path, sizeof path, "%s/kernel-%s-connection.json", dirname(dir), id);
    if (pyc_connfile_write(path, &a->cf, err) < 0)
        return -1;
    struct stat st;
    if (stat(path, &st) == 0) {
        a->own_dev = st.st_dev;
        a->own_ino = st.st_ino;
    }
    a->own_connection_file = strdup(path);
    const char *t = getenv("PYC_REGISTRATION_TIMEOUT");
    double timeout = t != NULL && strtod(t, NULL) > 0 ? strtod(t, NULL) : PYC_REGISTER_TIMEOUT_S;
    return pyc_register(&a->cf, a->auth, timeout, err);
}

void
pyc_app_wake(void *ctx)
{
    pyc_app_t *a = ctx;
    pyc_server_wake(a->srv);
}

/* Where the forked child pid writes its connection file (path), and its kernel id: beside this kernel's file,
 * named after it.  Returns 0, or -1 when either does not fit. */
static int
child_file(const pyc_app_t *a, pid_t pid, char *path, size_t cap, char *id, size_t idcap)
{
    char dir[4096], base[1024];
    snprintf(dir, sizeof dir, "%s", a->connection_file);
    snprintf(base, sizeof base, "%s", basename((char *)a->connection_file));
    char *dot = strrchr(base, '.');
    if (dot != NULL && strcmp(dot, ".json") == 0)
        *dot = '\0';
    if ((size_t)snprintf(path, cap, "%s/%s-fork-%ld.json", dirname(dir), base, (long)pid) >= cap ||
        (size_t)snprintf(id, idcap, "%s-fork-%ld", base, (long)pid) >= idcap)
        return -1;
    return 0;
}

/* In a forked child: the connection of the new session (the parent's transport, address and scheme; a new
 * key, and a new CURVE key pair when the parent has one, with the parent's allow-list; ports chosen by the
 * system, or for ipc a path prefix of its own) and where its file goes.  The address, key and tcp ports the
 * request gave (opts) replace those. */
static int
child_connection(pyc_app_t *a, const pyc_fork_opts_t *opts, char *path, size_t cap, char *id, size_t idcap,
                 pyc_error_t *err)
{
    char key[65];
    if (opts->has_key ? pyc_connfile_set_key(&a->cf, opts->key, strlen(opts->key), err) < 0
                      : pyc_random_hex(key, 32, err) < 0 || pyc_connfile_set_key(&a->cf, key, 64, err) < 0)
        return -1;
    if (pyc_connfile_curve(&a->cf) && pyc_zap_keypair(a->cf.curve_publickey, a->cf.curve_secretkey, err) < 0)
        return -1;
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        a->cf.ports[c] = 0;
    if (strcmp(a->cf.transport, "ipc") == 0) {
        /* ipc endpoints are paths made of ip and port: a new prefix keeps them apart from the parent's. */
        char ip[256];
        snprintf(ip, sizeof ip, "%.200s-fork-%ld", a->cf.ip, (long)getpid());
        memcpy(a->cf.ip, ip, sizeof a->cf.ip);
        for (int c = 0; c < PYC_CHAN_COUNT; c++)
            a->cf.ports[c] = c + 1;
    } else {
        if (opts->has_ip)
            memcpy(a->cf.ip, opts->ip, sizeof a->cf.ip);
        for (int c = 0; opts->has_ports && c < PYC_CHAN_COUNT; c++)
            a->cf.ports[c] = opts->ports[c];
    }
    if (child_file(a, getpid(), path, cap, id, idcap) < 0)
        return pyc_error_code(err, PYC_EINVAL, "the forked session's connection file name is too long");
    return 0;
}

/* fork.c's become callback: runs in the new child, whose inherited kernel sockets are closed already. */
static json_t *
child_become(void *ctx, const pyc_fork_opts_t *opts, pid_t parent, pyc_error_t *err)
{
    pyc_app_t *a = ctx;
    char path[4096], id[1100];
    /* What the parent's objects were: never used here (their threads do not exist), kept referenced. */
    pyc_fork_keep_inherited(a->srv);
    pyc_fork_keep_inherited(a->auth);
    a->srv = NULL;
    a->auth = NULL;
    pyc_tt_forget_root();        /* its snapshots are its own, its parent's are not its */
    if (child_connection(a, opts, path, sizeof path, id, sizeof id, err) < 0 || pyc_app_bind(a, err) < 0)
        return NULL;
    json_t *conn = pyc_connfile_to_json(&a->cf);
    if (pyc_connfile_write_json(path, conn, err) < 0) {
        json_decref(conn);
        return NULL;
    }
    a->own_connection_file = strdup(path);
    a->forked_session = true;
    a->watch_parent = opts->watch > 0 ? opts->watch : opts->outlive ? 0 : parent;
    if (a->own_connection_file == NULL) {
        json_decref(conn);
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    a->connection_json = conn;
    json_t *rep = NULL;
    if (pyc_kernel_become_child(a->kernel, pyc_server_io(a->srv), a->auth, &a->cf, id, err) == 0 &&
        pyc_app_start(a, err) == 0 &&
        (rep = json_pack("{s:i, s:s, s:O}", "pid", (int)getpid(), "connection_file", path, "connection",
                         conn)) == NULL)
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
    a->connection_json = NULL;
    json_decref(conn);
    return rep;
}

/* fork.c's adopted callback: a spare handed a request ends with the process the request named. */
static void
child_adopted(void *ctx, pid_t watch)
{
    pyc_app_t *a = ctx;
    a->watch_parent = watch;
}

int
pyc_app_fork_children(void *ctx, int n, const pyc_fork_opts_t *opts, json_t **reports, int *index)
{
    pyc_app_t *a = ctx;
    pyc_fork_spec_t spec = {.cf = &a->cf, .become = child_become, .adopted = child_adopted, .ctx = a};
    return pyc_fork_children(a->kernel, &spec, n, opts, reports, index);
}

int
pyc_app_fork_spare(void *ctx, pyc_fork_spare_t *spare, char *file, size_t cap, json_t **names)
{
    pyc_app_t *a = ctx;
    pyc_error_t err;
    pyc_fork_spec_t spec = {.cf = &a->cf, .become = child_become, .adopted = child_adopted, .ctx = a};
    int r = pyc_fork_spare(a->kernel, &spec, spare, names, &err);
    if (r < 0)
        pyc_log("pyc.fork: no spare: %s", err.text);
    char id[1100];
    if (r == 0 && child_file(a, spare->pid, file, cap, id, sizeof id) < 0)
        file[0] = '\0';
    return r;
}

json_t *
pyc_app_adopt_spare(void *ctx, pyc_fork_spare_t *spare, const pyc_fork_opts_t *opts, json_t *names)
{
    (void)ctx;
    return pyc_fork_adopt(spare, opts, names);
}
