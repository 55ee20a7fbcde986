/*
 * test_zmtp_curve.c -- cmocka tests for CurveZMQ in the `pyc` client (zmtp_curve.c, and its use by
 * zmtp_codec.c and zmtp.c), in two halves:
 *   - the codec against a CurveZMQ server played here with libsodium, byte by byte: our HELLO and INITIATE
 *     open with the server's keys (and the vouch proves our long-term key), WELCOME, READY and MESSAGEs are
 *     decoded, and the refusals: a WELCOME boxed for another server, an altered MESSAGE, a replayed one, a frame
 *     too short, the wrong mechanism; a PING travels inside a MESSAGE;
 *   - the connection against real libzmq 4.3 CURVE servers (libzmq is linked into this test only): DEALER and
 *     ROUTER both ways with a 10 MB frame queued before the handshake, SUB and PUB, REQ and REP, and a ZAP
 *     handler that refuses our key (its ERROR is reported).  (A libzmq server without CURVE closes the
 *     connection as soon as it sees our greeting, often before its own has been read: the codec test is the
 *     one that pins that refusal.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "z85.h"
#include "zmtp.h"
#include "zmtp_curve.h"
#include "zmtp_test.h"

/* ---- a CurveZMQ server played by the test ----------------------------------------------------------------- */

typedef struct server {
    unsigned char pub[32], sec[32];          /* S, s */
    unsigned char tpub[32], tsec[32];        /* S', s' */
    unsigned char client_t[32];              /* C', from HELLO */
    uint64_t nonce;
} server_t;

/* Our long-term key pair (C, c). */
static unsigned char cpub[32], csec[32];

static void
put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

/* A command frame of any length (LONG when over 255). */
static void
command(bytes_t *b, const unsigned char *body, size_t n)
{
    unsigned char h[9];
    put(b, h, pyc_zmtp_frame_header(h, n, false, true));
    put(b, body, n);
}

/* The server's answer to our HELLO: checks its box, then WELCOME (boxed with S unless wrong_key). */
static void
server_welcome(server_t *s, const unsigned char *hello, bytes_t *out, bool wrong_key)
{
    unsigned char n[24], zeros[64], plain[128], body[168];
    assert_memory_equal(hello, "\5HELLO\1\0", 8);
    memcpy(s->client_t, hello + 80, 32);
    memcpy(n, "CurveZMQHELLO---", 16);
    memcpy(n + 16, hello + 112, 8);
    assert_int_equal(crypto_box_open_easy(zeros, hello + 120, 80, n, s->client_t, s->sec), 0);
    crypto_box_keypair(s->tpub, s->tsec);
    memcpy(plain, s->tpub, 32);
    randombytes_buf(plain + 32, 96);                 /* the cookie: opaque to the client */
    memcpy(body, "\7WELCOME", 8);
    randombytes_buf(body + 8, 16);
    memcpy(n, "WELCOME-", 8);
    memcpy(n + 8, body + 8, 16);
    unsigned char other[32], other_sec[32];
    crypto_box_keypair(other, other_sec);
    assert_int_equal(crypto_box_easy(body + 24, plain, 128, n, s->client_t, wrong_key ? other_sec : s->sec), 0);
    command(out, body, sizeof body);
}

/* Opens our INITIATE and its vouch; returns the metadata's length (copied into props). */
static size_t
server_initiate(server_t *s, const unsigned char *init, size_t len, unsigned char *props)
{
    unsigned char n[24], plain[1024], vouch[64];
    assert_memory_equal(init, "\10INITIATE", 9);
    memcpy(n, "CurveZMQINITIATE", 16);
    memcpy(n + 16, init + 105, 8);
    assert_int_equal(crypto_box_open_easy(plain, init + 113, len - 113, n, s->client_t, s->tsec), 0);
    assert_memory_equal(plain, cpub, 32);            /* C */
    memcpy(n, "VOUCH---", 8);
    memcpy(n + 8, plain + 32, 16);
    assert_int_equal(crypto_box_open_easy(vouch, plain + 48, 80, n, cpub, s->tsec), 0);
    assert_memory_equal(vouch, s->client_t, 32);     /* C' */
    assert_memory_equal(vouch + 32, s->pub, 32);     /* S */
    size_t plen = len - 113 - 16 - 128;
    memcpy(props, plain + 128, plen);
    return plen;
}

