/*
 * gatewayint.h -- what the files of src/gateway share: the communication port (commport.c) and the TCP
 * helpers the launcher (launcher.c) uses for it, for the response address and for picking ports.
 */
#ifndef PYC_GATEWAYINT_H
#define PYC_GATEWAYINT_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>

#include "error.h"

/* Makes a TCP socket bound to ip:port (port 0: one the system gives), listening when listen_too, CLOEXEC and
 * non-blocking.  Returns the descriptor and the bound port in *bound, or -1 with errno set (EADDRINUSE for
 * a port in use) and err. */
int pyc__gw_bind(const char *ip, int port, bool listen_too, int *bound, pyc_error_t *err);

/* A port of [lo, hi] (both 0: any) that binds on ip: random tries, at most `tries`, then every port of the
 * range in turn.  Returns the descriptor (listening when listen_too) and the port in *bound, or -1 with err. */
int pyc__gw_bind_in_range(const char *ip, int lo, int hi, int tries, bool listen_too, int *bound,
                          pyc_error_t *err);

/* The communication port: a listening socket and up to PYC__GW_MAX_CONNS connections, each of which sends
 * one JSON object and closes its side; requests bigger than 64 KiB, or slower than 2 s, are dropped. */
#define PYC__GW_MAX_CONNS 8
typedef struct pyc__gw_comm {
    int lfd;                     /* -1 once closed */
    int port;
    struct {
        int fd;                  /* -1: a free slot */
        double deadline;
        char *buf;
        size_t len;
    } conns[PYC__GW_MAX_CONNS];
} pyc__gw_comm_t;

/* Binds and listens in [lo, hi] on ip.  Returns 0, or -1 with err. */
int pyc__gw_comm_open(pyc__gw_comm_t *c, const char *ip, int lo, int hi, int tries, pyc_error_t *err);

/* Appends the descriptors to poll to fds (at most cap); returns how many. */
int pyc__gw_comm_pollfds(const pyc__gw_comm_t *c, struct pollfd *fds, int cap);

/* The milliseconds until the earliest connection's deadline, or -1 when none waits. */
int pyc__gw_comm_timeout_ms(const pyc__gw_comm_t *c, double now);

/* Serves what fds (from pyc__gw_comm_pollfds, after poll) say is ready: accepts, reads, and for each request
 * that is complete calls on_request with the parsed object (borrowed).  Drops the connections past their
 * deadline.  Never fails: what goes wrong is logged. */
void pyc__gw_comm_serve(pyc__gw_comm_t *c, const struct pollfd *fds, int n, double now,
                        void (*on_request)(void *ctx, json_t *req), void *ctx);

/* Stops listening at once (a connection is then refused), and drops the open connections.  Idempotent. */
void pyc__gw_comm_close(pyc__gw_comm_t *c);

/* Writes "pyc-kernel gateway-launch: " and the formatted line to stderr. */
void pyc__gw_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
