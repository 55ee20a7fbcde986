/*
 * test_buf.c -- cmocka tests for buf.c: capped buffers, the JSON string encoder and UTF-8 prefix splitting.
 *
 * The cap is the point of the module, so every appending function is driven past it and the buffer is then
 * compared byte for byte with its state before the call.  The JSON encoder is checked two ways: exact output
 * for the escapes and the valid UTF-8 boundary characters, and, for invalid UTF-8 and for 20 000 random
 * inputs, that jansson parses the result back into a string in which every bad sequence became U+FFFD.
 * Out of memory is reached without injection, by asking for more than the address space with an uncapped
 * buffer; under AddressSanitizer that needs allocator_may_return_null, set below.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define FFFD "\xEF\xBF\xBD"

/* Read by AddressSanitizer at start-up, ignored otherwise: lets the out-of-memory test see realloc fail
 * with NULL instead of a report. */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

/* A snapshot of a buffer, to show that a failed call left it as it was. */
typedef struct snap {
    char *bytes;
    char *data;
    size_t len, alloc, max;
} snap_t;

static snap_t
take(const pyc_buf_t *b)
{
    snap_t s = { NULL, b->data, b->len, b->alloc, b->max };
    if (b->data != NULL) {
        s.bytes = malloc(b->len + 1);
        assert_non_null(s.bytes);
        memcpy(s.bytes, b->data, b->len + 1);
    }
    return s;
}

static void
assert_unchanged(const pyc_buf_t *b, snap_t *s)
{
    assert_ptr_equal(b->data, s->data);
    assert_int_equal(b->len, s->len);
    assert_int_equal(b->alloc, s->alloc);
    assert_int_equal(b->max, s->max);
    if (s->bytes != NULL)
        assert_memory_equal(b->data, s->bytes, s->len + 1);
    free(s->bytes);
    s->bytes = NULL;
}

/* Encodes n bytes of s as a JSON string into a fresh buffer and returns it; the caller frees it. */
static pyc_buf_t
encode(const char *s, size_t n)
{
    pyc_buf_t b;
    pyc_buf_init(&b, 1 << 20);
    assert_int_equal(pyc_buf_add_json_string(&b, s, n), 0);
    assert_non_null(b.data);
    assert_int_equal(b.data[b.len], '\0');
    return b;
}

/* Asserts that s (n bytes) encodes to exactly `want` (a C string). */
static void
assert_encodes(const char *s, size_t n, const char *want)
{
    pyc_buf_t b = encode(s, n);
    if (b.len != strlen(want) || memcmp(b.data, want, b.len) != 0)
        fail_msg("encoded %zu bytes to [%s], expected [%s]", n, b.data, want);
    pyc_buf_free(&b);
}

/* Parses an encoder result with jansson (json_loads, so a raw NUL would cut it short) and returns the
 * decoded string; the caller decrefs it. */
static json_t *
parse_back(const pyc_buf_t *b)
{
    json_error_t jerr;
    json_t *v = json_loads(b->data, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (v == NULL)
        fail_msg("encoder output does not parse: %s: [%s]", jerr.text, b->data);
    assert_true(json_is_string(v));
    return v;
}

/* Matches the decoded string against a pattern in which '?' stands for one or more U+FFFD and every other
 * byte stands for itself. */
static int
matches_replaced(const char *got, size_t glen, const char *pattern)
{
    size_t g = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        if (*p == '?') {
            if (glen - g < 3 || memcmp(got + g, FFFD, 3) != 0)
                return 0;
            while (glen - g >= 3 && memcmp(got + g, FFFD, 3) == 0)
                g += 3;
        } else {
            if (g >= glen || got[g] != *p)
                return 0;
            g++;
        }
    }
    return g == glen;
}

static void
test_init_empty(void **state)
{
    (void)state;
    pyc_buf_t b;
    size_t len = 99;
    pyc_buf_init(&b, 100);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.max, 100);
    assert_null(pyc_buf_detach(&b, &len));
    assert_int_equal(len, 0);
    pyc_buf_reset(&b);           /* nothing allocated: still fine */
    pyc_buf_free(&b);
    pyc_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.max, 100);
}