/* A boxed command from server to client: READY (metadata) or MESSAGE (flags and data). */
static void
server_box(server_t *s, bytes_t *out, const char *prefix, const char *name, const unsigned char *plain, size_t n)
{
    unsigned char nonce[24], body[1024];
    size_t nl = strlen(name);
    body[0] = (unsigned char)nl;
    memcpy(body + 1, name, nl);
    put_u64(body + 1 + nl, s->nonce++);
    memcpy(nonce, prefix, 16);
    memcpy(nonce + 16, body + 1 + nl, 8);
    assert_int_equal(crypto_box_easy(body + 9 + nl, plain, n, nonce, s->client_t, s->tsec), 0);
    size_t len = 9 + nl + 16 + n;
    unsigned char h[9];
    /* MESSAGEs travel as frames without flags, as libzmq sends them; READY is a command. */
    put(out, h, pyc_zmtp_frame_header(h, len, false, name[0] == 'R'));
    put(out, body, len);
}

static void
server_message(server_t *s, bytes_t *out, int flags, const void *data, size_t n)
{
    unsigned char plain[512];
    plain[0] = (unsigned char)flags;
    memcpy(plain + 1, data, n);
    server_box(s, out, "CurveZMQMESSAGES", "MESSAGE", plain, n + 1);
}

/* Feeds all of b; returns the events' types in order (at most 8), -1 ending the list on a refusal. */
static int
feed_all(pyc_zmtp_dec_t *d, const bytes_t *b, int *types, pyc_zmtp_msg_t **last, pyc_error_t *err)
{
    size_t off = 0;
    int k = 0;
    while (off < b->n) {
        size_t used;
        pyc_zmtp_event_t ev;
        int r = pyc_zmtp_dec_feed(d, b->d + off, b->n - off, &used, &ev, err);
        if (r < 0) {
            types[k++] = -1;
            return k;
        }
        off += used;
        if (r > 0 && k < 8)
            types[k++] = r;
        if (r == PYC_ZMTP_EV_MSG) {
            pyc_zmtp_msg_destroy(last);
            *last = ev.msg;
        }
    }
    return k;
}

/* A decoder and client state brought up to READY against s. */
static void
handshake(server_t *s, pyc_zmtp_curve_t **cv, pyc_zmtp_dec_t **d)
{
    unsigned char hello[PYC_CURVE_HELLO_LEN], init[PYC_CURVE_INITIATE_MAX], props[600], want[600];
    crypto_box_keypair(s->pub, s->sec);
    s->nonce = 1;
    *cv = pyc_zmtp_curve_new(s->pub, cpub, csec, NULL);
    *d = pyc_zmtp_dec_new(PYC_ZMTP_DEALER, 1 << 20, 16, NULL);
    assert_non_null(*cv);
    assert_non_null(*d);
    pyc_zmtp_dec_set_curve(*d, *cv);
    assert_int_equal(pyc_zmtp_curve_hello(*cv, hello), 0);
    bytes_t b = {.n = 0};
    peer_greeting(&b, 3, "CURVE");
    server_welcome(s, hello, &b, false);
    int types[8];
    pyc_zmtp_msg_t *m = NULL;
    pyc_error_t err;
    assert_int_equal(feed_all(*d, &b, types, &m, &err), 1);
    assert_int_equal(types[0], PYC_ZMTP_EV_WELCOME);
    int plen = pyc_zmtp_properties(props, PYC_ZMTP_DEALER, "me", 2);
    int r = pyc_zmtp_curve_initiate(*cv, props, (size_t)plen, init);
    assert_true(r >= 257);
    assert_int_equal(server_initiate(s, init, (size_t)r, want), (size_t)plen);
    assert_memory_equal(want, props, (size_t)plen);
    b.n = 0;
    unsigned char rprops[64];
    int rl = pyc_zmtp_properties(rprops, PYC_ZMTP_DEALER, NULL, 0);
    memcpy(rprops + 16, "ROUTER", 6);                /* "\13Socket-Type" + length + "DEALER" -> ROUTER */
    server_box(s, &b, "CurveZMQREADY---", "READY", rprops, (size_t)rl);
    assert_int_equal(feed_all(*d, &b, types, &m, &err), 1);
    assert_int_equal(types[0], PYC_ZMTP_EV_READY);
}

