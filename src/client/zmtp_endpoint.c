/*
 * zmtp_endpoint.c -- endpoints as libzmq reads them, turned into the socket address zmtp.c connects to:
 *
 *   tcp://ADDRESS:PORT   an IPv4 address, an IPv6 address (bare or in brackets), or a host name, which is
 *                        resolved IPv4 first, as libzmq without ZMQ_IPV6 does: "localhost" is the 127.0.0.1
 *                        the kernel listens on, not ::1;
 *   ipc://PATH           a Unix socket; a leading '@' names the abstract namespace, as in libzmq.
 *
 * An endpoint is parsed (and a host name resolved) once, by pyc_zmtp_new; reconnections reuse the address.
 */
#include "clientint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int
pyc__zmtp_endpoint(const char *ep, pyc__zmtp_addr_t *addr, socklen_t *addrlen, pyc_error_t *err)
{
    memset(addr, 0, sizeof *addr);
    if (strncmp(ep, "ipc://", 6) == 0) {
        const char *path = ep + 6;
        size_t len = strlen(path);
        if (len == 0 || (path[0] == '@' && len == 1))
            return pyc_error_set(err, "the endpoint %s has no path", ep);
        if (len >= sizeof addr->un.sun_path)
            return pyc_error_set(err, "the path of %s is longer than %zu bytes", ep, sizeof addr->un.sun_path - 1);
        addr->un.sun_family = AF_UNIX;
        memcpy(addr->un.sun_path, path, len);
        if (path[0] == '@') {
            /* libzmq's abstract namespace: a NUL for the '@', and the address is exactly the name. */
            addr->un.sun_path[0] = '\0';
            *addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        } else {
            *addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
        }
        return 0;
    }
    if (strncmp(ep, "tcp://", 6) != 0)
        return pyc_error_set(err, "the endpoint %s is neither tcp:// nor ipc://", ep);
    const char *hp = ep + 6, *colon = strrchr(hp, ':');
    char host[256], *end;
    if (colon == NULL || colon == hp)
        return pyc_error_set(err, "the endpoint %s has no address:port", ep);
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 || port == 0 || port > 65535)
        return pyc_error_set(err, "the endpoint %s has no valid port", ep);
    size_t hl = (size_t)(colon - hp);
    if (hl >= 2 && hp[0] == '[' && hp[hl - 1] == ']') {
        hp++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof host)
        return pyc_error_set(err, "the endpoint %s has no valid address", ep);
    memcpy(host, hp, hl);
    host[hl] = '\0';
    if (inet_pton(AF_INET, host, &addr->in4.sin_addr) == 1) {
        addr->in4.sin_family = AF_INET;
        addr->in4.sin_port = htons((uint16_t)port);
        *addrlen = sizeof addr->in4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &addr->in6.sin6_addr) == 1) {
        addr->in6.sin6_family = AF_INET6;
        addr->in6.sin6_port = htons((uint16_t)port);
        *addrlen = sizeof addr->in6;
        return 0;
    }
    /* A host name, or an IPv6 address with a zone ("fe80::1%eth0"): the resolver, which only numbers skip.
     * IPv4 first, as libzmq (without ZMQ_IPV6) has it: "localhost" is the kernel's 127.0.0.1, not ::1. */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int gr = getaddrinfo(host, colon + 1, &hints, &res);
    if (gr != 0) {
        hints.ai_family = AF_UNSPEC;
        gr = getaddrinfo(host, colon + 1, &hints, &res);
    }
    if (gr != 0 || res == NULL)
        return pyc_error_set(err, "cannot resolve %s: %s", host, gr != 0 ? gai_strerror(gr) : "no address");
    if (res->ai_addrlen > sizeof *addr) {
        freeaddrinfo(res);
        return pyc_error_set(err, "cannot resolve %s: an address of an unknown kind", host);
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}
