/*
 * test_msg.c -- cmocka tests for msg.c: UUID4 message ids, ISO 8601 dates and header text.
 *
 * Ids are checked for their exact shape (36 characters, version nibble 4, variant 8..b) and for uniqueness
 * over 100 000 draws, across threads, and across fork() when the child reseeds.  Dates are checked
 * character by character and against the clock.  A header must parse with jansson into exactly the six
 * fields the messaging spec asks for, with version "5.6".
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"

#define MANY_IDS 100000

static int
is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Fails the test unless id is a lowercase UUID4 in 8-4-4-4-12 form. */
static void
assert_uuid4(const char *id)
{
    if (strlen(id) != PYC_MSG_ID_LEN)
        fail_msg("id [%s] has %zu characters", id, strlen(id));
    for (int i = 0; i < PYC_MSG_ID_LEN; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? id[i] != '-' : !is_lower_hex(id[i]))
            fail_msg("id [%s]: bad character at %d", id, i);
    }
    if (id[14] != '4')
        fail_msg("id [%s] is not version 4", id);
    if (strchr("89ab", id[19]) == NULL)
        fail_msg("id [%s] does not have the RFC 4122 variant", id);
}

static int
cmp_ids(const void *a, const void *b)
{
    return memcmp(a, b, PYC_MSG_ID_LEN + 1);
}

/* Sorts n ids (PYC_MSG_ID_LEN + 1 bytes each) and fails on the first duplicate. */
static void
assert_all_different(char (*ids)[PYC_MSG_ID_LEN + 1], size_t n)
{
    qsort(ids, n, sizeof ids[0], cmp_ids);
    for (size_t i = 1; i < n; i++)
        if (memcmp(ids[i - 1], ids[i], sizeof ids[0]) == 0)
            fail_msg("id %s drawn twice", ids[i]);
}

static void
test_id_format(void **state)
{
    (void)state;
    char id[PYC_MSG_ID_LEN + 2];
    int variants[4] = { 0 };
    for (int i = 0; i < 2000; i++) {
        memset(id, 'X', sizeof id);
        pyc_msg_new_id(id);
        assert_int_equal(id[PYC_MSG_ID_LEN], '\0');
        assert_int_equal(id[PYC_MSG_ID_LEN + 1], 'X');   /* nothing written past the NUL */
        assert_uuid4(id);
        variants[id[19] == '8' ? 0 : id[19] == '9' ? 1 : id[19] == 'a' ? 2 : 3]++;
    }
    /* The two variant bits are fixed, the other two are random: all four digits turn up. */
    for (int v = 0; v < 4; v++)
        assert_true(variants[v] > 0);
}

static void
test_id_unique(void **state)
{
    (void)state;
    char (*ids)[PYC_MSG_ID_LEN + 1] = malloc(MANY_IDS * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < MANY_IDS; i++)
        pyc_msg_new_id(ids[i]);
    assert_all_different(ids, MANY_IDS);
    free(ids);
}

#define THREADS 4
#define PER_THREAD 10000

static void *
draw_ids(void *arg)
{
    char (*ids)[PYC_MSG_ID_LEN + 1] = arg;
    for (size_t i = 0; i < PER_THREAD; i++)
        pyc_msg_new_id(ids[i]);
    return NULL;
}

static void
test_id_unique_across_threads(void **state)
{
    (void)state;
    char (*ids)[PYC_MSG_ID_LEN + 1] = malloc(THREADS * PER_THREAD * sizeof *ids);
    pthread_t tid[THREADS];
    assert_non_null(ids);
    for (size_t t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, draw_ids, ids + t * PER_THREAD), 0);
    for (size_t t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(tid[t], NULL), 0);
    for (size_t i = 0; i < THREADS * PER_THREAD; i++)
        assert_uuid4(ids[i]);
    assert_all_different(ids, THREADS * PER_THREAD);
    free(ids);
}

