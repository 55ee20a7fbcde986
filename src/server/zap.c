/*
 * zap.c -- CURVE server options and the allow-list's ZAP handler; see zap.h.
 *
 * The handler follows ZeroMQ RFC 27 (ZAP 1.0).  libzmq sends, for each CURVE handshake that reaches
 * INITIATE, a request of at least seven frames to inproc://zeromq.zap.01: version "1.0", request id, domain,
 * address, routing id, mechanism "CURVE", and the client's 32-byte long-term public key; the REP socket strips
 * the envelope.  The reply is version, request id, status code ("200" lets the client in, "400" refuses it,
 * "500" says the request was malformed), status text, user id and empty metadata.  libzmq waits for the reply
 * before it answers the client, so a refused client gets an ERROR command and never a READY: nothing it sent
 * reaches the kernel.  One reply per request, always (a REP socket that skips one is stuck), and nothing
 * allocated per request: a client that connects in a loop costs a lookup in a short list.
 */
#include "zap.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_FRAMES 7             /* the frames of a CURVE request; more are read and dropped */

struct pyc_zap {
    void *sock;
    pthread_t th;
    unsigned char own[PYC_CURVE_KEY_BYTES];
    unsigned char (*allowed)[PYC_CURVE_KEY_BYTES];
    size_t nallowed;
    unsigned long refused;       /* read with __atomic_load_n: the handler thread counts */
};

/* Refusals are logged, at most a few lines a second: any peer can cause them. */
static pyc_log_limit_t refused_log = PYC_LOG_LIMIT_INIT;

bool
pyc_zap_has_curve(void)
{
    return zmq_has("curve") != 0;
}

int
pyc_zap_check(const pyc_connfile_t *cf, pyc_error_t *err)
{
    char derived[PYC_CURVE_KEY_TEXT + 1];
    if (!pyc_connfile_curve(cf))
        return 0;
    if (!pyc_zap_has_curve())
        return pyc_error_code(err, PYC_EINVAL, "the connection file asks for CURVE encryption (curve_publickey, "
                              "curve_secretkey), but this libzmq %d.%d.%d was built without CURVE: refused",
                              ZMQ_VERSION_MAJOR, ZMQ_VERSION_MINOR, ZMQ_VERSION_PATCH);
    if (zmq_curve_public(derived, cf->curve_secretkey) != 0)
        return pyc_error_code(err, PYC_EINVAL, "curve_secretkey cannot be used: %s", zmq_strerror(zmq_errno()));
    if (strcmp(derived, cf->curve_publickey) != 0)
        return pyc_error_code(err, PYC_EINVAL, "curve_publickey is not the public key of curve_secretkey (its "
                              "public key is %s): clients could never connect", derived);
    return 0;
}

int
pyc_zap_keypair(char pub[PYC_CURVE_KEY_TEXT + 1], char sec[PYC_CURVE_KEY_TEXT + 1], pyc_error_t *err)
{
    if (zmq_curve_keypair(pub, sec) != 0)
        return pyc_error_set(err, "cannot make a CURVE key pair: %s", zmq_strerror(zmq_errno()));
    return 0;
}

int
pyc_zap_secure(void *sock, const pyc_connfile_t *cf, const char *domain, pyc_error_t *err)
{
    int one = 1;
    /* 41 bytes: Z85 text with its NUL, which libzmq takes as text. */
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, cf->curve_secretkey, PYC_CURVE_KEY_TEXT + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, cf->curve_publickey, PYC_CURVE_KEY_TEXT + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0)
        return pyc_error_set(err, "cannot make the %s socket a CURVE server: %s", domain, zmq_strerror(zmq_errno()));
    return 0;
}

static bool
is_allowed(const pyc_zap_t *z, const unsigned char *key)
{
    if (memcmp(key, z->own, PYC_CURVE_KEY_BYTES) == 0)
        return true;
    for (size_t i = 0; i < z->nallowed; i++) {
        if (memcmp(key, z->allowed[i], PYC_CURVE_KEY_BYTES) == 0)
            return true;
    }
    return false;
}

static bool
frame_is(zmq_msg_t *m, const char *s)
{
    return zmq_msg_size(m) == strlen(s) && memcmp(zmq_msg_data(m), s, strlen(s)) == 0;
}

/* Copies a frame into out as a C string (cut to cap - 1 bytes), for log lines. */
static const char *
frame_text(zmq_msg_t *m, char *out, size_t cap)
{
    size_t n = zmq_msg_size(m) < cap - 1 ? zmq_msg_size(m) : cap - 1;
    memcpy(out, zmq_msg_data(m), n);
    out[n] = '\0';
    return out;
}

/* Decides one request of n frames (f[1] the request id when n > 1).  Returns the status code and sets *text
 * and the user id (the client key's Z85 text, or ""). */
