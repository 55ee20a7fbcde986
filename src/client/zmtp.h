/*
 * zmtp.h -- a ZeroMQ peer without libzmq: the client side of ZMTP 3.0 over tcp:// and ipc://, with the NULL
 * or CURVE security mechanism, for the `pyc` command.
 *
 * Why it exists: `pyc run NAME x` is a few milliseconds end to end, and linking libzmq alone cost about 2 ms
 * of it (loading libzmq, libstdc++, libsodium, libpgm, libnorm, the Kerberos libraries and libbsd), plus
 * 1-2 ms to start and stop ZeroMQ's I/O threads.  A Jupyter client needs only a small part of ZeroMQ: one
 * outgoing connection per socket, the NULL mechanism, and DEALER, SUB and REQ framing.  The kernel keeps
 * libzmq; this module only talks to it.
 *
 * The wire subset (ZeroMQ RFC 23, ZMTP 3.0; every number is big-endian):
 *   greeting  64 bytes: signature FF 00 00 00 00 00 00 00 00 7F, version 03 00, mechanism "NULL" and 16 NULs,
 *             as-server 00, 31 NULs.  A peer's greeting is accepted when byte 0 is FF, bit 0 of byte 9 is set
 *             (what libzmq checks), its major version is 3 or more (any minor: libzmq 4.3 answers 3.1 peers
 *             and 3.0 peers alike) and its mechanism is exactly "NULL" (or "CURVE" on a CURVE connection).
 *   frame     flags (bit 0 MORE, bit 1 LONG, bit 2 COMMAND; bits 3-7 must be 0), then the size in 1 byte, or
 *             in 8 bytes when LONG, then the body.  We send LONG only above 255 bytes; we accept either.
 *   READY     a command: "\5READY" then properties, each name-length (1 byte), name, value-length (4 bytes),
 *             value.  Ours: Socket-Type (DEALER, SUB or REQ) and, when given, Identity.  The peer's first
 *             command must be READY (or ERROR, whose reason we report) with a Socket-Type we may talk to:
 *             DEALER <-> ROUTER, DEALER or REP; SUB <-> PUB or XPUB; REQ <-> ROUTER or REP.
 *   SUB       a SUB subscribes with a data frame: 01 followed by the topic (ZMTP 3.0; the SUBSCRIBE command is
 *             3.1).  Since we announce 3.0, libzmq's PUB takes that frame as a subscription.
 *   PING      after READY, a PING (TTL and up to 16 bytes of context) is answered with a PONG carrying the
 *             context; every other command is ignored, as libzmq does.  ERROR closes the connection.
 * Nothing but our greeting and READY is written before the peer's READY has come: libzmq treats a data frame
 * that arrives before it has sent its own READY as a protocol error.
 *
 * Two layers:
 *   - the encoder and decoder (pyc_zmtp_dec_*, zmtp_codec.c): no sockets; bytes in, in any chunking, events
 *     out (the handshake is done, a whole multipart message, a PING to answer).  Every byte is untrusted:
 *     sizes are capped before any allocation, malformed input stops the decoder with one sentence.
 *     tests/fuzz/fuzz_zmtp.c drives it, and tests/fuzz/corpus/zmtp/NAME.err lists the refusals it must make;
 *   - the connection (pyc_zmtp_*, zmtp.c, with zmtp_endpoint.c for the endpoints): one non-blocking socket to
 *     one peer, single-threaded, driven by the caller's poll(2) loop.  It connects in the background and
 *     reconnects after a refusal or a lost connection, as libzmq does (10 ms, doubling to 100 ms), so that a
 *     client may be made before its kernel listens.  A protocol error is not retried: the connection fails
 *     for good with the reason.
 *
 * CURVE: a connection file with curve keys makes every connection speak CurveZMQ (RFC 26; zmtp_curve.h): the
 * greeting names CURVE, HELLO/WELCOME/INITIATE/READY replace READY, and every frame travels sealed in a
 * MESSAGE.  It is CurveZMQ written a second time (libzmq has it), about 300 lines over libsodium, rather than
 * dlopen'ing libzmq for such sessions: the NULL path stays as it was, and pyc stays one small program.
 */