static void
test_add_grows_and_terminates(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 1 << 20);

    /* An empty append allocates, so the buffer is a valid empty C string afterwards. */
    assert_int_equal(pyc_buf_add(&b, "", 0), 0);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");

    assert_int_equal(pyc_buf_add(&b, "ab\0cd", 5), 0);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "ab\0cd", 6);
    assert_int_equal(pyc_buf_adds(&b, "ef"), 0);
    assert_int_equal(b.len, 7);
    assert_memory_equal(b.data, "ab\0cdef", 8);

    /* Many small appends across several growths keep every byte. */
    pyc_buf_reset(&b);
    for (unsigned i = 0; i < 100000; i++) {
        char c = (char)('a' + i % 26);
        assert_int_equal(pyc_buf_add(&b, &c, 1), 0);
    }
    assert_int_equal(b.len, 100000);
    assert_true(b.alloc > b.len);
    assert_int_equal(b.data[b.len], '\0');
    for (unsigned i = 0; i < 100000; i++)
        if (b.data[i] != (char)('a' + i % 26))
            fail_msg("byte %u is wrong", i);
    pyc_buf_free(&b);
}

static void
test_cap_enforced(void **state)
{
    (void)state;
    pyc_buf_t b;
    snap_t s;
    pyc_buf_init(&b, 10);

    /* Too big for an empty buffer: fails before allocating anything. */
    s = take(&b);
    assert_int_equal(pyc_buf_add(&b, "0123456789X", 11), -1);
    assert_unchanged(&b, &s);
    assert_null(b.data);

    assert_int_equal(pyc_buf_add(&b, "01234", 5), 0);
    s = take(&b);
    assert_int_equal(pyc_buf_add(&b, "567890", 6), -1);
    assert_unchanged(&b, &s);
    s = take(&b);
    assert_int_equal(pyc_buf_adds(&b, "567890"), -1);
    assert_unchanged(&b, &s);
    s = take(&b);
    assert_int_equal(pyc_buf_addf(&b, "%d", 567890), -1);
    assert_unchanged(&b, &s);
    s = take(&b);
    assert_int_equal(pyc_buf_reserve(&b, 6), -1);
    assert_unchanged(&b, &s);
    s = take(&b);
    assert_int_equal(pyc_buf_reserve(&b, SIZE_MAX), -1);
    assert_unchanged(&b, &s);

    /* Exactly up to the cap is allowed; one byte more is not, and an empty append still is. */
    assert_int_equal(pyc_buf_add(&b, "56789", 5), 0);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "0123456789");
    s = take(&b);
    assert_int_equal(pyc_buf_add(&b, "X", 1), -1);
    assert_unchanged(&b, &s);
    assert_int_equal(pyc_buf_add(&b, "", 0), 0);
    assert_int_equal(pyc_buf_addf(&b, "%s", ""), 0);
    assert_int_equal(b.len, 10);

    /* After a reset the whole cap is available again. */
    pyc_buf_reset(&b);
    assert_int_equal(pyc_buf_addf(&b, "%010d", 42), 0);
    assert_string_equal(b.data, "0000000042");
    pyc_buf_free(&b);

    /* A cap of zero allows only empty appends. */
    pyc_buf_init(&b, 0);
    assert_int_equal(pyc_buf_add(&b, "", 0), 0);
    s = take(&b);
    assert_int_equal(pyc_buf_add(&b, "x", 1), -1);
    assert_unchanged(&b, &s);
    pyc_buf_free(&b);
}

static void
test_out_of_memory(void **state)
{
    (void)state;
    pyc_buf_t b;
    snap_t s;
    pyc_buf_init(&b, SIZE_MAX);
    assert_int_equal(pyc_buf_adds(&b, "kept"), 0);
    s = take(&b);
    /* 2^61 bytes: growth rounds to a 4 EiB request, more than any address space, yet not so big that
     * valgrind takes it for a negative size. */
    assert_int_equal(pyc_buf_reserve(&b, SIZE_MAX / 8), -1);
    assert_unchanged(&b, &s);
    pyc_buf_free(&b);
}