static const char *
decide(pyc_zap_t *z, zmq_msg_t *f, int n, const char **text, char user[PYC_CURVE_KEY_TEXT + 1])
{
    user[0] = '\0';
    if (n < 6 || !frame_is(&f[0], "1.0")) {
        *text = "malformed ZAP request";
        return "500";
    }
    if (!frame_is(&f[5], "CURVE") || n < 7 || zmq_msg_size(&f[6]) != PYC_CURVE_KEY_BYTES) {
        *text = "only CURVE clients may connect";
        return "400";
    }
    const unsigned char *key = zmq_msg_data(&f[6]);
    pyc_z85_encode(key, PYC_CURVE_KEY_BYTES, user);
    if (frame_is(&f[2], "heartbeat") || is_allowed(z, key)) {
        *text = "OK";
        return "200";
    }
    char address[64], domain[32];
    __atomic_add_fetch(&z->refused, 1, __ATOMIC_RELAXED);
    pyc_log_limited(&refused_log, "%s: refused a CURVE client from %s: its key %s is not on the allow-list",
                    frame_text(&f[2], domain, sizeof domain), frame_text(&f[3], address, sizeof address), user);
    *text = "client key not allowed";
    return "400";
}

static void *
zap_main(void *arg)
{
    pyc_zap_t *z = arg;
    zmq_msg_t f[ZAP_FRAMES + 1];
    for (;;) {
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t *m = &f[n < ZAP_FRAMES ? n : ZAP_FRAMES];
            zmq_msg_init(m);
            if (zmq_msg_recv(m, z->sock, 0) < 0) {
                zmq_msg_close(m);
                if (zmq_errno() == EINTR)
                    continue;
                /* ETERM: the context is being terminated; what was received of a request goes too. */
                for (int i = 0; i < n && i < ZAP_FRAMES; i++)
                    zmq_msg_close(&f[i]);
                zmq_close(z->sock);
                return NULL;
            }
            more = zmq_msg_more(m);
            if (n >= ZAP_FRAMES)
                zmq_msg_close(m);
            n++;
        }
        const char *text;
        char user[PYC_CURVE_KEY_TEXT + 1];
        int kept = n < ZAP_FRAMES ? n : ZAP_FRAMES;
        const char *code = decide(z, f, kept, &text, user);
        zmq_send(z->sock, "1.0", 3, ZMQ_SNDMORE);
        if (kept > 1)
            zmq_msg_send(&f[1], z->sock, ZMQ_SNDMORE);    /* the request id, as it came (now sent) */
        else
            zmq_send(z->sock, "", 0, ZMQ_SNDMORE);
        zmq_send(z->sock, code, 3, ZMQ_SNDMORE);
        zmq_send(z->sock, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(z->sock, user, strlen(user), ZMQ_SNDMORE);
        zmq_send(z->sock, "", 0, 0);
        for (int i = 0; i < kept; i++)
            zmq_msg_close(&f[i]);
    }
}

pyc_zap_t *
pyc_zap_start(void *zctx, const pyc_connfile_t *cf, pyc_error_t *err)
{
    pyc_zap_t *z = calloc(1, sizeof *z);
    if (z == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    if (pyc_z85_key(cf->curve_publickey, strlen(cf->curve_publickey), z->own, "curve_publickey", err) < 0)
        goto fail;
    if (cf->curve_nallowed > 0) {
        z->allowed = malloc(cf->curve_nallowed * PYC_CURVE_KEY_BYTES);
        if (z->allowed == NULL) {
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
            goto fail;
        }
        memcpy(z->allowed, cf->curve_allowed, cf->curve_nallowed * PYC_CURVE_KEY_BYTES);
        z->nallowed = cf->curve_nallowed;
    }
    /* Bound here, before any CURVE socket is: a handshake that finds no handler lets every client in. */
    z->sock = zmq_socket(zctx, ZMQ_REP);
    int linger = 0;
    if (z->sock == NULL || zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
        pyc_error_set(err, "cannot bind the ZAP handler of the CURVE allow-list: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (pthread_create(&z->th, NULL, zap_main, z) != 0) {
        pyc_error_set(err, "cannot start the ZAP handler's thread");
        goto fail;
    }
    return z;
fail:
    if (z->sock != NULL)
        zmq_close(z->sock);
    free(z->allowed);
    free(z);
    return NULL;
}

void
pyc_zap_join(pyc_zap_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_zap_t *z = *self_p;
    pthread_join(z->th, NULL);
    free(z->allowed);
    free(z);
    *self_p = NULL;
}

unsigned long
pyc_zap_refused(const pyc_zap_t *self)
{
    return __atomic_load_n(&self->refused, __ATOMIC_RELAXED);
}
