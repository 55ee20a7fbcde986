/*
 * fork.c -- see fork.h.
 *
 * Locks: the fork happens with the GIL, the streams lock and the kernel's parent lock held by the forking
 * thread, in that order (the order every other path takes them), so the child inherits none of them held by
 * a thread that no longer exists.  Everything else that other threads may hold (the server's queues and
 * iopub lock, ZeroMQ's internals) belongs to objects the child never touches.
 *
 * The child reports on a pipe: one JSON line, {"pid", "connection_file", "connection"} or {"error"}.  The
 * parent waits for it at most PYC_FORK_START_TIMEOUT_MS.
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
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "msg.h"
#include "random.h"

#define PYC_FORK_START_TIMEOUT_MS 10000

/* True when fd is a socket whose local address is one of the parent kernel's endpoints. */
static bool
is_kernel_socket(int fd, const pyc_connfile_t *cf)
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
                return true;
        }
        return false;
    }
    if (ss.ss_family == AF_UNIX) {
        const char *path = ((struct sockaddr_un *)&ss)->sun_path;
        return strncmp(path, cf->ip, strlen(cf->ip)) == 0;
    }
    return false;
}

/* Closes the parent's kernel sockets the child inherited: otherwise the child would keep the parent's
 * ports bound (a restarted parent could not bind them again) and its clients' connections open. */
static void
close_inherited_sockets(const pyc_connfile_t *cf, int keep)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    int dfd = dirfd(d);
    int fds[1024], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 1024) {
        int fd = (int)strtol(e->d_name, NULL, 10);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd <= 2 || fd == dfd || fd == keep)
            continue;
        fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (fstat(fds[i], &st) == 0 && S_ISSOCK(st.st_mode) && is_kernel_socket(fds[i], cf))
            close(fds[i]);
    }
}

/* The child's side: becomes a kernel of its own, then reports on fd.  Never returns on failure. */
static void
child_start(pyc_kernel_t *k, pyc_fork_env_t *env, bool outlive, pid_t parent, int fd)
{
    pyc_error_t err;
    char key[65], path[4096], line[8192];
    pyc_connfile_t ccf = *env->cf;
    pyc_auth_t *auth = NULL;
    pyc_server_t *srv = NULL;

    if (!outlive) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);            /* the parent died before the line above took effect */
    }
    setpgid(0, 0);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    pyc_msg_reseed();
    close_inherited_sockets(env->cf, fd);

    if (pyc_random_hex(key, 32, &err) < 0)
        goto fail;
    ccf.key = key;
    ccf.keylen = 64;
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        ccf.ports[c] = 0;
    if (strcmp(ccf.transport, "ipc") == 0) {
        /* ipc endpoints are paths made of ip and port: a new prefix keeps them apart from the parent's. */
        char ip[256];
        snprintf(ip, sizeof ip, "%.200s-fork-%ld", env->cf->ip, (long)getpid());
        memcpy(ccf.ip, ip, sizeof ccf.ip);
        for (int c = 0; c < PYC_CHAN_COUNT; c++)
            ccf.ports[c] = c + 1;
    }
    if ((auth = pyc_auth_new(ccf.signature_scheme, key, 64, 0, &err)) == NULL ||
        (srv = pyc_server_new(&ccf, auth, &err)) == NULL)
        goto fail;

    char dir[4096], base[1024];
    snprintf(dir, sizeof dir, "%s", env->connection_file);
    snprintf(base, sizeof base, "%s", basename((char *)env->connection_file));
    char *dot = strrchr(base, '.');
    if (dot != NULL && strcmp(dot, ".json") == 0)
        *dot = '\0';
    snprintf(path, sizeof path, "%s/%s-fork-%ld.json", dirname(dir), base, (long)getpid());
    if (pyc_connfile_write(path, &ccf, &err) < 0)
        goto fail;
    char id[1100];
    snprintf(id, sizeof id, "%s-fork-%ld", base, (long)getpid());
    if (pyc_kernel_become_child(k, pyc_server_io(srv), auth, &ccf, id, &err) < 0)
        goto fail;
    pyc_kernel_keep_inherited(*env->srv);
    pyc_kernel_keep_inherited(*env->auth);
    *env->srv = srv;
    *env->auth = auth;
    *env->watch_parent = outlive ? 0 : parent;
    env->own_connection_file = strdup(path);
    if (pyc_server_start(srv, pyc_kernel_control, k, &err) < 0)
        goto fail;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_sigmask(SIG_UNBLOCK, &block, NULL);

    json_t *conn = pyc_connfile_to_json(&ccf);
    json_t *rep = json_pack("{s:i, s:s, s:o}", "pid", (int)getpid(), "connection_file", path, "connection", conn);
    char *text = json_dumps(rep, JSON_COMPACT);
    json_decref(rep);
    snprintf(line, sizeof line, "%s\n", text != NULL ? text : "{\"error\":\"out of memory\"}");
    free(text);
    ssize_t w = write(fd, line, strlen(line));
    (void)w;
    close(fd);
    pyc_kernel_starting(k);
    return;
fail:
    snprintf(line, sizeof line, "{\"error\":\"%s\"}\n", err.text);
    for (char *p = line + 10; *p != '\0' && p[1] != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            *p = '\'';           /* keep the report valid JSON */
    }
    ssize_t w2 = write(fd, line, strlen(line));
    (void)w2;
    _exit(1);
}

pid_t
pyc_fork_child(pyc_kernel_t *k, pyc_fork_env_t *env, bool outlive, json_t **info, pyc_error_t *err)
{
    int p[2];
    *info = NULL;
    if (pipe2(p, O_CLOEXEC) < 0)
        return pyc_error_set(err, "pipe: %s", strerror(errno));
    pid_t parent = getpid();

    int saved;
    pid_t pid = pyc_kernel_fork(k, &saved);

    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return pyc_error_set(err, "fork: %s", strerror(saved));
    }
    if (pid == 0) {
        close(p[0]);
        child_start(k, env, outlive, parent, p[1]);
        return 0;
    }
    close(p[1]);
    char buf[8192];
    size_t len = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long waited = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (waited >= PYC_FORK_START_TIMEOUT_MS)
            break;
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        if (poll(&pfd, 1, (int)(PYC_FORK_START_TIMEOUT_MS - waited)) <= 0)
            continue;
        ssize_t r = read(p[0], buf + len, sizeof buf - 1 - len);
        if (r > 0) {
            len += (size_t)r;
            if (memchr(buf, '\n', len) != NULL || len == sizeof buf - 1)
                break;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        break;
    }
    close(p[0]);
    buf[len] = '\0';
    json_error_t jerr;
    json_t *rep = json_loads(buf, JSON_DISABLE_EOF_CHECK, &jerr);
    if (rep == NULL || json_object_get(rep, "error") != NULL || json_object_get(rep, "pid") == NULL) {
        pyc_error_set(err, "child %ld did not start: %s", (long)pid,
                      rep != NULL && json_is_string(json_object_get(rep, "error"))
                          ? json_string_value(json_object_get(rep, "error"))
                          : "no report within 10 s");
        json_decref(rep);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    *info = rep;
    return pid;
}