static void
test_addf(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 4096);
    assert_int_equal(pyc_buf_addf(&b, "%s=%d", "x", -17), 0);
    assert_int_equal(pyc_buf_addf(&b, ",%zu,%c,%.2f", (size_t)7, 'q', 1.5), 0);
    assert_string_equal(b.data, "x=-17,7,q,1.50");
    assert_int_equal(b.len, strlen("x=-17,7,q,1.50"));

    /* Longer than the first allocation, so the formatted text lands in grown storage. */
    assert_int_equal(pyc_buf_addf(&b, "[%0300d]", 5), 0);
    assert_int_equal(b.len, 14 + 302);
    assert_int_equal(b.data[14], '[');
    assert_int_equal(b.data[14 + 300], '5');
    assert_int_equal(b.data[b.len - 1], ']');
    assert_int_equal(b.data[b.len], '\0');
    pyc_buf_free(&b);

    /* Formatting into an empty buffer whose cap is exactly the text's length. */
    pyc_buf_init(&b, 5);
    assert_int_equal(pyc_buf_addf(&b, "%05u", 123u), 0);
    assert_string_equal(b.data, "00123");
    pyc_buf_free(&b);
}

static void
test_add_int(void **state)
{
    (void)state;
    static const long long vals[] = {0, 7, -1, 10, 99, -100, 123456789, 2147483647LL, -2147483648LL,
                                     LLONG_MAX, LLONG_MIN};
    pyc_buf_t b;
    char want[32];
    pyc_buf_init(&b, 4096);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        pyc_buf_reset(&b);
        assert_int_equal(pyc_buf_add_int(&b, vals[i]), 0);
        snprintf(want, sizeof want, "%lld", vals[i]);
        assert_string_equal(b.data, want);
        assert_int_equal(b.len, strlen(want));
    }
    pyc_buf_free(&b);

    /* Past the cap: nothing is written. */
    pyc_buf_init(&b, 3);
    assert_int_equal(pyc_buf_add_int(&b, 12), 0);
    assert_int_equal(pyc_buf_add_int(&b, 34), -1);
    assert_string_equal(b.data, "12");
    pyc_buf_free(&b);
}

static void
test_reset(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 1024);
    assert_int_equal(pyc_buf_adds(&b, "some text that is kept in the storage"), 0);
    char *data = b.data;
    size_t alloc = b.alloc;
    pyc_buf_reset(&b);
    assert_ptr_equal(b.data, data);
    assert_int_equal(b.alloc, alloc);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    assert_int_equal(pyc_buf_adds(&b, "new"), 0);
    assert_ptr_equal(b.data, data);
    assert_string_equal(b.data, "new");
    pyc_buf_free(&b);
}

/* The first allocation holds a few hundred bytes without a realloc; pyc_buf_shrink gives the rest back and
 * keeps the text; appends after it grow again. */
static void
test_first_alloc_and_shrink(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 1 << 20);
    pyc_buf_shrink(&b);                          /* nothing allocated: nothing to do */
    assert_null(b.data);
    assert_int_equal(pyc_buf_adds(&b, "{"), 0);
    char *first = b.data;
    for (int i = 0; i < 60; i++)
        assert_int_equal(pyc_buf_adds(&b, "\"key\":\"value\","), 0);  /* 900 bytes in all */
    assert_ptr_equal(b.data, first);
    assert_true(b.alloc >= 901);
    pyc_buf_reset(&b);
    assert_int_equal(pyc_buf_adds(&b, "short"), 0);
    pyc_buf_shrink(&b);
    assert_int_equal(b.alloc, 6);
    assert_string_equal(b.data, "short");
    assert_int_equal(pyc_buf_adds(&b, " and longer"), 0);
    assert_string_equal(b.data, "short and longer");
    assert_true(b.alloc >= b.len + 1);
    pyc_buf_free(&b);
}

