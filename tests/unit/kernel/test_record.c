/*
 * test_record.c -- cmocka tests for record.c, the pipe records between a kernel and its forked processes:
 * a round trip of several records with empty and binary frames, and the refusals (end of file in the
 * middle, too many frames).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "record.h"
#include "wire.h"

static void
test_round_trip(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pyc_frame_t f[3] = {{"hello", 5}, {"", 0}, {"\0\1\2", 3}};
    assert_int_equal(pyc_record_write(p[1], 7, 1, f, 3), 0);
    assert_int_equal(pyc_record_write(p[1], 8, 0, NULL, 0), 0);
    close(p[1]);
    uint32_t type, chan;
    pyc_outframe_t *got;
    size_t n;
    assert_int_equal(pyc_record_read(p[0], &type, &chan, &got, &n), 0);
    assert_int_equal(type, 7);
    assert_int_equal(chan, 1);
    assert_int_equal(n, 3);
    assert_int_equal(got[0].size, 5);
    assert_memory_equal(got[0].data, "hello", 5);
    assert_string_equal((const char *)got[0].data, "hello");   /* NUL-terminated for JSON */
    assert_int_equal(got[1].size, 0);
    assert_memory_equal(got[2].data, "\0\1\2", 3);
    assert_ptr_equal(got[0].owned, got[0].data);
    pyc_record_free(got, n);
    assert_int_equal(pyc_record_read(p[0], &type, &chan, &got, &n), 0);
    assert_int_equal(type, 8);
    assert_int_equal(n, 0);
    pyc_record_free(got, n);
    assert_int_equal(pyc_record_read(p[0], &type, &chan, &got, &n), -1);    /* end of file */
    assert_null(got);
    close(p[0]);
}

static void
test_refusals(void **state)
{
    (void)state;
    int p[2];
    uint32_t type, chan;
    pyc_outframe_t *got;
    size_t n;
    /* A record cut off in its second frame. */
    assert_int_equal(pipe(p), 0);
    uint32_t hdr[3] = {1, 0, 2};
    uint64_t size = 3;
    assert_int_equal(write(p[1], hdr, sizeof hdr), (ssize_t)sizeof hdr);
    assert_int_equal(write(p[1], &size, sizeof size), (ssize_t)sizeof size);
    assert_int_equal(write(p[1], "abc", 3), 3);
    assert_int_equal(write(p[1], &size, sizeof size), (ssize_t)sizeof size);
    assert_int_equal(write(p[1], "a", 1), 1);
    close(p[1]);
    assert_int_equal(pyc_record_read(p[0], &type, &chan, &got, &n), -1);
    close(p[0]);
    /* More frames than any message may have. */
    assert_int_equal(pipe(p), 0);
    hdr[2] = PYC_WIRE_MAX_FRAMES + 1;
    assert_int_equal(write(p[1], hdr, sizeof hdr), (ssize_t)sizeof hdr);
    close(p[1]);
    assert_int_equal(pyc_record_read(p[0], &type, &chan, &got, &n), -1);
    close(p[0]);
    /* A frame larger than the limit is refused before anything is allocated. */
    assert_int_equal(pipe(p), 0);
    hdr[2] = 1;
    size = PYC_RECORD_MAX_FRAME + 1;
    assert_int_equal(write(p[1], hdr, sizeof hdr), (ssize_t)sizeof hdr);
    assert_int_equal(write(p[1], &size, sizeof size), (ssize_t)sizeof size);
    close(p[1]);
    assert_int_equal(pyc_record_read(p[0], &type, &chan, &got, &n), -1);
    close(p[0]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