#ifndef PYC_ZMTP_H
#define PYC_ZMTP_H

#include <stdbool.h>
#include <stddef.h>

#include "auth.h"
#include "error.h"

/* The socket type we announce (the peer checks it, and so do we); PYC_ZMTP_NTYPES counts them. */
enum { PYC_ZMTP_DEALER, PYC_ZMTP_SUB, PYC_ZMTP_REQ, PYC_ZMTP_NTYPES };

#define PYC_ZMTP_GREETING_LEN 64

/* The largest command body accepted from a peer (a READY with all of libzmq's properties is < 1 KB). */
#define PYC_ZMTP_MAX_COMMAND 65536

/* The longest identity a READY may carry (the property is limited to 255 bytes by libzmq). */
#define PYC_ZMTP_MAX_IDENTITY 255

/* A received multipart message.  frames[0..n) are views into storage the message owns; the data of an empty
 * frame is a valid pointer too.  Free with pyc_zmtp_msg_destroy. */
typedef struct pyc_zmtp_msg {
    pyc_frame_t *frames;
    size_t n;
    size_t cap;                  /* internal: room in frames */
    size_t bytes;                /* internal: the sum of the frame sizes */
    struct pyc_zmtp_msg *next;   /* internal: the connection's queue */
} pyc_zmtp_msg_t;

/* Frees the message and its frames; sets *msg_p to NULL.  NULL-safe.  Also usable as a plain void (*)(void *)
 * through pyc_zmtp_msg_free. */
void pyc_zmtp_msg_destroy(pyc_zmtp_msg_t **msg_p);
void pyc_zmtp_msg_free(void *msg);

/* ---- encoding ------------------------------------------------------------------------------------------- */

/* Writes our 64-byte greeting, with the mechanism CURVE or NULL, into out. */
void pyc_zmtp_greeting(unsigned char out[PYC_ZMTP_GREETING_LEN], bool curve);

/* The most bytes pyc_zmtp_properties writes. */
#define PYC_ZMTP_MAX_PROPERTIES ((1 + 11 + 4 + 6) + (1 + 8 + 4 + PYC_ZMTP_MAX_IDENTITY))

/* Writes the properties of our READY (NULL) or INITIATE (CURVE) -- Socket-Type, and Identity when given --
 * into out (PYC_ZMTP_MAX_PROPERTIES bytes).  Returns their length, or -1 as pyc_zmtp_ready. */
int pyc_zmtp_properties(unsigned char *out, int type, const void *identity, size_t idlen);

/* Writes the header of a frame of `size` bytes (flags and size) into out.  Returns its length: 2, or 9 when
 * size > 255. */
size_t pyc_zmtp_frame_header(unsigned char out[9], size_t size, bool more, bool command);

/* Writes the whole READY command frame (header included) for a socket of `type` with the given identity
 * (NULL or idlen 0: no Identity property) into out.  Returns its length, or -1 when idlen is over
 * PYC_ZMTP_MAX_IDENTITY, type is unknown, or cap is too small (400 bytes always do). */
int pyc_zmtp_ready(unsigned char *out, size_t cap, int type, const void *identity, size_t idlen);

/* ---- decoding ------------------------------------------------------------------------------------------- */

enum {
    PYC_ZMTP_EV_NONE = 0,        /* every byte given was taken and nothing is complete: give more */
    PYC_ZMTP_EV_READY,           /* the peer's greeting and READY were accepted: messages may flow */
    PYC_ZMTP_EV_MSG,             /* a whole message, in ev->msg */
    PYC_ZMTP_EV_PING,            /* a PING: answer with a PONG carrying ev->ping_ctx */
    PYC_ZMTP_EV_WELCOME,         /* CURVE: the server's WELCOME was accepted: send INITIATE */
};

