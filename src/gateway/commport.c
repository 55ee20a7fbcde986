/*
 * commport.c -- the launcher's communication port, and the TCP helpers of src/gateway (gatewayint.h).
 *
 * The gateways' framing (Enterprise Gateway's processproxy.py, gateway_provisioners' remote_provisioner.py):
 * connect (with a socket timeout of 5 ms in EG, 10 ms in GP, which only the listen backlog can meet), send
 * one UTF-8 JSON object, close (for shutdown after shutdown(SHUT_WR)).  Nothing is answered.  The port is
 * not ZeroMQ and not authenticated: anything that reaches it may signal the kernel, which is why only the
 * signals a gateway sends are passed on (launcher.c).
 */
#include "gatewayint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "random.h"

/* A request bigger than this is no gateway's. */
#define COMM_MAX_REQUEST (64 << 10)
#define COMM_DEADLINE_S 2.0

void
pyc__gw_log(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pyc-kernel gateway-launch: %s\n", line);
}

int
pyc__gw_bind(const char *ip, int port, bool listen_too, int *bound, pyc_error_t *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int g = getaddrinfo(ip, service, &hints, &ai);
    if (g != 0) {
        pyc_error_code(err, PYC_EINVAL, "\"%s\" is not an IP address to listen on: %s", ip, gai_strerror(g));
        errno = EINVAL;
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || (listen_too && listen(fd, 16) < 0)) {
        int e = errno;
        pyc_error_set(err, "cannot listen on %s port %d: %s", ip, port, strerror(e));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        errno = e;
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *bound = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
                                      : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

int
pyc__gw_bind_in_range(const char *ip, int lo, int hi, int tries, bool listen_too, int *bound, pyc_error_t *err)
{
    if (lo == 0 && hi == 0)
        return pyc__gw_bind(ip, 0, listen_too, bound, err);
    unsigned span = (unsigned)(hi - lo + 1);
    for (int i = 0; i < tries; i++) {
        unsigned r = 0;
        pyc_random_bytes(&r, sizeof r, NULL);
        int fd = pyc__gw_bind(ip, lo + (int)(r % span), listen_too, bound, err);
        if (fd >= 0 || errno != EADDRINUSE)
            return fd;
    }
    /* The random tries (MAX_PORT_RANGE_RETRIES, as upstream) found only ports in use: a crowded range still
     * has free ports, and failing a kernel start while one is free helps nobody. */
    for (unsigned i = 0; i < span; i++) {
        int fd = pyc__gw_bind(ip, lo + (int)i, listen_too, bound, err);
        if (fd >= 0 || errno != EADDRINUSE)
            return fd;
    }
    return pyc_error_set(err, "no free port in %d..%d on %s", lo, hi, ip);
}

int
pyc__gw_comm_open(pyc__gw_comm_t *c, const char *ip, int lo, int hi, int tries, pyc_error_t *err)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < PYC__GW_MAX_CONNS; i++)
        c->conns[i].fd = -1;
    c->lfd = pyc__gw_bind_in_range(ip, lo, hi, tries, true, &c->port, err);
    return c->lfd >= 0 ? 0 : -1;
}

int
pyc__gw_comm_pollfds(const pyc__gw_comm_t *c, struct pollfd *fds, int cap)
{
    int n = 0;
    if (c->lfd >= 0 && n < cap)
        fds[n++] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
    for (int i = 0; i < PYC__GW_MAX_CONNS && n < cap; i++) {
        if (c->conns[i].fd >= 0)
            fds[n++] = (struct pollfd){.fd = c->conns[i].fd, .events = POLLIN};
    }
    return n;
}

int
pyc__gw_comm_timeout_ms(const pyc__gw_comm_t *c, double now)
{
    double first = 0;
    for (int i = 0; i < PYC__GW_MAX_CONNS; i++) {
        if (c->conns[i].fd >= 0 && (first == 0 || c->conns[i].deadline < first))
            first = c->conns[i].deadline;
    }
    return first == 0 ? -1 : first <= now ? 0 : (int)((first - now) * 1000) + 1;
}

static void
drop(pyc__gw_comm_t *c, int i)
{
    close(c->conns[i].fd);
    free(c->conns[i].buf);
    c->conns[i].fd = -1;
    c->conns[i].buf = NULL;
    c->conns[i].len = 0;
}

/* Reads what connection i has; at its end, parses the request and hands it on. */
static void
read_conn(pyc__gw_comm_t *c, int i, void (*on_request)(void *, json_t *), void *ctx)
{
    for (;;) {
        if (c->conns[i].buf == NULL && (c->conns[i].buf = malloc(COMM_MAX_REQUEST + 1)) == NULL) {
            pyc__gw_log("out of memory for a request on the communication port: dropped");
            drop(c, i);
            return;
        }
        ssize_t r = read(c->conns[i].fd, c->conns[i].buf + c->conns[i].len, COMM_MAX_REQUEST + 1 - c->conns[i].len);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (r < 0) {
            pyc__gw_log("communication port: %s: request dropped", strerror(errno));
            drop(c, i);
            return;
        }
        if (r > 0) {
            c->conns[i].len += (size_t)r;
            if (c->conns[i].len > COMM_MAX_REQUEST) {
                pyc__gw_log("communication port: a request of more than %d bytes: dropped", COMM_MAX_REQUEST);
                drop(c, i);
                return;
            }
            continue;
        }
        json_error_t jerr;
        json_t *req = c->conns[i].len > 0 ? json_loadb(c->conns[i].buf, c->conns[i].len, 0, &jerr) : NULL;
        if (json_is_object(req))
            on_request(ctx, req);
        else if (c->conns[i].len > 0)
            pyc__gw_log("communication port: a request that is not a JSON object (%zu bytes): ignored",
                        c->conns[i].len);
        json_decref(req);
        drop(c, i);
        return;
    }
}

void
pyc__gw_comm_serve(pyc__gw_comm_t *c, const struct pollfd *fds, int n, double now,
                   void (*on_request)(void *ctx, json_t *req), void *ctx)
{
    for (int k = 0; k < n; k++) {
        if (fds[k].revents == 0)
            continue;
        if (fds[k].fd == c->lfd) {
            int fd;
            while (c->lfd >= 0 && (fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
                int slot = -1;
                for (int i = 0; i < PYC__GW_MAX_CONNS && slot < 0; i++)
                    slot = c->conns[i].fd < 0 ? i : -1;
                if (slot < 0) {
                    pyc__gw_log("communication port: %d connections are open already: one refused", PYC__GW_MAX_CONNS);
                    close(fd);
                    continue;
                }
                c->conns[slot].fd = fd;
                c->conns[slot].deadline = now + COMM_DEADLINE_S;
            }
            continue;
        }
        for (int i = 0; i < PYC__GW_MAX_CONNS; i++) {
            if (c->conns[i].fd == fds[k].fd)
                read_conn(c, i, on_request, ctx);
        }
    }
    for (int i = 0; i < PYC__GW_MAX_CONNS; i++) {
        if (c->conns[i].fd >= 0 && c->conns[i].deadline <= now) {
            pyc__gw_log("communication port: a request not complete within %g s: dropped", COMM_DEADLINE_S);
            drop(c, i);
        }
    }
}

void
pyc__gw_comm_close(pyc__gw_comm_t *c)
{
    if (c->lfd >= 0)
        close(c->lfd);
    c->lfd = -1;
    for (int i = 0; i < PYC__GW_MAX_CONNS; i++) {
        if (c->conns[i].fd >= 0)
            drop(c, i);
    }
}
