/*
 * test_dap.c -- cmocka tests for dap.c: the framing of debugpy's DAP stream (whole, split and back-to-back
 * messages; extra headers; refusals of a missing or bad Content-Length, a length over the limit, a header
 * that never ends, lines without CR), and a connection to a local peer that sends two messages in pieces,
 * one that is not JSON, and then garbage (which closes the connection).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dap.h"

static int
frame(const char *s, size_t max, const char **body, size_t *blen, size_t *used)
{
    return pyc_dap_frame(s, strlen(s), max, body, blen, used);
}

static void
test_whole_split_and_back_to_back(void **state)
{
    (void)state;
    const char *body;
    size_t blen, used;
    const char *two = "Content-Length: 2\r\n\r\n{}Content-Length: 4\r\n\r\n[12]";
    assert_int_equal(frame(two, 100, &body, &blen, &used), 1);
    assert_int_equal(blen, 2);
    assert_memory_equal(body, "{}", 2);
    assert_int_equal(used, 23);
    assert_int_equal(frame(two + used, 100, &body, &blen, &used), 1);
    assert_memory_equal(body, "[12]", 4);
    /* every prefix of a message asks for more */
    const char *one = "Content-Length: 4\r\n\r\n[12]";
    for (size_t n = 0; n < strlen(one); n++)
        assert_int_equal(pyc_dap_frame(one, n, 100, &body, &blen, &used), 0);
    /* other headers, in any case, and spaces after the colon */
    assert_int_equal(frame("Content-Type: application/json\r\ncontent-LENGTH:   2\r\n\r\n{}", 100, &body, &blen,
                           &used), 1);
    assert_int_equal(blen, 2);
}

static void
test_refusals(void **state)
{
    (void)state;
    const char *body;
    size_t blen, used;
    assert_int_equal(frame("X: y\r\n\r\n{}", 100, &body, &blen, &used), -1);                /* no length */
    assert_int_equal(frame("Content-Length: 2x\r\n\r\n{}", 100, &body, &blen, &used), -1);   /* not a number */
    assert_int_equal(frame("Content-Length: \r\n\r\n", 100, &body, &blen, &used), -1);       /* empty */
    assert_int_equal(frame("Content-Length: 101\r\n\r\n", 100, &body, &blen, &used), -1);    /* over the limit */
    assert_int_equal(frame("Content-Length: 99999999999999999999999\r\n\r\n", 100, &body, &blen, &used), -1);
    assert_int_equal(frame("Content-Length: 2\n\n{}", 100, &body, &blen, &used), -1);        /* no CR */
    assert_int_equal(frame("Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 100, &body, &blen, &used), -1);
    char endless[PYC_DAP_MAX_HEADER + 10];
    memset(endless, 'a', sizeof endless - 1);
    endless[sizeof endless - 1] = '\0';
    assert_int_equal(frame(endless, 100, &body, &blen, &used), -1);                      /* header never ends */
}

static char peer_got[256];

/* The peer of the connection test: sends its script over the accepted connection, keeps what the client sent
 * (checked by the test's thread), then closes it. */
static void *
peer(void *arg)
{
    int ls = *(int *)arg;
    int fd = accept(ls, NULL, NULL);
    static const char *const parts[] = {
        "Content-Len", "gth: 12\r\n\r\n{\"type\":", "\"a\"}Content-Length: 3\r\n\r\n[1]",
        "Content-Length: 12\r\n\r\n{\"type\":\"b\"}", "garbage\r\n\r\n",
    };
    for (size_t i = 0; fd >= 0 && i < sizeof parts / sizeof parts[0]; i++) {
        ssize_t w = write(fd, parts[i], strlen(parts[i]));
        (void)w;
        usleep(20000);
    }
    ssize_t r = fd >= 0 ? read(fd, peer_got, sizeof peer_got - 1) : 0;   /* what the client sent */
    peer_got[r > 0 ? r : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void
test_connection(void **state)
{
    (void)state;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 1), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
    pthread_t th;
    pthread_create(&th, NULL, peer, &ls);

    pyc_dap_conn_t c;
    pyc_error_t err;
    pyc_dap_init(&c);
    assert_int_equal(pyc_dap_connect(&c, ntohs(sa.sin_port), &err), 0);
    json_t *req = json_pack("{s:i}", "seq", 1);
    assert_int_equal(pyc_dap_send(&c, req), 0);
    json_decref(req);
    const char *want[] = {"a", "b"};
    size_t got = 0;
    while (got < 2) {
        json_t *m = pyc_dap_next(&c);
        if (m == NULL) {
            assert_true(pyc_dap_read(&c, 2000) >= 0);
            continue;
        }
        assert_string_equal(json_string_value(json_object_get(m, "type")), want[got++]);  /* [1] was dropped */
        json_decref(m);
    }
    /* then garbage: the connection is closed */
    while (c.fd >= 0) {
        if (pyc_dap_next(&c) == NULL && c.fd >= 0)
            pyc_dap_read(&c, 2000);
    }
    assert_int_equal(pyc_dap_read(&c, 0), -1);
    pyc_dap_close(&c);
    pthread_join(th, NULL);
    assert_string_equal(peer_got, "Content-Length: 9\r\n\r\n{\"seq\":1}");
    close(ls);
    /* a port where nothing listens */
    assert_int_equal(pyc_dap_connect(&c, ntohs(sa.sin_port), &err), -1);
    assert_non_null(strstr(err.text, "cannot connect"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_split_and_back_to_back),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