typedef struct pyc_zmtp_event {
    int type;                    /* PYC_ZMTP_EV_* */
    pyc_zmtp_msg_t *msg;         /* EV_MSG: the message, now the caller's */
    unsigned char ping_ctx[16];  /* EV_PING: the context to echo, ping_len bytes */
    size_t ping_len;
} pyc_zmtp_event_t;

typedef struct pyc_zmtp_dec pyc_zmtp_dec_t;

/* A decoder for the peer of a socket of our `type`.  max_msg caps the bytes of one message (all its frames
 * together) and max_frames its frames; a frame that would pass either is a protocol error, refused before
 * anything is allocated for it.  Returns NULL with err when memory runs out or type is unknown. */
pyc_zmtp_dec_t *pyc_zmtp_dec_new(int type, size_t max_msg, size_t max_frames, pyc_error_t *err);

/* Frees the decoder and any message half received; sets *self_p to NULL.  NULL-safe. */
void pyc_zmtp_dec_destroy(pyc_zmtp_dec_t **self_p);

/* Makes the decoder expect CURVE, with curve's keys and nonces (borrowed; it must outlive the decoder, and
 * its HELLO must be the one sent on each connection).  NULL: the NULL mechanism again. */
struct pyc_zmtp_curve;
void pyc_zmtp_dec_set_curve(pyc_zmtp_dec_t *self, struct pyc_zmtp_curve *curve);

/* Makes the decoder new again, for a new connection: a greeting comes first, a half-received message is
 * dropped, and a failed decoder works again. */
void pyc_zmtp_dec_reset(pyc_zmtp_dec_t *self);

/* Takes bytes from p[0..n) until one event is complete or every byte is taken; *used says how many were
 * taken (call again with the rest after an event).  Returns the event's type (>= 0) with *ev filled, or -1
 * with err when the bytes break the protocol; the decoder then refuses everything with the same sentence
 * until pyc_zmtp_dec_reset. */
int pyc_zmtp_dec_feed(pyc_zmtp_dec_t *self, const void *p, size_t n, size_t *used, pyc_zmtp_event_t *ev,
                      pyc_error_t *err);

/* For reading a large frame straight into its storage: when the decoder is inside the body of a data frame,
 * sets *dst to where the next bytes of the body go and returns how many the body still lacks; otherwise
 * returns 0.  After writing k of them (0 < k <= that count) at *dst, call pyc_zmtp_dec_commit. */
size_t pyc_zmtp_dec_body(pyc_zmtp_dec_t *self, void **dst);

/* Accounts for k bytes written at the place pyc_zmtp_dec_body gave.  Returns like pyc_zmtp_dec_feed. */
int pyc_zmtp_dec_commit(pyc_zmtp_dec_t *self, size_t k, pyc_zmtp_event_t *ev, pyc_error_t *err);

/* ---- the connection -------------------------------------------------------------------------------------- */

typedef struct pyc_zmtp pyc_zmtp_t;

/* Flags of pyc_zmtp_send. */
enum {
    PYC_ZMTP_MORE = 1,           /* the message goes on: more frames follow in the next call */
    PYC_ZMTP_BORROW = 2,         /* the frames' bytes are not copied: the caller keeps them valid and unchanged
                                  * until pyc_zmtp_pending says 0 or the connection is destroyed */
};

/* Connects to endpoint, "tcp://ADDRESS:PORT" (IPv4, IPv6 bare or in brackets, or a host name, resolved to
 * IPv4 first as libzmq does) or "ipc://PATH" (a Unix socket; a leading '@' names the abstract namespace, as
 * in libzmq), as a socket of `type` with the given routing identity (NULL: none; at most
 * PYC_ZMTP_MAX_IDENTITY bytes).  Never waits: a refused connection is tried again in the background.
 * max_msg and max_frames cap what is received (see pyc_zmtp_dec_new).  Returns NULL with err for an endpoint
 * that cannot be parsed, a socket that cannot be made, or no memory. */
