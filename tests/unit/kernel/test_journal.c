/*
 * test_journal.c -- cmocka tests for journal.c, the kernel's record of recent cells: a cell's life (queued,
 * running, done) as the send path feeds it, outputs recognized by their parent header, the per-cell and total
 * bounds, eviction of the oldest done record, and the report's JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"

/* A request header frame with msg_id id. */
static char *
header(const char *id)
{
    char *h = NULL;
    assert_true(asprintf(&h, "{\"msg_id\":\"%s\",\"msg_type\":\"execute_request\"}", id) > 0);
    return h;
}

static void
tap(pyc_journal_t *j, const char *type, const char *parent, const char *content)
{
    pyc_journal_tap(j, type, parent, strlen(parent), type[0] == 'e' && strstr(type, "reply") ? "{\"m\":1}" : NULL,
                    content, strlen(content));
}

/* The parsed report of ids (a JSON array text, or NULL for all). */
static json_t *
report(pyc_journal_t *j, const char *ids, bool outputs)
{
    json_t *sel = ids != NULL ? json_loads(ids, 0, NULL) : NULL;
    size_t len;
    char *text = pyc_journal_report(j, sel, outputs, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    json_error_t e;
    json_t *r = json_loads(text, 0, &e);
    if (r == NULL)
        fail_msg("not JSON (%s): %s", e.text, text);
    free(text);
    json_decref(sel);
    return r;
}

static json_t *
cell(json_t *r, size_t i)
{
    return json_array_get(json_object_get(r, "cells"), i);
}

static const char *
str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static pyc_journal_t *
journal(size_t cells, size_t cell_bytes, size_t total)
{
    pyc_journal_limits_t lim = {cells, cell_bytes, total};
    pyc_journal_t *j = pyc_journal_new(&lim);
    assert_non_null(j);
    return j;
}

static void
test_life_of_a_cell(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(8, 1 << 20, 1 << 20);
    char *h = header("a\"1");    /* an id that needs escaping */
    assert_int_equal(pyc_journal_expect(j, "a\"1"), 0);
    json_t *r = report(j, "[\"a\\\"1\"]", true);
    assert_string_equal(str(cell(r, 0), "state"), "queued");
    assert_string_equal(str(cell(r, 0), "id"), "a\"1");
    json_decref(r);

    pyc_journal_begin(j, "a\"1", h, strlen(h), 7);
    tap(j, "stream", h, "{\"name\":\"stdout\",\"text\":\"hi\\n\"}");
    tap(j, "status", h, "{\"execution_state\":\"busy\"}");          /* not an output */
    tap(j, "stream", "{\"msg_id\":\"other\"}", "{\"name\":\"stdout\",\"text\":\"no\"}"); /* another request's */
    r = report(j, "[\"a\\\"1\"]", true);
    assert_string_equal(str(cell(r, 0), "state"), "running");
    assert_int_equal(json_integer_value(json_object_get(cell(r, 0), "execution_count")), 7);
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "outputs")), 1);
    assert_null(json_object_get(cell(r, 0), "reply"));
    json_decref(r);

    tap(j, "execute_result", h, "{\"data\":{\"text/plain\":\"42\"}}");
    tap(j, "execute_reply", h, "{\"status\":\"ok\"}");
    tap(j, "stream", h, "{\"name\":\"stdout\",\"text\":\"late\"}");   /* after the reply: a late output */
    r = report(j, "[\"a\\\"1\", \"nope\"]", true);
    json_t *c = cell(r, 0);
    assert_string_equal(str(c, "state"), "done");
    json_t *outs = json_object_get(c, "outputs");
    assert_int_equal(json_array_size(outs), 3);
    assert_string_equal(str(json_array_get(outs, 0), "type"), "stream");
    assert_string_equal(str(json_array_get(outs, 1), "type"), "execute_result");
    assert_string_equal(str(json_object_get(json_array_get(outs, 2), "content"), "text"), "late");
    assert_string_equal(str(json_object_get(json_object_get(c, "reply"), "content"), "status"), "ok");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(c, "reply"), "metadata"),
                                                        "m")), 1);
    assert_true(json_real_value(json_object_get(c, "ended")) >= json_real_value(json_object_get(c, "started")));
    assert_string_equal(str(cell(r, 1), "state"), "unknown");
    json_decref(r);

    /* One id named many times is reported once (a small request must not build a huge reply), in every
     * report; an unknown id repeated costs its few bytes each time. */
    r = report(j, "[\"a\\\"1\", \"a\\\"1\", \"nope\", \"a\\\"1\", \"nope\"]", true);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 3);
    assert_string_equal(str(cell(r, 0), "state"), "done");
    assert_string_equal(str(cell(r, 1), "state"), "unknown");
    assert_string_equal(str(cell(r, 2), "state"), "unknown");
    json_decref(r);
    r = report(j, "[\"a\\\"1\"]", true);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 1);
    json_decref(r);

    r = report(j, NULL, false);   /* the listing: status, no outputs */
    assert_string_equal(str(cell(r, 0), "status"), "ok");
    assert_null(json_object_get(cell(r, 0), "outputs"));
    json_decref(r);
    free(h);
    pyc_journal_free(&j);
    assert_null(j);
}