static void
test_reseed_after_fork(void **state)
{
    (void)state;
    char parent_id[PYC_MSG_ID_LEN + 1], child_id[PYC_MSG_ID_LEN + 1];
    int fds[2];

    pyc_msg_new_id(parent_id);   /* make sure this thread's generator is seeded before the fork */
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char id[PYC_MSG_ID_LEN + 1];
        pyc_msg_reseed();
        pyc_msg_new_id(id);
        ssize_t w = write(fds[1], id, sizeof id);
        _exit(w == (ssize_t)sizeof id ? 0 : 1);
    }
    close(fds[1]);
    pyc_msg_new_id(parent_id);
    assert_int_equal(read(fds[0], child_id, sizeof child_id), (ssize_t)sizeof child_id);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_uuid4(child_id);
    assert_string_not_equal(child_id, parent_id);

    /* Reseeding in place keeps the ids well formed. */
    pyc_msg_reseed();
    pyc_msg_new_id(parent_id);
    assert_uuid4(parent_id);
}

/* The value of the n decimal digits at s (already checked to be digits). */
static int
digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

/* Parses a date made by pyc_msg_now into seconds since the epoch; fails the test when its form is wrong. */
static time_t
parse_date(const char *d)
{
    if (strlen(d) != PYC_MSG_DATE_LEN)
        fail_msg("date [%s] has %zu characters", d, strlen(d));
    for (int i = 0; i < PYC_MSG_DATE_LEN; i++) {
        char want = i == 4 || i == 7 ? '-' : i == 10 ? 'T' : i == 13 || i == 16 ? ':' : i == 19 ? '.'
                  : i == 26 ? 'Z' : '0';
        if (want == '0' ? (d[i] < '0' || d[i] > '9') : d[i] != want)
            fail_msg("date [%s]: bad character at %d", d, i);
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = digits(d, 4) - 1900;
    tm.tm_mon = digits(d + 5, 2) - 1;
    tm.tm_mday = digits(d + 8, 2);
    tm.tm_hour = digits(d + 11, 2);
    tm.tm_min = digits(d + 14, 2);
    tm.tm_sec = digits(d + 17, 2);
    assert_true(tm.tm_mon >= 0 && tm.tm_mon <= 11);
    assert_true(tm.tm_mday >= 1 && tm.tm_mday <= 31);
    assert_true(tm.tm_hour >= 0 && tm.tm_hour <= 23);
    assert_true(tm.tm_min >= 0 && tm.tm_min <= 59);
    assert_true(tm.tm_sec >= 0 && tm.tm_sec <= 60);
    return timegm(&tm);
}

/* Seconds of CLOCK_REALTIME, the clock pyc_msg_now reads.  Not time(): glibc serves that from the coarse
 * clock, which can still be in the previous second when the precise one has moved on. */
static time_t
now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec;
}

static void
test_date_format(void **state)
{
    (void)state;
    char d[PYC_MSG_DATE_LEN + 2];
    for (int i = 0; i < 1000; i++) {
        memset(d, 'X', sizeof d);
        time_t before = now_real();
        pyc_msg_now(d);
        time_t after = now_real();
        assert_int_equal(d[PYC_MSG_DATE_LEN], '\0');
        assert_int_equal(d[PYC_MSG_DATE_LEN + 1], 'X');
        time_t t = parse_date(d);
        assert_true(t >= before && t <= after);
    }
}

static void
test_date_increases(void **state)
{
    (void)state;
    char a[PYC_MSG_DATE_LEN + 1], b[PYC_MSG_DATE_LEN + 1];
    pyc_msg_now(a);
    usleep(2000);
    pyc_msg_now(b);
    /* The fixed-width form sorts as text in time order. */
    assert_true(strcmp(a, b) < 0);
}

