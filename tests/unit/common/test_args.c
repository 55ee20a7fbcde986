/*
 * test_args.c -- cmocka tests for args.c, the command-line parser of both programs: long and short options,
 * "=" and separate values, flags, "--", help, positional words that look like options, repeated options, and
 * every refusal with its sentence.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "args.h"

static const pyc_argspec_t specs[] = {
    {"connection-file", true, 'f'},
    {"json", false, 0},
    {"timeout", true, 0},
};
enum { CF, JSON, TIMEOUT, NSPECS };

static int
parse(pyc_args_t *a, pyc_error_t *err, int argc, ...)
{
    char *argv[16];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    return pyc_args_parse(argc, argv, specs, NSPECS, a, err);
}

static void
expect_refused(int rc, const pyc_error_t *err, const char *sentence)
{
    assert_int_equal(rc, -1);
    assert_string_equal(err->text, sentence);
}

static void
test_forms(void **state)
{
    (void)state;
    pyc_args_t a;
    pyc_error_t err;
    assert_int_equal(parse(&a, &err, 6, "-f", "k.json", "work", "--timeout=5", "--json", "x = 1"), 0);
    assert_string_equal(a.value[CF], "k.json");
    assert_string_equal(a.value[TIMEOUT], "5");
    assert_string_equal(a.value[JSON], "");
    assert_int_equal(a.npos, 2);
    assert_string_equal(a.pos[0], "work");
    assert_string_equal(a.pos[1], "x = 1");
    assert_false(a.help);

    assert_int_equal(parse(&a, &err, 3, "--connection-file", "a", "--timeout=="), 0);
    assert_string_equal(a.value[CF], "a");
    assert_string_equal(a.value[TIMEOUT], "=");
    assert_null(a.value[JSON]);
    assert_int_equal(a.npos, 0);
}

static void
test_positional_words_that_look_like_options(void **state)
{
    (void)state;
    pyc_args_t a;
    pyc_error_t err;
    /* "-" is stdin, "-1" is code, and after "--" everything is a word. */
    assert_int_equal(parse(&a, &err, 6, "-", "-1", "--", "--json", "-h", "-f"), 0);
    assert_int_equal(a.npos, 5);
    assert_string_equal(a.pos[0], "-");
    assert_string_equal(a.pos[1], "-1");
    assert_string_equal(a.pos[2], "--json");
    assert_string_equal(a.pos[3], "-h");
    assert_string_equal(a.pos[4], "-f");
    assert_null(a.value[JSON]);
    assert_false(a.help);
}

static void
test_help(void **state)
{
    (void)state;
    pyc_args_t a;
    pyc_error_t err;
    assert_int_equal(parse(&a, &err, 2, "work", "--help"), 0);
    assert_true(a.help);
    assert_int_equal(parse(&a, &err, 1, "-h"), 0);
    assert_true(a.help);
}

static void
test_refusals(void **state)
{
    (void)state;
    pyc_args_t a;
    pyc_error_t err;
    expect_refused(parse(&a, &err, 1, "--nope"), &err, "unknown option --nope");
    expect_refused(parse(&a, &err, 1, "--nope=3"), &err, "unknown option --nope");
    expect_refused(parse(&a, &err, 1, "--json=yes"), &err, "--json takes no value");
    expect_refused(parse(&a, &err, 1, "--timeout"), &err, "--timeout needs a value");
    expect_refused(parse(&a, &err, 1, "-f"), &err, "-f needs a value");

    char *many[PYC_ARGS_MAX_POS + 1];
    for (int i = 0; i <= PYC_ARGS_MAX_POS; i++)
        many[i] = "w";
    expect_refused(pyc_args_parse(PYC_ARGS_MAX_POS + 1, many, specs, NSPECS, &a, &err), &err,
                   "too many arguments");
    assert_int_equal(pyc_args_parse(PYC_ARGS_MAX_POS, many, specs, NSPECS, &a, &err), 0);
}

static void
test_iterator_repeats(void **state)
{
    (void)state;
    static const pyc_argspec_t env_spec[] = {{"env", true, 0}};
    char *argv[] = {"--env", "A=1", "--env=B=2", "x"};
    pyc_argiter_t it;
    pyc_error_t err;
    const char *v;
    pyc_args_begin(&it, 4, argv, env_spec, 1);
    assert_int_equal(pyc_args_next(&it, &v, &err), 0);
    assert_string_equal(v, "A=1");
    assert_int_equal(pyc_args_next(&it, &v, &err), 0);
    assert_string_equal(v, "B=2");
    assert_int_equal(pyc_args_next(&it, &v, &err), PYC_ARG_POSITIONAL);
    assert_string_equal(v, "x");
    assert_int_equal(pyc_args_next(&it, &v, &err), PYC_ARG_END);
    assert_int_equal(pyc_args_next(&it, &v, &err), PYC_ARG_END);
}

/* An option whose value may be the next word (pyc new --replay [FILE]): --name=V, --name WORD, --name alone
 * (last, or before an option), and a word taken back by a command short of positional words. */
static void
test_optional_word(void **state)
{
    (void)state;
    static const pyc_argspec_t ow[] = {{"replay", PYC_ARG_OPTIONAL_WORD, 0}, {"json", false, 0}};
    pyc_args_t a;
    pyc_error_t err;
    char *v1[] = {"work", "--replay", "f.py"};
    assert_int_equal(pyc_args_parse(3, v1, ow, 2, &a, &err), 0);
    assert_string_equal(a.value[0], "f.py");
    assert_true(a.took_word[0]);
    pyc_args_give_back(&a, 1);   /* has its one positional word: nothing moves */
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.value[0], "f.py");

    char *v2[] = {"--replay=", "work"};
    assert_int_equal(pyc_args_parse(2, v2, ow, 2, &a, &err), 0);
    assert_string_equal(a.value[0], "");
    assert_false(a.took_word[0]);
    assert_int_equal(a.npos, 1);

    char *v3[] = {"work", "--replay", "--json"};
    assert_int_equal(pyc_args_parse(3, v3, ow, 2, &a, &err), 0);
    assert_string_equal(a.value[0], "");
    assert_string_equal(a.value[1], "");
    assert_int_equal(a.npos, 1);

    char *v4[] = {"work", "--replay"};
    assert_int_equal(pyc_args_parse(2, v4, ow, 2, &a, &err), 0);
    assert_string_equal(a.value[0], "");

    char *v5[] = {"--replay", "work"};
    assert_int_equal(pyc_args_parse(2, v5, ow, 2, &a, &err), 0);
    assert_int_equal(a.npos, 0);
    pyc_args_give_back(&a, 1);   /* `pyc new --replay work`: work is the session, --replay is bare */
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.pos[0], "work");
    assert_string_equal(a.value[0], "");

    char *v6[] = {"--replay", "--", "x"};
    assert_int_equal(pyc_args_parse(3, v6, ow, 2, &a, &err), 0);
    assert_string_equal(a.value[0], "");
    assert_int_equal(a.npos, 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_positional_words_that_look_like_options),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_iterator_repeats),
        cmocka_unit_test(test_optional_word),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