static void
test_detach(void **state)
{
    (void)state;
    pyc_buf_t b;
    size_t len = 0;
    pyc_buf_init(&b, 1024);
    assert_int_equal(pyc_buf_adds(&b, "hello"), 0);
    char *p = pyc_buf_detach(&b, &len);
    assert_non_null(p);
    assert_int_equal(len, 5);
    assert_string_equal(p, "hello");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.alloc, 0);
    assert_int_equal(b.max, 1024);
    free(p);

    /* The buffer is usable again, and len may be NULL. */
    assert_int_equal(pyc_buf_adds(&b, "again"), 0);
    p = pyc_buf_detach(&b, NULL);
    assert_string_equal(p, "again");
    free(p);
    assert_null(pyc_buf_detach(&b, &len));
    assert_int_equal(len, 0);

    /* A buffer emptied by reset still hands over its storage, as an empty string. */
    assert_int_equal(pyc_buf_adds(&b, "x"), 0);
    pyc_buf_reset(&b);
    p = pyc_buf_detach(&b, &len);
    assert_non_null(p);
    assert_int_equal(len, 0);
    assert_string_equal(p, "");
    free(p);
    pyc_buf_free(&b);
}

static void
test_json_escapes(void **state)
{
    (void)state;
    assert_encodes("", 0, "\"\"");
    assert_encodes("plain text", 10, "\"plain text\"");
    assert_encodes("a\"b\\c/", 6, "\"a\\\"b\\\\c/\"");
    assert_encodes("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
    assert_encodes("\x01\x1f\x0b\x1b", 4, "\"\\u0001\\u001f\\u000b\\u001b\"");
    assert_encodes("a\0b", 3, "\"a\\u0000b\"");
    assert_encodes("\0", 1, "\"\\u0000\"");
    assert_encodes("\x7f~ ", 3, "\"\x7f~ \"");
    assert_encodes("\"\"", 2, "\"\\\"\\\"\"");

    /* Every byte below 0x20 is escaped and decodes back to itself. */
    for (int c = 0; c < 0x20; c++) {
        char in = (char)c;
        pyc_buf_t b = encode(&in, 1);
        json_t *v = parse_back(&b);
        assert_int_equal(json_string_length(v), 1);
        assert_int_equal(json_string_value(v)[0], c);
        json_decref(v);
        pyc_buf_free(&b);
    }
}

static void
test_json_appends(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 1024);
    assert_int_equal(pyc_buf_adds(&b, "{\"text\":"), 0);
    assert_int_equal(pyc_buf_add_json_string(&b, "x\ny", 3), 0);
    assert_int_equal(pyc_buf_adds(&b, "}"), 0);
    assert_string_equal(b.data, "{\"text\":\"x\\ny\"}");
    pyc_buf_free(&b);
}

static void
test_json_valid_utf8_passes(void **state)
{
    (void)state;
    /* Two-, three- and four-byte characters, and the first and last character of each length, and around the
     * surrogate block, are copied unchanged. */
    static const char *const ok[] = {
        "\xC3\xA9",                  /* U+00E9 */
        "\xE2\x82\xAC",              /* U+20AC */
        "\xF0\x9F\x98\x80",          /* U+1F600 */
        "\xC2\x80", "\xDF\xBF",      /* U+0080, U+07FF */
        "\xE0\xA0\x80", "\xEF\xBF\xBF", /* U+0800, U+FFFF */
        "\xED\x9F\xBF", "\xEE\x80\x80", /* U+D7FF, U+E000 */
        "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", /* U+10000, U+10FFFF */
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80!",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n = strlen(ok[i]);
        pyc_buf_t b = encode(ok[i], n);
        assert_int_equal(b.len, n + 2);
        assert_memory_equal(b.data + 1, ok[i], n);
        json_t *v = parse_back(&b);
        assert_int_equal(json_string_length(v), n);
        assert_memory_equal(json_string_value(v), ok[i], n);
        json_decref(v);
        pyc_buf_free(&b);
    }
}

