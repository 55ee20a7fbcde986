/*
 * test_zmtp.c -- cmocka tests for zmtp.c: ZMTP 3.0 bytes, the decoder's refusals, and real libzmq peers.
 *
 * Three parts:
 *   1. the encoder against byte-exact vectors written out by hand from RFC 23 (greeting, READY, short and
 *      long frame headers), so a change of the wire bytes cannot go unnoticed;
 *   2. the decoder: a peer's handshake and messages fed whole, byte by byte, and through the direct-body
 *      path, and every malformed input refused with its sentence (one case per line in test_refusals);
 *   3. interoperation with libzmq 4.3 in this process (linked into this test only): our DEALER against a
 *      ROUTER, our SUB against a PUB, our REQ against a REP and a ROUTER, on tcp://127.0.0.1 (port 0 and
 *      ZMQ_LAST_ENDPOINT), tcp://localhost, tcp://[::1] when the machine has IPv6, ipc:// paths and the
 *      abstract namespace; multipart messages both ways with empty frames and a 10 MB frame; connecting
 *      before the peer binds, and after it went away and came back.  A raw socket plays the peers that break
 *      the protocol, send PINGs, or vanish in the middle of a message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "zmtp.h"

#define BIG (10u << 20)
#define MAX_MSG ((size_t)64 << 20)

/* ---- helpers --------------------------------------------------------------------------------------------- */

static double
now_ms(void)
{
    return pyc_now_s() * 1e3;
}

/* A byte string under construction (the peer's side of the tests). */
typedef struct bytes {
    unsigned char d[4096];
    size_t n;
} bytes_t;

static void
put(bytes_t *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->d);
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

/* The greeting a libzmq 4.3 peer sends: version 3.1, NULL, as-server 0. */
static void
peer_greeting(bytes_t *b, int major, const char *mech)
{
    unsigned char g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};
    g[10] = (unsigned char)major;
    g[11] = 1;
    memcpy(g + 12, mech, strlen(mech));
    put(b, g, sizeof g);
}

/* A short frame. */
static void
frame(bytes_t *b, unsigned char flags, const void *body, size_t n)
{
    unsigned char h[2] = {flags, (unsigned char)n};
    assert_true(n <= 255);
    put(b, h, 2);
    put(b, body, n);
}

/* A READY with the given Socket-Type, as libzmq writes it (with an empty Identity). */
static void
peer_ready(bytes_t *b, const char *type)
{
    unsigned char body[128];
    size_t n = 0, tl = strlen(type);
    memcpy(body, "\5READY\13Socket-Type", 18);
    n = 18;
    unsigned char len[4] = {0, 0, 0, (unsigned char)tl};
    memcpy(body + n, len, 4);
    memcpy(body + n + 4, type, tl);
    n += 4 + tl;
    memcpy(body + n, "\10Identity\0\0\0\0", 13);
    n += 13;
    frame(b, 0x04, body, n);
}

/* Feeds all of b to dec in pieces of `chunk` bytes and collects up to max events. */
static int
feed_all(pyc_zmtp_dec_t *dec, const bytes_t *b, size_t chunk, pyc_zmtp_event_t *evs, int max, pyc_error_t *err)
{
    int k = 0;
    size_t off = 0;
    while (off < b->n) {
        size_t n = b->n - off < chunk ? b->n - off : chunk;
        size_t used;
        pyc_zmtp_event_t ev;
        int r = pyc_zmtp_dec_feed(dec, b->d + off, n, &used, &ev, err);
        if (r < 0)
            return -1;
        assert_true(used <= n);
        assert_true(r > 0 || used == n);
        off += used;
        if (r > 0) {
            assert_true(k < max);
            evs[k++] = ev;
        }
    }
    return k;
}

static void
expect_frame(const pyc_zmtp_msg_t *m, size_t i, const void *data, size_t n)
{
    assert_true(i < m->n);
    assert_int_equal(m->frames[i].size, n);
    assert_non_null(m->frames[i].data);
    if (n > 0)
        assert_memory_equal(m->frames[i].data, data, n);
}

/* Runs c's I/O once, waiting up to ms. */
static int
pump(pyc_zmtp_t *c, int ms, pyc_error_t *err)
{
    struct pollfd p = {.fd = pyc_zmtp_fd(c), .events = pyc_zmtp_events(c)};
    int wake = pyc_zmtp_wake_ms(c);
    if (wake >= 0 && wake < ms)
        ms = wake;
    if (p.fd >= 0)
        poll(&p, 1, ms);
    else
        poll(NULL, 0, ms);
    return pyc_zmtp_handle(c, p.fd >= 0 ? p.revents : 0, err);
}

/* Pumps c until a message comes (returned) or ms pass (NULL). */
static pyc_zmtp_msg_t *
wait_msg(pyc_zmtp_t *c, int ms)
{
    double end = now_ms() + ms;
    pyc_error_t err;
    while (!pyc_zmtp_has_msg(c) && now_ms() < end) {
        if (pump(c, 10, &err) < 0)
            fail_msg("connection failed: %s", err.text);
    }
    return pyc_zmtp_recv(c);
}

/* Pumps c until everything queued is written. */
static void
wait_sent(pyc_zmtp_t *c, int ms)
{
    double end = now_ms() + ms;
    pyc_error_t err;
    while ((!pyc_zmtp_is_up(c) || pyc_zmtp_pending(c) > 0) && now_ms() < end) {
        if (pump(c, 10, &err) < 0)
            fail_msg("connection failed: %s", err.text);
    }
    assert_true(pyc_zmtp_is_up(c));
    assert_int_equal(pyc_zmtp_pending(c), 0);
}

/* Pumps c until it fails; returns the sentence's error. */
static void
wait_failure(pyc_zmtp_t *c, int ms, const char *want)
{
    double end = now_ms() + ms;
    pyc_error_t err;
    while (now_ms() < end) {
        if (pump(c, 10, &err) < 0) {
            if (strstr(err.text, want) == NULL)
                fail_msg("refused with \"%s\", expected \"%s\"", err.text, want);
            assert_int_equal(pyc_zmtp_fd(c), -1);
            assert_int_equal(pyc_zmtp_handle(c, 0, &err), -1);   /* for good */
            return;
        }
    }
    fail_msg("the connection did not fail (expected \"%s\")", want);
}

