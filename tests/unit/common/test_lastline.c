/*
 * test_lastline.c -- cmocka tests for lastline.c: which cells' last statement is certainly not an expression
 * (assignments, keyword statements, decorators, blocks) and which may be one (expressions, calls,
 * comparisons, walrus in brackets, lambdas with defaults), with the '=' and keywords that strings, comments
 * and brackets hide, ';'-separated parts, continuations, CRLF, and the texts the scan declines to judge; and
 * which cells end with IPython's ';' (comments and blank lines after it aside, not one inside a string,
 * comment or brackets).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lastline.h"

/* Both answers for code, scanned from an exact-size copy (no NUL after it), so that a read past the end
 * shows under the sanitizers. */
static pyc_lastline_t
judge(const char *code)
{
    size_t n = strlen(code);
    char *copy = malloc(n + 1);
    assert_non_null(copy);
    memcpy(copy, code, n);
    pyc_lastline_t r;
    pyc_lastline_judge(copy, n, 0, &r);
    free(copy);
    return r;
}

static bool
stmt(const char *code)
{
    return judge(code).not_expression;
}

static void
test_statements(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "x = 1",
        "x = 1\n",
        "x=1",
        "x += 1",
        "x -= 1\n\n\n",
        "x <<= 2",
        "x >>= 2",
        "x **= 2",
        "x //= 2",
        "a[i] = 3",
        "a.b = f(c=1)",
        "x: int = 3",
        "a, b = b, a",
        "*a, b = c",
        "f = lambda x=1: x",
        "x = y == z",
        "import os",
        "from os import path",
        "def f():\n    return 1\n",
        "def f(): return 1",
        "class C:\n    x = 1\n    y\n",
        "for i in range(3):\n    print(i)\n",
        "for i in range(3): print(i)",
        "while False:\n    pass",
        "if x:\n    y\n",
        "if x: y",
        "if x:\n    y\nelse:\n    z\n",
        "with open(p) as f:\n    f.read()\n",
        "try:\n    1/0\nexcept Exception:\n    e\n",
        "try:\n    f()\nfinally:\n    g()\n",
        "pass",
        "del x",
        "raise ValueError('x')",
        "global g",
        "nonlocal n",
        "assert x, 'no'",
        "break",
        "continue",
        "return 5",
        "async def f():\n    await g()\n",
        "@decorator\ndef f(): pass",
        "@decorator\ndef f():\n    pass\n",
        "x = 1; y = 2",
        "y; x = 1",
        "x = 1; y = 2;",
        "x = 1;",
        "print(1)\nx = 2",
        "x = '=='\n",
        "x = (1,\n     2)\n",
        "x = [\n  1,\n  2,\n]\n",
        "x = \\\n  5\n",
        "x = 1\r\n",
        "x = 1\r\ny = 2",
        "x = 1\ry = 2\r",
        "s = '''\ny\n'''\n",
        "s = \"\"\"a 'b' \\\"\"\" c\"\"\"",
        "s = r'\\'' ",
        "x = f'{y}'",
        "x = 1  # y",
        "x = 1\n# y\n",
        "x = 1\n   # y\n",
        "x = 1\n\n   \n",
        "",
        "\n\n",
        "# only a comment",
        "x = 1\n\f",
        "λ = 1",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!stmt(cases[i]))
            fail_msg("not judged a statement: %s", cases[i]);
    }
}

static void
test_maybe_expressions(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "x",
        "x\n",
        "f(x)",
        "print(1)",
        "a == b",
        "a != b",
        "a <= b",
        "a >= b",
        "a<=b",
        "(y := 2)",
        "f(a=1)",
        "x = 1; y",
        "x = 1\ny",
        "x = 1; y;",             /* suppressed by the caller's ';' rule, but still an expression */
        "y  # x = 1",
        "'x = 1'",
        "\"import os\"",
        "'''\nx = 1\n'''",
        "f'{x=}'",
        "rb'='",
        "{'a': 1}",
        "[x for x in y if x]",
        "lambda x=1: x",
        "lambda: (yield)",
        "await f()",
        "not x",
        "None",
        "format(x)",
        "iffy",
        "classes",
        "deferred",
        "import_x",
        "x if y else z",
        "(x =\n 1)",             /* not Python; judged by the parser */
        "x = 1\n(a,\n b)",
        "x = 1\n\\\ny",         /* a continuation before a line's code: not judged */
        "x = 1\ny \\\n  + 1",
        "match(x)",
        "case",
        "type(x)",
        "x = 1\n-1",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (stmt(cases[i]))
            fail_msg("judged a statement: %s", cases[i]);
    }
}