static void
test_json_invalid_utf8_replaced(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *pattern;     /* '?' = one or more U+FFFD */
    } cases[] = {
        { "\x80", "?" },                          /* lone continuation byte */
        { "a\x80z", "a?z" },
        { "\xBF\xBF", "?" },
        { "\xE2\x82", "?" },                      /* truncated at the end */
        { "x\xE2\x82y", "x?y" },                  /* truncated, then ASCII */
        { "\xF0\x9F\x98", "?" },
        { "\xC3", "?" },
        { "\xC3(", "?(" },
        { "\xC0\xAF", "?" },                      /* overlong '/' */
        { "\xC1\xBF", "?" },
        { "\xE0\x80\xAF", "?" },                  /* overlong, three bytes */
        { "\xF0\x80\x80\xAF", "?" },              /* overlong, four bytes */
        { "\xED\xA0\x80", "?" },                  /* surrogate U+D800 */
        { "\xED\xBF\xBF", "?" },                  /* surrogate U+DFFF */
        { "\xF4\x90\x80\x80", "?" },              /* above U+10FFFF */
        { "\xF5\x80\x80\x80", "?" },
        { "\xF8\x88\x80\x80\x80", "?" },          /* five-byte form */
        { "\xFE\xFF", "?" },
        { "ok\xC3\xA9\xFFok", "ok\xC3\xA9?ok" },  /* good character kept next to a bad byte */
        { "\xE2\x82\xE2\x82\xAC", "?\xE2\x82\xAC" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pyc_buf_t b = encode(cases[i].in, strlen(cases[i].in));
        json_t *v = parse_back(&b);
        if (!matches_replaced(json_string_value(v), json_string_length(v), cases[i].pattern))
            fail_msg("case %zu: [%s] does not match [%s]", i, b.data, cases[i].pattern);
        json_decref(v);
        pyc_buf_free(&b);
    }
    /* The simplest case exactly: one bad byte, one replacement character. */
    assert_encodes("\x80", 1, "\"" FFFD "\"");
    /* A bad byte next to an escape. */
    assert_encodes("\x80\n\x80", 3, "\"" FFFD "\\n" FFFD "\"");
}

static void
test_json_every_byte(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        char in = (char)c;
        pyc_buf_t b = encode(&in, 1);
        json_t *v = parse_back(&b);
        if (c < 0x80) {
            assert_int_equal(json_string_length(v), 1);
            assert_int_equal((unsigned char)json_string_value(v)[0], c);
        } else {
            assert_int_equal(json_string_length(v), 3);
            assert_memory_equal(json_string_value(v), FFFD, 3);
        }
        json_decref(v);
        pyc_buf_free(&b);
    }
}

/* A small deterministic generator (xorshift64*), so a failure can be replayed. */
static uint64_t
next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static void
test_json_random_always_parses(void **state)
{
    (void)state;
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    unsigned char in[300];
    for (unsigned iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(next_rand(&seed) % sizeof in);
        /* Half the inputs lean towards bytes >= 0x80 to exercise the UTF-8 checks. */
        unsigned mask = iter % 2 ? 0xFF : 0x7F;
        for (size_t i = 0; i < n; i++)
            in[i] = (unsigned char)(next_rand(&seed) & mask);
        pyc_buf_t b = encode((const char *)in, n);
        json_t *v = parse_back(&b);
        if (mask == 0x7F) {
            /* ASCII round-trips exactly. */
            assert_int_equal(json_string_length(v), n);
            assert_memory_equal(json_string_value(v), in, n);
        }
        json_decref(v);
        pyc_buf_free(&b);
    }
}

