"""pyc._pretty against IPython.lib.pretty: the same text for a corpus of values (IPython 8 from Debian; the
comparison is skipped where IPython is not installed, the checks of pyc's own output are not)."""

import collections
import datetime
import random
import re
import types

import pytest

from pyc._pretty import Printer, for_type, pretty

try:
    from IPython.lib import pretty as ipretty
except ImportError:     # the comparisons skip; the rest runs
    ipretty = None


class Plain:
    pass


class WithRepr:
    def __repr__(self):
        return "WithRepr(\n  a=1,\n  b=2)"


class Pretty:
    def __init__(self, items):
        self.items = items

    def _repr_pretty_(self, p, cycle):
        if cycle:
            p.text("Pretty(...)")
            return
        with p.group(7, "Pretty(", ")"):
            for i, x in enumerate(self.items):
                if i:
                    p.text(",")
                    p.breakable()
                p.pretty(x)


class ListSub(list):
    pass


class ListSubRepr(list):
    def __repr__(self):
        return "ListSubRepr!"


class Meta(type):
    def __repr__(cls):
        return "<meta %s>" % cls.__name__


class WithMeta(metaclass=Meta):
    pass


class MyError(ValueError):
    pass


def func(a, b=2, *args, c, **kw):
    pass


def corpus():
    cyclic = [1, 2]
    cyclic.append(cyclic)
    d = {"a": 1}
    d["self"] = d
    nested = {"k%d" % i: list(range(i * 3)) for i in range(12)}
    return [
        None, True, 1, -5, 2 ** 100, 1.5, float("inf"), 1j, "text", "line\nbreak", b"bytes", "x" * 200,
        [], (), {}, set(), frozenset(), (1,), (1, 2), [1, [2, [3, [4]]]],
        list(range(10)), list(range(100)), list(range(1500)), tuple(range(40)), set(range(50)),
        frozenset("abcdefghijklmnopqrstuvwxyz" * 3), {3, 1, 2}, {1, "a", 2.5},
        {"a": 1, "b": [1, 2, 3], "c": {"d": (4, 5)}}, nested, dict.fromkeys(range(2000)),
        ["a" * 30, "b" * 30, "c" * 30, "d" * 30], [["x" * 20] * 5] * 3,
        cyclic, d, collections.OrderedDict(a=1, b=2), collections.OrderedDict(),
        collections.defaultdict(list, {"a": [1]}), collections.deque(range(5)), collections.deque(range(5), 3),
        collections.Counter("abracadabra"), collections.Counter(), collections.UserList([1, 2]),
        types.SimpleNamespace(a=1, b="two"), re.compile(r"\d+\s"), re.compile("a.b", re.I | re.M),
        datetime.datetime(2026, 12, 3, 14, 0), datetime.timedelta(days=1), range(10), slice(1, 5, 2),
        ValueError("bad", 3), MyError("mine"), KeyError("k"),
        int, str, Plain, WithMeta, Pretty, len, func, print, Plain().__init__,
        WithRepr(), [WithRepr(), WithRepr()], Pretty(list(range(60))), Pretty(["x" * 40, "y" * 40]),
        ListSub([1, 2, 3]), ListSubRepr([1]), {"k": Plain}, types.MappingProxyType({"a": 1}),
        [{"name": "alice" * 3, "age": 31, "tags": ["a", "b", "c"] * 4}] * 3,
    ]


@pytest.mark.skipif(ipretty is None, reason="IPython is not installed")
@pytest.mark.parametrize("i", range(len(corpus())))
def test_same_text_as_ipython(i):
    obj = corpus()[i]
    assert pretty(obj) == ipretty.pretty(obj)


def test_long_containers_are_cut_after_1000_items():
    text = pretty(list(range(10 ** 6)))
    assert text.endswith(" 999,\n ...]")
    assert len(text) < 8000


def test_width_is_79_columns():
    lines = pretty(list(range(1000))).splitlines()
    assert max(len(line) for line in lines) <= 79
    assert pretty(list(range(10))) == repr(list(range(10)))


def test_cycles_are_shown_not_followed():
    a = [1]
    a.append(a)
    assert pretty(a) == "[1, [...]]"


def test_for_type_registers_a_printer():
    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    old = for_type(Point, lambda obj, p, cycle: p.text("P<%d,%d>" % (obj.x, obj.y)))
    assert old is None
    assert pretty([Point(1, 2)]) == "[P<1,2>]"


def test_a_raising_repr_propagates():
    class Bad:
        def __repr__(self):
            raise RuntimeError("no repr")

    with pytest.raises(RuntimeError):
        pretty(Bad())


def test_printer_interface():
    p = Printer(max_width=10)
    with p.group(1, "[", "]"):
        for i in range(5):
            if i:
                p.text(",")
                p.breakable()
            p.text(str(i * 111))
    p.flush()
    assert p.getvalue() == "[0,\n 111,\n 222,\n 333,\n 444]"


class Lines:
    """An object whose repr has line breaks of every kind str.splitlines knows."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


class Margin:
    """Lays out its children at the left margin (indent 0), between breakables of groups of its own."""

    def __init__(self, kids, widths):
        self.kids = kids
        self.widths = widths

    def _repr_pretty_(self, p, cycle):
        with p.group(0):
            p.text("M")
            for kid, width in zip(self.kids, self.widths):
                p.pretty(kid)
                p.breakable()
                p.text("z")
                with p.group(0, "<", ">"):
                    p.breakable("")
                    p.text("w" * width)


def margin_corpus(seed, count):
    """Nested containers, _repr_pretty_ objects and multi-line reprs, many of them at the left margin, where
    pyc's printer adds a long repr's lines in one piece (_pretty._repr)."""
    rnd = random.Random(seed)

    def text():
        pieces = ["a", "bb ", "\n", "\r\n", "\u2028", "\x0b", "xyz" * 10, " "]
        return "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))

    def obj(depth=0):
        c = rnd.random()
        if depth > 4 or c < 0.35:
            return Lines(text())
        n = rnd.randint(0, 3)
        if c < 0.5:
            return [obj(depth + 1) for _ in range(n + 1)]
        if c < 0.6:
            return {str(i): obj(depth + 1) for i in range(n)}
        if c < 0.8:
            return Pretty([obj(depth + 1) for _ in range(n)])
        return Margin([obj(depth + 1) for _ in range(n)], [rnd.randint(0, 30) for _ in range(n)])

    return [obj() for _ in range(count)]


@pytest.mark.skipif(ipretty is None, reason="IPython is not installed")
def test_multiline_reprs_are_laid_out_as_ipython_does():
    """Each line break of a repr takes one forced break, which breaks one more enclosing group: the text
    after a long repr at the left margin must break where IPython's does."""
    for obj in margin_corpus(7, 3000):
        for width in (79, 20):
            assert pretty(obj, max_width=width) == ipretty.pretty(obj, max_width=width)
