"""pyc._transform.transform_cell: plain Python untouched, IPython-style lines rewritten."""

import ast

import pytest

from pyc._transform import transform_cell

M = "__import__('pyc._magics')._magics."


@pytest.mark.parametrize(
    "code",
    [
        "",
        "x = 5 % 3",
        "x = 5 %3\ny = 'a' % ()",
        "print('!')",
        "print('?')",
        "s = 'what?'",
        "d = {'%a': 1, '!b': 2}\nd['%a']",
        "x = 1  # really?",
        "x = 1 != 2",
        "s = '''\n!not a command\n%not a magic\nwhat?\n'''",
        "f = lambda: 1\nf()",
        "if x:\n    pass\nelse:\n    y = 3 % 2",
        "await something()",
        "async with a as b:\n    pass",
        "x = (1,\n     2)",
        "x = f'{a}?'",
        "print(r'\\!')",
    ],
)
def test_plain_python_is_untouched(code):
    assert transform_cell(code) is code


@pytest.mark.parametrize(
    "code",
    [
        "a = b ? c",  # invalid anyway: the user gets the SyntaxError of what they typed
        "x = (1,\n  %time y)",  # % inside brackets is not a magic line
        "def f(:\n    pass",
        "print('unterminated)",
        "  x = (",  # indented and invalid once dedented too
    ],
)
def test_invalid_python_without_magic_comes_back_unchanged(code):
    assert transform_cell(code) is code
    with pytest.raises(SyntaxError):
        compile(code, "<cell>", "exec")


def test_shell():
    assert transform_cell("!ls -l") == M + "system('ls -l')"
    assert transform_cell("! ls") == M + "system('ls')"
    assert transform_cell("for f in x:\n    !echo {f}") == "for f in x:\n    " + M + "system('echo {f}')"


def test_shell_capture():
    assert transform_cell("files = !ls *.py") == "files = " + M + "getoutput('ls *.py')"
    assert transform_cell("a, b = !echo 1") == "a, b = " + M + "getoutput('echo 1')"
    assert transform_cell("!!ls") == M + "getoutput('ls')"


def test_shell_with_quotes_and_question_marks():
    code = "!echo \"don't?\" 'x'"
    assert transform_cell(code) == M + "system(%r)" % code[1:]


def test_help():
    assert transform_cell("os.path?") == M + "page('os.path', 0)"
    assert transform_cell("os.path??") == M + "page('os.path', 1)"
    assert transform_cell("?os") == M + "page('os', 0)"
    assert transform_cell("??os") == M + "page('os', 1)"
    assert transform_cell("x = 1\nlen?  # help") == "x = 1\n" + M + "page('len', 0)"
    assert transform_cell("%timeit?") == M + "page('%timeit', 0)"


def test_help_ignores_question_marks_in_strings_and_comments():
    code = "print('what?')  # really?\nx?"
    assert transform_cell(code) == "print('what?')  # really?\n" + M + "page('x', 0)"


def test_line_magics():
    assert transform_cell("%time x = 1") == M + "line_magic('time', 'x = 1')"
    assert transform_cell("%timeit -n1 f(x)") == M + "line_magic('timeit', '-n1 f(x)')"
    assert transform_cell("%matplotlib inline") == M + "line_magic('matplotlib', 'inline')"
    assert transform_cell("%cd /tmp") == M + "line_magic('cd', '/tmp')"
    assert transform_cell("%pwd") == M + "line_magic('pwd', '')"
    assert transform_cell("%env") == M + "line_magic('env', '')"
    assert transform_cell("%env A=1") == M + "line_magic('env', 'A=1')"
    assert transform_cell("here = %pwd") == "here = " + M + "line_magic('pwd', '')"
    assert transform_cell("%load_ext foo") == M + "line_magic('load_ext', 'foo')"


def test_semicolon_still_suppresses_the_value():
    assert transform_cell("%time 1 + 1;") == M + "line_magic('time', '1 + 1;');"


def test_backslash_continuation_keeps_line_numbers():
    code = "%time x = 1 + \\\n  2\nprint(x)"
    out = transform_cell(code)
    assert out.split("\n") == [M + "line_magic('time', 'x = 1 +   2')", "", "print(x)"]


def test_cell_magics():
    code = "%%time\nx = 1\n!ls\ny = 2"
    out = transform_cell(code)
    assert out.split("\n") == [M + "cell_magic('time', '', 'x = 1\\n!ls\\ny = 2')", "", "", ""]
    assert transform_cell("\n%%timeit -n2 a = 1\na + 1") == "\n" + M + "cell_magic('timeit', '-n2 a = 1', 'a + 1')\n"


def test_cell_magic_not_on_the_first_line():
    assert transform_cell("x = 1\n%%time\ny = 2") == "x = 1\n" + M + "cell_magic('time', '', None)\ny = 2"


def test_magics_mixed_with_python():
    code = "import os\n!ls\nx = [i for i in range(3)]\n%cd /tmp\nx?"
    out = transform_cell(code)
    assert out.split("\n") == [
        "import os",
        M + "system('ls')",
        "x = [i for i in range(3)]",
        M + "line_magic('cd', '/tmp')",
        M + "page('x', 0)",
    ]
    ast.parse(out)