static void
test_json_cap(void **state)
{
    (void)state;
    pyc_buf_t b;
    snap_t s;

    /* Fails on the first reservation: the raw text does not fit. */
    pyc_buf_init(&b, 8);
    assert_int_equal(pyc_buf_adds(&b, "abc"), 0);
    s = take(&b);
    assert_int_equal(pyc_buf_add_json_string(&b, "abcd", 4), -1);
    assert_unchanged(&b, &s);
    /* Just fits: 3 + 2 quotes + 3. */
    assert_int_equal(pyc_buf_add_json_string(&b, "xyz", 3), 0);
    assert_string_equal(b.data, "abc\"xyz\"");
    pyc_buf_free(&b);

    /* Fails half way: the raw text fits but its escapes do not.  The buffer is rolled back, still
     * NUL-terminated. */
    pyc_buf_init(&b, 20);
    assert_int_equal(pyc_buf_adds(&b, "abc"), 0);
    assert_int_equal(pyc_buf_reserve(&b, 17), 0);
    s = take(&b);
    assert_int_equal(pyc_buf_add_json_string(&b, "\x01\x02\x03\x04\x05", 5), -1);
    assert_unchanged(&b, &s);
    s = take(&b);
    assert_int_equal(pyc_buf_add_json_string(&b, "\x80\x80\x80\x80\x80\x80", 6), -1);
    assert_unchanged(&b, &s);
    s = take(&b);
    /* Fails on the closing quote: 3 + 1 + 2 + 14 = 20 bytes fit, the quote is the 21st. */
    assert_int_equal(pyc_buf_add_json_string(&b, "\n01234567890123", 15), -1);
    assert_unchanged(&b, &s);
    pyc_buf_free(&b);
}

static void
test_utf8_complete_prefix(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        { "", 0 },
        { "abc", 3 },
        { "a\xC3", 1 },                   /* two-byte character cut after its lead */
        { "a\xC3\xA9", 3 },
        { "\xE2", 0 },
        { "\xE2\x82", 0 },                /* three-byte character cut after two */
        { "ab\xE2\x82", 2 },
        { "\xE2\x82\xAC", 3 },
        { "x\xF0", 1 },
        { "x\xF0\x9F", 1 },
        { "x\xF0\x9F\x98", 1 },           /* four-byte character cut after three */
        { "x\xF0\x9F\x98\x80", 5 },
        { "\x80", 1 },                    /* stray continuation bytes cannot be completed: keep them */
        { "\x80\x80\x80\x80", 4 },
        { "a\xC3\xA9\xA9", 4 },           /* one continuation too many: nothing to wait for */
        { "\xC3\xA9\xE2\x82\xAC", 5 },
        /* Bytes that never begin a valid sequence cannot be completed either. */
        { "a\xFF", 2 },
        { "a\xF8\x80", 3 },
        { "a\xF5", 2 },
        { "a\xC0", 2 },
        { "a\xC1", 2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = pyc_utf8_complete_prefix(cases[i].s, strlen(cases[i].s));
        if (got != cases[i].want)
            fail_msg("case %zu: prefix %zu, expected %zu", i, got, cases[i].want);
    }

    /* Cutting valid text anywhere holds back at most three bytes, and what is kept is valid UTF-8. */
    static const char text[] = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z\xDF\xBF";
    for (size_t k = 0; k <= sizeof text - 1; k++) {
        size_t p = pyc_utf8_complete_prefix(text, k);
        assert_true(p <= k && k - p <= 3);
        pyc_buf_t b = encode(text, p);
        assert_null(strstr(b.data, FFFD));
        pyc_buf_free(&b);
        /* The held-back tail plus the rest completes the text without replacement either. */
        b = encode(text + p, sizeof text - 1 - p);
        assert_null(strstr(b.data, FFFD));
        pyc_buf_free(&b);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_empty),
        cmocka_unit_test(test_add_grows_and_terminates),
        cmocka_unit_test(test_cap_enforced),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_first_alloc_and_shrink),
        cmocka_unit_test(test_addf),
        cmocka_unit_test(test_add_int),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_detach),
        cmocka_unit_test(test_json_escapes),
        cmocka_unit_test(test_json_appends),
        cmocka_unit_test(test_json_valid_utf8_passes),
        cmocka_unit_test(test_json_invalid_utf8_replaced),
        cmocka_unit_test(test_json_every_byte),
        cmocka_unit_test(test_json_random_always_parses),
        cmocka_unit_test(test_json_cap),
        cmocka_unit_test(test_utf8_complete_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