/* Receives one multipart message from a libzmq socket (waiting up to 5 s); returns the frame count and fills
 * msgs (closed by the caller with close_parts). */
static int
zrecv(void *s, zmq_msg_t *msgs, int max)
{
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    assert_int_equal(zmq_poll(&it, 1, 5000), 1);
    int n = 0, more = 1;
    while (more) {
        assert_true(n < max);
        zmq_msg_init(&msgs[n]);
        assert_true(zmq_msg_recv(&msgs[n], s, 0) >= 0);
        more = zmq_msg_more(&msgs[n]);
        n++;
    }
    return n;
}

static void
close_parts(zmq_msg_t *msgs, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&msgs[i]);
}

static void
expect_part(zmq_msg_t *m, const void *data, size_t n)
{
    assert_int_equal(zmq_msg_size(m), n);
    if (n > 0)
        assert_memory_equal(zmq_msg_data(m), data, n);
}

static unsigned char *
big_pattern(unsigned seed)
{
    unsigned char *p = malloc(BIG);
    assert_non_null(p);
    for (size_t i = 0; i < BIG; i++)
        p[i] = (unsigned char)(i * 131 + seed + (i >> 12));
    return p;
}

/* Binds a libzmq socket of `type` to `where` ("tcp://127.0.0.1:0", an ipc:// path) and writes the endpoint to
 * connect to into ep. */
static void *
zbind(void *ctx, int type, const char *where, char *ep, size_t cap)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0;
    assert_non_null(s);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (strncmp(where, "tcp://[", 7) == 0) {
        int one = 1;
        zmq_setsockopt(s, ZMQ_IPV6, &one, sizeof one);
    }
    if (zmq_bind(s, where) != 0) {
        zmq_close(s);
        return NULL;
    }
    size_t len = cap;
    assert_int_equal(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    return s;
}

/* ---- 1. encoder vectors ---------------------------------------------------------------------------------- */

static void
test_greeting_bytes(void **state)
{
    (void)state;
    static const unsigned char want[64] = {
        0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    unsigned char g[64];
    pyc_zmtp_greeting(g);
    assert_memory_equal(g, want, 64);
}

static void
test_frame_headers(void **state)
{
    (void)state;
    unsigned char h[9];
    assert_int_equal(pyc_zmtp_frame_header(h, 0, false, false), 2);
    assert_memory_equal(h, "\x00\x00", 2);
    assert_int_equal(pyc_zmtp_frame_header(h, 5, true, false), 2);
    assert_memory_equal(h, "\x01\x05", 2);
    assert_int_equal(pyc_zmtp_frame_header(h, 255, false, true), 2);
    assert_memory_equal(h, "\x04\xff", 2);
    assert_int_equal(pyc_zmtp_frame_header(h, 256, false, false), 9);
    assert_memory_equal(h, "\x02\x00\x00\x00\x00\x00\x00\x01\x00", 9);
    assert_int_equal(pyc_zmtp_frame_header(h, BIG, true, false), 9);
    assert_memory_equal(h, "\x03\x00\x00\x00\x00\x00\xa0\x00\x00", 9);
    assert_int_equal(pyc_zmtp_frame_header(h, (size_t)0x0102030405060708ull, false, true), 9);
    assert_memory_equal(h, "\x06\x01\x02\x03\x04\x05\x06\x07\x08", 9);
}

static void
test_ready_bytes(void **state)
{
    (void)state;
    /* 44 bytes of body: "\5READY", "\13Socket-Type" 00 00 00 06 "DEALER", "\10Identity" 00 00 00 03 "abc". */
    static const unsigned char dealer[] = "\x04\x2c"
                                          "\x05READY"
                                          "\x0bSocket-Type\x00\x00\x00\x06"
                                          "DEALER"
                                          "\x08Identity\x00\x00\x00\x03"
                                          "abc";
    static const unsigned char sub[] = "\x04\x19"
                                       "\x05READY"
                                       "\x0bSocket-Type\x00\x00\x00\x03"
                                       "SUB";
    unsigned char out[400], id[256];
    assert_int_equal(pyc_zmtp_ready(out, sizeof out, PYC_ZMTP_DEALER, "abc", 3), sizeof dealer - 1);
    assert_memory_equal(out, dealer, sizeof dealer - 1);
    assert_int_equal(pyc_zmtp_ready(out, sizeof out, PYC_ZMTP_SUB, NULL, 0), sizeof sub - 1);
    assert_memory_equal(out, sub, sizeof sub - 1);
    assert_int_equal(pyc_zmtp_ready(out, sizeof out, PYC_ZMTP_REQ, NULL, 0), 2 + 25);
    assert_memory_equal(out + 2 + 22, "REQ", 3);
    /* A 255-byte identity makes the body 296 bytes: a long frame. */
    memset(id, 'i', sizeof id);
    assert_int_equal(pyc_zmtp_ready(out, sizeof out, PYC_ZMTP_DEALER, id, 255), 9 + 296);
    assert_memory_equal(out, "\x06\x00\x00\x00\x00\x00\x00\x01\x28", 9);
    assert_int_equal(pyc_zmtp_ready(out, sizeof out, PYC_ZMTP_DEALER, id, 256), -1);
    assert_int_equal(pyc_zmtp_ready(out, 100, PYC_ZMTP_DEALER, id, 255), -1);
    assert_int_equal(pyc_zmtp_ready(out, sizeof out, 7, NULL, 0), -1);
}

/* ---- 2. the decoder -------------------------------------------------------------------------------------- */

/* A peer's handshake and three messages: a MORE chain of short frames with an empty one, a long frame, and a
 * command between messages that is ignored. */
static void
build_stream(bytes_t *b)
{
    unsigned char long_hdr[9] = {0x02, 0, 0, 0, 0, 0, 0, 0x01, 0x2c};   /* 300 bytes */
    unsigned char body[300];
    memset(body, 'L', sizeof body);
    b->n = 0;
    peer_greeting(b, 3, "NULL");
    peer_ready(b, "ROUTER");
    frame(b, 0x01, "id", 2);
    frame(b, 0x01, "", 0);
    frame(b, 0x00, "hello", 5);
    frame(b, 0x04, "\4PONG", 5);                                       /* ignored */
    frame(b, 0x04, "\11SUBSCRIBE", 10);                                /* ignored */
    put(b, long_hdr, 9);
    put(b, body, sizeof body);
    frame(b, 0x00, "", 0);                                             /* a message of one empty frame */
}

static void
check_stream_events(pyc_zmtp_event_t *evs, int k)
{
    assert_int_equal(k, 4);
    assert_int_equal(evs[0].type, PYC_ZMTP_EV_READY);
    assert_int_equal(evs[1].type, PYC_ZMTP_EV_MSG);
    assert_int_equal(evs[1].msg->n, 3);
    expect_frame(evs[1].msg, 0, "id", 2);
    expect_frame(evs[1].msg, 1, "", 0);
    expect_frame(evs[1].msg, 2, "hello", 5);
    assert_int_equal(evs[2].type, PYC_ZMTP_EV_MSG);
    assert_int_equal(evs[2].msg->n, 1);
    assert_int_equal(evs[2].msg->frames[0].size, 300);
    assert_int_equal(((const char *)evs[2].msg->frames[0].data)[299], 'L');
    assert_int_equal(evs[3].type, PYC_ZMTP_EV_MSG);
    assert_int_equal(evs[3].msg->n, 1);
    expect_frame(evs[3].msg, 0, "", 0);
    for (int i = 1; i < k; i++)
        pyc_zmtp_msg_destroy(&evs[i].msg);
}

static void
test_decode_stream(void **state)
{
    (void)state;
    bytes_t b;
    pyc_error_t err;
    pyc_zmtp_event_t evs[8];
    build_stream(&b);
    static const size_t chunks[] = {1, 2, 3, 7, 64, 65, 4096};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        pyc_zmtp_dec_t *dec = pyc_zmtp_dec_new(PYC_ZMTP_DEALER, 1 << 20, 16, &err);
        assert_non_null(dec);
        int k = feed_all(dec, &b, chunks[c], evs, 8, &err);
        if (k < 0)
            fail_msg("chunk %zu: %s", chunks[c], err.text);
        check_stream_events(evs, k);
        pyc_zmtp_dec_destroy(&dec);
        assert_null(dec);
    }
    pyc_zmtp_dec_destroy(NULL);
}

