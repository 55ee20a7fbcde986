/*
 * test_execreq.c -- cmocka tests for execreq.c, the one decoding of an execute_request: the defaults
 * (allow_stdin false on every shell, as in ipykernel, store_history false when silent), members of the wrong type,
 * metadata.pyc's limits, color, pace and snapshot, the first-line magics %%isolate and %%transaction, and
 * the refusals (no string code, malformed metadata.pyc, a misspelt isolation, a bad %%isolate duration).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>

#include "execreq.h"

/* Decodes content and metadata given as JSON text (metadata may be NULL) against kernel limits of a 10 s
 * deadline and a 1000-byte output cap. */
static int
decode(pyc_execreq_t *r, const char *content, const char *metadata, json_t **keep)
{
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_timeout = 10;
    l.output_bytes = 1000;
    json_t *c = json_loads(content, 0, NULL);
    json_t *m = metadata != NULL ? json_loads(metadata, 0, NULL) : NULL;
    assert_non_null(c);
    /* The decoding borrows from the JSON: the test keeps both until it is done with r. */
    keep[0] = c;
    keep[1] = m;
    return pyc_execreq_decode(r, c, m, &l);
}

static void
release(json_t **keep)
{
    json_decref(keep[0]);
    json_decref(keep[1]);
}

static void
test_defaults(void **state)
{
    (void)state;
    pyc_execreq_t r;
    json_t *keep[2];
    assert_int_equal(decode(&r, "{\"code\": \"1 + 1\"}", NULL, keep), 0);
    assert_null(r.refused);
    assert_string_equal(r.code, "1 + 1");
    assert_ptr_equal(r.code, r.source);
    assert_false(r.silent);
    assert_true(r.store_history);
    assert_true(r.stop_on_error);
    assert_false(r.allow_stdin);       /* ipykernel's default, on every shell */
    assert_null(r.user_expressions);
    assert_int_equal(r.color, -1);
    assert_true(r.pace);
    assert_false(r.isolated);
    assert_false(r.transaction);
    assert_null(r.snapshot);
    assert_true(r.limits.timeout == 10);
    assert_int_equal(r.limits.output_bytes, 1000);
    release(keep);
}

static void
test_members(void **state)
{
    (void)state;
    pyc_execreq_t r;
    json_t *keep[2];
    assert_int_equal(decode(&r, "{\"code\": \"x\", \"silent\": true, \"store_history\": true, \"stop_on_error\": false,"
                                " \"allow_stdin\": true, \"user_expressions\": {\"a\": \"1\"}}",
                            "{\"pyc\": {\"color\": false, \"pace\": false, \"snapshot\": \"s1\", \"timeout\": 2}}",
                            keep),
                     0);
    assert_true(r.silent);
    assert_false(r.store_history);     /* a silent cell is never stored */
    assert_false(r.stop_on_error);
    assert_true(r.allow_stdin);
    assert_non_null(r.user_expressions);
    assert_int_equal(r.color, 0);
    assert_false(r.pace);
    assert_string_equal(json_string_value(r.snapshot), "s1");
    assert_true(r.limits.timeout == 2);
    release(keep);

    /* Members of the wrong type count as absent. */
    assert_int_equal(decode(&r, "{\"code\": \"x\", \"silent\": 1, \"store_history\": \"no\", \"allow_stdin\": null,"
                                " \"user_expressions\": [1]}",
                            "{\"pyc\": {\"color\": \"yes\", \"snapshot\": false}}", keep),
                     0);
    assert_false(r.silent);
    assert_true(r.store_history);
    assert_false(r.allow_stdin);
    assert_null(r.user_expressions);
    assert_int_equal(r.color, -1);
    assert_null(r.snapshot);
    release(keep);

    /* A request's limits never loosen the kernel's. */
    assert_int_equal(decode(&r, "{\"code\": \"x\"}", "{\"pyc\": {\"timeout\": 100, \"output_limit\": 5000}}", keep),
                     0);
    assert_true(r.limits.timeout == 10);
    assert_int_equal(r.limits.output_bytes, 1000);
    release(keep);
}