/* ---- the codec ------------------------------------------------------------------------------------------ */

static void
test_codec_messages(void **state)
{
    (void)state;
    server_t s;
    pyc_zmtp_curve_t *cv;
    pyc_zmtp_dec_t *d;
    handshake(&s, &cv, &d);
    bytes_t b = {.n = 0};
    int types[8];
    pyc_zmtp_msg_t *m = NULL;
    pyc_error_t err;

    /* Two frames, then a PING inside a MESSAGE, then a one-frame message. */
    server_message(&s, &b, PYC_CURVE_MORE, "reply", 5);
    server_message(&s, &b, 0, "", 0);
    server_message(&s, &b, PYC_CURVE_COMMAND, "\4PING\0\1ctx", 10);
    server_message(&s, &b, 0, "second", 6);
    assert_int_equal(feed_all(d, &b, types, &m, &err), 3);
    assert_int_equal(types[0], PYC_ZMTP_EV_MSG);
    assert_int_equal(types[1], PYC_ZMTP_EV_PING);
    assert_int_equal(types[2], PYC_ZMTP_EV_MSG);
    assert_int_equal(m->n, 1);
    expect_frame(m, 0, "second", 6);
    pyc_zmtp_msg_destroy(&m);

    /* Ours: the server opens it with "CurveZMQMESSAGEC" and sees the flags. */
    unsigned char out[64], n[24], plain[64];
    pyc_zmtp_curve_seal(cv, PYC_CURVE_MORE, "hello", 5, out);
    assert_memory_equal(out, "\7MESSAGE", 8);
    memcpy(n, "CurveZMQMESSAGEC", 16);
    memcpy(n + 16, out + 8, 8);
    assert_int_equal(crypto_box_open_easy(plain, out + 16, 5 + 1 + 16, n, s.client_t, s.tsec), 0);
    assert_memory_equal(plain, "\1hello", 6);
    /* Nonces: HELLO 1, INITIATE 2, this MESSAGE 3. */
    assert_memory_equal(out + 8, "\0\0\0\0\0\0\0\3", 8);

    /* An altered MESSAGE is refused, and the decoder stays refused. */
    b.n = 0;
    server_message(&s, &b, 0, "x", 1);
    b.d[b.n - 1] ^= 1;
    assert_int_equal(feed_all(d, &b, types, &m, &err), 1);
    assert_int_equal(types[0], -1);
    assert_non_null(strstr(err.text, "does not open"));
    pyc_zmtp_dec_destroy(&d);
    pyc_zmtp_curve_destroy(&cv);
    assert_null(cv);
}