/* The parsed late report. */
static json_t *
report_late(pyc_journal_t *j)
{
    size_t len;
    char *text = pyc_journal_report_late(j, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    json_t *r = json_loads(text, 0, NULL);
    if (r == NULL)
        fail_msg("not JSON: %s", text);
    free(text);
    return r;
}

/* What a cell's threads publish after its reply is kept with it and handed out once by the late report, of
 * every done cell that has some, oldest first; a second reply to a done cell's header changes nothing. */
static void
test_late_outputs(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(8, 1 << 20, 1 << 20);
    char *ha = header("a"), *hb = header("b");
    pyc_journal_begin(j, "a", ha, strlen(ha), 1);
    tap(j, "stream", ha, "{\"name\":\"stdout\",\"text\":\"own\"}");
    tap(j, "execute_reply", ha, "{\"status\":\"ok\"}");
    assert_int_equal(pyc_journal_late_unseen(j), 0);
    json_t *r = report_late(j);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 0);
    json_decref(r);

    tap(j, "stream", ha, "{\"name\":\"stdout\",\"text\":\"late 1\"}");
    pyc_journal_begin(j, "b", hb, strlen(hb), 2);
    tap(j, "stream", ha, "{\"name\":\"stderr\",\"text\":\"late 2\"}");   /* while b runs: still a's */
    tap(j, "stream", hb, "{\"name\":\"stdout\",\"text\":\"b's own\"}");
    assert_int_equal(pyc_journal_late_unseen(j), 2);
    tap(j, "execute_reply", hb, "{\"status\":\"ok\"}");
    tap(j, "execute_reply", ha, "{\"status\":\"error\"}");                 /* not a's: it has one */
    tap(j, "display_data", hb, "{\"data\":{}}");
    assert_int_equal(pyc_journal_late_unseen(j), 3);

    r = report_late(j);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 2);
    json_t *a = cell(r, 0), *b = cell(r, 1);
    assert_string_equal(str(a, "id"), "a");
    assert_int_equal(json_integer_value(json_object_get(a, "execution_count")), 1);
    json_t *late = json_object_get(a, "late");
    assert_int_equal(json_array_size(late), 2);
    assert_string_equal(str(json_object_get(json_array_get(late, 0), "content"), "text"), "late 1");
    assert_string_equal(str(json_object_get(json_array_get(late, 1), "content"), "text"), "late 2");
    assert_string_equal(str(b, "id"), "b");
    assert_int_equal(json_array_size(json_object_get(b, "late")), 1);
    assert_string_equal(str(json_array_get(json_object_get(b, "late"), 0), "type"), "display_data");
    json_decref(r);
    assert_int_equal(pyc_journal_late_unseen(j), 0);
    r = report_late(j);                                                      /* handed out once */
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 0);
    json_decref(r);

    tap(j, "stream", ha, "{\"name\":\"stdout\",\"text\":\"late 3\"}");
    r = report_late(j);
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "late")), 1);
    assert_string_equal(str(json_object_get(json_array_get(json_object_get(cell(r, 0), "late"), 0), "content"),
                            "text"), "late 3");
    json_decref(r);
    /* a's reply is its own, and its outputs are all there for poll: its own, then the late ones */
    r = report(j, "[\"a\"]", true);
    assert_string_equal(str(json_object_get(json_object_get(cell(r, 0), "reply"), "content"), "status"), "ok");
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "outputs")), 4);
    json_decref(r);
    free(ha);
    free(hb);
    pyc_journal_free(&j);
}

