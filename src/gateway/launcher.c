/*
 * launcher.c -- `pyc-kernel gateway-launch` (gateway.h): the kernel's start, the report of its ports, the
 * delivery of the sealed connection info, and the life of the kernel process until it ends.
 *
 * One thread and one poll loop.  SIGCHLD, SIGTERM, SIGHUP and SIGINT are blocked and read from a signalfd,
 * so that a signal is an event among the others and never interrupts the registration or a delivery half
 * way.  The kernel is a child process (not exec'ed in our place): the launcher must outlive it to close the
 * communication port when it dies, which is how a gateway that polls the port learns of the death.
 *
 * Budget: a gateway waits 30 s for the payload (pod scheduling and the image's pull included); the kernel
 * has 25 s to report its ports (pyc-kernel starts in ~20 ms; an image's cold start may take seconds), the
 * delivery is retried for PYC_GATEWAY_RESPONSE_TIMEOUT (20 s) on connection failures only.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "clock.h"
#include "connfile.h"
#include "gateway.h"
#include "gatewayint.h"
#include "random.h"
#include "regreport.h"
#include "seal.h"
#include "wire.h"
#include "zrecv.h"

#define REPORT_TIMEOUT_S 25.0    /* the kernel's report of its ports */
#define SHUTDOWN_GRACE_S 5.0     /* after {"shutdown": 1}: the kernel's own exit, then SIGTERM */
#define KILL_GRACE_S 5.0         /* after a SIGTERM: then SIGKILL */
#define CONNECT_TIMEOUT_S 2.0    /* one attempt to reach the response address */
#define GENERIC_TRIES 3          /* starts of another kernel whose ports were taken meanwhile */

typedef struct launcher {
    pyc_gwopts_t o;
    pyc_seal_key_t *key;
    pyc__gw_comm_t comm;
    int sfd;                     /* signalfd of SIGCHLD, SIGTERM, SIGHUP, SIGINT */
    sigset_t saved_mask;         /* the mask the kernel starts with */
    char dir[4096];              /* private directory of the files below */
    char file[4200];             /* registration file (pyc-kernel) or connection file (another kernel) */
    char hmac_key[40];           /* a UUID4, as the upstream launchers make it */
    int ports[PYC_CHAN_COUNT];
    pid_t kernel;                /* 0 once reaped */
    int status;                  /* the exit status to end with, once reaped */
    double term_at, kill_at;     /* when the kernel gets SIGTERM, SIGKILL (0: not due) */
} launcher_t;

/* ---- the kernel process ------------------------------------------------------------------------------- */

/* Starts argv[0] (a path, or a name looked up in PATH) as the kernel, with the signal mask this process
 * had and JPY_PARENT_PID naming this process (pyc-kernel exits when it is gone).  A command that cannot be
 * run is known here, by a close-on-exec pipe that carries exec's errno, and is not a kernel that ended:
 * it is reaped at once, l->status is 127 (the shell's "cannot run"), and nothing is tried again.
 * Returns 0, or -1. */
