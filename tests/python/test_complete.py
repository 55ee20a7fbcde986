"""pyc._complete: completion with jedi and with the standard library (PYC_NO_JEDI=1)."""

import collections
import os
import time

import pytest

from pyc import _complete


def _ns(**kw):
    import builtins

    ns = {"__builtins__": builtins, "os": os, "collections": collections}
    ns.update(kw)
    return ns


def _check_shape(r, code, pos):
    assert r["status"] == "ok"
    assert set(r) == {"matches", "cursor_start", "cursor_end", "metadata", "status"}
    assert 0 <= r["cursor_start"] <= r["cursor_end"] <= len(code)
    assert r["cursor_start"] <= pos
    types = r["metadata"]["_jupyter_types_experimental"]
    assert [t["text"] for t in types] == r["matches"]
    for t in types:
        assert set(t) == {"start", "end", "text", "type", "signature"}
        assert (t["start"], t["end"]) == (r["cursor_start"], r["cursor_end"])
    assert len(set(r["matches"])) == len(r["matches"])


def _apply(code, r, match):
    return code[: r["cursor_start"]] + match + code[r["cursor_end"] :]


def test_attribute(completer):
    code = "os.pa"
    r = completer(code, ns=_ns())
    _check_shape(r, code, len(code))
    assert {"path", "pardir", "pathsep"} <= set(r["matches"])
    assert (r["cursor_start"], r["cursor_end"]) == (3, 5)
    types = {t["text"]: t["type"] for t in r["metadata"]["_jupyter_types_experimental"]}
    assert types["path"] == "module"
    assert types["pardir"] == "instance"


def test_attribute_chain_and_signature(completer):
    code = "os.path.jo"
    r = completer(code, ns=_ns())
    assert r["matches"] == ["join"]
    t = r["metadata"]["_jupyter_types_experimental"][0]
    assert t["type"] == "function"
    assert t["signature"].startswith("(a")


def test_attribute_of_subscript(completer):
    code = "d['key'].bit_l"
    r = completer(code, ns=_ns(d={"key": 5}))
    assert r["matches"] == ["bit_length"]


def test_private_names_only_with_underscore(completer):
    r = completer("os.", ns=_ns())
    assert "path" in r["matches"]
    assert not any(m.startswith("_") for m in r["matches"])
    r = completer("os._e", ns=_ns())
    assert "_exit" in r["matches"]


def test_dict_keys(completer):
    code = "d['ke"
    r = completer(code, ns=_ns(d={"key": 1, "kez": 2, "other": 3, 4: 5}))
    _check_shape(r, code, len(code))
    assert {"'key'", "'kez'"} <= set(r["matches"])
    assert "'other'" not in r["matches"]
    assert r["cursor_start"] == 2
    assert _apply(code, r, "'key'") == "d['key'"


def test_dict_keys_closing_quote_typed(completer):
    code = "d['ke']"
    r = completer(code, pos=5, ns=_ns(d={"key": 1}))
    assert len(r["matches"]) == 1
    assert _apply(code, r, r["matches"][0]) == "d['key']"


def test_dict_keys_double_quote(completer):
    code = 'd["ke'
    r = completer(code, ns=_ns(d={"key": 1}))
    assert _apply(code, r, r["matches"][0]) == 'd["key"'


def test_import_module(completer):
    code = "import o"
    r = completer(code, ns=_ns())
    assert {"os", "operator"} <= set(r["matches"])
    assert (r["cursor_start"], r["cursor_end"]) == (7, 8)


def test_import_submodule(completer):
    code = "import os.pa"
    r = completer(code, ns=_ns())
    assert "path" in r["matches"]
    assert r["cursor_start"] == 10
    r = completer("import xml.etree.Ele", ns=_ns())
    assert "ElementTree" in r["matches"]


def test_from_import(completer):
    code = "from os import pa"
    r = completer(code, ns=_ns())
    assert {"path", "pardir"} <= set(r["matches"])
    assert r["cursor_start"] == len("from os import ")
    r = completer("from o", ns=_ns())
    assert "os" in r["matches"]
    r = completer("from collections import Ord", ns=_ns())
    assert "OrderedDict" in r["matches"]


def test_from_import_not_yet_imported_module(completer):
    # the names come from the module's source (parsed, not run)
    assert "tabnanny" not in __import__("sys").modules
    r = completer("from tabnanny import proc", ns=_ns())
    assert "process_tokens" in r["matches"]
    assert "tabnanny" not in __import__("sys").modules