/* A request sent twice (two records whose request has the same header frame): the running one gets the reply
 * and the outputs, not the done one found first. */
static void
test_same_header_twice(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(8, 1 << 20, 1 << 20);
    char *h = header("same");
    pyc_journal_begin(j, "first", h, strlen(h), 1);
    tap(j, "execute_reply", h, "{\"status\":\"ok\"}");
    pyc_journal_begin(j, "second", h, strlen(h), 2);
    char *h3 = header("third");
    pyc_journal_begin(j, "third", h3, strlen(h3), 3);    /* begun last: the walk is what finds the others */
    tap(j, "stream", h, "{\"name\":\"stdout\",\"text\":\"x\"}");
    tap(j, "execute_reply", h, "{\"status\":\"error\"}");
    free(h3);
    json_t *r = report(j, "[\"first\", \"second\"]", true);
    assert_string_equal(str(json_object_get(json_object_get(cell(r, 0), "reply"), "content"), "status"), "ok");
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "outputs")), 0);
    assert_string_equal(str(cell(r, 1), "state"), "done");
    assert_string_equal(str(json_object_get(json_object_get(cell(r, 1), "reply"), "content"), "status"), "error");
    assert_int_equal(json_array_size(json_object_get(cell(r, 1), "outputs")), 1);
    json_decref(r);
    free(h);
    pyc_journal_free(&j);
}

/* A queued cell answered without beginning (aborted, refused) is recognized by the msg_id in its reply's
 * parent. */
static void
test_queued_then_aborted(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(8, 1 << 20, 1 << 20);
    char *h = header("q");
    pyc_journal_expect(j, "q");
    pyc_journal_expect(j, "q");  /* once only */
    tap(j, "execute_reply", h, "{\"status\":\"aborted\"}");
    json_t *r = report(j, NULL, true);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 1);
    assert_string_equal(str(cell(r, 0), "state"), "done");
    assert_string_equal(str(json_object_get(json_object_get(cell(r, 0), "reply"), "content"), "status"), "aborted");
    json_decref(r);
    free(h);
    pyc_journal_free(&j);
}

static void
test_bounds(void **state)
{
    (void)state;
    /* 3 records; 200 bytes of outputs per cell; 500 in all */
    pyc_journal_t *j = journal(3, 200, 500);
    char *hs[5];
    char id[8];
    const char *out = "{\"name\":\"stdout\",\"text\":\"0123456789012345678901234567890123456789\"}";
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "c%d", i);
        hs[i] = header(id);
        pyc_journal_begin(j, id, hs[i], strlen(hs[i]), i + 1);
        for (int n = 0; n < 10; n++)
            tap(j, "stream", hs[i], out);
        tap(j, "execute_reply", hs[i], "{\"status\":\"ok\"}");
    }
    json_t *r = report(j, NULL, true);
    json_t *cells = json_object_get(r, "cells");
    assert_int_equal(json_array_size(cells), 3);            /* c0 and c1 evicted */
    assert_string_equal(str(cell(r, 0), "id"), "c2");
    assert_string_equal(str(cell(r, 2), "id"), "c4");
    size_t total = 0;
    for (size_t i = 0; i < 3; i++) {
        json_t *c = cell(r, i);
        size_t kept = json_array_size(json_object_get(c, "outputs"));
        assert_true(kept < 10);                               /* the per-cell cap */
        assert_int_equal(kept + (size_t)json_integer_value(json_object_get(c, "outputs_dropped")), 10);
        char *t = json_dumps(json_object_get(c, "outputs"), JSON_COMPACT);
        total += strlen(t);
        free(t);
    }
    assert_true(total <= 500 + 3 * 2);                        /* the total bound ("[]" of each aside) */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "limits"), "cells")), 3);
    json_decref(r);
    for (int i = 0; i < 5; i++)
        free(hs[i]);
    pyc_journal_free(&j);
}

