"""pyc._inspect: the text of inspect_reply and of obj? / obj??."""

import collections
import re
import os

import pytest

from pyc import _inspect

from conftest import run_cell


@pytest.fixture
def ns():
    ns = {"__name__": "__main__", "os": os, "collections": collections}
    run_cell(
        "def add(a, b=2):\n"
        "    '''Add things.'''\n"
        "    return a + b\n"
        "\n"
        "class Thing:\n"
        "    '''A thing.'''\n"
        "    def __init__(self, size):\n"
        "        '''Make a thing of that size.'''\n"
        "        self.size = size\n"
        "\n"
        "class Small(Thing):\n"
        "    pass\n"
        "\n"
        "class Caller:\n"
        "    def __call__(self, x):\n"
        "        '''Call me.'''\n"
        "\n"
        "d = {'a': 1}\n"
        "n = 5\n"
        "call = Caller()\n",
        ns,
    )
    return ns


def _text(code, ns, pos=None, level=0):
    r = _inspect.inspect(code, len(code) if pos is None else pos, level, ns)
    assert r["status"] == "ok"
    assert r["metadata"] == {}
    assert r["found"] is True, code
    return r["data"]["text/plain"]


def test_function_detail_0(ns):
    t = _text("add", ns)
    assert t.startswith("Signature: add(a, b=2)\n")
    assert "Docstring: Add things.\n" in t
    assert "Type:      function" in t
    assert "return a + b" not in t


def test_function_detail_1_shows_source(ns):
    t = _text("add", ns, level=1)
    assert "Signature: add(a, b=2)" in t
    assert "Source:\ndef add(a, b=2):\n    '''Add things.'''\n    return a + b\n" in t


def test_builtin_function(ns):
    t = _text("len", ns)
    assert "Signature: len(obj, /)" in t
    assert "Return the number of items in a container." in t
    assert "Type:      builtin_function_or_method" in t
    # no source for C functions: detail 1 shows the docstring
    assert "Return the number of items" in _text("len", ns, level=1)


def test_stdlib_function_has_file(ns):
    t = _text("os.path.join", ns)
    assert t.startswith("Signature: os.path.join(a, *p)")
    assert "File:      " in t and "posixpath.py" in t


def test_class(ns):
    t = _text("Thing", ns)
    assert "Init signature: Thing(size)" in t
    assert "Docstring:      A thing." in t
    assert "Init docstring: Make a thing of that size." in t
    assert "Type:           type" in t
    assert "Subclasses:     Small" in t
    t = _text("Thing", ns, level=1)
    assert "class Thing:" in t
    assert "__main__.py" not in t       # __main__ is pytest's here: its __file__ is no cell


def test_instance(ns):
    t = _text("d", ns)
    assert "Type:        dict" in t
    assert "String form: {'a': 1}" in t
    assert "Length:      1" in t
    assert "dict() -> new empty dictionary" in t
    t = _text("n", ns)
    assert "Type:        int" in t and "String form: 5" in t


def test_callable_instance(ns):
    t = _text("call", ns)
    assert "Call signature: call(x)" in t
    assert "Call docstring: Call me." in t


def test_module(ns):
    t = _text("os", ns)
    assert "Type:        module" in t
    assert "os.py" in t
    assert "OS routines" in t


def test_long_string_form_is_cut(ns):
    ns["big"] = list(range(10000))
    t = _text("big", ns)
    line = next(ln for ln in t.splitlines() if ln.startswith("String form"))
    assert "<...>" in line and len(line) < 300


def test_not_found(ns):
    for code in ("nope", "os.nope", "", "   ", "1 + ", "# add"):
        r = _inspect.inspect(code, len(code), 0, ns)
        assert r == {"status": "ok", "found": False, "data": {}, "metadata": {}}


def test_inside_call_inspects_the_callee(ns):
    assert _text("add(1, ", ns).startswith("Signature: add(a, b=2)")
    assert _text("x = add(n, [1, 2", ns).startswith("Signature: add(a, b=2)")
    assert _text("os.path.join('a', ", ns).startswith("Signature: os.path.join(a, *p)")
    code = "add(1, 2)"
    assert _text(code, ns, pos=code.index("1") + 1).startswith("Signature: add")
    # inside a string argument
    assert _text("open('some/fi", ns).startswith("Signature: open(")


def test_cursor_in_a_name(ns):
    code = "os.path.join('a')"
    t = _text(code, ns, pos=code.index("path") + 2)
    assert "Type:        module" in t and "posixpath" in t
    t = _text(code, ns, pos=code.index("join") + 1)
    assert t.startswith("Signature: os.path.join")
    # right after the name
    t = _text("x = add", ns)
    assert t.startswith("Signature: add")


def test_subscript_expression(ns):
    t = _text("d['a']", ns)
    assert "Type:        int" in t


def test_no_calls_are_made(ns):
    run_cell("calls = []\ndef side():\n    calls.append(1)\n    return 1\n", ns)
    r = _inspect.inspect("side().real", 11, 0, ns)
    assert r["found"] is False
    assert ns["calls"] == []


def test_broken_object_is_not_an_error(ns):
    class Broken:
        def __str__(self):
            raise RuntimeError("no str")

        def __len__(self):
            raise RuntimeError("no len")

    ns["b"] = Broken()
    t = _text("b", ns)
    assert re.search(r"^Type: +Broken$", t, re.M)


def test_after_a_call_inspects_the_callee(ns):
    assert _text("add(1, 2)", ns).startswith("Signature: add(a, b=2)")


def test_candidates():
    assert _inspect.candidates("os.path.join(a, ", 16) == ["os.path.join"]
    assert _inspect.candidates("f(g(x), ", 8) == ["f"]
    assert _inspect.candidates("f(g(x", 5) == ["x", "g", "f"]
    assert _inspect.candidates("x = 1  # f(", 11) == []


def test_properties_and_descriptors_are_never_called():
    """Shift-Tab on an attribute must not run the object's code: a property that loops forever once wedged
    the kernel for good.  What the class stores is shown instead (a property's docstring and type)."""
    calls = []

    class Guarded:
        def __init__(self):
            self.plain = [1, 2]

        @property
        def boom(self):
            """A property that must not run."""
            calls.append("boom")
            while True:
                pass

        def method(self, x):
            """A method."""

        @classmethod
        def make(cls):
            """A classmethod."""

    ns = {"g": Guarded(), "Guarded": Guarded}
    t = _text("g.boom", ns)
    assert calls == []
    assert "A property that must not run." in t and "property" in t
    assert "Signature: g.method(x)" in _text("g.method", ns)
    assert "Signature: Guarded.make()" in _text("Guarded.make", ns)
    assert "String form: [1, 2]" in _text("g.plain", ns)
    # the obj? magic inspects the same way
    assert calls == []
