/*
 * clientint.h -- what the files of libpycclient share and no file outside src/client may use (error.h's
 * pyc__ rule): the socket address of a ZMTP endpoint, which zmtp_endpoint.c parses and zmtp.c connects to, and
 * the connection's state, which zmtp.c drives and zmtp_queue.c's output queue fills and empties.
 */
#ifndef PYC_CLIENTINT_H
#define PYC_CLIENTINT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "buf.h"
#include "error.h"
#include "zmtp.h"
#include "zmtp_curve.h"

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

/* Our greeting and READY (64 + 9 + a READY body of at most 6 + 22 + 13 + 255 bytes), or with CURVE our
 * greeting and HELLO (64 + 2 + 200), then INITIATE (9 + PYC_CURVE_INITIATE_MAX). */
#define HS_MAX 1024

enum { C_WAIT, C_CONNECTING, C_HANDSHAKE, C_UP, C_FAILED };

/* CURVE: a frame queued before the handshake was done: borrowed bytes (ext) or a copy (own). */
typedef struct cframe {
    const unsigned char *ext;
    unsigned char *own;
    size_t len;
    int flags;                   /* PYC_CURVE_MORE */
    bool first;
} cframe_t;

/* A piece of queued output: borrowed bytes (ext), or bytes at obuf.data + off. */
typedef struct seg {
    const unsigned char *ext;
    size_t off, len;
    bool first;                  /* the first piece of a message */
} seg_t;

struct pyc_zmtp {
    int type;
    char *endpoint;
    pyc__zmtp_addr_t addr;       /* what endpoint names, parsed once by pyc_zmtp_new */
    socklen_t addrlen;
    int fd, state;
    double retry_at;             /* C_WAIT: when to connect again, in pyc_now_s seconds */
    int retry_ms;
    unsigned char hs[HS_MAX];    /* our greeting and READY, written first on every connection */
    size_t hs_len, hs_off;
    pyc_zmtp_dec_t *dec;
    /* output: segs[cur..nseg) are unwritten, the first of them from cur_off on; pending counts their bytes */
    pyc_buf_t obuf;
    seg_t *segs;
    size_t nseg, segcap, cur, cur_off, pending;
    bool in_msg;                 /* the caller's last send had PYC_ZMTP_MORE */
    bool discard;                /* the open message was dropped with a lost connection: drop its rest too */
    bool pong_due;               /* a PONG waits for the open message to end */
    unsigned char pong_ctx[16];
    size_t pong_len;
    unsigned char *rbuf;
    pyc_zmtp_msg_t *head, *tail; /* received messages */
    pyc_error_t failure;         /* C_FAILED: why */
    pyc_zmtp_curve_t *curve;     /* CURVE's keys and nonces (owned), or NULL for NULL security */
    unsigned char props[PYC_ZMTP_MAX_PROPERTIES];   /* CURVE: INITIATE's metadata */
    size_t props_len;
    cframe_t *cq;                /* CURVE: frames waiting for the handshake; their bytes count in pending */
    size_t ncq, cqcap;
    bool accepted;               /* made from an accepted socket (pyc_zmtp_new_fd): never reconnects */
};


/* ---- zmtp_queue.c: the output queue (see zmtp.c) --------------------------------------------------------- */

/* Appends n bytes to the output: copied into obuf, or borrowed.  Returns 0 or -1 when memory (or the cap)
 * runs out. */
int pyc__zmtp_queue(pyc_zmtp_t *self, const void *p, size_t n, bool borrow, bool first);

/* CURVE: seals one frame (flags: PYC_CURVE_*) into obuf as a MESSAGE, after its frame header. */
int pyc__zmtp_queue_sealed(pyc_zmtp_t *self, const void *p, size_t n, int flags, bool first);

/* CURVE: keeps a frame unsealed until the handshake is done (a copy, or borrowed); cq_seal seals them all in
 * order; cq_bytes counts their bytes. */
int pyc__zmtp_cq_add(pyc_zmtp_t *self, const pyc_frame_t *f, int flags, bool borrow, bool first);
int pyc__zmtp_cq_seal(pyc_zmtp_t *self);
size_t pyc__zmtp_cq_bytes(const pyc_zmtp_t *self);

/* Queues a command or a one-frame message from our side (subscription, PONG) between the caller's messages;
 * queue_pong queues the PONG that is due. */
int pyc__zmtp_queue_own(pyc_zmtp_t *self, const unsigned char *body, size_t n, bool command);
int pyc__zmtp_queue_pong(pyc_zmtp_t *self);

/* Moves the output position on by w written bytes. */
void pyc__zmtp_advance(pyc_zmtp_t *self, size_t w);

/* Skips the rest of the message whose bytes were being written when the connection was lost. */
void pyc__zmtp_drop_partial(pyc_zmtp_t *self);

#endif