static int
spawn(launcher_t *l, char **argv)
{
    char ppid[32];
    snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
    setenv("JPY_PARENT_PID", ppid, 1);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        pyc__gw_log("cannot start the kernel: pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        pyc__gw_log("cannot start the kernel: fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        sigprocmask(SIG_SETMASK, &l->saved_mask, NULL);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(p[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(p[1]);
    int e = 0;
    ssize_t r;
    while ((r = read(p[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(p[0]);
    if (r == (ssize_t)sizeof e) {
        pyc__gw_log("cannot run %s: %s", argv[0], strerror(e));
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        l->kernel = 0;
        l->status = 127;
        return -1;
    }
    l->kernel = pid;
    return 0;
}

static int
status_of(int wstatus)
{
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : 1;
}

/* Reads the signals that came: reaps the kernel, passes SIGTERM and SIGHUP on.  Returns true once the kernel
 * has ended (l->kernel is 0 and l->status set). */
static bool
take_signals(launcher_t *l)
{
    struct signalfd_siginfo si;
    while (read(l->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) && l->kernel > 0) {
            pyc__gw_log("%s: stopping the kernel (pid %ld)", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGHUP",
                        (long)l->kernel);
            kill(l->kernel, SIGTERM);
            if (l->kill_at == 0)
                l->kill_at = pyc_now_s() + KILL_GRACE_S;
        }
    }
    int wstatus;
    if (l->kernel > 0 && waitpid(l->kernel, &wstatus, WNOHANG) == l->kernel) {
        l->status = status_of(wstatus);
        if (WIFSIGNALED(wstatus))
            pyc__gw_log("the kernel (pid %ld) was killed by signal %d", (long)l->kernel, WTERMSIG(wstatus));
        else
            pyc__gw_log("the kernel (pid %ld) exited with status %d", (long)l->kernel, l->status);
        l->kernel = 0;
    }
    return l->kernel == 0;
}

/* Sends the due SIGTERM or SIGKILL of a shutdown or a termination. */
static void
escalate(launcher_t *l, double now)
{
    if (l->kernel <= 0)
        return;
    if (l->term_at > 0 && now >= l->term_at) {
        pyc__gw_log("the kernel did not end within %g s of the shutdown request: SIGTERM", SHUTDOWN_GRACE_S);
        kill(l->kernel, SIGTERM);
        l->term_at = 0;
        l->kill_at = now + KILL_GRACE_S;
    }
    if (l->kill_at > 0 && now >= l->kill_at) {
        pyc__gw_log("the kernel did not end within %g s of SIGTERM: SIGKILL", KILL_GRACE_S);
        kill(l->kernel, SIGKILL);
        l->kill_at = 0;
    }
}

static int
ms_until(double t, double now, int cap)
{
    if (t <= 0)
        return cap;
    int ms = t <= now ? 0 : (int)((t - now) * 1000) + 1;
    return cap >= 0 && ms > cap ? cap : ms;
}

/* Waits up to ms for a signal (the kernel's end included), keeping the escalation going.  Returns true once
 * the kernel has ended. */
static bool
wait_signals(launcher_t *l, int ms)
{
    struct pollfd p = {.fd = l->sfd, .events = POLLIN};
    double now = pyc_now_s();
    poll(&p, 1, ms_until(l->term_at > 0 ? l->term_at : l->kill_at, now, ms));
    escalate(l, pyc_now_s());
    return take_signals(l);
}

/* Stops the kernel (SIGTERM, SIGKILL after the grace) and waits for its end. */
static void
stop_kernel(launcher_t *l)
{
    if (l->kernel <= 0)
        return;
    kill(l->kernel, SIGTERM);
    l->kill_at = pyc_now_s() + KILL_GRACE_S;
    while (!wait_signals(l, 1000))
        ;
}

/* ---- files ---------------------------------------------------------------------------------------------- */

/* A UUID4 in text, the key the upstream launchers give a kernel. */
static int
uuid4(char out[37])
{
    unsigned char b[16];
    if (pyc_random_bytes(b, sizeof b, NULL) < 0)
        return -1;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return 0;
}

/* The members every file and the payload share: ip, key, transport, signature scheme, kernel name. */
static json_t *
connection_base(const launcher_t *l)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "ip", l->o.ip, "key", l->hmac_key, "transport", "tcp",
                     "signature_scheme", "hmac-sha256", "kernel_name", "");
}

static json_t *
connection_info(const launcher_t *l)
{
    json_t *c = connection_base(l);
    for (int i = 0; c != NULL && i < PYC_CHAN_COUNT; i++)
        json_object_set_new(c, pyc_connfile_port_names[i], json_integer(l->ports[i]));
    return c;
}

static int
write_json(const char *path, json_t *root)
{
    pyc_error_t err;
    int rc = root != NULL ? pyc_connfile_write_json(path, root, &err) : -1;
    if (rc < 0)
        pyc__gw_log("cannot write %s: %s", path, root != NULL ? err.text : "out of memory");
    json_decref(root);
    return rc;
}

/* Removes the private directory and what is in it (the kernel's own file too, if it could not). */
static void
remove_files(launcher_t *l)
{
    if (l->dir[0] == '\0')
        return;
    DIR *d = opendir(l->dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d != NULL)
        closedir(d);
    rmdir(l->dir);
    l->dir[0] = '\0';
}

/* ---- pyc-kernel: the registration ----------------------------------------------------------------------- */

/* Takes one message from the registration socket; when it is the kernel's report, answers it.  Returns 1
 * for the report taken, 0 for none (or one refused: logged). */
static int
take_report(launcher_t *l, void *sock, pyc_auth_t *auth)
{
    zmq_msg_t parts[8];
    int n = pyc_zrecv(sock, parts, 8), rc = 0;
    if (n < 1)
        return 0;
    pyc_frame_t frames[7];
    for (int i = 1; i < n; i++)
        frames[i - 1] = (pyc_frame_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
    pyc_connfile_t cf;
    memset(&cf, 0, sizeof cf);
    pyc_error_t err;
    char sig[PYC_AUTH_MAX_HEX + 1];
    if (pyc_regreport_take(frames, (size_t)(n - 1), auth, l->o.kernel_id, &cf, &err) < 0) {
        pyc__gw_log("refused a registration report: %s", err.text);
    } else if (pyc_regreport_ack(auth, sig) < 0) {
        pyc__gw_log("cannot sign the registration's ACK");
    } else {
        memcpy(l->ports, cf.ports, sizeof l->ports);
        zmq_send(sock, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), ZMQ_SNDMORE);
        zmq_send(sock, PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN, ZMQ_SNDMORE);
        zmq_send(sock, sig, strlen(sig), ZMQ_SNDMORE);
        zmq_send(sock, PYC_REGREPORT_ACK, sizeof PYC_REGREPORT_ACK - 1, 0);
        rc = 1;
    }
    pyc_zrecv_close(parts, n);
    return rc;
}

/* Starts pyc-kernel (self) on a registration file and waits for its report.  Returns 0 with l->ports set,
 * or -1 (the kernel ended, or reported nothing in time: then it is stopped). */
static int
start_pyc(launcher_t *l, const char *self)
{
    pyc_error_t err;
    pyc_auth_t *auth = pyc_auth_new("hmac-sha256", l->hmac_key, strlen(l->hmac_key), 0, &err);
    void *ctx = zmq_ctx_new();
    void *sock = ctx != NULL ? zmq_socket(ctx, ZMQ_ROUTER) : NULL;
    int linger = 2000, rc = -1, reg_port = 0;
    char ep[256];
    size_t eplen = sizeof ep;
    if (auth == NULL || sock == NULL || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) < 0 ||
        zmq_bind(sock, "tcp://127.0.0.1:*") < 0 || zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &eplen) < 0) {
        pyc__gw_log("cannot listen for the kernel's registration: %s",
                    auth == NULL ? err.text : zmq_strerror(zmq_errno()));
        goto out;
    }
    reg_port = (int)strtol(strrchr(ep, ':') + 1, NULL, 10);
    json_t *reg = connection_base(l);
    json_object_set_new(reg, "kernel_id", json_string(l->o.kernel_id));
    json_object_set_new(reg, "registration_ip", json_string("127.0.0.1"));
    json_object_set_new(reg, "registration_port", json_integer(reg_port));
    if (l->o.port_min > 0)
        json_object_set_new(reg, "port_range", json_pack("[i, i]", l->o.port_min, l->o.port_max));
    if (write_json(l->file, reg) < 0)
        goto out;
    char *argv[] = {(char *)self, "-f", l->file, NULL};
    if (spawn(l, argv) < 0)
        goto out;
    double deadline = pyc_now_s() + REPORT_TIMEOUT_S;
    while (rc < 0) {
        double now = pyc_now_s();
        if (now >= deadline) {
            pyc__gw_log("the kernel did not report its ports within %g s: stopping it", REPORT_TIMEOUT_S);
            stop_kernel(l);
            goto out;
        }
        zmq_pollitem_t items[2] = {{.socket = sock, .events = ZMQ_POLLIN}, {.fd = l->sfd, .events = ZMQ_POLLIN}};
        zmq_poll(items, 2, ms_until(deadline, now, 1000));
        if (take_signals(l)) {
            pyc__gw_log("the kernel ended before it reported its ports");
            goto out;
        }
        if ((items[0].revents & ZMQ_POLLIN) && take_report(l, sock, auth) == 1)
            rc = 0;
    }
out:
    /* Closing with a linger sends the ACK before the context ends (zmq_ctx_term waits for it). */
    if (sock != NULL)
        zmq_close(sock);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    pyc_auth_destroy(&auth);
    return rc;
}

/* ---- another kernel: ports picked here ------------------------------------------------------------------ */

/* True when a TCP connection to every port of the kernel is accepted. */
static bool
ports_accept(const launcher_t *l)
{
    const char *ip = strcmp(l->o.ip, "0.0.0.0") == 0 ? "127.0.0.1" : strcmp(l->o.ip, "::") == 0 ? "::1" : l->o.ip;
    for (int i = 0; i < PYC_CHAN_COUNT; i++) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        char service[16];
        snprintf(service, sizeof service, "%d", l->ports[i]);
        if (getaddrinfo(ip, service, &hints, &ai) != 0)
            return false;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        if (!ok)
            return false;
    }
    return true;
}

/* Starts the command after "--" on a connection file with ports picked here, and waits until its ports
 * accept connections.  A kernel that ends first (most likely: a port was taken between our pick and its
 * bind) is started again on new ports, GENERIC_TRIES times in all.  Returns 0, or -1. */
static int
start_other(launcher_t *l)
{
    char **argv = calloc((size_t)l->o.ncommand + 3, sizeof *argv);
    if (argv == NULL)
        return -1;
    int n = 0;
    bool placed = false;
    for (int i = 0; i < l->o.ncommand; i++) {
        placed |= strcmp(l->o.command[i], "{connection_file}") == 0;
        argv[n++] = strcmp(l->o.command[i], "{connection_file}") == 0 ? l->file : l->o.command[i];
    }
    if (!placed) {
        argv[n++] = "-f";
        argv[n++] = l->file;
    }
    int rc = -1;
    for (int attempt = 1; attempt <= GENERIC_TRIES && rc < 0; attempt++) {
        int fds[PYC_CHAN_COUNT], opened = 0;
        pyc_error_t err;
        for (; opened < PYC_CHAN_COUNT; opened++) {
            fds[opened] = pyc__gw_bind_in_range(l->o.ip, l->o.port_min, l->o.port_max, l->o.max_retries, false,
                                                &l->ports[opened], &err);
            if (fds[opened] < 0)
                break;
        }
        for (int i = 0; i < opened; i++)
            close(fds[i]);
        if (opened < PYC_CHAN_COUNT) {
            pyc__gw_log("cannot pick the kernel's ports: %s", err.text);
            break;
        }
        if (write_json(l->file, connection_info(l)) < 0 || spawn(l, argv) < 0)
            break;
        double deadline = pyc_now_s() + REPORT_TIMEOUT_S;
        while (rc < 0 && l->kernel > 0 && pyc_now_s() < deadline) {
            if (ports_accept(l))
                rc = 0;
            else
                wait_signals(l, 50);
        }
        if (rc < 0 && l->kernel > 0) {
            pyc__gw_log("the kernel's ports did not accept connections within %g s: stopping it", REPORT_TIMEOUT_S);
            stop_kernel(l);
            break;
        }
        if (rc < 0)
            pyc__gw_log("the kernel ended before its ports accepted connections (try %d of %d)", attempt,
                        GENERIC_TRIES);
    }
    free(argv);
    return rc;
}

/* ---- the payload ---------------------------------------------------------------------------------------- */

/* One attempt to send text to the response address.  Returns 0, or -1 with err. */
static int
send_once(const launcher_t *l, const char *text, pyc_error_t *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", l->o.response_port);
    int g = getaddrinfo(l->o.response_host, service, &hints, &ai);
    if (g != 0)
        return pyc_error_set(err, "%s: %s", l->o.response_host, gai_strerror(g));
    int rc = -1;
    pyc_error_set(err, "no address");
    for (struct addrinfo *a = ai; a != NULL && rc < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            pyc_error_set(err, "socket: %s", strerror(errno));
            continue;
        }
        int e = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (e == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            socklen_t len = sizeof e;
            e = poll(&p, 1, (int)(CONNECT_TIMEOUT_S * 1000)) == 1 &&
                        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0
                    ? e
                    : ETIMEDOUT;
        }
        size_t left = strlen(text);
        const char *at = text;
        while (e == 0 && left > 0) {
            ssize_t w = send(fd, at, left, MSG_NOSIGNAL);
            if (w > 0) {
                at += w;
                left -= (size_t)w;
            } else if (w < 0 && errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                e = poll(&p, 1, (int)(CONNECT_TIMEOUT_S * 1000)) == 1 ? 0 : ETIMEDOUT;
            } else {
                e = w < 0 ? errno : EPIPE;
            }
        }
        close(fd);
        if (e == 0)
            rc = 0;
        else
            pyc_error_set(err, "%s", strerror(e));
    }
    freeaddrinfo(ai);
    return rc;
}