static void
test_codec_refusals(void **state)
{
    (void)state;
    server_t s;
    pyc_zmtp_curve_t *cv;
    pyc_zmtp_dec_t *d;
    bytes_t b = {.n = 0}, replay = {.n = 0};
    int types[8];
    pyc_zmtp_msg_t *m = NULL;
    pyc_error_t err;

    /* A replayed MESSAGE: its nonce does not grow. */
    handshake(&s, &cv, &d);
    server_message(&s, &replay, 0, "once", 4);
    b = replay;
    put(&b, replay.d, replay.n);
    assert_int_equal(feed_all(d, &b, types, &m, &err), 2);
    assert_int_equal(types[0], PYC_ZMTP_EV_MSG);
    assert_int_equal(types[1], -1);
    assert_non_null(strstr(err.text, "does not follow"));
    pyc_zmtp_msg_destroy(&m);
    pyc_zmtp_dec_destroy(&d);
    pyc_zmtp_curve_destroy(&cv);

    /* A frame too short to be a MESSAGE. */
    handshake(&s, &cv, &d);
    b.n = 0;
    frame(&b, 0, "\7MESSAGE", 8);
    assert_int_equal(feed_all(d, &b, types, &m, &err), 1);
    assert_non_null(strstr(err.text, "too short for a CurveZMQ MESSAGE"));
    pyc_zmtp_dec_destroy(&d);
    pyc_zmtp_curve_destroy(&cv);

    /* A WELCOME boxed by another server; a greeting that names NULL; READY where WELCOME belongs. */
    unsigned char hello[PYC_CURVE_HELLO_LEN];
    const char *want[3] = {"it is not the server whose public key the connection file names",
                           "asks for the security mechanism \"NULL\"; the connection file says CURVE",
                           "the peer sent READY where CURVE's WELCOME belongs"};
    for (int i = 0; i < 3; i++) {
        crypto_box_keypair(s.pub, s.sec);
        cv = pyc_zmtp_curve_new(s.pub, cpub, csec, NULL);
        d = pyc_zmtp_dec_new(PYC_ZMTP_SUB, 1 << 20, 16, NULL);
        pyc_zmtp_dec_set_curve(d, cv);
        assert_int_equal(pyc_zmtp_curve_hello(cv, hello), 0);
        b.n = 0;
        peer_greeting(&b, 3, i == 1 ? "NULL" : "CURVE");
        if (i == 0)
            server_welcome(&s, hello, &b, true);
        else
            peer_ready(&b, "PUB");
        assert_int_equal(feed_all(d, &b, types, &m, &err), 1);
        assert_int_equal(types[0], -1);
        if (strstr(err.text, want[i]) == NULL)
            fail_msg("refused with \"%s\", expected \"%s\"", err.text, want[i]);
        pyc_zmtp_dec_destroy(&d);
        pyc_zmtp_curve_destroy(&cv);
    }
    /* INITIATE before WELCOME cannot be made. */
    cv = pyc_zmtp_curve_new(s.pub, cpub, csec, NULL);
    unsigned char init[PYC_CURVE_INITIATE_MAX];
    assert_int_equal(pyc_zmtp_curve_hello(cv, hello), 0);
    assert_int_equal(pyc_zmtp_curve_initiate(cv, (const unsigned char *)"", 0, init), -1);
    pyc_zmtp_curve_destroy(&cv);
}

static void
test_keypair(void **state)
{
    (void)state;
    char pub[41], sec[41], derived[41];
    assert_int_equal(pyc_zmtp_curve_keypair(pub, sec, NULL), 0);
    assert_int_equal(strlen(pub), 40);
    assert_int_equal(zmq_curve_public(derived, sec), 0);     /* libzmq agrees the pair belongs together */
    assert_string_equal(derived, pub);
}

/* ---- against libzmq --------------------------------------------------------------------------------------- */

/* A libzmq CURVE server socket of `type` on tcp://127.0.0.1 (endpoint into ep); *keys gets what our client
 * needs (its key pair is cpub/csec). */