static void
test_header(void **state)
{
    (void)state;
    pyc_buf_t b, user;
    char id[PYC_MSG_ID_LEN + 1];
    json_error_t jerr;

    pyc_buf_init(&user, 256);
    assert_int_equal(pyc_buf_add_json_string(&user, "j\"o\\e\n", 6), 0);
    pyc_buf_init(&b, 4096);
    assert_int_equal(pyc_msg_header(&b, "execute_reply", "9e6a1cb2-sess", user.data, id), 0);
    assert_int_equal(b.data[b.len], '\0');

    json_t *h = json_loads(b.data, 0, &jerr);
    if (h == NULL)
        fail_msg("header does not parse: %s: %s", jerr.text, b.data);
    assert_true(json_is_object(h));
    assert_int_equal(json_object_size(h), 6);
    assert_uuid4(id);
    assert_string_equal(json_string_value(json_object_get(h, "msg_id")), id);
    assert_string_equal(json_string_value(json_object_get(h, "msg_type")), "execute_reply");
    assert_string_equal(json_string_value(json_object_get(h, "session")), "9e6a1cb2-sess");
    assert_string_equal(json_string_value(json_object_get(h, "username")), "j\"o\\e\n");
    assert_string_equal(json_string_value(json_object_get(h, "version")), "5.6");
    assert_string_equal(json_string_value(json_object_get(h, "version")), PYC_PROTOCOL_VERSION);
    const char *date = json_string_value(json_object_get(h, "date"));
    assert_non_null(date);
    time_t t = parse_date(date);
    assert_true(t <= now_real() && t >= now_real() - 5);
    json_decref(h);
    pyc_buf_free(&b);
    pyc_buf_free(&user);
}

static void
test_header_appends_and_ids_differ(void **state)
{
    (void)state;
    pyc_buf_t b;
    char id1[PYC_MSG_ID_LEN + 1], id2[PYC_MSG_ID_LEN + 1];

    pyc_buf_init(&b, 4096);
    assert_int_equal(pyc_buf_adds(&b, "["), 0);
    assert_int_equal(pyc_msg_header(&b, "status", "s", "\"u\"", id1), 0);
    assert_int_equal(pyc_buf_adds(&b, ","), 0);
    assert_int_equal(pyc_msg_header(&b, "status", "s", "\"u\"", id2), 0);
    assert_int_equal(pyc_buf_adds(&b, ","), 0);
    assert_int_equal(pyc_msg_header(&b, "stream", "s", "\"u\"", NULL), 0);   /* the id is optional */
    assert_int_equal(pyc_buf_adds(&b, "]"), 0);
    assert_string_not_equal(id1, id2);

    json_error_t jerr;
    json_t *arr = json_loads(b.data, 0, &jerr);
    if (arr == NULL)
        fail_msg("headers do not parse: %s", jerr.text);
    assert_int_equal(json_array_size(arr), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "msg_id")), id1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "msg_id")), id2);
    assert_uuid4(json_string_value(json_object_get(json_array_get(arr, 2), "msg_id")));
    json_decref(arr);
    pyc_buf_free(&b);
}

static void
test_header_cap(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 64);        /* a header is about 180 bytes */
    assert_int_equal(pyc_buf_adds(&b, "kept"), 0);
    assert_int_equal(pyc_msg_header(&b, "status", "s", "\"u\"", NULL), -1);
    assert_int_equal(b.len, 4);
    assert_string_equal(b.data, "kept");
    pyc_buf_free(&b);
}

/* An owner that frees frames one by one: records which frames were freed and when the owner went. */
typedef struct {
    int freed[16];
    int owner_freed;
} frames_owner_t;

static void
frames_owner_free(void *p)
{
    ((frames_owner_t *)p)->owner_freed++;
}

static void
frames_owner_free_frame(void *p, size_t i)
{
    frames_owner_t *o = p;
    assert_true(i < 16);
    o->freed[i]++;
}

/* A received message as decode leaves it: one identity, the delimiter, the signature, four dicts and three
 * buffers, all views into frames_copy; owned by o, which frees frames one by one. */
