/*
 * test_zmtp_codec.c -- cmocka tests for zmtp_codec.c: the bytes we write and the decoding of the bytes a peer
 * writes, without sockets.
 *
 *   1. the encoder against byte-exact vectors written out by hand from RFC 23 (greeting, READY, short and
 *      long frame headers), so a change of the wire bytes cannot go unnoticed;
 *   2. the decoder: a peer's handshake and messages fed whole, byte by byte, and through the direct-body
 *      path, and every malformed input refused with its sentence (one case per line in test_refusals);
 *   3. the fuzz corpus as a refusal table, in the manner of jansson's test suites: every input in
 *      tests/fuzz/corpus/zmtp (its format is fuzz_zmtp.c's: byte 0 picks our socket type, byte 1 is a seed,
 *      the rest is the peer's stream) that has a NAME.err beside it must be refused with a sentence that
 *      contains the first line of NAME.err, and every other input must be accepted.  The directory is found
 *      through $PYC_SRCDIR (which `make check` exports), else from this program's place in an in-tree build;
 *      without either the check is skipped with a message.
 *
 * The connection, against real libzmq peers and raw sockets, is test_zmtp.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zmtp.h"
#include "zmtp_curve.h"
#include "zmtp_test.h"

/* ---- helpers --------------------------------------------------------------------------------------------- */

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
    pyc_zmtp_greeting(g, false);
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
    pyc_zmtp_greeting(g, false);
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
    refused(PYC_ZMTP_DEALER, &b, "the connection file says NULL (no CURVE keys)");

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
    assert_null(pyc_zmtp_dec_new(PYC_ZMTP_NTYPES, 1, 1, &err));
    assert_non_null(strstr(err.text, "unknown socket type"));
    assert_null(pyc_zmtp_dec_new(-1, 1, 1, &err));
    pyc_zmtp_dec_destroy(NULL);
    pyc_zmtp_msg_destroy(NULL);
}

/* ---- 3. the corpus's refusal table ---------------------------------------------------------------------- */

#define CORPUS_SUBDIR "tests/fuzz/corpus/zmtp"

/* The caps fuzz_zmtp.c decodes with; bad-too-large and bad-too-many-frames pass them. */
#define CORPUS_MAX_MSG 65536
#define CORPUS_MAX_FRAMES 16

/* Where this program lives, for finding the corpus in an in-tree build. */
static char exe_dir[PATH_MAX];

/* Finds the corpus directory; returns 0 with dir filled, or -1. */
static int
find_corpus(char *dir, size_t cap)
{
    const char *src = getenv("PYC_SRCDIR");
    struct stat st;
    if (src != NULL && src[0] != '\0') {
        if ((size_t)snprintf(dir, cap, "%s/" CORPUS_SUBDIR, src) < cap && stat(dir, &st) == 0 &&
            S_ISDIR(st.st_mode))
            return 0;
        fail_msg("PYC_SRCDIR is set but %s is not a directory", dir);
    }
    if (exe_dir[0] != '\0' && (size_t)snprintf(dir, cap, "%s/../../../" CORPUS_SUBDIR, exe_dir) < cap &&
        stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    return -1;
}

/* Decodes a corpus input as fuzz_zmtp.c does (our type is byte 0 mod 3, CURVE with bit 6 of it, the stream
 * starts at byte 2), in pieces of `chunk` bytes.  Returns 0 when every byte was accepted, or -1 with the refusal
 * in err. */
static int
decode_input(const unsigned char *data, size_t n, size_t chunk, pyc_error_t *err)
{
    static const unsigned char key[32] = {9};
    pyc_zmtp_dec_t *dec = pyc_zmtp_dec_new(data[0] % 3, CORPUS_MAX_MSG, CORPUS_MAX_FRAMES, err);
    pyc_zmtp_curve_t *cv = (data[0] & 0x40) ? pyc_zmtp_curve_new(key, key, key, NULL) : NULL;
    int rc = 0;
    assert_non_null(dec);
    pyc_zmtp_dec_set_curve(dec, cv);
    for (size_t off = 2; off < n && rc == 0;) {
        size_t used;
        pyc_zmtp_event_t ev;
        size_t len = n - off < chunk ? n - off : chunk;
        if (pyc_zmtp_dec_feed(dec, data + off, len, &used, &ev, err) < 0)
            rc = -1;
        else
            off += used;
        if (rc == 0 && ev.type == PYC_ZMTP_EV_MSG)
            pyc_zmtp_msg_destroy(&ev.msg);
    }
    pyc_zmtp_dec_destroy(&dec);
    pyc_zmtp_curve_destroy(&cv);
    return rc;
}

/* Reads all of path into a new buffer; *n gets its length. */
static unsigned char *
read_input(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    unsigned char *data = malloc(1 << 20);
    assert_non_null(data);
    *n = fread(data, 1, 1 << 20, f);
    assert_int_equal(ferror(f), 0);
    assert_true(feof(f));
    fclose(f);
    return data;
}

static void
test_corpus_refusals(void **state)
{
    (void)state;
    char dir[PATH_MAX], path[PATH_MAX], errpath[PATH_MAX], want[256];
    int refusals = 0, accepted = 0;
    if (find_corpus(dir, sizeof dir) < 0) {
        print_message("the zmtp corpus was not found: set PYC_SRCDIR to the source tree; skipping\n");
        skip();
    }
    DIR *d = opendir(dir);
    struct dirent *e;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || (len > 4 && strcmp(e->d_name + len - 4, ".err") == 0))
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
            (size_t)snprintf(errpath, sizeof errpath, "%s.err", path) >= sizeof errpath)
            fail_msg("the path of %s is too long", e->d_name);
        size_t n;
        unsigned char *data = read_input(path, &n);
        FILE *ef = fopen(errpath, "r");
        pyc_error_t whole, bytes;
        whole.text[0] = bytes.text[0] = '\0';
        int rw = n >= 2 ? decode_input(data, n, n, &whole) : 0;
        int rb = n >= 2 ? decode_input(data, n, 1, &bytes) : 0;
        free(data);
        if (ef == NULL) {
            if (rw < 0 || rb < 0)
                fail_msg("%s was refused (\"%s\"), but it has no %s.err saying so", e->d_name,
                         rw < 0 ? whole.text : bytes.text, e->d_name);
            accepted++;
            continue;
        }
        if (fgets(want, sizeof want, ef) == NULL)
            fail_msg("%s is empty", errpath);
        fclose(ef);
        want[strcspn(want, "\r\n")] = '\0';
        if (want[0] == '\0')
            fail_msg("%s: the first line is empty", errpath);
        if (rw == 0 || rb == 0)
            fail_msg("%s was accepted%s; expected \"%s\"", e->d_name, rw == 0 ? "" : " byte by byte", want);
        if (strstr(whole.text, want) == NULL)
            fail_msg("%s: refused with \"%s\", which does not contain \"%s\"", e->d_name, whole.text, want);
        assert_string_equal(bytes.text, whole.text);
        refusals++;
    }
    closedir(d);
    print_message("zmtp corpus: %d inputs refused as their .err says, %d accepted\n", refusals, accepted);
    assert_true(refusals >= 8);
}

int
main(void)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(exe_dir, sizeof exe_dir, "%s", exe);
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greeting_bytes),
        cmocka_unit_test(test_frame_headers),
        cmocka_unit_test(test_ready_bytes),
        cmocka_unit_test(test_decode_stream),
        cmocka_unit_test(test_decode_direct_body),
        cmocka_unit_test(test_decode_ping),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_decoder_args),
        cmocka_unit_test(test_corpus_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