static void
test_declined(void **state)
{
    (void)state;
    /* Texts the scan does not understand answer "maybe", whatever their last line. */
    static const char *const cases[] = {
        "x = 'abc",
        "x = '''abc",
        "x = 'a\nb'",
        "x = (1",
        "x = 1)",
        "x = ]",
        "x = 1 \\ y",
        "x = 1\\",
        "x = 'a\\",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (stmt(cases[i]))
            fail_msg("judged a statement: %s", cases[i]);
    }
}

static void
test_nested_fstrings(void **state)
{
    (void)state;
    /* From Python 3.12 f"{"a" + "="}" is one string; the flag makes any f-string a reason to parse. */
    const char *code = "s = f\"{\"(\"}\"\ny";
    assert_false(pyc_lastline_not_expression(code, strlen(code), PYC_LASTLINE_NESTED_FSTRINGS));
    code = "x = f'{y}'";
    assert_true(pyc_lastline_not_expression(code, strlen(code), 0));
    assert_false(pyc_lastline_not_expression(code, strlen(code), PYC_LASTLINE_NESTED_FSTRINGS));
    code = "x = rb'{y}'";
    assert_true(pyc_lastline_not_expression(code, strlen(code), PYC_LASTLINE_NESTED_FSTRINGS));
}

static void
test_length_not_nul(void **state)
{
    (void)state;
    /* Only code[0..len) is read: here the last statement within len is an assignment. */
    const char *code = "x = 1\ny";
    assert_true(pyc_lastline_not_expression(code, 5, 0));
    assert_false(pyc_lastline_not_expression(code, strlen(code), 0));
    /* A NUL is one more character that is not Python; the scan goes on past it. */
    assert_false(pyc_lastline_not_expression("x = 1\0\ny", 8, 0));
}

static int
semi(const char *code)
{
    return judge(code).semicolon;
}

static void
test_semicolon(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "x;", "x;\n", "x ;  \n\n", "plt.plot(x, y);  # blue", "plt.plot(x, y);# blue ;", "f(1);\n# a comment\n",
        "f(1);\n\n   # indented comment\n\n", "a = 1\nb;", "f(a,\n  b);", "x;\r\n# c\r\n", "s = 'a;';",
        "f('#');  # x", "x;\t",
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (semi(yes[i]) != 1)
            fail_msg("no ';' seen at the end of: %s", yes[i]);
    }
    static const char *const no[] = {
        "", "x", "# x;", "x  # y;", "'a;'", "\"\"\"a;\"\"\"", "f(a;)", "x; y", "x;\ny", "[1;]", "x # ;\n# ;",
        "# only;\n# comments;", "x;\n'#;'",
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        if (semi(no[i]) != 0)
            fail_msg("a ';' seen at the end of: %s", no[i]);
    }
    static const char *const unsure[] = {"'a;", "f(a;", "x = \"\"\"a;", "\\\nx;"};
    for (size_t i = 0; i < sizeof unsure / sizeof unsure[0]; i++) {
        if (semi(unsure[i]) != -1)
            fail_msg("judged although not understood: %s", unsure[i]);
    }
    /* From 3.12 an f-string may nest quotes: the scan declines instead of guessing. */
    const char *code = "f\"{d[\"k;\"]}\"";
    assert_int_equal(pyc_lastline_semicolon(code, strlen(code), PYC_LASTLINE_NESTED_FSTRINGS), -1);
    code = "f'{x}';";
    assert_int_equal(pyc_lastline_semicolon(code, strlen(code), 0), 1);
    /* The two questions' own entry points give the one scan's answers. */
    code = "x = 1;  # c";
    assert_int_equal(pyc_lastline_semicolon(code, strlen(code), 0), 1);
    assert_true(pyc_lastline_not_expression(code, strlen(code), 0));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_maybe_expressions),
        cmocka_unit_test(test_declined),
        cmocka_unit_test(test_nested_fstrings),
        cmocka_unit_test(test_length_not_nul),
        cmocka_unit_test(test_semicolon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