static pyc_msg_t *
owned_msg(frames_owner_t *o)
{
    static const char text[] = "frame";
    pyc_msg_t *msg = calloc(1, sizeof *msg);
    pyc_frame_t *frames = malloc(10 * sizeof *frames);
    assert_non_null(msg);
    assert_non_null(frames);
    for (size_t i = 0; i < 10; i++)
        frames[i] = (pyc_frame_t){text, sizeof text - 1};
    msg->frames_copy = frames;
    msg->idents = frames;
    msg->n_idents = 1;
    msg->buffers = frames + 7;
    msg->n_buffers = 3;
    memset(o, 0, sizeof *o);
    pyc_msg_set_owner(msg, o, frames_owner_free);
    pyc_msg_set_frame_free(msg, frames_owner_free_frame);
    return msg;
}

/* Holds of single frames: once the message is destroyed, every frame that no hold views is freed at once,
 * each held frame when its last hold goes (exactly once), the owner after all of them; a whole-message hold,
 * and a hold of a frame not in the message, keep every frame. */
static void
test_frame_holds_free_each_frame(void **state)
{
    (void)state;
    frames_owner_t o;
    pyc_msg_t *msg = owned_msg(&o);
    size_t i0, i1, i1b;
    pyc_msg_hold_t *h0 = pyc_msg_hold_frame(msg, &msg->buffers[0], &i0);
    pyc_msg_hold_t *h1 = pyc_msg_hold_frame(msg, &msg->buffers[1], &i1);
    pyc_msg_hold_t *h1b = pyc_msg_hold_frame(msg, &msg->buffers[1], &i1b);
    assert_int_equal(i0, 7);
    assert_int_equal(i1, 8);
    assert_int_equal(i1b, 8);
    pyc_msg_destroy(&msg);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(o.freed[i], i == 7 || i == 8 ? 0 : 1);
    assert_int_equal(o.owner_freed, 0);
    pyc_msg_hold_release_frame(h0, i0);
    assert_int_equal(o.freed[7], 1);
    pyc_msg_hold_release_frame(h1, i1);
    assert_int_equal(o.freed[8], 0);
    assert_int_equal(o.owner_freed, 0);
    pyc_msg_hold_release_frame(h1b, i1b);
    assert_int_equal(o.freed[8], 1);
    assert_int_equal(o.owner_freed, 1);
    pyc_msg_hold_release_frame(NULL, 0);

    msg = owned_msg(&o);
    pyc_frame_t elsewhere = {"x", 1};
    size_t ix;
    pyc_msg_hold_t *hw = pyc_msg_hold(msg), *hx = pyc_msg_hold_frame(msg, &elsewhere, &ix);
    assert_int_equal(ix, SIZE_MAX);
    pyc_msg_destroy(&msg);
    pyc_msg_hold_release_frame(hx, ix);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(o.freed[i], 0);      /* the whole-message hold keeps every frame */
    assert_int_equal(o.owner_freed, 0);
    pyc_msg_hold_release(hw);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(o.freed[i], 1);
    assert_int_equal(o.owner_freed, 1);

    /* an owner without frame_free: holds of frames hold the whole message, as before */
    msg = owned_msg(&o);
    pyc_msg_set_frame_free(msg, NULL);
    pyc_msg_hold_t *hn = pyc_msg_hold_frame(msg, &msg->buffers[2], &ix);
    assert_int_equal(ix, SIZE_MAX);
    pyc_msg_destroy(&msg);
    assert_int_equal(o.owner_freed, 0);
    pyc_msg_hold_release_frame(hn, ix);
    assert_int_equal(o.owner_freed, 1);
    assert_int_equal(o.freed[9], 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_format),
        cmocka_unit_test(test_id_unique),
        cmocka_unit_test(test_id_unique_across_threads),
        cmocka_unit_test(test_reseed_after_fork),
        cmocka_unit_test(test_date_format),
        cmocka_unit_test(test_date_increases),
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_header_appends_and_ids_differ),
        cmocka_unit_test(test_header_cap),
        cmocka_unit_test(test_frame_holds_free_each_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
