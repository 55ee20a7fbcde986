/*
 * zap.h -- CURVE on the kernel's sockets: the checks a CURVE connection file gets before anything is bound,
 * the socket options that make a socket a CURVE server, and the allow-list's ZAP handler.
 *
 * A connection file with curve_publickey and curve_secretkey (connfile.h) makes every one of the five sockets
 * a CURVE server with that key pair: a client must know the public key to connect at all, and what it sends
 * and receives is encrypted (CurveZMQ, ZeroMQ RFC 26); HMAC signing goes on as before inside.  With an
 * allow-list (curve_allowed_clients, PYC_CURVE_ALLOWED_CLIENTS), a ZAP handler (ZeroMQ RFC 27) in a thread of
 * its own answers libzmq's question "may this client key connect?" for every new connection: yes for the file's
 * own public key (the key pair Jupyter's clients present, as they read the same file) and for the listed keys,
 * no for the rest; the heartbeat socket lets any CURVE client in (its ZAP domain is "heartbeat"), because
 * jupyter_client's heartbeat connects with a throwaway key pair, and it only echoes bytes.
 *
 * The handler is one thread and a REP socket bound to inproc://zeromq.zap.01 in the server's context, started
 * before any socket is bound.  It ends when the context is terminated (its receive fails with ETERM); join it
 * after zmq_ctx_term.  czmq's zauth would do the same with a second library and an actor per socket.
 */
#ifndef PYC_ZAP_H
#define PYC_ZAP_H

#include <stdbool.h>

#include "connfile.h"

typedef struct pyc_zap pyc_zap_t;

/* Whether this libzmq was built with CURVE (zmq_has("curve")). */
bool pyc_zap_has_curve(void);

/* Checks that cf's CURVE keys can be used: libzmq has CURVE, and curve_publickey is the public key of
 * curve_secretkey (a mismatched pair would make every client's handshake fail without a word).  A connection
 * without CURVE passes.  Returns 0, or -1 with err saying what is wrong. */
int pyc_zap_check(const pyc_connfile_t *cf, pyc_error_t *err);

/* Makes a new key pair into pub and sec (Z85 text, NUL-terminated).  Returns 0 or -1 with err. */
int pyc_zap_keypair(char pub[PYC_CURVE_KEY_TEXT + 1], char sec[PYC_CURVE_KEY_TEXT + 1], pyc_error_t *err);

/* Makes sock, not yet bound, a CURVE server with cf's key pair, whose connections the ZAP handler (when
 * there is one) sees under the ZAP domain `domain` (the channel's name).  Returns 0 or -1 with err. */
int pyc_zap_secure(void *sock, const pyc_connfile_t *cf, const char *domain, pyc_error_t *err);

/* Binds the ZAP handler in context zctx and starts its thread, allowing cf's own public key and cf's
 * allow-list (copied).  Returns the handler, or NULL with err (another handler is bound in the context, no
 * thread, no memory). */
pyc_zap_t *pyc_zap_start(void *zctx, const pyc_connfile_t *cf, pyc_error_t *err);

/* Joins the handler's thread, which ends once the context is terminated, and frees it; sets *self_p to NULL.
 * NULL-safe.  Call after zmq_ctx_term. */
void pyc_zap_join(pyc_zap_t **self_p);

/* How many connections the handler has refused so far (tests, logs). */
unsigned long pyc_zap_refused(const pyc_zap_t *self);

#endif
