/*
 * test_zrecv.c -- cmocka tests for zrecv.c over an inproc PAIR: nothing waiting gives 0 without blocking; a
 * message is taken whole, frame order and contents kept; a message longer than the bound is taken whole too,
 * its extra frames dropped, so that the next call sees the next message and not the rest of this one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "zrecv.h"

typedef struct pair {
    void *ctx, *a, *b;
} pair_t;

static int
setup(void **state)
{
    static pair_t p;
    p.ctx = zmq_ctx_new();
    p.a = zmq_socket(p.ctx, ZMQ_PAIR);
    p.b = zmq_socket(p.ctx, ZMQ_PAIR);
    if (p.ctx == NULL || p.a == NULL || p.b == NULL || zmq_bind(p.a, "inproc://zrecv") < 0 ||
        zmq_connect(p.b, "inproc://zrecv") < 0)
        return -1;
    *state = &p;
    return 0;
}

static int
teardown(void **state)
{
    pair_t *p = *state;
    zmq_close(p->a);
    zmq_close(p->b);
    zmq_ctx_term(p->ctx);
    return 0;
}

/* Sends n frames "f0", "f1", ... as one message. */
static void
send_frames(void *sock, int n)
{
    for (int i = 0; i < n; i++) {
        char f[16];
        int len = snprintf(f, sizeof f, "f%d", i);
        assert_int_equal(zmq_send(sock, f, (size_t)len, i + 1 < n ? ZMQ_SNDMORE : 0), len);
    }
}

static void
assert_frames(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++) {
        char want[16];
        int len = snprintf(want, sizeof want, "f%d", i);
        assert_int_equal(zmq_msg_size(&parts[i]), (size_t)len);
        assert_memory_equal(zmq_msg_data(&parts[i]), want, (size_t)len);
    }
}

static void
test_nothing_waiting(void **state)
{
    pair_t *p = *state;
    zmq_msg_t parts[4];
    assert_int_equal(pyc_zrecv(p->b, parts, 4), 0);
}

static void
test_whole_message(void **state)
{
    pair_t *p = *state;
    zmq_msg_t parts[4];
    send_frames(p->a, 3);
    int n = pyc_zrecv(p->b, parts, 4);
    assert_int_equal(n, 3);
    assert_frames(parts, n);
    pyc_zrecv_close(parts, n);
    assert_int_equal(pyc_zrecv(p->b, parts, 4), 0);
}

static void
test_longer_than_the_bound(void **state)
{
    pair_t *p = *state;
    zmq_msg_t parts[4];
    send_frames(p->a, 10);
    send_frames(p->a, 2);
    int n = pyc_zrecv(p->b, parts, 4);
    assert_int_equal(n, 4);
    assert_frames(parts, n);
    pyc_zrecv_close(parts, n);
    n = pyc_zrecv(p->b, parts, 4);       /* the next message, not frames f4..f9 of the first */
    assert_int_equal(n, 2);
    assert_frames(parts, n);
    pyc_zrecv_close(parts, n);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_waiting),
        cmocka_unit_test(test_whole_message),
        cmocka_unit_test(test_longer_than_the_bound),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