/* A stream message that does not fit whole in the cell's room is kept cut, on a whole character, marked "cut":
 * its text is a prefix of what was printed and the report stays JSON, wherever the cut falls (inside an
 * escape, a \uXXXX, a UTF-8 sequence); later messages, and a result that does not fit, are dropped. */
static void
test_a_stream_too_big_is_kept_cut(void **state)
{
    (void)state;
    static const char *const pieces[] = {"a", "\\n", "\\\"", "\\\\", "\\u001b", "\xc3\xa9", "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80"};
    for (int shift = 0; shift < 24; shift++) {
        pyc_journal_t *j = journal(4, 200, 100000);
        char *h = header("big");
        pyc_journal_begin(j, "big", h, strlen(h), 1);
        char content[2048];
        size_t n = (size_t)snprintf(content, sizeof content, "{\"name\":\"stdout\",\"text\":\"%.*s", shift,
                                    "xxxxxxxxxxxxxxxxxxxxxxxx");
        for (int i = 0; i < 60; i++)
            n += (size_t)snprintf(content + n, sizeof content - n, "%s", pieces[(i + shift) % 8]);
        snprintf(content + n, sizeof content - n, "\"}");
        json_t *sent = json_loads(content, 0, NULL);
        assert_non_null(sent);
        tap(j, "stream", h, content);
        tap(j, "stream", h, "{\"name\":\"stdout\",\"text\":\"more\"}");
        tap(j, "execute_result", h, "{\"data\":{\"text/plain\":\"a result\"}}");
        json_t *r = report(j, "[\"big\"]", true);
        json_t *outs = json_object_get(cell(r, 0), "outputs");
        assert_int_equal(json_array_size(outs), 1);
        json_t *o = json_array_get(outs, 0);
        assert_true(json_is_true(json_object_get(o, "cut")));
        const char *kept = str(json_object_get(o, "content"), "text");
        const char *full = str(sent, "text");
        assert_non_null(kept);
        assert_true(strlen(kept) > 0 && strlen(kept) < strlen(full));
        assert_memory_equal(kept, full, strlen(kept));
        assert_string_equal(str(json_object_get(o, "content"), "name"), "stdout");
        assert_int_equal(json_integer_value(json_object_get(cell(r, 0), "outputs_dropped")), 2);
        char *t = json_dumps(outs, JSON_COMPACT);
        assert_true(strlen(t) <= 200 + 2);
        free(t);
        json_decref(r);
        json_decref(sent);
        free(h);
        pyc_journal_free(&j);
    }
}

/* A running cell is not evicted while a done one remains. */
static void
test_eviction_prefers_done(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(2, 1000, 1000);
    char *h0 = header("run"), *h1 = header("done1"), *h2 = header("new");
    pyc_journal_begin(j, "run", h0, strlen(h0), 1);
    pyc_journal_begin(j, "done1", h1, strlen(h1), 2);
    tap(j, "execute_reply", h1, "{\"status\":\"ok\"}");
    pyc_journal_begin(j, "new", h2, strlen(h2), 3);
    json_t *r = report(j, NULL, false);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 2);
    assert_string_equal(str(cell(r, 0), "id"), "run");
    assert_string_equal(str(cell(r, 1), "id"), "new");
    json_decref(r);
    tap(j, "stream", h0, "{\"name\":\"stdout\",\"text\":\"still\"}");
    r = report(j, "[\"run\"]", true);
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "outputs")), 1);
    json_decref(r);
    free(h0);
    free(h1);
    free(h2);
    pyc_journal_free(&j);
}

/* Two cells running at once (a subshell's beside the main shell's): each output goes to the record whose
 * header is its parent, whichever was begun last (the lookup tries that one first); a done one gets what its
 * threads print after it (late outputs); an evicted one is never the one found. */