pyc_zmtp_t *pyc_zmtp_new(const char *endpoint, int type, const char *identity, size_t max_msg, size_t max_frames,
                         pyc_error_t *err);

/* CURVE keys: the server's long-term public key and ours, 32 bytes each. */
typedef struct pyc_zmtp_keys {
    unsigned char server[32], public_key[32], secret_key[32];
} pyc_zmtp_keys_t;

/* As pyc_zmtp_new, speaking CurveZMQ with keys (copied) when keys is not NULL.  Messages sent before the
 * handshake is done wait unsealed and are sealed when it is; a CURVE connection that is lost drops what it had
 * sealed and not written (it was sealed for that connection's keys). */
pyc_zmtp_t *pyc_zmtp_new_curve(const char *endpoint, int type, const char *identity, size_t max_msg,
                               size_t max_frames, const pyc_zmtp_keys_t *keys, pyc_error_t *err);

/* As pyc_zmtp_new (NULL security, no identity), on a connection the caller accepted on a listening TCP socket
 * (fd, taken over; made non-blocking here).  The handshake starts at once; when the peer goes, the connection
 * fails for good instead of reconnecting.  For `pyc new`'s registration socket, which the kernel's DEALER
 * connects to (we answer as a DEALER, which ZMTP allows).  Returns NULL with err (fd is then closed by the
 * caller). */
pyc_zmtp_t *pyc_zmtp_new_fd(int fd, int type, size_t max_msg, size_t max_frames, pyc_error_t *err);

/* Closes the connection (what is unsent is dropped) and frees everything, received messages included; sets
 * *self_p to NULL.  NULL-safe. */
void pyc_zmtp_destroy(pyc_zmtp_t **self_p);

/* Queues frames[0..n) as (part of) one message and writes as much as the socket takes now; the rest goes out
 * from pyc_zmtp_handle.  Messages queued before the connection is up are kept until it is.  When a connection
 * is lost, a message of which some bytes were written is dropped whole; the ones behind it are kept.
 * Returns 0, or -1 with err when memory runs out or the connection has failed for good. */
int pyc_zmtp_send(pyc_zmtp_t *self, const pyc_frame_t *frames, size_t n, int flags, pyc_error_t *err);

/* The file descriptor to poll, and the events to poll it for (POLLIN, and POLLOUT while connecting or while
 * output waits).  fd is -1 while the connection waits to be tried again, and after it failed. */
int pyc_zmtp_fd(const pyc_zmtp_t *self);
short pyc_zmtp_events(const pyc_zmtp_t *self);

/* Milliseconds until pyc_zmtp_handle wants to be called even if the fd shows nothing (the next connection
 * attempt): 0 when it is due, -1 when nothing is due. */
int pyc_zmtp_wake_ms(const pyc_zmtp_t *self);

/* Does what poll's answer allows (revents: the fd's revents, or 0 after a timeout): finishes a connection,
 * writes, reads and decodes all that is there, or tries to connect again when that is due.  Never blocks.
 * Returns 0, or -1 with err when the connection failed for good (the peer broke the protocol, refused us with
 * an ERROR, or the socket failed in a way that is not worth another try); a lost connection is not an
 * error. */
int pyc_zmtp_handle(pyc_zmtp_t *self, short revents, pyc_error_t *err);

/* True when a whole message has been received and waits in pyc_zmtp_recv: a poll loop must not sleep then,
 * since the socket may have nothing more to say. */
bool pyc_zmtp_has_msg(const pyc_zmtp_t *self);

/* The oldest received message (the caller's now), or NULL when none waits. */
pyc_zmtp_msg_t *pyc_zmtp_recv(pyc_zmtp_t *self);

/* Bytes of queued messages not yet written. */
size_t pyc_zmtp_pending(const pyc_zmtp_t *self);

/* True between the peer's READY and the loss of the connection. */
bool pyc_zmtp_is_up(const pyc_zmtp_t *self);

#endif