static void
test_magics(void **state)
{
    (void)state;
    pyc_execreq_t r;
    json_t *keep[2];
    assert_int_equal(decode(&r, "{\"code\": \"%%isolate 3s\\nx = 1\"}", NULL, keep), 0);
    assert_true(r.isolated);
    assert_true(r.isolate_timeout == 3);
    assert_string_equal(r.code, "x = 1");
    assert_string_equal(r.source, "%%isolate 3s\nx = 1");
    release(keep);

    assert_int_equal(decode(&r, "{\"code\": \"%%isolate\"}", NULL, keep), 0);
    assert_true(r.isolated);
    assert_true(r.isolate_timeout == 0);
    assert_string_equal(r.code, "");
    assert_ptr_equal(r.code, r.source + strlen(r.source));    /* still inside the request's text */
    release(keep);

    /* A magic line alone: nothing left to run, and the code still points into the source (found by
     * fuzz_execreq). */
    assert_int_equal(decode(&r, "{\"code\": \"%%transaction\"}", NULL, keep), 0);
    assert_true(r.transaction);
    assert_ptr_equal(r.code, r.source + strlen(r.source));
    release(keep);

    assert_int_equal(decode(&r, "{\"code\": \"%%transaction\\ny = 2\"}", NULL, keep), 0);
    assert_true(r.transaction);
    assert_false(r.isolated);
    assert_string_equal(r.code, "y = 2");
    release(keep);

    assert_int_equal(decode(&r, "{\"code\": \"z = 3\"}", "{\"pyc\": {\"transaction\": true, \"isolate\": \"fork\"}}",
                            keep),
                     0);
    assert_true(r.transaction);
    assert_true(r.isolated);
    assert_string_equal(r.code, "z = 3");
    release(keep);

    /* Not the magic: a longer word, or the magic further down. */
    assert_int_equal(decode(&r, "{\"code\": \"%%isolated\\nx\"}", NULL, keep), 0);
    assert_false(r.isolated);
    assert_string_equal(r.code, "%%isolated\nx");
    release(keep);
    assert_int_equal(decode(&r, "{\"code\": \"x = 1\\n%%transaction\"}", NULL, keep), 0);
    assert_false(r.transaction);
    release(keep);
}

static void
test_refusals(void **state)
{
    (void)state;
    pyc_execreq_t r;
    json_t *keep[2];
    const struct {
        const char *content, *metadata, *why;
    } bad[] = {
        {"{\"silent\": true}", NULL, "lacks a string 'code'"},
        {"{\"code\": 7}", NULL, "lacks a string 'code'"},
        {"{\"code\": \"x\"}", "{\"pyc\": []}", "metadata.pyc must be an object"},
        {"{\"code\": \"x\"}", "{\"pyc\": {\"timeout\": -1}}", "timeout"},
        {"{\"code\": \"x\"}", "{\"pyc\": {\"isolate\": true}}", "isolate must be \"fork\""},
        {"{\"code\": \"x\"}", "{\"pyc\": {\"isolate\": \"Fork\"}}", "isolate must be \"fork\""},
        {"{\"code\": \"%%isolate soon\\nx\"}", NULL, "soon"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (decode(&r, bad[i].content, bad[i].metadata, keep) != -1)
            fail_msg("accepted: %s %s", bad[i].content, bad[i].metadata != NULL ? bad[i].metadata : "");
        assert_non_null(r.refused);
        if (strstr(r.refused, bad[i].why) == NULL)
            fail_msg("%s: refused with '%s', not about '%s'", bad[i].content, r.refused, bad[i].why);
        release(keep);
    }
    /* A refusal still reads what it can: a silent request stays silent. */
    assert_int_equal(decode(&r, "{\"silent\": true}", NULL, keep), -1);
    assert_true(r.silent);
    release(keep);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_members),
        cmocka_unit_test(test_magics),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
