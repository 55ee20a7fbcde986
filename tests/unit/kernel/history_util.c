/*
 * history_util.c -- what the history tests share (test_history.c, test_history_query.c): paths, opening and
 * recording that fail the test on an error, and history_request checks that compare the reply whole.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history_util.h"

/* Writes "a/b" into out (PATH_MAX bytes), failing the test when it does not fit. */
void
join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
    assert_true(n > 0 && n < PATH_MAX);
}

/* Opens path, failing the test with the error sentence when it cannot. */
pyc_history_t *
open_ok(const char *path)
{
    pyc_error_t err = {0, ""};
    pyc_history_t *h = pyc_history_open(path, &err);
    if (h == NULL)
        fail_msg("cannot open %s: %s", path, err.text);
    return h;
}

void
add_ok(pyc_history_t *h, int line, const char *source, const char *output)
{
    pyc_error_t err = {0, ""};
    if (pyc_history_add(h, line, source, output, &err) != 0)
        fail_msg("add %d failed: %s", line, err.text);
}

json_t *
parse(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (j == NULL)
        fail_msg("test JSON does not parse: %s: %s", jerr.text, text);
    return j;
}

/* Sends request (JSON text) and checks that the reply is exactly {"status": "ok", "history": <history>}. */
void
expect_history(pyc_history_t *h, const char *request, const char *history)
{
    json_t *req = parse(request);
    json_t *reply = pyc_history_request(h, req);
    assert_non_null(reply);
    json_t *want = json_pack("{s:s, s:o}", "status", "ok", "history", parse(history));
    if (!json_equal(reply, want)) {
        char *got = json_dumps(reply, JSON_COMPACT), *exp = json_dumps(want, JSON_COMPACT);
        print_error("request %s\n  got  %s\n  want %s\n", request, got, exp);
        free(got);
        free(exp);
        json_decref(req);
        json_decref(reply);
        json_decref(want);
        fail();
    }
    json_decref(req);
    json_decref(reply);
    json_decref(want);
}

/* Sends request and checks that the reply is an error with that ename whose evalue contains `contains`. */
void
expect_error(pyc_history_t *h, const char *request, const char *ename, const char *contains)
{
    json_t *req = parse(request);
    json_t *reply = pyc_history_request(h, req);
    assert_non_null(reply);
    const char *status = NULL, *en = NULL, *ev = NULL;
    json_t *tb = NULL;
    if (json_unpack(reply, "{s:s, s:s, s:s, s:o}", "status", &status, "ename", &en, "evalue", &ev, "traceback",
                    &tb) != 0 ||
        strcmp(status, "error") != 0 || !json_is_array(tb) || json_array_size(tb) != 0 ||
        json_object_size(reply) != 4) {
        char *got = json_dumps(reply, JSON_COMPACT);
        print_error("request %s: not an error reply: %s\n", request, got);
        free(got);
        fail();
    }
    if (strcmp(en, ename) != 0 || strstr(ev, contains) == NULL)
        fail_msg("request %s: got %s [%s], want %s containing [%s]", request, en, ev, ename, contains);
    json_decref(req);
    json_decref(reply);
}