/* The body of a frame written straight into its storage (how large frames are read). */
static void
test_decode_direct_body(void **state)
{
    (void)state;
    bytes_t b = {.n = 0};
    pyc_error_t err;
    pyc_zmtp_event_t ev;
    size_t used;
    void *dst;
    unsigned char hdr[9] = {0x02, 0, 0, 0, 0, 0, 0, 0x10, 0};           /* 4096 bytes */
    pyc_zmtp_dec_t *dec = pyc_zmtp_dec_new(PYC_ZMTP_SUB, 1 << 20, 16, &err);
    peer_greeting(&b, 3, "NULL");
    peer_ready(&b, "PUB");
    put(&b, hdr, 9);
    put(&b, "abc", 3);
    assert_int_equal(pyc_zmtp_dec_body(dec, &dst), 0);
    assert_int_equal(pyc_zmtp_dec_feed(dec, b.d, b.n, &used, &ev, &err), PYC_ZMTP_EV_READY);
    assert_int_equal(pyc_zmtp_dec_feed(dec, b.d + used, b.n - used, &used, &ev, &err), PYC_ZMTP_EV_NONE);
    assert_int_equal(pyc_zmtp_dec_body(dec, &dst), 4093);
    memset(dst, 'x', 4000);
    assert_int_equal(pyc_zmtp_dec_commit(dec, 4000, &ev, &err), PYC_ZMTP_EV_NONE);
    assert_int_equal(pyc_zmtp_dec_body(dec, &dst), 93);
    memset(dst, 'y', 93);
    assert_int_equal(pyc_zmtp_dec_commit(dec, 93, &ev, &err), PYC_ZMTP_EV_MSG);
    assert_int_equal(ev.msg->n, 1);
    const unsigned char *d = ev.msg->frames[0].data;
    assert_memory_equal(d, "abcxx", 5);
    assert_int_equal(d[4095], 'y');
    pyc_zmtp_msg_destroy(&ev.msg);
    assert_int_equal(pyc_zmtp_dec_body(dec, &dst), 0);
    pyc_zmtp_dec_destroy(&dec);
}

static void
test_decode_ping(void **state)
{
    (void)state;
    bytes_t b = {.n = 0};
    pyc_error_t err;
    pyc_zmtp_event_t evs[4];
    pyc_zmtp_dec_t *dec = pyc_zmtp_dec_new(PYC_ZMTP_REQ, 1 << 20, 16, &err);
    peer_greeting(&b, 3, "NULL");
    peer_ready(&b, "REP");
    frame(&b, 0x04, "\4PING\0\x0a" "ctx", 10);
    frame(&b, 0x04, "\4PING\0\0", 7);
    assert_int_equal(feed_all(dec, &b, 5, evs, 4, &err), 3);
    assert_int_equal(evs[1].type, PYC_ZMTP_EV_PING);
    assert_int_equal(evs[1].ping_len, 3);
    assert_memory_equal(evs[1].ping_ctx, "ctx", 3);
    assert_int_equal(evs[2].type, PYC_ZMTP_EV_PING);
    assert_int_equal(evs[2].ping_len, 0);
    pyc_zmtp_dec_destroy(&dec);
}

/* Feeds b to a fresh decoder of `type`, byte by byte, 3 bytes at a time and all at once, and expects the refusal `want`
 * both times; a refused decoder refuses again with the same sentence, and works after a reset. */
static void
refused(int type, const bytes_t *b, const char *want)
{
    pyc_error_t err, again;
    pyc_zmtp_event_t evs[8];
    static const size_t chunks[] = {1, 3, sizeof b->d};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        size_t chunk = chunks[c];
        pyc_zmtp_dec_t *dec = pyc_zmtp_dec_new(type, 1000, 4, &err);
        assert_non_null(dec);
        err.text[0] = '\0';
        int k = feed_all(dec, b, chunk, evs, 8, &err);
        if (k >= 0)
            fail_msg("accepted what should be refused with \"%s\"", want);
        if (strstr(err.text, want) == NULL)
            fail_msg("refused with \"%s\", expected \"%s\"", err.text, want);
        size_t used;
        pyc_zmtp_event_t ev;
        assert_int_equal(pyc_zmtp_dec_feed(dec, "x", 1, &used, &ev, &again), -1);
        assert_int_equal(used, 0);
        assert_string_equal(again.text, err.text);
        pyc_zmtp_dec_reset(dec);
        assert_int_equal(pyc_zmtp_dec_feed(dec, "\xff", 1, &used, &ev, &err), PYC_ZMTP_EV_NONE);
        pyc_zmtp_dec_destroy(&dec);
    }
}

