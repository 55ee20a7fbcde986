/*
 * test_usage.c -- cmocka tests for usage.c, the answer to usage_request: this process and a child of it
 * measured, the host's memory, and the CPU percentage of a second request.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "usage.h"

static void
test_usage(void **state)
{
    (void)state;
    pyc_usage_state_t st = {0};
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    json_t *r = pyc_usage_report(getpid(), &st);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), getpid());
    assert_true(json_integer_value(json_object_get(r, "kernel_memory")) > 0);
    assert_true(json_integer_value(json_object_get(json_object_get(r, "pyc"), "processes")) >= 2);
    json_t *hv = json_object_get(r, "host_virtual_memory");
    assert_true(json_integer_value(json_object_get(hv, "total")) > json_integer_value(json_object_get(hv, "free")));
    assert_true(json_real_value(json_object_get(r, "kernel_cpu")) >= 0);
    json_decref(r);
    assert_true(st.when > 0);
    r = pyc_usage_report(getpid(), &st);      /* the second: a percentage since the first */
    assert_non_null(r);
    json_decref(r);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