static void
test_outputs_of_two_running_cells(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(2, 1000, 1000);
    char *ha = header("a"), *hb = header("b"), *hc = header("c");
    pyc_journal_begin(j, "a", ha, strlen(ha), 1);
    pyc_journal_begin(j, "b", hb, strlen(hb), 2);
    tap(j, "stream", ha, "{\"name\":\"stdout\",\"text\":\"for a\"}");
    tap(j, "stream", hb, "{\"name\":\"stdout\",\"text\":\"for b\"}");
    tap(j, "stream", ha, "{\"name\":\"stdout\",\"text\":\"a again\"}");
    tap(j, "execute_reply", hb, "{\"status\":\"ok\"}");
    tap(j, "stream", hb, "{\"name\":\"stdout\",\"text\":\"after b's reply\"}");   /* b is done: late */
    json_t *r = report(j, NULL, true);
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "outputs")), 2);
    assert_int_equal(json_array_size(json_object_get(cell(r, 1), "outputs")), 2);
    assert_string_equal(str(cell(r, 1), "state"), "done");
    json_decref(r);
    /* c evicts b (the done one); the last begun is c, and a still gets its own */
    pyc_journal_begin(j, "c", hc, strlen(hc), 3);
    tap(j, "stream", ha, "{\"name\":\"stdout\",\"text\":\"a third\"}");
    tap(j, "stream", hc, "{\"name\":\"stdout\",\"text\":\"for c\"}");
    r = report(j, NULL, true);
    assert_string_equal(str(cell(r, 0), "id"), "a");
    assert_int_equal(json_array_size(json_object_get(cell(r, 0), "outputs")), 3);
    assert_string_equal(str(cell(r, 1), "id"), "c");
    assert_int_equal(json_array_size(json_object_get(cell(r, 1), "outputs")), 1);
    json_decref(r);
    free(ha);
    free(hb);
    free(hc);
    pyc_journal_free(&j);
}

/* A forked session keeps the done records and drops those its parent has yet to finish. */
static void
test_after_fork(void **state)
{
    (void)state;
    pyc_journal_t *j = journal(8, 1000, 1000);
    char *h0 = header("done"), *h1 = header("running");
    pyc_journal_begin(j, "done", h0, strlen(h0), 1);
    tap(j, "execute_reply", h0, "{\"status\":\"ok\"}");
    pyc_journal_begin(j, "running", h1, strlen(h1), 2);
    pyc_journal_expect(j, "queued");
    pyc_journal_lock(j);         /* as the fork handlers hold it across fork() */
    pyc_journal_unlock(j);
    pyc_journal_after_fork(j);
    json_t *r = report(j, NULL, false);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 1);
    assert_string_equal(str(cell(r, 0), "id"), "done");
    json_decref(r);
    pyc_journal_begin(j, "next", h1, strlen(h1), 3);   /* the list goes on from its tail */
    r = report(j, NULL, false);
    assert_int_equal(json_array_size(json_object_get(r, "cells")), 2);
    assert_string_equal(str(cell(r, 1), "id"), "next");
    json_decref(r);
    free(h0);
    free(h1);
    pyc_journal_free(&j);
}

static void
test_off(void **state)
{
    (void)state;
    pyc_journal_limits_t lim = {0, 1, 1};
    assert_null(pyc_journal_new(&lim));
    pyc_journal_tap(NULL, "stream", "{}", 2, NULL, "{}", 2);   /* NULL-safe */
    assert_int_equal(pyc_journal_expect(NULL, "x"), 0);
    pyc_journal_t *none = NULL;
    json_t *r = report(none, "[\"x\"]", true);
    assert_string_equal(str(cell(r, 0), "state"), "unknown");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "limits"), "cells")), 0);
    json_decref(r);
    setenv("PYC_JOURNAL_CELLS", "12", 1);
    setenv("PYC_JOURNAL_BYTES", "junk", 1);
    pyc_journal_limits_from_env(&lim);
    assert_int_equal(lim.cells, 12);
    assert_int_equal(lim.total_bytes, PYC_JOURNAL_TOTAL_BYTES);
    assert_int_equal(lim.cell_bytes, PYC_JOURNAL_CELL_BYTES);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_life_of_a_cell),
        cmocka_unit_test(test_late_outputs),
        cmocka_unit_test(test_same_header_twice),
        cmocka_unit_test(test_queued_then_aborted),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_a_stream_too_big_is_kept_cut),
        cmocka_unit_test(test_eviction_prefers_done),
        cmocka_unit_test(test_outputs_of_two_running_cells),
        cmocka_unit_test(test_after_fork),
        cmocka_unit_test(test_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