/* Seals the connection info and sends it to the gateway, retrying failures with a growing pause for up to
 * the response timeout.  Returns 0, or -1 (the kernel ended meanwhile, or the time ran out). */
static int
deliver(launcher_t *l)
{
    json_t *info = connection_info(l);
    json_object_set_new(info, "pid", json_integer(l->kernel));
    json_object_set_new(info, "pgid", json_integer(getpgid(l->kernel)));
    json_object_set_new(info, "comm_port", json_integer(l->comm.port));
    json_object_set_new(info, "kernel_id", json_string(l->o.kernel_id));
    char *text = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    pyc_error_t err;
    char *payload = text != NULL ? pyc_seal_gateway_payload(l->key, text, &err) : NULL;
    free(text);
    if (payload == NULL) {
        pyc__gw_log("cannot seal the connection info: %s", text == NULL ? "out of memory" : err.text);
        return -1;
    }
    double deadline = pyc_now_s() + l->o.response_timeout_s, pause = 0.1;
    int rc = -1, tries = 0;
    while (rc < 0 && l->kernel > 0) {
        tries++;
        if (send_once(l, payload, &err) == 0) {
            rc = 0;
            break;
        }
        double now = pyc_now_s();
        if (now + pause >= deadline) {
            pyc__gw_log("cannot deliver the connection info to %s: %s (%d tries in %g s)", l->o.response, err.text,
                        tries, l->o.response_timeout_s);
            break;
        }
        if (tries == 1)
            pyc__gw_log("cannot reach %s yet (%s): trying again", l->o.response, err.text);
        wait_signals(l, (int)(pause * 1000));
        pause = pause * 2 < 1.0 ? pause * 2 : 1.0;
    }
    free(payload);
    return rc;
}

