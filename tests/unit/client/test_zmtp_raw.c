/*
 * test_zmtp_raw.c -- cmocka tests for zmtp.c against raw sockets that play the peer, for what a libzmq peer
 * would never do: break the protocol (we must fail for good, having written nothing but our greeting and
 * READY), send a PING (answered with a PONG between our messages, never inside one), or vanish while a
 * message is half written (it is dropped whole, and the next goes to the next connection); and the
 * endpoints and arguments pyc_zmtp_new refuses.  No libzmq here: test_zmtp.c talks to real libzmq peers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zmtp.h"
#include "zmtp_test.h"

/* ---- raw peers ------------------------------------------------------------------------------------------- */


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
    pyc_zmtp_greeting(want_hs, false);
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

/* ---- refusals -------------------------------------------------------------------------------------------- */

static void
test_connection_args(void **state)
{
    (void)state;
    pyc_error_t err;
    assert_null(pyc_zmtp_new("tcp://127.0.0.1:1", -1, NULL, 1, 1, &err));
    assert_null(pyc_zmtp_new("tcp://127.0.0.1:1", PYC_ZMTP_NTYPES, NULL, 1, 1, &err));
    assert_non_null(strstr(err.text, "unknown socket type"));
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
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broken_peers),
        cmocka_unit_test(test_ping_pong),
        cmocka_unit_test(test_pong_after_open_message),
        cmocka_unit_test(test_lost_mid_message),
        cmocka_unit_test(test_connection_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