static void *
curve_server(void *ctx, int type, char *ep, size_t cap, pyc_zmtp_keys_t *keys)
{
    char pub[41], sec[41];
    int one = 1, zero = 0;
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    void *s = zmq_socket(ctx, type);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 41);
    assert_int_equal(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    size_t len = cap;
    assert_int_equal(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    assert_int_equal(pyc_z85_key(pub, 40, keys->server, "server", NULL), 0);
    memcpy(keys->public_key, cpub, 32);
    memcpy(keys->secret_key, csec, 32);
    return s;
}

static void
test_libzmq_dealer_router(void **state)
{
    (void)state;
    char ep[256];
    pyc_zmtp_keys_t keys;
    pyc_error_t err;
    void *ctx = zmq_ctx_new();
    void *router = curve_server(ctx, ZMQ_ROUTER, ep, sizeof ep, &keys);
    pyc_zmtp_t *c = pyc_zmtp_new_curve(ep, PYC_ZMTP_DEALER, "pyc-dealer", MAX_MSG, 64, &keys, &err);
    assert_non_null(c);
    unsigned char *big = big_pattern(3);
    /* Queued before the handshake (the big frame borrowed), sealed when READY comes. */
    pyc_frame_t parts[3] = {{"hello", 5}, {"", 0}, {big, BIG}};
    assert_int_equal(pyc_zmtp_send(c, parts, 3, PYC_ZMTP_BORROW, &err), 0);
    assert_int_equal(pyc_zmtp_send(c, parts, 1, 0, &err), 0);
    wait_sent(c, 10000);
    zmq_msg_t in[8];
    zmq_pollitem_t it = {.socket = router, .events = ZMQ_POLLIN};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(zmq_poll(&it, 1, 5000), 1);
        int n = 0, more = 1;
        while (more) {
            zmq_msg_init(&in[n]);
            assert_true(zmq_msg_recv(&in[n], router, 0) >= 0);
            more = zmq_msg_more(&in[n++]);
        }
        assert_int_equal(n, k == 0 ? 4 : 2);
        assert_int_equal(zmq_msg_size(&in[0]), 10);
        assert_memory_equal(zmq_msg_data(&in[0]), "pyc-dealer", 10);
        assert_memory_equal(zmq_msg_data(&in[1]), "hello", 5);
        if (k == 0) {
            assert_int_equal(zmq_msg_size(&in[2]), 0);
            assert_int_equal(zmq_msg_size(&in[3]), BIG);
            assert_memory_equal(zmq_msg_data(&in[3]), big, BIG);
        }
        for (int i = 0; i < n; i++)
            zmq_msg_close(&in[i]);
    }
    /* Theirs to ours, the big frame too. */
    assert_int_equal(zmq_send(router, "pyc-dealer", 10, ZMQ_SNDMORE), 10);
    assert_int_equal(zmq_send(router, "reply", 5, ZMQ_SNDMORE), 5);
    assert_int_equal(zmq_send(router, big, BIG, 0), (int)BIG);
    pyc_zmtp_msg_t *m = wait_msg(c, 10000);
    assert_non_null(m);
    assert_int_equal(m->n, 2);
    expect_frame(m, 0, "reply", 5);
    expect_frame(m, 1, big, BIG);
    pyc_zmtp_msg_destroy(&m);
    free(big);
    pyc_zmtp_destroy(&c);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void
test_libzmq_sub_pub_and_req_rep(void **state)
{
    (void)state;
    char ep[256];
    pyc_zmtp_keys_t keys;
    pyc_error_t err;
    void *ctx = zmq_ctx_new();
    void *pub = curve_server(ctx, ZMQ_PUB, ep, sizeof ep, &keys);
    pyc_zmtp_t *sub = pyc_zmtp_new_curve(ep, PYC_ZMTP_SUB, NULL, MAX_MSG, 64, &keys, &err);
    assert_non_null(sub);
    /* Published until the subscription (sealed first on READY) has reached the PUB. */
    pyc_zmtp_msg_t *m = NULL;
    for (int i = 0; i < 500 && m == NULL; i++) {
        zmq_send(pub, "news", 4, ZMQ_SNDMORE);
        zmq_send(pub, "item", 4, 0);
        m = wait_msg(sub, 10);
    }
    assert_non_null(m);
    expect_frame(m, 0, "news", 4);
    expect_frame(m, 1, "item", 4);
    pyc_zmtp_msg_destroy(&m);
    pyc_zmtp_destroy(&sub);
    zmq_close(pub);

    void *rep = curve_server(ctx, ZMQ_REP, ep, sizeof ep, &keys);
    pyc_zmtp_t *req = pyc_zmtp_new_curve(ep, PYC_ZMTP_REQ, NULL, MAX_MSG, 64, &keys, &err);
    pyc_frame_t q[2] = {{"", 0}, {"ping", 4}};    /* REQ's empty delimiter, then the request */
    assert_int_equal(pyc_zmtp_send(req, q, 2, 0, &err), 0);
    wait_sent(req, 10000);
    char buf[16];
    assert_int_equal(zmq_recv(rep, buf, sizeof buf, 0), 4);
    assert_memory_equal(buf, "ping", 4);
    assert_int_equal(zmq_send(rep, "pong", 4, 0), 4);
    m = wait_msg(req, 10000);
    assert_non_null(m);
    expect_frame(m, 1, "pong", 4);
    pyc_zmtp_msg_destroy(&m);
    pyc_zmtp_destroy(&req);
    zmq_close(rep);
    zmq_ctx_term(ctx);
}

static void
test_libzmq_refusals(void **state)
{
    (void)state;
    char ep[256];
    pyc_zmtp_keys_t keys;
    pyc_error_t err;
    void *ctx = zmq_ctx_new();

    /* A ZAP handler that refuses every key: libzmq sends ERROR, which ends the connection for good. */
    void *zap = zmq_socket(ctx, ZMQ_REP);
    assert_int_equal(zmq_bind(zap, "inproc://zeromq.zap.01"), 0);
    void *router = curve_server(ctx, ZMQ_ROUTER, ep, sizeof ep, &keys);
    pyc_zmtp_t *c = pyc_zmtp_new_curve(ep, PYC_ZMTP_DEALER, NULL, MAX_MSG, 64, &keys, &err);
    double end = now_ms() + 10000;
    int rc = 0;
    while (rc == 0 && now_ms() < end) {
        rc = pump(c, 10, &err);
        zmq_msg_t f[8];
        int n = 0, more = 1;
        if (zmq_poll(&(zmq_pollitem_t){.socket = zap, .events = ZMQ_POLLIN}, 1, 0) != 1)
            continue;
        while (more) {
            zmq_msg_init(&f[n]);
            assert_true(zmq_msg_recv(&f[n], zap, 0) >= 0);
            more = zmq_msg_more(&f[n++]);
        }
        assert_int_equal(zmq_msg_size(&f[6]), 32);
        assert_memory_equal(zmq_msg_data(&f[6]), cpub, 32);      /* libzmq saw our long-term key */
        zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
        zmq_msg_send(&f[1], zap, ZMQ_SNDMORE);
        zmq_send(zap, "400", 3, ZMQ_SNDMORE);
        zmq_send(zap, "not you", 7, ZMQ_SNDMORE);
        zmq_send(zap, "", 0, ZMQ_SNDMORE);
        zmq_send(zap, "", 0, 0);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&f[i]);
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.text, "the peer refused the connection"));
    pyc_zmtp_destroy(&c);
    zmq_close(router);
    zmq_close(zap);

    zmq_ctx_term(ctx);
}

int
main(void)
{
    if (sodium_init() < 0)
        return 1;
    crypto_box_keypair(cpub, csec);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_messages),
        cmocka_unit_test(test_codec_refusals),
        cmocka_unit_test(test_keypair),
        cmocka_unit_test(test_libzmq_dealer_router),
        cmocka_unit_test(test_libzmq_sub_pub_and_req_rep),
        cmocka_unit_test(test_libzmq_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