/* ---- serving --------------------------------------------------------------------------------------------- */

static void
on_request(void *ctx, json_t *req)
{
    launcher_t *l = ctx;
    json_t *sig = json_object_get(req, "signum"), *shut = json_object_get(req, "shutdown");
    if (json_is_integer(sig)) {
        long n = (long)json_integer_value(sig);
        /* The signals a gateway sends: 0 to poll, SIGINT to interrupt (SIGUSR2 from Spark launchers), SIGTERM
         * and SIGKILL from gateway_provisioners' terminate and kill, SIGHUP/SIGQUIT/SIGUSR1 as the upstream
         * listener passes on any.  No others: the port has no authentication. */
        if (n == 0 || l->kernel <= 0)
            return;
        if (n == SIGHUP || n == SIGINT || n == SIGQUIT || n == SIGKILL || n == SIGUSR1 || n == SIGUSR2 ||
            n == SIGTERM) {
            pyc__gw_log("signal %ld to the kernel (pid %ld), as the gateway asks", n, (long)l->kernel);
            kill(l->kernel, (int)n);
        } else {
            pyc__gw_log("signal %ld asked on the communication port: not one a gateway sends, ignored", n);
        }
    } else if (shut != NULL && !json_is_false(shut) && !json_is_null(shut) &&
               !(json_is_integer(shut) && json_integer_value(shut) == 0)) {
        pyc__gw_log("shutdown asked on the communication port: waiting %g s for the kernel's own exit",
                    SHUTDOWN_GRACE_S);
        pyc__gw_comm_close(&l->comm);
        if (l->term_at == 0 && l->kill_at == 0)
            l->term_at = pyc_now_s() + SHUTDOWN_GRACE_S;
    } else {
        pyc__gw_log("communication port: a request with neither \"signum\" nor \"shutdown\": ignored");
    }
}

