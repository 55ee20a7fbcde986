/*
 * test_zmtp.c -- cmocka tests for zmtp.c against real libzmq 4.3 peers in this process (libzmq is linked into
 * this test only, never into pyc): our DEALER against a ROUTER, our SUB against a PUB, our REQ against a REP
 * and a ROUTER, on tcp://127.0.0.1 (port 0 and ZMQ_LAST_ENDPOINT), tcp://localhost, tcp://[::1] when the
 * machine has IPv6, ipc:// paths and the abstract namespace; multipart messages both ways with empty frames
 * and a 10 MB frame; connecting before the peer binds, and after it went away and came back.
 *
 * Peers that break the protocol are played by raw sockets in test_zmtp_raw.c; the bytes themselves are
 * test_zmtp_codec.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "zmtp.h"
#include "zmtp_test.h"

/* ---- libzmq helpers -------------------------------------------------------------------------------------- */

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

/* ---- the tests ------------------------------------------------------------------------------------------- */

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

int
main(void)
{
    const struct CMUnitTest tests[] = {
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
