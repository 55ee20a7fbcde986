/*
 * clientint.h -- what the files of libpycclient share and no file outside src/client may use (error.h's
 * pyc__ rule).  Today that is the socket address of a ZMTP endpoint, which zmtp_endpoint.c parses and zmtp.c
 * connects to.
 */
#ifndef PYC_CLIENTINT_H
#define PYC_CLIENTINT_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "error.h"

/* Large enough for every address an endpoint may name. */
typedef union pyc__zmtp_addr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    struct sockaddr_un un;
} pyc__zmtp_addr_t;

/* Parses endpoint ("tcp://ADDRESS:PORT" or "ipc://PATH", see zmtp_endpoint.c) into *addr and *addrlen,
 * resolving a host name.  Returns 0, or -1 with err saying what is wrong with it (or why it did not
 * resolve). */
int pyc__zmtp_endpoint(const char *endpoint, pyc__zmtp_addr_t *addr, socklen_t *addrlen, pyc_error_t *err);

#endif