static void
test_refusals(void **state)
{
    (void)state;
    bytes_t b;
    unsigned char g[64];
    char big[300];
    memset(big, 'B', sizeof big);

#define START(t) (b.n = 0, peer_greeting(&b, 3, "NULL"), peer_ready(&b, t))
    /* greetings */
    b.n = 0;
    put(&b, "GET / HTTP/1.0\r\n", 16);
    refused(PYC_ZMTP_DEALER, &b, "does not speak ZMTP (its greeting starts with 0x47");
    pyc_zmtp_greeting(g);
    g[9] = 0x7e;
    b.n = 0;
    put(&b, g, 10);
    refused(PYC_ZMTP_DEALER, &b, "ZMTP 1.0");
    b.n = 0;
    peer_greeting(&b, 2, "NULL");
    refused(PYC_ZMTP_DEALER, &b, "ZMTP 2.x");
    b.n = 0;
    peer_greeting(&b, 3, "CURVE");
    refused(PYC_ZMTP_DEALER, &b, "security mechanism \"CURVE\"");
    b.n = 0;
    peer_greeting(&b, 3, "NULLX");
    refused(PYC_ZMTP_DEALER, &b, "only NULL is supported");

    /* the handshake */
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x00, "early", 5);
    refused(PYC_ZMTP_DEALER, &b, "a message before its READY");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\4PING\0\0", 7);
    refused(PYC_ZMTP_DEALER, &b, "first command is PING, not READY");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5READY", 6);
    refused(PYC_ZMTP_DEALER, &b, "READY has no Socket-Type");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5READY\13Socket-Type\0\0\0\11", 22);
    refused(PYC_ZMTP_DEALER, &b, "property longer than the command");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5READY\13Socket-Ty", 17);
    refused(PYC_ZMTP_DEALER, &b, "malformed property");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5READY\0", 7);
    refused(PYC_ZMTP_DEALER, &b, "malformed property");
    START("PUB");
    refused(PYC_ZMTP_DEALER, &b, "the peer is a PUB socket, which a DEALER cannot talk to");
    START("ROUTER");
    refused(PYC_ZMTP_SUB, &b, "the peer is a ROUTER socket, which a SUB cannot talk to");
    START("DEALER");
    refused(PYC_ZMTP_REQ, &b, "the peer is a DEALER socket, which a REQ cannot talk to");
    START("\x01\x7f\xff");
    refused(PYC_ZMTP_REQ, &b, "the peer is a ??? socket");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5ERROR\15Access denied", 20);
    refused(PYC_ZMTP_DEALER, &b, "the peer refused the connection: Access denied");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5ERROR\20Access denied", 20);
    refused(PYC_ZMTP_DEALER, &b, "malformed ERROR");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5ERR", 4);
    refused(PYC_ZMTP_DEALER, &b, "malformed command");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\0", 1);
    refused(PYC_ZMTP_DEALER, &b, "malformed command");

    /* frames */
    START("ROUTER");
    put(&b, "\x08\x01x", 3);
    refused(PYC_ZMTP_DEALER, &b, "reserved flag bits set (0x08)");
    START("ROUTER");
    put(&b, "\x80\x01x", 3);
    refused(PYC_ZMTP_DEALER, &b, "reserved flag bits set (0x80)");
    START("ROUTER");
    frame(&b, 0x05, "\4PING\0\0", 7);
    refused(PYC_ZMTP_DEALER, &b, "a command marked MORE");
    START("ROUTER");
    frame(&b, 0x04, "", 0);
    refused(PYC_ZMTP_DEALER, &b, "an empty command");
    START("ROUTER");
    put(&b, "\x06\x00\x00\x00\x00\x00\x01\x00\x01", 9);
    refused(PYC_ZMTP_DEALER, &b, "a command of 65537 bytes");
    START("ROUTER");
    frame(&b, 0x04, "\5READY", 6);
    refused(PYC_ZMTP_DEALER, &b, "a second READY");
    START("ROUTER");
    frame(&b, 0x04, "\4PING\0", 6);
    refused(PYC_ZMTP_DEALER, &b, "malformed PING");
    START("ROUTER");
    frame(&b, 0x04, "\4PING\0\0" "12345678901234567", 24);
    refused(PYC_ZMTP_DEALER, &b, "malformed PING");
    /* caps: the decoders of refused() take 1000 bytes and 4 frames per message */
    START("ROUTER");
    put(&b, "\x02\x00\x00\x00\x00\x00\x00\x03\xe9", 9);
    refused(PYC_ZMTP_DEALER, &b, "more than 1000 bytes");
    START("ROUTER");
    frame(&b, 0x01, big, 255);
    frame(&b, 0x01, big, 255);
    frame(&b, 0x01, big, 255);
    frame(&b, 0x00, big, 255);   /* 1020 bytes in all */
    refused(PYC_ZMTP_DEALER, &b, "more than 1000 bytes");
    START("ROUTER");
    put(&b, "\x02\xff\xff\xff\xff\xff\xff\xff\xff", 9);
    refused(PYC_ZMTP_DEALER, &b, "more than 1000 bytes");
    START("ROUTER");
    for (int i = 0; i < 5; i++)
        frame(&b, 0x01, "f", 1);
    refused(PYC_ZMTP_DEALER, &b, "more than 4 frames");
#undef START
}

