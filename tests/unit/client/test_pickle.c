/*
 * test_pickle.c -- cmocka tests for pickle.c: out-of-band buffers of a protocol-5 pickle put back in band.
 *
 * The vectors were made with /usr/bin/python3 (3.11): each *_main is
 *     pickle.dumps(obj, protocol=5, buffer_callback=lambda b: bufs.append(b.raw().tobytes()) or False)
 * with its *_buf* frames, and each *_inband is the same pickle rewritten by an independent walk with
 * pickletools.genops (FRAME dropped, NEXT_BUFFER -> BYTEARRAY8 + length + bytes), checked to load with
 * pickle.loads to the original object.  "two" holds strings and bytes made of the opcode bytes 0x95 and 0x97,
 * so a walk that looked at data as opcodes would go wrong.  p0 is protocol 0 (text lines, a two-line GLOBAL,
 * an escaped newline inside a UNICODE line), which must pass unchanged.
 *
 * Every refusal is checked by its status and by its sentence, and by the sink: nothing was written.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "pickle.h"

/* obj = pickle.PickleBuffer(b"hello"): a read-only buffer (NEXT_BUFFER READONLY_BUFFER). */
static const char ro_main[] = "\x80\x05\x97\x98\x2e";
static const char ro_buf0[] = "\x68\x65\x6c\x6c\x6f";
static const char ro_inband[] = "\x80\x05\x96\x05\x00\x00\x00\x00\x00\x00\x00\x68\x65\x6c\x6c\x6f\x98\x2e";

/* obj = {'s': '\x97\x95', 'b': b'\x97\x95\x00', 'x': PickleBuffer(bytearray(b'A'*10)), 'y': PickleBuffer(b'BBB')} */
static const char two_main[] =
    "\x80\x05\x95\x25\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x73\x94\x8c\x04\xc2\x97\xc2\x95"
    "\x94\x8c\x01\x62\x94\x43\x03\x97\x95\x00\x94\x8c\x01\x78\x94\x97\x8c\x01\x79\x94\x97\x98\x75\x2e";
static const char two_buf0[] = "\x41\x41\x41\x41\x41\x41\x41\x41\x41\x41";
static const char two_buf1[] = "\x42\x42\x42";
static const char two_inband[] =
    "\x80\x05\x7d\x94\x28\x8c\x01\x73\x94\x8c\x04\xc2\x97\xc2\x95\x94\x8c\x01\x62\x94\x43\x03\x97\x95"
    "\x00\x94\x8c\x01\x78\x94\x96\x0a\x00\x00\x00\x00\x00\x00\x00\x41\x41\x41\x41\x41\x41\x41\x41\x41"
    "\x41\x8c\x01\x79\x94\x96\x03\x00\x00\x00\x00\x00\x00\x00\x42\x42\x42\x98\x75\x2e";

/* pickle.dumps(collections.OrderedDict(a=1, b='x\ny'), protocol=0) */
static const char p0[] = "ccollections\nOrderedDict\np0\n(tRp1\nVa\np2\nI1\nsVb\np3\nVx\\u000ay\np4\ns.";

#define FRAME_OF(s) ((pyc_frame_t){(s), sizeof(s) - 1})

/* Collects the output in a capped buffer; fails (ENOSPC) once `budget` writes have been made, if set. */
typedef struct sink {
    pyc_buf_t b;
    int writes;
    int budget;                  /* 0: no limit */
} sink_t;

static int
sink_write(void *ctx, const void *p, size_t n)
{
    sink_t *s = ctx;
    if (s->budget > 0 && s->writes >= s->budget) {
        errno = ENOSPC;
        return -1;
    }
    s->writes++;
    return pyc_buf_add(&s->b, p, n);
}

static int
run(const pyc_frame_t *main, const pyc_frame_t *bufs, size_t n, sink_t *s, pyc_error_t *err)
{
    pyc_buf_init(&s->b, 1 << 20);
    s->writes = 0;
    err->text[0] = '\0';
    return pyc_pickle_inband(main, bufs, n, sink_write, s, err);
}

static void
expect_output(const sink_t *s, const char *want, size_t len)
{
    assert_int_equal(s->b.len, len);
    assert_memory_equal(s->b.data, want, len);
}

static void
expect_error(const pyc_frame_t *main, const pyc_frame_t *bufs, size_t n, const char *needle)
{
    sink_t s = {0};
    pyc_error_t err;
    assert_int_equal(run(main, bufs, n, &s, &err), -1);
    assert_int_equal(err.code, PYC_EINVAL);
    if (strstr(err.text, needle) == NULL)
        fail_msg("error '%s' does not contain '%s'", err.text, needle);
    /* Refused before anything was written (a partial pickle on stdout cannot be taken back). */
    assert_int_equal(s.writes, 0);
    pyc_buf_free(&s.b);
}

static void
test_readonly_buffer(void **state)
{
    (void)state;
    pyc_frame_t main = FRAME_OF(ro_main), bufs[1] = {FRAME_OF(ro_buf0)};
    sink_t s = {0};
    pyc_error_t err;
    assert_int_equal(run(&main, bufs, 1, &s, &err), 0);
    expect_output(&s, ro_inband, sizeof ro_inband - 1);
    pyc_buf_free(&s.b);
}

static void
test_two_buffers_and_opcode_bytes_in_data(void **state)
{
    (void)state;
    pyc_frame_t main = FRAME_OF(two_main), bufs[2] = {FRAME_OF(two_buf0), FRAME_OF(two_buf1)};
    sink_t s = {0};
    pyc_error_t err;
    assert_int_equal(run(&main, bufs, 2, &s, &err), 0);
    expect_output(&s, two_inband, sizeof two_inband - 1);
    pyc_buf_free(&s.b);
}