def test_magic_lines_inside_strings_are_left_alone():
    code = "s = '''\n%not magic\n!not shell\n'''\n!ls"
    assert transform_cell(code) == "s = '''\n%not magic\n!not shell\n'''\n" + M + "system('ls')"
    code = "s = 'a\\\n!b'\n!ls"
    assert transform_cell(code).endswith("\n" + M + "system('ls')")
    assert transform_cell(code).startswith("s = 'a\\\n!b'\n")


def test_genuine_error_elsewhere_is_reported_on_its_line():
    # the user's own mistake on line 2 is what compile reports, with the same line number and text
    out = transform_cell("!ls\nfoo(")
    assert out == M + "system('ls')\nfoo("
    with pytest.raises(SyntaxError) as e:
        compile(out, "<cell>", "exec")
    assert e.value.lineno == 2


def test_crlf():
    assert transform_cell("x = 1\r\n!ls\r\n") == "x = 1\r\n" + M + "system('ls')\r\n"


def test_not_a_str():
    assert transform_cell(None) is None


# ---- IPython's cleanup transforms, automagic and escapes ------------------------------------------------------


@pytest.mark.parametrize(
    "code, expected",
    [
        (">>> a = 3\n>>> a + 1", "a = 3\na + 1"),
        (">>> def h(x):\n...     return x * 2\n>>> h(4)", "def h(x):\n    return x * 2\nh(4)"),
        (">>>\n>>> x = 1", "\nx = 1"),
        ("In [1]: b = 5\n\nIn [2]: b * 2", "b = 5\n\nb * 2"),  # parses as annotated assignments too
        ("In [3]: for i in range(2):\n   ...:     print(i)\n   ...: ", "for i in range(2):\n    print(i)\n"),
        ("[nav] In [7]: y = 1", "y = 1"),
        ("\n\n>>> z = 2", "\n\nz = 2"),  # leading blank lines kept: the line numbers stay the cell's
        ("x = 1\n... ", "x = 1\n"),  # a prompt on the second line strips them all, as IPython does
        ("    y = 10\n    y + 1", "y = 10\ny + 1"),
        ("  if x:\n      pass\n  y = 2", "if x:\n    pass\ny = 2"),
        ("  !echo indented cell", M + "system('echo indented cell')"),
        ("    >>> x = 1\n    >>> x", "x = 1\nx"),  # a doctest pasted from a docstring: indentation first
        ("   ...: %time 1", M + "line_magic('time', '1')"),
        (" In [1]: %time 1", M + "line_magic('time', '1')"),
    ],
)
def test_pasted_prompts_and_indentation(code, expected):
    assert transform_cell(code) == expected


@pytest.mark.parametrize(
    "code",
    [
        "In = [0, 1]\nIn[1]",  # no prompt: "In[1]" lacks the space of "In [1]: "
        "x = ...",
        "print('>>> not a prompt')",
        "s = '''\n    >>> inside a string\n'''",
    ],
)
def test_prompt_lookalikes_are_python(code):
    assert transform_cell(code) is code


@pytest.mark.parametrize(
    "code, expected",
    [
        ("ls -la", M + "line_magic('ls', '-la')"),
        ("ls", M + "line_magic('ls', '')"),
        ("pwd", M + "line_magic('pwd', '')"),
        ("cd ..", M + "line_magic('cd', '..')"),
        ("  ls", M + "line_magic('ls', '')"),
        ("ls\n", M + "line_magic('ls', '')\n"),
        ("\nls folder", "\n" + M + "line_magic('ls', 'folder')"),
        ("time", M + "line_magic('time', '')"),
    ],
)
def test_automagic(code, expected):
    assert transform_cell(code, {}) == expected


@pytest.mark.parametrize(
    "code, ns",
    [
        ("ls", {"ls": 3}),  # a variable shadows the magic
        ("time", {"time": 0}),
        ("ls = 3", {}),  # an assignment
        ("ls, x = 1, 2", {}),
        ("ls.x", {}),  # another name to IPython
        ("ls\nls", {}),  # automagic is for one-line cells
        ("ls\n\n", {}),
        ("dir", {}),  # a builtin
        ("nosuchmagic x", {}),
        ("pass", {}),
    ],
)
def test_not_automagic(code, ns):
    assert "line_magic" not in transform_cell(code, ns)


def test_automagic_needs_the_namespace():
    assert transform_cell("ls -la") == "ls -la"  # parses (ls - la), and no namespace was given


@pytest.mark.parametrize(
    "code, expected",
    [
        (",f a b", 'f("a", "b")'),
        (";f a b", 'f("a b")'),
        ("/f a b", "f(a, b)"),
        ("/f", "f()"),
        ("x = 1\n,f a", 'x = 1\nf("a")'),
    ],
)
def test_quote_and_call_escapes(code, expected):
    assert transform_cell(code) == expected


def test_wildcard_and_magic_help():
    assert transform_cell("*int*?") == M + "page('*int*', 0)"
    assert transform_cell("os.*path*?") == M + "page('os.*path*', 0)"
    assert transform_cell("%load?") == M + "page('%load', 0)"
    assert transform_cell("%%timeit??") == M + "page('%%timeit', 1)"


def test_a_paste_that_stays_invalid_comes_back_unchanged():
    assert transform_cell("   ...: x = (") == "   ...: x = ("