static void
test_decoder_args(void **state)
{
    (void)state;
    pyc_error_t err;
    assert_null(pyc_zmtp_dec_new(3, 1, 1, &err));
    assert_non_null(strstr(err.text, "unknown socket type"));
    assert_null(pyc_zmtp_new("tcp://127.0.0.1:1", -1, NULL, 1, 1, &err));
    char id[300];
    memset(id, 'a', sizeof id - 1);
    id[sizeof id - 1] = '\0';
    assert_null(pyc_zmtp_new("tcp://127.0.0.1:1", PYC_ZMTP_DEALER, id, 1, 1, &err));
    assert_non_null(strstr(err.text, "identity of 299 bytes"));
    static const char *const bad[] = {
        "udp://127.0.0.1:5",  "tcp://127.0.0.1",        "tcp://127.0.0.1:0",   "tcp://127.0.0.1:65536",
        "tcp://127.0.0.1:x",  "tcp://:5",               "tcp://[]:5",          "tcp://127.0.0.1:-1",
        "ipc://",             "ipc://@",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.text[0] = '\0';
        if (pyc_zmtp_new(bad[i], PYC_ZMTP_DEALER, NULL, 1, 1, &err) != NULL)
            fail_msg("accepted the endpoint %s", bad[i]);
        assert_true(err.text[0] != '\0');
    }
    char longpath[200] = "ipc:///tmp/";
    memset(longpath + 11, 'p', 150);
    assert_null(pyc_zmtp_new(longpath, PYC_ZMTP_DEALER, NULL, 1, 1, &err));
    assert_non_null(strstr(err.text, "longer than 107 bytes"));
    pyc_zmtp_destroy(NULL);
    pyc_zmtp_msg_destroy(NULL);
}

/* ---- 3. libzmq peers ------------------------------------------------------------------------------------- */

/* Our DEALER with identity "pyc-dealer" and a libzmq ROUTER at `where`: multipart both ways, with empty
 * frames and a 10 MB frame. */