static void
test_no_buffers_unchanged(void **state)
{
    (void)state;
    sink_t s = {0};
    pyc_error_t err;
    pyc_frame_t main = FRAME_OF(p0);
    assert_int_equal(run(&main, NULL, 0, &s, &err), 0);
    expect_output(&s, p0, sizeof p0 - 1);
    pyc_buf_free(&s.b);
    /* A framed pickle without buffers keeps its FRAME: nothing grows. */
    static const char framed[] = "\x80\x05\x95\x03\x00\x00\x00\x00\x00\x00\x00\x4b\x07\x2e";
    main = FRAME_OF(framed);
    assert_int_equal(run(&main, NULL, 0, &s, &err), 0);
    expect_output(&s, framed, sizeof framed - 1);
    pyc_buf_free(&s.b);
}

static void
test_every_truncation_refused(void **state)
{
    (void)state;
    pyc_frame_t bufs[2] = {FRAME_OF(two_buf0), FRAME_OF(two_buf1)};
    for (size_t cut = 0; cut < sizeof two_main - 1; cut++) {
        pyc_frame_t main = {two_main, cut};
        sink_t s = {0};
        pyc_error_t err;
        int r = run(&main, bufs, 2, &s, &err);
        if (r != -1)
            fail_msg("a pickle cut at %zu bytes was accepted", cut);
        if (s.writes != 0)
            fail_msg("a pickle cut at %zu bytes was refused after %d writes", cut, s.writes);
        pyc_buf_free(&s.b);
    }
    for (size_t cut = 0; cut < sizeof p0 - 1; cut++) {
        pyc_frame_t main = {p0, cut};
        sink_t s = {0};
        pyc_error_t err;
        assert_int_equal(run(&main, NULL, 0, &s, &err), -1);
        assert_int_equal(s.writes, 0);
        pyc_buf_free(&s.b);
    }
}

static void
test_bad_pickles(void **state)
{
    (void)state;
    pyc_frame_t buf = FRAME_OF(ro_buf0);
    static const char unknown[] = "\x80\x05\xff\x2e";
    pyc_frame_t m = FRAME_OF(unknown);
    expect_error(&m, NULL, 0, "byte 0xff at offset 2 is no opcode");

    static const char no_stop[] = "\x80\x05\x4b\x01";
    m = FRAME_OF(no_stop);
    expect_error(&m, NULL, 0, "without a STOP");

    static const char trailing[] = "\x80\x05\x4e\x2e\x4e";
    m = FRAME_OF(trailing);
    expect_error(&m, NULL, 0, "1 bytes follow the pickle's STOP");

    m = FRAME_OF(ro_main);
    expect_error(&m, NULL, 0, "asks for out-of-band buffer 1, but there are only 0");

    static const char none[] = "\x80\x05\x4e\x2e";
    m = FRAME_OF(none);
    expect_error(&m, &buf, 1, "used 0 of its 1 out-of-band buffers");

    /* Late refusals, after a buffer was used and output would already have been due. */
    static const char late_trailing[] = "\x80\x05\x97\x98\x2e\x4e";
    m = FRAME_OF(late_trailing);
    expect_error(&m, &buf, 1, "1 bytes follow the pickle's STOP");
    pyc_frame_t two_bufs[2] = {FRAME_OF(ro_buf0), FRAME_OF(ro_buf0)};
    m = FRAME_OF(ro_main);
    expect_error(&m, two_bufs, 2, "used 1 of its 2 out-of-band buffers");
    static const char late_bad[] = "\x80\x05\x97\x98\xff\x2e";
    m = FRAME_OF(late_bad);
    expect_error(&m, &buf, 1, "byte 0xff at offset 4 is no opcode");

    /* A length that points past the end, in each length-prefixed layout. */
    static const char long_short[] = "\x80\x05\x8c\x09" "ab.";
    m = FRAME_OF(long_short);
    expect_error(&m, NULL, 0, "truncated or malformed at offset 2");
    static const char long_eight[] = "\x80\x05\x8e\xff\xff\xff\xff\xff\xff\xff\xff.";
    m = FRAME_OF(long_eight);
    expect_error(&m, NULL, 0, "truncated or malformed at offset 2");
    static const char neg_four[] = "\x80\x02T\xff\xff\xff\xff.";
    m = FRAME_OF(neg_four);
    expect_error(&m, NULL, 0, "truncated or malformed at offset 2");
    static const char open_line[] = "I12";
    m = FRAME_OF(open_line);
    expect_error(&m, NULL, 0, "truncated or malformed at offset 0");
    static const char one_line_global[] = "cmodule\n";
    m = FRAME_OF(one_line_global);
    expect_error(&m, NULL, 0, "truncated or malformed at offset 0");
}

static void
test_write_failure(void **state)
{
    (void)state;
    pyc_frame_t main = FRAME_OF(two_main), bufs[2] = {FRAME_OF(two_buf0), FRAME_OF(two_buf1)};
    for (int budget = 1; budget <= 4; budget++) {
        sink_t s = {.budget = budget};
        pyc_error_t err;
        assert_int_equal(run(&main, bufs, 2, &s, &err), -1);
        assert_int_equal(err.code, PYC_EIO);
        assert_non_null(strstr(err.text, "cannot write the pickle"));
        pyc_buf_free(&s.b);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readonly_buffer),
        cmocka_unit_test(test_two_buffers_and_opcode_bytes_in_data),
        cmocka_unit_test(test_no_buffers_unchanged),
        cmocka_unit_test(test_every_truncation_refused),
        cmocka_unit_test(test_bad_pickles),
        cmocka_unit_test(test_write_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