def test_keywords(completer):
    r = completer("wh", ns=_ns())
    assert "while" in r["matches"]
    r = completer("x = Tr", ns=_ns())
    assert "True" in r["matches"]


def test_names_namespace_and_builtins(completer):
    r = completer("my_v", ns=_ns(my_variable=1, my_value=2, other=3))
    assert set(r["matches"]) == {"my_variable", "my_value"}
    r = completer("isinst", ns=_ns())
    assert r["matches"] == ["isinstance"]
    t = r["metadata"]["_jupyter_types_experimental"][0]
    assert t["type"] == "function"


def test_unicode_positions(completer):
    # positions are code points, even after characters outside the BMP
    code = "s = '\U0001f600'; t = 'é'; wörd_value.up"
    r = completer(code, ns=_ns(wörd_value="abc"))
    assert r["matches"] == ["upper"]
    assert r["cursor_start"] == len(code) - 2
    assert r["cursor_end"] == len(code)


def test_multiline_cursor_in_middle(completer):
    code = "import os\nx = os.pa\ny = 2\n"
    pos = code.index("os.pa") + 5
    r = completer(code, pos=pos, ns=_ns())
    assert "path" in r["matches"]
    assert (r["cursor_start"], r["cursor_end"]) == (pos - 2, pos)


def test_crlf_lines(completer):
    code = "a = 1\r\nos.pa"
    r = completer(code, ns=_ns())
    assert "path" in r["matches"]
    assert r["cursor_start"] == len(code) - 2


def test_keyword_arguments(completer):
    r = completer("sorted([], ke", ns=_ns())
    assert "key=" in r["matches"]


def test_file_paths_in_strings(completer, tmp_path):
    (tmp_path / "file_one.txt").write_text("x")
    (tmp_path / "file_dir").mkdir()
    (tmp_path / ".file_hidden").write_text("x")
    code = "open('%s/fi" % tmp_path
    r = completer(code, ns=_ns())
    # jedi closes the string after a file name
    assert {m.rstrip("'") for m in r["matches"]} == {"file_one.txt", "file_dir/"}
    assert r["cursor_start"] == len(code) - 2
    types = {t["type"] for t in r["metadata"]["_jupyter_types_experimental"]}
    assert types == {"path"}


def test_root_path(completer):
    r = completer("open('/us", ns=_ns())
    assert "usr/" in r["matches"]


def test_magics(completer):
    r = completer("%ti")
    assert r["matches"] == ["%time", "%timeit"]
    assert (r["cursor_start"], r["cursor_end"]) == (0, 3)
    r = completer("%%ti")
    assert r["matches"] == ["%%time", "%%timeit"]
    r = completer("x = 1\n%p")
    assert r["matches"] == ["%pinfo", "%pinfo2", "%pip", "%psearch", "%pwd"]
    r = completer("%%py")
    assert r["matches"] == ["%%pypy", "%%python", "%%python2", "%%python3"]


def test_python_after_time_magic(completer):
    r = completer("%time os.pa", ns=_ns())
    assert "path" in r["matches"]


def test_shell_line_paths(completer, tmp_path):
    (tmp_path / "data_a.csv").write_text("x")
    code = "!ls %s/data" % tmp_path
    r = completer(code, ns=_ns())
    assert r["matches"] == ["data_a.csv"]


def test_comment_gives_nothing(completer):
    r = completer("x = 1  # os.pa", ns=_ns())
    assert r["matches"] == []
    assert r["cursor_start"] == r["cursor_end"] == len("x = 1  # os.pa")


@pytest.mark.parametrize(
    "code,pos",
    [("", 0), ("os.pa", 99), ("os.pa", -3), ("(((", 3), ("'''", 3), ("x.", 2), ("1.", 2), ("\\", 1), ("a[", 2)],
)
def test_odd_inputs_never_raise(completer, code, pos):
    r = completer(code, pos=pos, ns=_ns())
    assert r["status"] == "ok"
    assert 0 <= r["cursor_start"] <= r["cursor_end"] <= len(code)


def test_hostile_objects(completer):
    class Hostile:
        def __dir__(self):
            raise RuntimeError("no dir")

        def __getattr__(self, name):
            raise RuntimeError("no attr")

        def keys(self):
            raise RuntimeError("no keys")

        def __getitem__(self, k):
            raise RuntimeError("no item")

    ns = _ns(h=Hostile())
    for code in ("h.", "h.x", "h['a", "h["):
        r = completer(code, ns=ns)
        assert r["status"] == "ok"