static void
dealer_router(const char *where)
{
    char ep[256];
    pyc_error_t err;
    void *ctx = zmq_ctx_new();
    void *router = zbind(ctx, ZMQ_ROUTER, where, ep, sizeof ep);
    if (router == NULL) {
        zmq_ctx_term(ctx);
        if (strncmp(where, "tcp://[", 7) == 0) {
            print_message("no IPv6 here: %s skipped\n", where);
            return;
        }
        fail_msg("cannot bind %s", where);
    }
    pyc_zmtp_t *c = pyc_zmtp_new(ep, PYC_ZMTP_DEALER, "pyc-dealer", MAX_MSG, 64, &err);
    if (c == NULL)
        fail_msg("%s: %s", ep, err.text);
    unsigned char *big = big_pattern(1);

    /* ours to theirs: queued before the connection is up; the big frame is borrowed */
    pyc_frame_t parts[3] = {{"hello", 5}, {"", 0}, {"world", 5}};
    pyc_frame_t tail[2] = {{big, BIG}, {"", 0}};
    assert_int_equal(pyc_zmtp_send(c, parts, 3, PYC_ZMTP_MORE, &err), 0);
    assert_int_equal(pyc_zmtp_send(c, tail, 2, PYC_ZMTP_BORROW, &err), 0);
    assert_int_equal(pyc_zmtp_send(c, parts, 1, 0, &err), 0);
    wait_sent(c, 10000);
    zmq_msg_t in[8];
    int n = zrecv(router, in, 8);
    assert_int_equal(n, 6);
    expect_part(&in[0], "pyc-dealer", 10);   /* the Identity of our READY is the routing id */
    expect_part(&in[1], "hello", 5);
    expect_part(&in[2], "", 0);
    expect_part(&in[3], "world", 5);
    expect_part(&in[4], big, BIG);
    expect_part(&in[5], "", 0);
    close_parts(in, n);
    n = zrecv(router, in, 8);
    assert_int_equal(n, 2);
    expect_part(&in[1], "hello", 5);
    close_parts(in, n);

    /* theirs to ours */
    unsigned char *big2 = big_pattern(2);
    assert_int_equal(zmq_send(router, "pyc-dealer", 10, ZMQ_SNDMORE), 10);
    assert_int_equal(zmq_send(router, "", 0, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(router, "reply", 5, ZMQ_SNDMORE), 5);
    assert_int_equal(zmq_send(router, big2, BIG, ZMQ_SNDMORE), (int)BIG);
    assert_int_equal(zmq_send(router, "", 0, 0), 0);
    assert_int_equal(zmq_send(router, "pyc-dealer", 10, ZMQ_SNDMORE), 10);
    assert_int_equal(zmq_send(router, "second", 6, 0), 6);
    pyc_zmtp_msg_t *m = wait_msg(c, 10000);
    assert_non_null(m);
    assert_int_equal(m->n, 4);
    expect_frame(m, 0, "", 0);
    expect_frame(m, 1, "reply", 5);
    expect_frame(m, 2, big2, BIG);
    expect_frame(m, 3, "", 0);
    pyc_zmtp_msg_destroy(&m);
    m = wait_msg(c, 5000);
    assert_non_null(m);
    assert_int_equal(m->n, 1);
    expect_frame(m, 0, "second", 6);
    pyc_zmtp_msg_destroy(&m);
    assert_false(pyc_zmtp_has_msg(c));
    assert_null(pyc_zmtp_recv(c));

    free(big);
    free(big2);
    pyc_zmtp_destroy(&c);
    assert_null(c);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void
test_dealer_router_tcp(void **state)
{
    (void)state;
    dealer_router("tcp://127.0.0.1:0");
}

/* A host name instead of an address: "localhost" resolves to 127.0.0.1, where the ROUTER listens. */
static void
test_dealer_router_hostname(void **state)
{
    (void)state;
    char ep[256], named[300];
    pyc_error_t err;
    void *ctx = zmq_ctx_new();
    void *router = zbind(ctx, ZMQ_ROUTER, "tcp://127.0.0.1:0", ep, sizeof ep);
    assert_non_null(router);
    snprintf(named, sizeof named, "tcp://localhost:%s", strrchr(ep, ':') + 1);
    pyc_zmtp_t *c = pyc_zmtp_new(named, PYC_ZMTP_DEALER, "named", MAX_MSG, 64, &err);
    if (c == NULL)
        fail_msg("%s: %s", named, err.text);
    pyc_frame_t f = {"hi", 2};
    assert_int_equal(pyc_zmtp_send(c, &f, 1, 0, &err), 0);
    wait_sent(c, 5000);
    zmq_msg_t in[4];
    int n = zrecv(router, in, 4);
    assert_int_equal(n, 2);
    expect_part(&in[0], "named", 5);
    expect_part(&in[1], "hi", 2);
    close_parts(in, n);
    pyc_zmtp_destroy(&c);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void
test_dealer_router_tcp6(void **state)
{
    (void)state;
    dealer_router("tcp://[::1]:0");
}

static void
test_dealer_router_ipc(void **state)
{
    (void)state;
    char where[128];
    snprintf(where, sizeof where, "ipc:///tmp/pyc-test-zmtp-%ld-r", (long)getpid());
    dealer_router(where);
    unlink(where + 6);
}

static void
test_dealer_router_abstract(void **state)
{
    (void)state;
    char where[128];
    snprintf(where, sizeof where, "ipc://@pyc-test-zmtp-%ld", (long)getpid());
    dealer_router(where);
}

/* Our SUB and a libzmq PUB: the subscription takes some time to reach the PUB (what pyc_client_sync_iopub
 * is for), so the PUB publishes until something arrives; then a multipart with a 10 MB frame. */
static void
sub_pub(const char *where)
{
    char ep[256];
    pyc_error_t err;
    void *ctx = zmq_ctx_new();
    void *pub = zbind(ctx, ZMQ_PUB, where, ep, sizeof ep);
    assert_non_null(pub);
    pyc_zmtp_t *c = pyc_zmtp_new(ep, PYC_ZMTP_SUB, NULL, MAX_MSG, 64, &err);
    assert_non_null(c);
    pyc_zmtp_msg_t *m = NULL;
    double end = now_ms() + 10000;
    while (m == NULL && now_ms() < end) {
        assert_int_equal(zmq_send(pub, "topic", 5, ZMQ_SNDMORE), 5);
        assert_int_equal(zmq_send(pub, "", 0, 0), 0);
        m = wait_msg(c, 20);
    }
    assert_non_null(m);
    assert_int_equal(m->n, 2);
    expect_frame(m, 0, "topic", 5);
    expect_frame(m, 1, "", 0);
    pyc_zmtp_msg_destroy(&m);
    while ((m = wait_msg(c, 50)) != NULL)
        pyc_zmtp_msg_destroy(&m);

    unsigned char *big = big_pattern(3);
    assert_int_equal(zmq_send(pub, "x", 1, ZMQ_SNDMORE), 1);
    assert_int_equal(zmq_send(pub, big, BIG, 0), (int)BIG);
    m = wait_msg(c, 10000);
    assert_non_null(m);
    assert_int_equal(m->n, 2);
    expect_frame(m, 1, big, BIG);
    pyc_zmtp_msg_destroy(&m);
    /* A SUB sends nothing but its subscription. */
    assert_int_equal(pyc_zmtp_pending(c), 0);
    free(big);
    pyc_zmtp_destroy(&c);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}

static void
test_sub_pub_tcp(void **state)
{
    (void)state;
    sub_pub("tcp://127.0.0.1:0");
}

static void
test_sub_pub_ipc(void **state)
{
    (void)state;
    char where[128];
    snprintf(where, sizeof where, "ipc:///tmp/pyc-test-zmtp-%ld-p", (long)getpid());
    sub_pub(where);
    unlink(where + 6);
}

/* Our REQ (with the REQ envelope, an empty delimiter, written by the caller) against a libzmq REP, which
 * strips and restores the delimiter, and against a ROUTER echo like the kernel's heartbeat. */
static void
req_peers(const char *where)
{
    char ep[256];
    pyc_error_t err;
    void *ctx = zmq_ctx_new();
    void *rep = zbind(ctx, ZMQ_REP, where, ep, sizeof ep);
    assert_non_null(rep);
    pyc_zmtp_t *c = pyc_zmtp_new(ep, PYC_ZMTP_REQ, NULL, MAX_MSG, 64, &err);
    assert_non_null(c);
    pyc_frame_t ping[3] = {{"", 0}, {"ping", 4}, {"", 0}};
    assert_int_equal(pyc_zmtp_send(c, ping, 3, 0, &err), 0);
    wait_sent(c, 5000);
    zmq_msg_t in[4];
    int n = zrecv(rep, in, 4);
    assert_int_equal(n, 2);
    expect_part(&in[0], "ping", 4);
    expect_part(&in[1], "", 0);
    close_parts(in, n);
    assert_int_equal(zmq_send(rep, "pong", 4, 0), 4);
    pyc_zmtp_msg_t *m = wait_msg(c, 5000);
    assert_non_null(m);
    assert_int_equal(m->n, 2);
    expect_frame(m, 0, "", 0);
    expect_frame(m, 1, "pong", 4);
    pyc_zmtp_msg_destroy(&m);
    pyc_zmtp_destroy(&c);
    zmq_close(rep);

    void *router = zbind(ctx, ZMQ_ROUTER, where, ep, sizeof ep);
    assert_non_null(router);
    c = pyc_zmtp_new(ep, PYC_ZMTP_REQ, NULL, MAX_MSG, 64, &err);
    assert_non_null(c);
    assert_int_equal(pyc_zmtp_send(c, ping, 2, 0, &err), 0);
    wait_sent(c, 5000);
    n = zrecv(router, in, 4);
    assert_int_equal(n, 3);          /* a routing id libzmq made up, the delimiter, the ping */
    expect_part(&in[1], "", 0);
    expect_part(&in[2], "ping", 4);
    for (int i = 0; i < n; i++)
        assert_true(zmq_msg_send(&in[i], router, i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
    m = wait_msg(c, 5000);
    assert_non_null(m);
    assert_int_equal(m->n, 2);
    expect_frame(m, 1, "ping", 4);
    pyc_zmtp_msg_destroy(&m);
    pyc_zmtp_destroy(&c);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void
test_req_tcp(void **state)
{
    (void)state;
    req_peers("tcp://127.0.0.1:0");
}

static void
test_req_ipc(void **state)
{
    (void)state;
    char where[128];
    snprintf(where, sizeof where, "ipc:///tmp/pyc-test-zmtp-%ld-q", (long)getpid());
    req_peers(where);
    unlink(where + 6);
}

/* Connecting before anyone listens, then the peer going away and coming back: messages queued meanwhile
 * arrive, none twice, and nothing is an error. */
static void
test_reconnect(void **state)
{
    (void)state;
    char where[128], ep[256];
    pyc_error_t err;
    snprintf(where, sizeof where, "ipc:///tmp/pyc-test-zmtp-%ld-late", (long)getpid());
    unlink(where + 6);
    void *ctx = zmq_ctx_new();
    pyc_zmtp_t *c = pyc_zmtp_new(where, PYC_ZMTP_DEALER, "late", MAX_MSG, 64, &err);
    assert_non_null(c);
    pyc_frame_t one = {"first", 5};
    assert_int_equal(pyc_zmtp_send(c, &one, 1, 0, &err), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(pump(c, 10, &err), 0);   /* refused (no such path): waits, no error */
    assert_false(pyc_zmtp_is_up(c));
    assert_int_equal(pyc_zmtp_pending(c), 2 + 5);

    void *router = zbind(ctx, ZMQ_ROUTER, where, ep, sizeof ep);
    assert_non_null(router);
    wait_sent(c, 5000);
    zmq_msg_t in[4];
    int n = zrecv(router, in, 4);
    assert_int_equal(n, 2);
    expect_part(&in[0], "late", 4);
    expect_part(&in[1], "first", 5);
    close_parts(in, n);

    /* The peer goes away: the connection is lost, quietly. */
    zmq_close(router);
    unlink(where + 6);
    double end = now_ms() + 2000;
    while (pyc_zmtp_is_up(c) && now_ms() < end)
        assert_int_equal(pump(c, 10, &err), 0);
    assert_false(pyc_zmtp_is_up(c));
    pyc_frame_t two = {"second", 6};
    assert_int_equal(pyc_zmtp_send(c, &two, 1, 0, &err), 0);
    router = zbind(ctx, ZMQ_ROUTER, where, ep, sizeof ep);
    assert_non_null(router);
    wait_sent(c, 5000);
    n = zrecv(router, in, 4);
    assert_int_equal(n, 2);
    expect_part(&in[1], "second", 6);
    close_parts(in, n);
    zmq_pollitem_t it = {.socket = router, .events = ZMQ_POLLIN};
    assert_int_equal(zmq_poll(&it, 1, 100), 0);   /* and nothing else */

    pyc_zmtp_destroy(&c);
    zmq_close(router);
    zmq_ctx_term(ctx);
    unlink(where + 6);
}

/* A raw listening socket on 127.0.0.1; *port gets its port. */
static int
raw_listener(int *port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return l;
}

/* A peer that sends `b` after our connection is accepted; we must fail with `want`. */
static void
raw_peer(int type, const bytes_t *b, const char *want)
{
    int port;
    char ep[64];
    pyc_error_t err;
    int l = raw_listener(&port);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pyc_zmtp_t *c = pyc_zmtp_new(ep, type, "id", MAX_MSG, 64, &err);
    assert_non_null(c);
    int s = accept(l, NULL, NULL);
    assert_true(s >= 0);
    assert_int_equal(write(s, b->d, b->n), (ssize_t)b->n);
    wait_failure(c, 5000, want);
    /* What we wrote before failing: our greeting and READY, nothing else. */
    unsigned char got[512], want_hs[512];
    pyc_zmtp_greeting(want_hs);
    int r = pyc_zmtp_ready(want_hs + 64, sizeof want_hs - 64, type, "id", 2);
    ssize_t n = 0, k;
    while ((k = read(s, got + n, sizeof got - (size_t)n)) > 0)
        n += k;
    assert_int_equal(n, 64 + r);
    assert_memory_equal(got, want_hs, (size_t)n);
    pyc_frame_t f = {"x", 1};
    assert_int_equal(pyc_zmtp_send(c, &f, 1, 0, &err), -1);
    assert_non_null(strstr(err.text, want));
    pyc_zmtp_destroy(&c);
    close(s);
    close(l);
}

static void
test_broken_peers(void **state)
{
    (void)state;
    bytes_t b = {.n = 0};
    put(&b, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
    raw_peer(PYC_ZMTP_DEALER, &b, "does not speak ZMTP");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    peer_ready(&b, "PUB");
    raw_peer(PYC_ZMTP_DEALER, &b, "the peer is a PUB socket");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    peer_ready(&b, "ROUTER");
    put(&b, "\x02\x7f\xff\xff\xff\xff\xff\xff\xff", 9);
    raw_peer(PYC_ZMTP_DEALER, &b, "more than");
    b.n = 0;
    peer_greeting(&b, 3, "NULL");
    frame(&b, 0x04, "\5ERROR\3bad", 10);
    raw_peer(PYC_ZMTP_SUB, &b, "refused the connection: bad");
}

/* A PING after READY is answered with a PONG carrying its context, between messages. */
static void
test_ping_pong(void **state)
{
    (void)state;
    int port;
    char ep[64];
    pyc_error_t err;
    int l = raw_listener(&port);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pyc_zmtp_t *c = pyc_zmtp_new(ep, PYC_ZMTP_DEALER, NULL, MAX_MSG, 64, &err);
    assert_non_null(c);
    int s = accept(l, NULL, NULL);
    bytes_t b = {.n = 0};
    peer_greeting(&b, 3, "NULL");
    peer_ready(&b, "ROUTER");
    frame(&b, 0x04, "\4PING\0\x0a" "ctx", 10);
    frame(&b, 0x00, "m", 1);
    assert_int_equal(write(s, b.d, b.n), (ssize_t)b.n);
    pyc_zmtp_msg_t *m = wait_msg(c, 5000);
    assert_non_null(m);
    expect_frame(m, 0, "m", 1);
    pyc_zmtp_msg_destroy(&m);
    wait_sent(c, 5000);
    unsigned char got[512];
    int hs = 64 + pyc_zmtp_ready(got, sizeof got, PYC_ZMTP_DEALER, NULL, 0);
    ssize_t n = 0;
    while (n < hs + 10) {
        ssize_t k = read(s, got + n, sizeof got - (size_t)n);
        assert_true(k > 0);
        n += k;
    }
    assert_int_equal(n, hs + 10);
    assert_memory_equal(got + hs, "\x04\x08\x04PONGctx", 10);
    pyc_zmtp_destroy(&c);
    close(s);
    close(l);
}

/* Reads from s until n bytes came (or fails the test). */
static void
read_exactly(int s, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(s, buf + got, n - got);
        assert_true(k > 0);
        got += (size_t)k;
    }
}

/* A raw peer that accepts our connection and completes the handshake; returns its socket, c being up. */
static int
raw_up(int l, pyc_zmtp_t *c, int type)
{
    pyc_error_t err;
    struct pollfd p = {.fd = l, .events = POLLIN};
    double until = now_ms() + 5000;
    while (poll(&p, 1, 0) == 0 && now_ms() < until)
        assert_int_equal(pump(c, 10, &err), 0);   /* c may have to connect again first */
    int s = accept(l, NULL, NULL);
    assert_true(s >= 0);
    bytes_t b = {.n = 0};
    peer_greeting(&b, 3, "NULL");
    peer_ready(&b, type == PYC_ZMTP_SUB ? "PUB" : "ROUTER");
    assert_int_equal(write(s, b.d, b.n), (ssize_t)b.n);
    double end = now_ms() + 5000;
    while (!pyc_zmtp_is_up(c) && now_ms() < end)
        assert_int_equal(pump(c, 10, &err), 0);
    assert_true(pyc_zmtp_is_up(c));
    unsigned char hs[512];
    int r = pyc_zmtp_ready(hs, sizeof hs, type, NULL, 0);
    read_exactly(s, hs, 64 + (size_t)r);     /* our greeting and READY */
    return s;
}

/* A PING that comes while the caller is in the middle of a multipart message is answered after it. */
static void
test_pong_after_open_message(void **state)
{
    (void)state;
    int port;
    char ep[64];
    pyc_error_t err;
    int l = raw_listener(&port);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pyc_zmtp_t *c = pyc_zmtp_new(ep, PYC_ZMTP_DEALER, NULL, MAX_MSG, 64, &err);
    assert_non_null(c);
    int s = raw_up(l, c, PYC_ZMTP_DEALER);
    pyc_frame_t a = {"a", 1}, b = {"b", 1};
    assert_int_equal(pyc_zmtp_send(c, &a, 1, PYC_ZMTP_MORE, &err), 0);
    bytes_t ping = {.n = 0};
    frame(&ping, 0x04, "\4PING\0\0" "xy", 9);
    assert_int_equal(write(s, ping.d, ping.n), (ssize_t)ping.n);
    for (int i = 0; i < 5; i++)
        assert_int_equal(pump(c, 10, &err), 0);
    assert_int_equal(pyc_zmtp_send(c, &b, 1, 0, &err), 0);
    wait_sent(c, 5000);
    unsigned char got[14];
    read_exactly(s, got, sizeof got);
    assert_memory_equal(got, "\x01\x01" "a" "\x00\x01" "b" "\x04\x07\x04PONGxy", sizeof got);
    pyc_zmtp_destroy(&c);
    close(s);
    close(l);
}

/* The connection is lost while a message is half written: that message is dropped whole, also the part the
 * caller sends after the loss, and the next message goes to the next connection, alone. */
static void
test_lost_mid_message(void **state)
{
    (void)state;
    int port;
    char ep[64];
    pyc_error_t err;
    int l = raw_listener(&port), small = 65536;
    /* A small receive buffer (inherited by the accepted socket), so that 10 MB cannot all be taken at once. */
    setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pyc_zmtp_t *c = pyc_zmtp_new(ep, PYC_ZMTP_DEALER, NULL, MAX_MSG, 64, &err);
    assert_non_null(c);
    int s = raw_up(l, c, PYC_ZMTP_DEALER);
    unsigned char *big = big_pattern(4);
    pyc_frame_t head = {big, BIG}, tail = {"end", 3}, next = {"next", 4};
    /* 10 MB that the peer does not read: the socket takes a part, the rest waits. */
    assert_int_equal(pyc_zmtp_send(c, &head, 1, PYC_ZMTP_MORE | PYC_ZMTP_BORROW, &err), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pump(c, 10, &err), 0);
    assert_true(pyc_zmtp_pending(c) > 0 && pyc_zmtp_pending(c) < BIG);
    /* The peer goes away with our bytes unread (a reset). */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(s);
    double end = now_ms() + 5000;
    while (pyc_zmtp_is_up(c) && now_ms() < end)
        assert_int_equal(pump(c, 10, &err), 0);
    assert_false(pyc_zmtp_is_up(c));
    assert_int_equal(pyc_zmtp_pending(c), 0);
    assert_int_equal(pyc_zmtp_send(c, &tail, 1, 0, &err), 0);   /* the rest of the lost message: dropped */
    assert_int_equal(pyc_zmtp_pending(c), 0);
    assert_int_equal(pyc_zmtp_send(c, &next, 1, 0, &err), 0);
    assert_int_equal(pyc_zmtp_pending(c), 6);
    s = raw_up(l, c, PYC_ZMTP_DEALER);   /* we connect again by ourselves */
    wait_sent(c, 5000);
    unsigned char got[7];
    read_exactly(s, got, 6);
    assert_memory_equal(got, "\x00\x04next", 6);
    struct pollfd p = {.fd = s, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 50), 0);   /* and nothing else */
    free(big);
    pyc_zmtp_destroy(&c);
    close(s);
    close(l);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greeting_bytes),
        cmocka_unit_test(test_frame_headers),
        cmocka_unit_test(test_ready_bytes),
        cmocka_unit_test(test_decode_stream),
        cmocka_unit_test(test_decode_direct_body),
        cmocka_unit_test(test_decode_ping),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_decoder_args),
        cmocka_unit_test(test_dealer_router_tcp),
        cmocka_unit_test(test_dealer_router_hostname),
        cmocka_unit_test(test_dealer_router_tcp6),
        cmocka_unit_test(test_dealer_router_ipc),
        cmocka_unit_test(test_dealer_router_abstract),
        cmocka_unit_test(test_sub_pub_tcp),
        cmocka_unit_test(test_sub_pub_ipc),
        cmocka_unit_test(test_req_tcp),
        cmocka_unit_test(test_req_ipc),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_broken_peers),
        cmocka_unit_test(test_ping_pong),
        cmocka_unit_test(test_pong_after_open_message),
        cmocka_unit_test(test_lost_mid_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