/* Serves the communication port until the kernel ends. */
static void
serve(launcher_t *l)
{
    while (l->kernel > 0) {
        struct pollfd fds[PYC__GW_MAX_CONNS + 2];
        fds[0] = (struct pollfd){.fd = l->sfd, .events = POLLIN};
        int n = 1 + pyc__gw_comm_pollfds(&l->comm, fds + 1, PYC__GW_MAX_CONNS + 1);
        double now = pyc_now_s();
        int ms = pyc__gw_comm_timeout_ms(&l->comm, now);
        ms = ms_until(l->term_at > 0 ? l->term_at : l->kill_at, now, ms);
        if (poll(fds, (nfds_t)n, ms) < 0 && errno != EINTR)
            pyc__gw_log("poll: %s", strerror(errno));
        now = pyc_now_s();
        if (take_signals(l))
            break;
        pyc__gw_comm_serve(&l->comm, fds + 1, n - 1, now, on_request, l);
        escalate(l, now);
    }
    /* At once: a gateway polling the port sees the connection refused. */
    pyc__gw_comm_close(&l->comm);
}

/* ---- the command ------------------------------------------------------------------------------------------ */

static int
run(launcher_t *l, const char *self)
{
    pyc_error_t err;
    if (pyc__gw_comm_open(&l->comm, l->o.ip, l->o.port_min, l->o.port_max, l->o.max_retries, &err) < 0) {
        pyc__gw_log("the communication port: %s", err.text);
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(l->dir, sizeof l->dir, "%s/pyc-gateway-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(l->dir) == NULL) {
        pyc__gw_log("cannot make a directory for the connection file (%s): %s", l->dir, strerror(errno));
        l->dir[0] = '\0';
        return 1;
    }
    snprintf(l->file, sizeof l->file, "%s/%s.json", l->dir, l->o.command != NULL ? "connection" : "registration");
    if (uuid4(l->hmac_key) < 0) {
        pyc__gw_log("no random bytes for the kernel's key");
        return 1;
    }
    if (l->o.command != NULL ? start_other(l) < 0 : start_pyc(l, self) < 0)
        return l->kernel == 0 && l->status != 0 ? l->status : 1;
    pyc__gw_log("kernel %s started: pid %ld, ports %d %d %d %d %d, communication port %d", l->o.kernel_id,
                (long)l->kernel, l->ports[0], l->ports[1], l->ports[2], l->ports[3], l->ports[4], l->comm.port);
    if (l->o.response != NULL) {
        if (deliver(l) < 0) {
            stop_kernel(l);
            return 1;
        }
    } else {
        /* No gateway waits (EG's "pull mode"): whoever started this reads the connection file. */
        char path[4300];
        snprintf(path, sizeof path, "%s/connection.json", l->dir);
        if (l->o.command == NULL && write_json(path, connection_info(l)) < 0)
            snprintf(path, sizeof path, "%s", "(none)");
        pyc__gw_log("no response address: the connection file is %s", l->o.command == NULL ? path : l->file);
    }
    serve(l);
    return l->status;
}

int
pyc_gateway_main(int argc, char **argv, const char *self)
{
    launcher_t l;
    memset(&l, 0, sizeof l);
    l.sfd = -1;
    l.comm.lfd = -1;
    pyc_error_t err;
    if (pyc_gwopts_parse(&l.o, argc - 1, argv + 1, &err) < 0) {
        pyc__gw_log("%s", err.text);
        fputs(pyc_gateway_usage, stderr);
        return 2;
    }
    if (l.o.help) {
        fputs(pyc_gateway_usage, stdout);
        return 0;
    }
    l.key = pyc_seal_key_new(l.o.public_key, &err);
    if (l.key == NULL) {
        struct stat st;
        bool path = l.o.public_key[0] == '/' || stat(l.o.public_key, &st) == 0;
        pyc__gw_log("the public key is not the gateway's RSA key: %s%s", err.text,
                    path ? " (it names a file: the key must be given itself, base64 DER, not its path)" : "");
        return 2;
    }
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &l.saved_mask);
    l.sfd = signalfd(-1, &block, SFD_CLOEXEC | SFD_NONBLOCK);
    int rc = 1;
    if (l.sfd < 0)
        pyc__gw_log("signalfd: %s", strerror(errno));
    else
        rc = run(&l, self);
    pyc__gw_comm_close(&l.comm);
    remove_files(&l);
    if (l.sfd >= 0)
        close(l.sfd);
    pyc_seal_key_destroy(&l.key);
    sigprocmask(SIG_SETMASK, &l.saved_mask, NULL);
    return rc;
}