def test_total_failure_gives_empty_reply(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(_complete, "_complete", boom)
    r = _complete.complete("os.pa", 5, {})
    assert r == {
        "matches": [],
        "cursor_start": 5,
        "cursor_end": 5,
        "metadata": {"_jupyter_types_experimental": []},
        "status": "ok",
    }


def test_jedi_failure_falls_back_to_stdlib(monkeypatch):
    monkeypatch.delenv("PYC_NO_JEDI", raising=False)

    def boom(*a, **k):
        raise RuntimeError("jedi broke")

    monkeypatch.setattr(_complete, "_jedi_items", boom)
    r = _complete.complete("os.pa", 5, _ns())
    assert "path" in r["matches"]


def test_request_asks_the_stdlib_first_while_jedi_is_cold(monkeypatch):
    """complete_request before jedi has completed once: the standard library answers (in milliseconds, where
    jedi's first completion can take over JupyterLab's 1 s), jedi only when it finds nothing; after
    warm_up, jedi first."""
    monkeypatch.delenv("PYC_NO_JEDI", raising=False)
    monkeypatch.setattr(_complete, "_jedi_warm", False)
    calls = []
    real = _complete._jedi_items

    def recording(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(_complete, "_jedi_items", recording)
    assert "print" in _complete.request("pri", 3, _ns())["matches"]
    assert "path" in _complete.request("os.pa", 5, _ns())["matches"]
    assert calls == [] and _complete._jedi_warm is False
    # nothing the standard library knows (a name the cell defines, not yet run): jedi answers, and is warm
    code = "word = 'abc'\nword.upp"
    assert "upper" in _complete.request(code, len(code), _ns())["matches"]
    assert calls == [code] and _complete._jedi_warm is True
    monkeypatch.setattr(_complete, "_jedi_warm", False)
    assert _complete.warm_up() is True and _complete._jedi_warm is True
    calls.clear()
    assert "print" in _complete.request("pri", 3, _ns())["matches"]
    assert calls == ["pri"]


def test_no_jedi_env_means_no_jedi(monkeypatch):
    monkeypatch.setenv("PYC_NO_JEDI", "1")

    def fail(*a, **k):
        raise AssertionError("jedi used although PYC_NO_JEDI=1")

    monkeypatch.setattr(_complete, "_jedi_items", fail)
    assert "path" in _complete.complete("os.pa", 5, _ns())["matches"]


def test_stdlib_is_fast(monkeypatch):
    monkeypatch.setenv("PYC_NO_JEDI", "1")
    ns = _ns(**{"var%d" % i: i for i in range(200)})
    for code in ("os.pa", "va", "d['k", "import o", "open('/us"):
        ns["d"] = {"k%d" % i: i for i in range(100)}
        _complete.complete(code, len(code), ns)  # warm (module list cache, lazy imports)
        best = min(_timed(_complete.complete, code, len(code), ns) for _ in range(5))
        assert best < 0.005, (code, best)


def _timed(f, *args):
    t = time.perf_counter()
    f(*args)
    return time.perf_counter() - t


def test_shell_line_with_quotes(completer, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    code = "!echo don't # see %s/no" % tmp_path
    r = completer(code, ns=_ns())
    assert r["matches"] == ["notes.txt"]
    code = "x = !ls %s/no" % tmp_path
    assert completer(code, ns=_ns())["matches"] == ["notes.txt"]


def test_cd_completes_directories_only(completer, tmp_path):
    (tmp_path / "subdir").mkdir()
    (tmp_path / "subfile").write_text("x")
    r = completer("%%cd %s/sub" % tmp_path, ns=_ns())
    assert r["matches"] == ["subdir/"]


def test_magic_names_only_at_statement_start(completer):
    r = completer("x = (1 +\n%ti", ns=_ns())
    assert "%time" not in r["matches"]


def test_jedi_not_installed(monkeypatch):
    import sys

    monkeypatch.delenv("PYC_NO_JEDI", raising=False)
    monkeypatch.setitem(sys.modules, "jedi", None)  # import jedi -> ImportError
    r = _complete.complete("os.pa", 5, _ns())
    assert "path" in r["matches"]
