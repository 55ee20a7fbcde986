"""pyc._source: the scanner, expression extraction and guarded evaluation shared by the other modules."""

import collections

import pytest

from pyc import _source


def test_scan_strings_comments_brackets():
    st = _source.scan("f(a, 'b#c', [1")
    assert st.string is None and st.comment is None
    assert [c for _, c in st.brackets] == ["(", "["]
    st = _source.scan("x = rb'abc")
    assert st.string == (4, 7, "'")
    st = _source.scan('s = """a\nb')
    assert st.string == (4, 7, '"""')
    st = _source.scan("x = 1  # comment 'not a string")
    assert st.comment == 7 and st.string is None
    st = _source.scan("s = 'it\\'s")
    assert st.string is not None


def test_expression_start():
    for code, expr in [
        ("x = os.path.jo", "os.path.jo"),
        ("f(a)[0].real", "f(a)[0].real"),
        ("print('abc'.up", "'abc'.up"),
        ("[1, 2].cou", "[1, 2].cou"),
        ("d['k'].x", "d['k'].x"),
        ("a + b", "b"),
    ]:
        st = _source.scan(code)
        assert code[_source.expression_start(code, len(code), st) :] == expr
    assert _source.expression_start("a + ", 4, _source.scan("a + ")) is None


def test_guarded_eval():
    ns = {"d": {"a": [1, 2]}, "s": "abc", "collections": collections}
    assert _source.guarded_eval("d['a'][1]", ns) == 2
    assert _source.guarded_eval("s[1:]", ns) == "bc"
    assert _source.guarded_eval("len", ns) is len
    assert _source.guarded_eval("{'k': (1, -2)}", ns) == {"k": (1, -2)}
    assert _source.guarded_eval("collections.OrderedDict", ns) is collections.OrderedDict


@pytest.mark.parametrize("expr", ["f()", "d.pop('a')", "a + b", "[x for x in y]", "lambda: 1", "obj[0]"])
def test_guarded_eval_refuses_code(expr):
    class Obj:
        def __getitem__(self, k):
            raise AssertionError("called")

    calls = []
    ns = {"f": lambda: calls.append(1), "d": {"a": 1}, "a": 1, "b": 2, "y": [1], "obj": Obj()}
    with pytest.raises(Exception):
        _source.guarded_eval(expr, ns)
    assert calls == [] and ns["d"] == {"a": 1}


def test_guarded_eval_does_not_grow_defaultdicts():
    dd = collections.defaultdict(list)
    with pytest.raises(KeyError):
        _source.guarded_eval("dd['new']", {"dd": dd})
    assert dict(dd) == {}
