"""The comm target pyc.pickle and pyc_client (DESIGN.md section 5): variables out of, into and between
kernels as protocol-5 pickles whose out-of-band buffers travel as raw message frames, checked by SHA-256
before anything is unpickled.  pyc-only."""

import hashlib
import os
import time
import secrets
import sys
import uuid
import warnings

import pytest

import pyctest
from pyctest import assert_alive, eval_value, execute, get_reply, request, rss_mb, stream_text, validate

np = pytest.importorskip("numpy")

sys.path.insert(0, os.path.join(pyctest.PYC_SRCDIR, "cli", "python"))
import pyc_client  # noqa: E402
from pyc_client import PycError, PycSkippedWarning  # noqa: E402

pytestmark = pytest.mark.skipif(not pyctest.IS_PYC, reason=pyctest.NOT_PYC_REASON)

BIG_TIMEOUT = 120


@pytest.fixture
def pkc(kernel):
    """The module's kernel, checked to be pyc, with numpy and pandas imported."""
    kernel.require_pyc()
    reply, _ = execute(kernel.kc, "import numpy as np, pandas as pd, hashlib, os")
    assert reply["content"]["status"] == "ok", reply["content"]
    return kernel.kc


@pytest.fixture(scope="module")
def _second_kernel():
    holder = {}
    yield holder
    if "k" in holder:
        holder["k"].shutdown(now=True)


@pytest.fixture
def kc2(_second_kernel, pkc):
    """A second pyc kernel for kernel-to-kernel copies (shared by the module)."""
    k = _second_kernel.get("k")
    if k is None or not k.is_alive():
        if k is not None:
            k.shutdown(now=True)
        k = _second_kernel["k"] = pyctest.Kernel("pyc")
    pyctest.drain(k.kc, "iopub", quiet=0.01)
    reply, _ = execute(k.kc, "import numpy as np, pandas as pd, hashlib")
    assert reply["content"]["status"] == "ok", reply["content"]
    return k.kc


def run_ok(kc, code):
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    return stream_text(msgs)


def kernel_digest(kc, expr):
    """SHA-256 of the bytes of the array expr, computed inside the kernel."""
    v = eval_value(kc, "hashlib.sha256(np.ascontiguousarray(%s).tobytes()).hexdigest()" % expr)
    return v.strip("'\"")


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def assert_same_array(a, b):
    assert type(b) is np.ndarray
    assert b.dtype == a.dtype and b.shape == a.shape
    assert b.tobytes() == a.tobytes()
    if a.dtype != object:
        assert digest(a) == digest(b)


def no_open_comms(kc):
    reply, _ = request(kc, "comm_info_request", {"target_name": "pyc.pickle"})
    return reply["content"]["comms"] == {}


# ---- the wire format ---------------------------------------------------------------------------------------


def test_wire_format_get(pkc):
    """comm_open (request in data) -> busy, one comm_msg with the pickle in raw buffers, comm_close, idle."""
    run_ok(pkc, "w = np.arange(1000, dtype=np.int32)")
    comm_id = uuid.uuid4().hex
    msg = pkc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "pyc.pickle",
                                        "data": {"op": "get", "name": "w"}})
    pkc.shell_channel.send(msg)
    msgs = pyctest.iopub_for(pkc, msg["header"]["msg_id"])
    types = [m["msg_type"] for m in msgs]
    assert types == ["status", "comm_msg", "comm_close", "status"], types
    answer = msgs[1]
    assert answer["content"]["comm_id"] == comm_id and msgs[2]["content"]["comm_id"] == comm_id
    data = answer["content"]["data"]
    assert data["status"] == "ok" and data["name"] == "w" and data["type"] == "numpy.ndarray"
    assert data["protocol"] == 5
    bufs = [bytes(b) for b in answer["buffers"]]
    assert len(bufs) == 2                                   # the main pickle and the array's data, out of band
    assert bufs[1] == np.arange(1000, dtype=np.int32).tobytes()   # raw bytes, not base64
    assert data["sha256"] == [hashlib.sha256(b).hexdigest() for b in bufs]
    assert data["nbytes"] == sum(len(b) for b in bufs)
    import pickle

    assert_same_array(np.arange(1000, dtype=np.int32), pickle.loads(bufs[0], buffers=bufs[1:]))
    assert no_open_comms(pkc)


def test_wire_format_put(pkc):
    import pickle

    a = np.linspace(0, 1, 257)
    oob = []
    main = pickle.dumps(a, protocol=5, buffer_callback=lambda pb: oob.append(pb.raw()))
    bufs = [main] + oob
    comm_id = uuid.uuid4().hex
    data = {"op": "put", "name": "wp", "sha256": [hashlib.sha256(b).hexdigest() for b in bufs]}
    msg = pkc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "pyc.pickle", "data": data})
    pkc.session.send(pkc.shell_channel.socket, msg, buffers=bufs)
    msgs = pyctest.iopub_for(pkc, msg["header"]["msg_id"])
    assert [m["msg_type"] for m in msgs] == ["status", "comm_msg", "comm_close", "status"]
    answer = msgs[1]["content"]["data"]
    assert answer == {"status": "ok", "op": "put", "name": "wp", "type": "numpy.ndarray",
                      "nbytes": sum(len(memoryview(b).cast("B")) for b in bufs)}
    assert msgs[1]["buffers"] == []
    assert kernel_digest(pkc, "wp") == digest(a)
    assert eval_value(pkc, "wp.flags.writeable") == "True"
    assert no_open_comms(pkc)


# ---- round trips client <-> kernel ------------------------------------------------------------------------

DTYPES = ["int8", "uint16", "int32", "int64", "float16", "float32", "float64", "complex128", "bool",
          "datetime64[ns]", "timedelta64[ms]", "<U7", "S3", [("a", "<i4"), ("b", "<f8"), ("c", "S2")]]


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
def test_numpy_dtypes_round_trip(pkc, dtype):
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, size=24 * 1000 * np.dtype(dtype).itemsize, dtype=np.uint8)
    a = raw.view(np.dtype(dtype))[:24000].reshape(40, 600)
    if a.dtype.kind == "U":                 # only valid code points
        a = np.array([["x%dy" % (i * j) for j in range(60)] for i in range(40)], dtype=dtype)
    pyc_client.put(pkc, "arr", a)
    assert kernel_digest(pkc, "arr") == digest(a)
    assert eval_value(pkc, "(str(arr.dtype), arr.shape)") == repr((str(a.dtype), a.shape))
    b = pyc_client.get(pkc, "arr")
    assert_same_array(a, b)
    assert b.flags.writeable


def test_numpy_object_and_fortran(pkc):
    a = np.array([1, "two", (3,), None, {"five": 5}], dtype=object)
    pyc_client.put(pkc, "objs", a)
    b = pyc_client.get(pkc, "objs")
    assert b.dtype == object and list(b) == list(a)
    f = np.asfortranarray(np.arange(600, dtype=np.float64).reshape(20, 30))
    pyc_client.put(pkc, "fort", f)
    assert eval_value(pkc, "fort.flags.f_contiguous") == "True"
    g = pyc_client.get(pkc, "fort")
    assert g.flags.f_contiguous and np.array_equal(f, g) and digest(f) == digest(g)


def test_numpy_non_contiguous_view(pkc):
    base = np.arange(200 * 300, dtype=np.int64).reshape(200, 300)
    view = base[::3, 1::7]
    assert not view.flags.c_contiguous and not view.flags.f_contiguous
    pyc_client.put(pkc, "view", view)
    assert kernel_digest(pkc, "view") == digest(view)
    back = pyc_client.get(pkc, "view")
    assert np.array_equal(back, view) and back.dtype == view.dtype
    # and a view made in the kernel
    run_ok(pkc, "kbase = np.arange(200 * 300, dtype=np.int64).reshape(200, 300); kview = kbase[::3, 1::7]")
    assert np.array_equal(pyc_client.get(pkc, "kview"), view)


def test_numpy_50mb_round_trip(pkc):
    a = np.random.default_rng(1).random(50 * 1024 * 1024 // 8)
    reply = pyc_client.put(pkc, "big", a, timeout=BIG_TIMEOUT)
    assert reply["nbytes"] >= a.nbytes
    assert kernel_digest(pkc, "big") == digest(a)
    b = pyc_client.get(pkc, "big", timeout=BIG_TIMEOUT)
    assert_same_array(a, b)
    b[0] = -1.0                             # writable on the client too
    run_ok(pkc, "del big")


def test_dataframe_round_trip(pkc):
    # imported here, not at collection, where every pytest-xdist worker would pay for it
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({
        "i": np.arange(1000, dtype=np.int64),
        "f": np.linspace(0, 1, 1000),
        "s": ["row%d" % i for i in range(1000)],
        "t": pd.date_range("2020-01-01", periods=1000, freq="h"),
        "tz": pd.date_range("2021-06-01", periods=1000, freq="min", tz="Europe/Paris"),
        "c": pd.Categorical(["a", "b", "c", "a"] * 250),
    })
    df.index = pd.Index(np.arange(1000) * 2, name="idx")
    reply = pyc_client.put(pkc, "df", df)
    assert reply["type"] == "pandas.core.frame.DataFrame"
    assert eval_value(pkc, "str(df['t'].dtype)") == "'datetime64[ns]'"
    assert eval_value(pkc, "df['t'].iloc[25].isoformat()") == repr(df["t"].iloc[25].isoformat())
    back = pyc_client.get(pkc, "df")
    pd.testing.assert_frame_equal(df, back)
    # and a frame made in the kernel
    # one format for all: pandas 2 takes the first date's format for every one (1.5 guessed each)
    run_ok(pkc, "kdf = pd.DataFrame({'when': pd.to_datetime(['2024-02-29 12:00', '1999-12-31 00:00']), 'v': [1.5, None]})")
    kdf = pyc_client.get(pkc, "kdf")
    expected = pd.DataFrame({"when": pd.to_datetime(["2024-02-29 12:00", "1999-12-31 00:00"]), "v": [1.5, None]})
    pd.testing.assert_frame_equal(kdf, expected)


def test_nested_objects_round_trip(pkc):
    obj = {
        "lists": [[(1, "x", None), (2.5, b"\x00\xff", True)], [], [((),)]],
        "nested": {"deeper": {"tuple": (1, (2, (3, [4, {"five": 5}])))}},
        "sets": {frozenset({1, 2}), frozenset()},
        "text": "héllo ✓",
        "big_int": 2 ** 200,
        "arrays": [np.arange(5), (np.ones(3, dtype=np.float32), "tag")],
    }
    pyc_client.put(pkc, "nested", obj)
    assert eval_value(pkc, "nested['nested']['deeper']['tuple'][1][1][1][1]") == "{'five': 5}"
    back = pyc_client.get(pkc, "nested")
    arrays = back.pop("arrays")
    expected = dict(obj)
    expected_arrays = expected.pop("arrays")
    assert back == expected
    assert np.array_equal(arrays[0], expected_arrays[0])
    assert np.array_equal(arrays[1][0], expected_arrays[1][0]) and arrays[1][1] == "tag"


def test_shared_references_kept(pkc):
    run_ok(pkc, "shared_a = [1, 2]; shared = {'x': shared_a, 'y': shared_a}")
    back = pyc_client.get(pkc, "shared")
    assert back["x"] is back["y"]


def test_get_list_of_names(pkc):
    run_ok(pkc, "la = 1; lb = 'two'")
    assert pyc_client.get(pkc, ["la", "lb"]) == {"la": 1, "lb": "two"}
    with pytest.raises(PycError) as ei:
        pyc_client.get(pkc, ["la", "no_such_name_here"])
    assert ei.value.ename == "NameError" and "no_such_name_here" in ei.value.evalue


# ---- the namespace -------------------------------------------------------------------------------------------


def test_whole_namespace_get_skips_unpicklable(pkc):
    run_ok(pkc, "\n".join([
        "ns_int = 42",
        "ns_arr = np.arange(6).reshape(2, 3)",
        "ns_df = pd.DataFrame({'a': [1, 2]})",
        "ns_lambda = lambda x: x",
        "ns_gen = (i for i in range(3))",
        "ns_file = open(os.devnull)",
        "def ns_func(): return 1",
        "_ns_private = 1",
        "import json as ns_module",
    ]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ns = pyc_client.get(pkc)
    assert ns["ns_int"] == 42
    assert np.array_equal(ns["ns_arr"], np.arange(6).reshape(2, 3))
    pd = pytest.importorskip("pandas")
    pd.testing.assert_frame_equal(ns["ns_df"], pd.DataFrame({"a": [1, 2]}))
    for name in ("ns_lambda", "ns_gen", "ns_file", "ns_func", "_ns_private", "ns_module", "np", "hashlib"):
        assert name not in ns, name
    assert any(issubclass(w.category, PycSkippedWarning) and "ns_gen" in str(w.message) for w in caught)
    # the answer itself names the skipped ones with a reason
    reply, bufs = pyc_client.request(pkc, {"op": "get", "names": None})
    skipped = reply["skipped"]
    assert "generator" in skipped["ns_gen"]
    assert "lambda" in skipped["ns_lambda"]
    assert "TextIOWrapper" in skipped["ns_file"]
    assert "__main__" in skipped["ns_func"]
    for name in ("_ns_private", "ns_module", "np", "ns_int"):
        assert name not in skipped
    # modules are not lost values (the receiver re-imports them) but are listed, so a client can say so
    assert "ns_module" in reply["modules"] and "np" in reply["modules"] and "ns_int" not in reply["modules"]
    assert reply["modules"] == sorted(reply["modules"])
    listed, _ = pyc_client.request(pkc, {"op": "get", "names": ["ns_int"]})
    assert "modules" not in listed
    assert "ns_int" in reply["names"] and "ns_df" in reply["names"]
    run_ok(pkc, "ns_file.close()")


def test_put_dict_merge(pkc):
    run_ok(pkc, "merge_keep = 'kept'; merge_over = 'old'")
    reply = pyc_client.put(pkc, None, {"merge_over": "new", "merge_arr": np.arange(4), "merge_t": (1, [2])})
    assert sorted(reply["names"]) == ["merge_arr", "merge_over", "merge_t"]
    assert stream_text(execute(pkc, "print(merge_keep, merge_over, merge_arr.sum(), merge_t)")[1]) == \
        "kept new 6 (1, [2])\n"
    with pytest.raises(TypeError):
        pyc_client.put(pkc, None, [1, 2])
    with pytest.raises(PycError) as ei:
        pyc_client.put(pkc, None, {"not an identifier": 1})
    assert ei.value.ename == "BadRequest"


# ---- kernel to kernel ------------------------------------------------------------------------------------------


def test_copy_between_kernels(pkc, kc2):
    run_ok(pkc, "cp_arr = np.random.default_rng(3).random((500, 400)); "
                "cp_df = pd.DataFrame({'t': pd.date_range('2022-01-01', periods=5), 'v': range(5)})")
    reply = pyc_client.copy(pkc, "cp_arr", kc2)
    assert reply["status"] == "ok" and reply["name"] == "cp_arr" and reply["type"] == "numpy.ndarray"
    assert kernel_digest(kc2, "cp_arr") == kernel_digest(pkc, "cp_arr")
    pyc_client.copy(pkc, "cp_df", kc2, new_name="renamed_df")
    assert eval_value(kc2, "renamed_df.equals(pd.DataFrame({'t': pd.date_range('2022-01-01', periods=5), "
                           "'v': range(5)}))") == "True"
    assert eval_value(kc2, "str(renamed_df['t'].dtype)") == "'datetime64[ns]'"


def test_copy_cell_defined_dataclass(pkc, kc2):
    cell = "\n".join([
        "from dataclasses import dataclass, field",
        "@dataclass",
        "class Point:",
        "    x: float",
        "    y: float",
        "    tags: list = field(default_factory=list)",
    ])
    run_ok(pkc, cell + "\npt = Point(1.5, -2.0, ['a', ('b', 3)])")
    # the destination does not know Point yet: a clear error, and it goes on
    with pytest.raises(PycError) as ei:
        pyc_client.copy(pkc, "pt", kc2)
    assert ei.value.ename == "AttributeError" and "Point" in ei.value.evalue
    assert_alive(kc2)
    run_ok(kc2, cell)
    pyc_client.copy(pkc, "pt", kc2)
    assert eval_value(kc2, "type(pt) is Point and pt == Point(1.5, -2.0, ['a', ('b', 3)])") == "True"


def test_copy_whole_namespace(pkc, kc2):
    run_ok(pkc, "whole_a = [1, 2, 3]; whole_b = np.full(10, 7); whole_gen = (i for i in range(2))")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reply = pyc_client.copy(pkc, None, kc2)
    assert "whole_a" in reply["names"] and "whole_b" in reply["names"]
    assert "whole_gen" in reply["skipped"]
    assert any(issubclass(w.category, PycSkippedWarning) for w in caught)
    assert eval_value(kc2, "(whole_a, int(whole_b.sum()))") == "([1, 2, 3], 70)"
    assert eval_value(kc2, "'whole_gen' in globals()") == "False"


# ---- errors -----------------------------------------------------------------------------------------------


def test_unknown_name(pkc):
    with pytest.raises(PycError) as ei:
        pyc_client.get(pkc, "surely_not_defined_anywhere")
    assert ei.value.ename == "NameError"
    assert "surely_not_defined_anywhere" in ei.value.evalue and "not defined" in ei.value.evalue
    assert no_open_comms(pkc)
    assert_alive(pkc)


@pytest.mark.parametrize("code, word", [
    ("bad = (i for i in range(3))", "generator"),
    ("import threading; bad = threading.Lock()", "lock"),
    ("bad = lambda: 0", "lambda"),
    ("bad = open(os.devnull)", "TextIOWrapper"),
])
def test_unpicklable_object(pkc, code, word):
    run_ok(pkc, code)
    with pytest.raises(PycError) as ei:
        pyc_client.get(pkc, "bad")
    assert word in ei.value.evalue and "'bad'" in ei.value.evalue
    assert ei.value.ename in ("TypeError", "PicklingError", "AttributeError")
    assert_alive(pkc)


def test_unpicklable_on_the_client_side(pkc):
    with pytest.raises(TypeError):
        pyc_client.put(pkc, "g", (i for i in range(2)))


def _put_request(name, bufs, **extra):
    data = {"op": "put", "name": name, "sha256": [hashlib.sha256(b).hexdigest() for b in bufs]}
    data.update(extra)
    return data


def test_tampered_buffer_refused(pkc):
    a = np.arange(10000, dtype=np.float64)
    bufs = pyc_client._dumps(a)
    assert len(bufs) == 2
    data = _put_request("tampered", bufs)
    bad = bytearray(bufs[1])
    bad[1234] ^= 0x01                        # after the digests were computed
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, data, [bufs[0], bad])
    assert ei.value.ename == "IntegrityError" and "buffer 1" in ei.value.evalue
    bad_main = bytearray(bufs[0])
    bad_main[-2] ^= 0x40
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, data, [bad_main, bufs[1]])
    assert ei.value.ename == "IntegrityError" and "buffer 0" in ei.value.evalue
    # a buffer dropped, or one more: the count is checked too
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, data, bufs[:1])
    assert ei.value.ename == "IntegrityError"
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, data, bufs + [b"extra"])
    assert ei.value.ename == "IntegrityError"
    assert eval_value(pkc, "'tampered' in globals()") == "False"
    assert_alive(pkc)
    # and the untouched buffers go in
    pyc_client.request(pkc, data, bufs)
    assert kernel_digest(pkc, "tampered") == digest(a)


def test_tampered_answer_refused_by_client(pkc, monkeypatch):
    run_ok(pkc, "tamper_src = np.arange(100)")
    real = pyc_client.request

    def flip(client, data, buffers=(), timeout=60):
        reply, bufs = real(client, data, buffers, timeout)
        b = bytearray(bufs[-1])
        b[0] ^= 1
        return reply, bufs[:-1] + [memoryview(b)]

    monkeypatch.setattr(pyc_client, "request", flip)
    with pytest.raises(PycError) as ei:
        pyc_client.get(pkc, "tamper_src")
    assert ei.value.ename == "IntegrityError"


# The frames' logic at two scales: in the test command, with frames of 1 MiB (this process's
# PYC_MAX_MESSAGE_BYTES, the smallest frame a put cuts), and in check-slow at the real one, 256 MiB frames, a
# 300 MB put and 1 GiB between two kernels, whose copies and digests alone take some 20 s of CPU here.
FRAME_SCALES = [
    pytest.param(1 << 20, (7 << 20) // 2, 1 << 20, id="1MiB-frames"),
    pytest.param(None, 300 << 20, 1 << 30, id="256MiB-frames", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("frame_max, put_bytes, direct_bytes", FRAME_SCALES)
def test_a_put_larger_than_a_frame_travels_in_frames(pkc, kc2, monkeypatch, frame_max, put_bytes, direct_bytes):
    """A buffer over the largest frame (FRAME_MAX, 256 MiB, or less when PYC_MAX_MESSAGE_BYTES says so) goes in
    a put as frames of at most that size, the largest a kernel takes from a peer before it has checked the key
    (test_hardening.py); the kernel joins them and checks the digests of the whole buffers.  Through put and
    the relay of copy; the documented path between two kernels, the direct one, moves a larger buffer (1 GiB
    at full scale)."""
    if frame_max is not None:
        monkeypatch.setenv("PYC_MAX_MESSAGE_BYTES", str(frame_max))
    largest = frame_max or (256 << 20)
    a = np.random.default_rng(11).random(put_bytes // 8)
    frames, counts = pyc_client._split(pyc_client._dumps(a), pyc_client._frame_max())
    assert counts == [1, -(-a.nbytes // largest)] and counts[1] >= 2, counts
    assert max(memoryview(f).nbytes for f in frames) == largest
    reply = pyc_client.put(pkc, "framed", a, timeout=BIG_TIMEOUT)
    assert reply["nbytes"] >= a.nbytes
    assert kernel_digest(pkc, "framed") == digest(a)
    assert eval_value(pkc, "framed.flags.writeable") == "True"
    relayed = pyc_client.copy(pkc, "framed", kc2, direct=False, timeout=BIG_TIMEOUT)
    assert relayed["path"] == "relay" and kernel_digest(kc2, "framed") == digest(a)
    del a, frames
    run_ok(kc2, "del framed")
    run_ok(pkc, "del framed; gig = np.ones(%d // 8)" % direct_bytes)
    direct = pyc_client.copy(pkc, "gig", kc2, timeout=BIG_TIMEOUT)
    assert direct["path"] == "direct" and direct["nbytes"] >= direct_bytes
    assert eval_value(kc2, "gig.nbytes, float(gig.sum())") == "(%d, %r)" % (direct_bytes, float(direct_bytes // 8))
    run_ok(pkc, "del gig")
    run_ok(kc2, "del gig")


def test_frames_that_do_not_match_are_refused(pkc):
    """A put's "frames" must count every frame it came in: otherwise BadRequest, and nothing is loaded."""
    bufs = pyc_client._dumps(np.arange(10))
    data = {"op": "put", "name": "badframes", "sha256": pyc_client._digests(bufs)}
    for counts in ([1], [1, 1, 1], [0, 2], "2", [1.0, 1], [True, 1]):
        with pytest.raises(PycError) as ei:
            pyc_client.request(pkc, dict(data, frames=counts), bufs)
        assert ei.value.ename == "BadRequest" and "frames" in ei.value.evalue, ei.value.evalue
    # one buffer sent as two frames, said so: joined
    main, arr = bufs
    half = memoryview(arr).cast("B")
    reply, _ = pyc_client.request(pkc, dict(data, frames=[1, 2]), [main, half[:30], half[30:]])
    assert reply["status"] == "ok"
    assert eval_value(pkc, "badframes.tolist()") == str(list(range(10)))
    # and the digests are still those of the whole buffers
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, dict(data, frames=[1, 2]), [main, half[30:], half[:30]])
    assert ei.value.ename == "IntegrityError"
    # as many digests as buffers, before anything is joined
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, dict(data, frames=[1, 1, 1]), [main, half[:30], half[30:]])
    assert ei.value.ename == "IntegrityError" and "digests" in ei.value.evalue
    # the size limit holds for the frames together, before anything is joined
    run_ok(pkc, "os.environ['PYC_PICKLE_MAX_BYTES'] = '64'")
    try:
        with pytest.raises(PycError) as ei:
            pyc_client.request(pkc, dict(data, frames=[1, 2]), [main, half[:30], half[30:]])
        assert ei.value.ename == "PickleTooLarge"
    finally:
        run_ok(pkc, "del os.environ['PYC_PICKLE_MAX_BYTES']")
    assert_alive(pkc)


@pytest.mark.slow   # a 300 MiB put in 256 MiB frames under a 700 MB memory limit: check-slow, with the others of its size
def test_a_joined_put_keeps_no_frame_it_does_not_need():
    """Each received frame is held by its own views only: once a put is done, the frames a joined buffer came
    in are freed even while another array of the same put (on its own frame, without a copy) lives, and
    deleting the joined array gives its memory back.  Under a memory limit that cannot hold a buffer twice,
    the join fails with a MemoryError answer, and the kernel goes on."""
    env = {"PYC_MEMORY_LIMIT": "700M"}
    if pyctest.UNDER_ASAN:
        # AddressSanitizer keeps freed blocks in quarantine (256 MB by default) instead of giving them back:
        # without it, what this test measures is the kernel's own holding again.
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"
    k = pyctest.Kernel("pyc", env=env)
    try:
        run_ok(k.kc, "import numpy as np")
        base = rss_mb(k.pid)
        big = np.ones((300 << 20) // 8)
        small = np.arange((1 << 20) // 8, dtype=np.float64)
        pyc_client.put(k.kc, None, {"jbig": big, "jsmall": small}, timeout=BIG_TIMEOUT)
        run_ok(k.kc, "pass")                 # the put's message is gone by then
        held = rss_mb(k.pid)
        assert held - base < 300 + 100, "%.0f MB held after the put (%.0f before)" % (held, base)
        run_ok(k.kc, "del jbig")
        left = rss_mb(k.pid)
        assert left - base < 60, "%.0f MB left after del (%.0f before): the frames are still held" % (left, base)
        assert eval_value(k.kc, "float(jsmall[-1]), jsmall.flags.writeable") == "(%r, True)" % float(small[-1])
        huge = np.ones((500 << 20) // 8)
        with pytest.raises(PycError) as ei:
            pyc_client.put(k.kc, "jhuge", huge, timeout=BIG_TIMEOUT)
        assert ei.value.ename == "MemoryError" and "twice" in ei.value.evalue, ei.value.evalue
        assert eval_value(k.kc, "'jhuge' in globals()") == "False"
        assert_alive(k.kc)
    finally:
        k.shutdown(now=True)


@pytest.mark.parametrize("data, ename", [
    ({"op": "fetch", "name": "x"}, "BadRequest"),
    ({"name": "x"}, "BadRequest"),
    ({"op": "get"}, "BadRequest"),
    ({"op": "get", "name": 7}, "BadRequest"),
    ({"op": "get", "names": "abc"}, "BadRequest"),
    ({"op": "put", "name": "x", "sha256": []}, "BadRequest"),        # no buffers
    ({"op": "put", "name": "not valid", "sha256": ["00"]}, "BadRequest"),
    ({"op": "put", "names": 3, "sha256": ["00"]}, "BadRequest"),
])
def test_bad_requests(pkc, data, ename):
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, data)
    assert ei.value.ename == ename
    assert_alive(pkc)


def test_put_needs_digests(pkc):
    bufs = pyc_client._dumps([1, 2, 3])
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, {"op": "put", "name": "nodigest"}, bufs)
    assert ei.value.ename == "BadRequest" and "sha256" in ei.value.evalue
    for digests in (["not hex at all"] * len(bufs), [7] * len(bufs), "abc"):
        with pytest.raises(PycError) as ei:
            pyc_client.request(pkc, {"op": "put", "name": "nodigest", "sha256": digests}, bufs)
        assert ei.value.ename == "BadRequest"
    assert eval_value(pkc, "'nodigest' in globals()") == "False"


def test_unpickling_error_reported(pkc):
    bufs = [b"\x80\x05this is not a pickle"]
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, _put_request("junk", bufs), bufs)
    assert ei.value.ename == "UnpicklingError" and "cannot unpickle" in ei.value.evalue
    assert_alive(pkc)


def test_size_limit_read_at_each_request(pkc):
    run_ok(pkc, "os.environ['PYC_PICKLE_MAX_BYTES'] = '4096'; lim_small = list(range(10)); "
                "lim_big = np.zeros(10000)")
    try:
        assert pyc_client.get(pkc, "lim_small") == list(range(10))
        with pytest.raises(PycError) as ei:
            pyc_client.get(pkc, "lim_big")
        assert ei.value.ename == "PickleTooLarge" and "4096" in ei.value.evalue
        with pytest.raises(PycError) as ei:
            pyc_client.put(pkc, "lim_in", np.zeros(10000))
        assert ei.value.ename == "PickleTooLarge"
        run_ok(pkc, "os.environ['PYC_PICKLE_MAX_BYTES'] = 'lots'")
        with pytest.raises(PycError) as ei:
            pyc_client.get(pkc, "lim_small")
        assert ei.value.ename == "BadConfig"
    finally:
        run_ok(pkc, "del os.environ['PYC_PICKLE_MAX_BYTES']")
    assert pyc_client.get(pkc, "lim_big").shape == (10000,)


def test_size_limit_from_kernel_environment(monkeypatch):
    """A kernel started with PYC_PICKLE_MAX_BYTES refuses larger pickles both ways and goes on."""
    monkeypatch.setenv("PYC_PICKLE_MAX_BYTES", "100000")
    with pyctest.Kernel("pyc") as k:
        k.require_pyc()
        kc = k.kc
        run_ok(kc, "import numpy as np\nsmall = np.arange(100)\nlarge = np.zeros(1_000_000)")
        assert np.array_equal(pyc_client.get(kc, "small"), np.arange(100))
        with pytest.raises(PycError) as ei:
            pyc_client.get(kc, "large")
        assert ei.value.ename == "PickleTooLarge" and "100000" in ei.value.evalue
        with pytest.raises(PycError) as ei:
            pyc_client.get(kc)                  # the namespace holds `large`
        assert ei.value.ename == "PickleTooLarge"
        with pytest.raises(PycError) as ei:
            pyc_client.put(kc, "incoming", np.ones(1_000_000))
        assert ei.value.ename == "PickleTooLarge"
        # in-band data counts too (a big list is pickled in the main pickle)
        with pytest.raises(PycError) as ei:
            pyc_client.put(kc, "incoming", list(range(100_000)))
        assert ei.value.ename == "PickleTooLarge"
        assert eval_value(kc, "'incoming' in globals()") == "False"
        pyc_client.put(kc, "fine", np.ones(1000))
        assert eval_value(kc, "int(fine.sum())") == "1000"
        assert_alive(kc)


def test_kernel_goes_on_after_errors(pkc):
    for _ in range(3):
        with pytest.raises(PycError):
            pyc_client.get(pkc, "still_not_defined")
    assert no_open_comms(pkc)
    assert_alive(pkc)


def test_timeout(pkc):
    """A kernel busy in a cell answers later: the client gives up with TimeoutError."""
    msg_id = pkc.execute("import time; time.sleep(1.5)")
    with pytest.raises(TimeoutError):
        pyc_client.get(pkc, "la", timeout=0.3)
    get_reply(pkc, msg_id)
    pyctest.drain(pkc, "iopub", quiet=0.5)


def test_replies_validate(pkc):
    """The comm messages of an operation are valid messaging-spec v5 messages."""
    run_ok(pkc, "val = {'a': 1}")
    comm_id = uuid.uuid4().hex
    msg = pkc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "pyc.pickle",
                                        "data": {"op": "get", "name": "missing_for_validation"}})
    pkc.shell_channel.send(msg)
    msgs = pyctest.iopub_for(pkc, msg["header"]["msg_id"])
    for m in msgs:
        validate(m)
    data = msgs[1]["content"]["data"]
    assert data["status"] == "error" and data["ename"] == "NameError" and data["op"] == "get"


# ---- chunked digests ---------------------------------------------------------------------------------------

CHUNK = 64 << 10


def chunk_digests(b, chunk=CHUNK):
    m = memoryview(b).cast("B")
    return [hashlib.sha256(m[i:i + chunk]).hexdigest() for i in range(0, m.nbytes, chunk)] or \
        [hashlib.sha256(b"").hexdigest()]


def test_get_with_chunked_digests(pkc):
    """A get asking for "chunk" answers a list of chunk digests per buffer (the last chunk shorter)."""
    run_ok(pkc, "chk = np.arange(50_000, dtype=np.float64); chk_empty = np.zeros(0)")
    reply, bufs = pyc_client.request(pkc, {"op": "get", "name": "chk", "chunk": CHUNK})
    assert reply["chunk"] == CHUNK and len(reply["sha256"]) == len(bufs) == 2
    assert reply["sha256"] == [chunk_digests(b) for b in bufs]
    assert len(reply["sha256"][1]) == -(-400_000 // CHUNK)
    reply, bufs = pyc_client.request(pkc, {"op": "get", "name": "chk_empty", "chunk": CHUNK})
    assert reply["sha256"][1] == [hashlib.sha256(b"").hexdigest()]
    assert np.array_equal(pyc_client.get(pkc, "chk_empty"), np.zeros(0))
    for bad in (0, CHUNK - 1, 1.5, "64k", True):
        with pytest.raises(PycError) as ei:
            pyc_client.request(pkc, {"op": "get", "name": "chk", "chunk": bad})
        assert ei.value.ename == "BadRequest" and "chunk" in ei.value.evalue


def test_put_with_chunked_digests(pkc):
    a = np.random.default_rng(5).random(100_000)
    bufs = pyc_client._dumps(a)
    data = {"op": "put", "name": "chunked_in", "chunk": CHUNK, "sha256": [chunk_digests(b) for b in bufs]}
    pyc_client.request(pkc, data, bufs)
    assert kernel_digest(pkc, "chunked_in") == digest(a)
    # both forms in one request: a whole digest for the main pickle, chunks for the data
    mixed = dict(data, name="mixed_in", sha256=[hashlib.sha256(bufs[0]).hexdigest(), chunk_digests(bufs[1])])
    pyc_client.request(pkc, mixed, bufs)
    assert kernel_digest(pkc, "mixed_in") == digest(a)
    # chunk digests without the chunk size; a wrong number of chunks
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, {k: v for k, v in data.items() if k != "chunk"}, bufs)
    assert ei.value.ename == "BadRequest"
    short = dict(data, sha256=[data["sha256"][0], data["sha256"][1][:-1]])
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, short, bufs)
    assert ei.value.ename == "IntegrityError" and "chunks" in ei.value.evalue


def test_tampered_chunk_refused(pkc):
    a = np.arange(100_000, dtype=np.int64)
    bufs = pyc_client._dumps(a)
    data = {"op": "put", "name": "tampered_chunk", "chunk": CHUNK, "sha256": [chunk_digests(b) for b in bufs]}
    bad = bytearray(bufs[1])
    bad[5 * CHUNK + 17] ^= 0x80              # in the sixth chunk, after the digests were taken
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, data, [bufs[0], bad])
    assert ei.value.ename == "IntegrityError" and "buffer 1 (chunk 5)" in ei.value.evalue
    assert eval_value(pkc, "'tampered_chunk' in globals()") == "False"


# ---- buffers without copies ----------------------------------------------------------------------------------


def test_received_buffers_are_the_message_frames(pkc):
    """A put's array uses the received frame as it is (a _pyc.FrameBuffer), and is writable and equal."""
    a = np.random.default_rng(8).random(1 << 17)          # 1 MiB
    pyc_client.put(pkc, "zc_in", a)
    out = run_ok(pkc, "\n".join([
        "o = zc_in",
        "while getattr(o, 'base', None) is not None: o = o.base",
        "o = o.obj if isinstance(o, memoryview) else o",
        "print(type(o).__name__, zc_in.flags.writeable)",
        "zc_in[0] = -1.0",
        "print(zc_in[0], zc_in[1] == %r)" % a[1],
        "del o",
    ]))
    assert out.split() == ["FrameBuffer", "True", "-1.0", "True"]
    assert kernel_digest(pkc, "zc_in[1:]") == digest(a[1:])
    # a small buffer is copied into a bytearray: still writable
    pyc_client.put(pkc, "zc_small", np.arange(10))
    assert eval_value(pkc, "zc_small.flags.writeable") == "True"


def test_sent_buffers_released(pkc):
    """A get lends the array's memory to ZeroMQ; once sent, the kernel lets go of it (no reference left)."""
    run_ok(pkc, "import weakref, gc\nlent = np.ones(1 << 18)\nlent_ref = weakref.ref(lent)")
    for _ in range(3):
        assert np.array_equal(pyc_client.get(pkc, "lent"), np.ones(1 << 18))
    run_ok(pkc, "del lent")
    # the next request releases what ZeroMQ gave back meanwhile
    assert eval_value(pkc, "(gc.collect(), lent_ref() is None)[1]") == "True"


def kernel_rss_mb(kc):
    return int(eval_value(kc, "int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') "
                              ">> 20"))


@pytest.mark.slow
def test_memory_bounded_after_many_transfers(pkc, kc2):
    """20 puts, gets and copies of 50 MB each leave the kernels' memory where it was (nothing held)."""
    run_ok(kc2, "import os")
    a = np.random.default_rng(9).random(50 * 1024 * 1024 // 8)
    pyc_client.put(pkc, "rss_x", a, timeout=BIG_TIMEOUT)
    pyc_client.copy(pkc, "rss_x", kc2, timeout=BIG_TIMEOUT)
    base1, base2 = kernel_rss_mb(pkc), kernel_rss_mb(kc2)
    for i in range(20):
        pyc_client.put(pkc, "rss_x", a, timeout=BIG_TIMEOUT)
        assert pyc_client.get(pkc, "rss_x", timeout=BIG_TIMEOUT).shape == a.shape
        pyc_client.copy(pkc, "rss_x", kc2, timeout=BIG_TIMEOUT, direct=i % 2 == 0)
    assert kernel_digest(kc2, "rss_x") == digest(a)
    grown1, grown2 = kernel_rss_mb(pkc) - base1, kernel_rss_mb(kc2) - base2
    # 1000 MB went through each kernel; AddressSanitizer keeps up to 256 MB of freed blocks in quarantine
    bound = 120 + (300 if os.environ.get("PYC_SANITIZER_LOGS") else 0)
    assert grown1 < bound and grown2 < bound, (grown1, grown2)
    run_ok(pkc, "del rss_x")
    run_ok(kc2, "del rss_x")


# ---- kernel to kernel, directly ------------------------------------------------------------------------------


def landings(kc):
    return int(eval_value(kc, "len(__import__('pyc._pickle_direct', fromlist=['_landings'])._landings)"))


def test_at_most_16_transfers_wait_at_once(kc2):
    """A client with the key can make a kernel wait for pickles from another kernel, each up to
    PYC_PICKLE_MAX_BYTES: at most MAX_LANDINGS (16) at once; the 17th listen is refused, and a cancel makes room
    again (README, "Security model")."""
    me = {"pid": os.getpid(), "uid": os.getuid()}
    tickets = ["%032x" % (0xabc000 + i) for i in range(17)]
    try:
        for t in tickets[:16]:
            pyc_client.request(kc2, {"op": "listen", "timeout": 60, "ticket": t, "sender": me})
        assert landings(kc2) == 16
        with pytest.raises(PycError) as ei:
            pyc_client.request(kc2, {"op": "listen", "timeout": 60, "ticket": tickets[16], "sender": me})
        assert ei.value.ename == "TooManyTransfers", ei.value
        pyc_client.request(kc2, {"op": "cancel", "ticket": tickets[0]})
        pyc_client.request(kc2, {"op": "listen", "timeout": 60, "ticket": tickets[16], "sender": me})
    finally:
        for t in tickets:
            try:
                pyc_client.request(kc2, {"op": "cancel", "ticket": t})
            except PycError:
                pass
    assert landings(kc2) == 0


def test_a_cancel_ends_a_waiting_landing_at_once(kc2):
    """A landing's thread waits in accept() for the sender; a cancel wakes it, and it ends with the cancel
    (Linux wakes no accept on a listening Unix socket for its shutdown: the thread used to wait out the
    listen's timeout, and every cancel its own one-second wait for that thread)."""
    me = {"pid": os.getpid(), "uid": os.getuid()}
    ticket = "%032x" % 0xdef001
    pyc_client.request(kc2, {"op": "listen", "timeout": 60, "ticket": ticket, "sender": me})
    landing_threads = "sum(t.name == 'pyc-pickle-landing' for t in __import__('threading').enumerate())"
    assert eval_value(kc2, landing_threads) == "1"
    reply, _ = pyc_client.request(kc2, {"op": "cancel", "ticket": ticket})
    assert reply["landing_error"] is None, reply
    deadline = time.monotonic() + 5
    while eval_value(kc2, landing_threads) != "0" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert eval_value(kc2, landing_threads) == "0"
    assert landings(kc2) == 0


def test_copy_goes_direct(pkc, kc2):
    run_ok(pkc, "dir_x = np.random.default_rng(10).random(300_000); dir_obj = {'k': [1, 'two'], 'a': dir_x[:5]}")
    reply = pyc_client.copy(pkc, "dir_x", kc2)
    assert reply["path"] == "direct" and reply["name"] == "dir_x" and reply["type"] == "numpy.ndarray"
    assert kernel_digest(kc2, "dir_x") == kernel_digest(pkc, "dir_x")
    assert eval_value(kc2, "dir_x.flags.writeable") == "True"
    reply = pyc_client.copy(pkc, "dir_obj", kc2, new_name="dir_obj2")
    assert reply["path"] == "direct"
    assert eval_value(kc2, "dir_obj2['k'], list(dir_obj2['a']) == list(dir_x[:5])") == "([1, 'two'], True)"
    relayed = pyc_client.copy(pkc, "dir_x", kc2, new_name="dir_relayed", direct=False)
    assert relayed["path"] == "relay" and kernel_digest(kc2, "dir_relayed") == kernel_digest(pkc, "dir_x")
    assert landings(kc2) == 0


def test_direct_copy_refuses_tampered_stream(pkc):
    """Bytes that reach a landing but do not match the digests of the signed put are never unpickled."""
    import socket
    import struct

    a = np.arange(200_000, dtype=np.float64)
    bufs = pyc_client._dumps(a)
    for tamper in (True, False):
        ticket = secrets.token_hex(16)
        land, _ = pyc_client.request(pkc, {"op": "listen", "timeout": 30, "ticket": ticket,
                                           "sender": {"pid": os.getpid(), "uid": os.getuid()}})
        assert set(land) >= {"address", "machine", "pid", "uid"} and land["status"] == "ok"
        assert "ticket" not in land         # answers go out on iopub, which others may read
        land["ticket"] = ticket
        sent = [bytes(b) for b in bufs]
        if tamper:
            sent[1] = sent[1][:1000] + bytes([sent[1][1000] ^ 1]) + sent[1][1001:]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stray:   # a stray connection first
            stray.connect("\0" + land["address"])
            stray.sendall(b"PYC1" + b"0" * 32)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect("\0" + land["address"])
                s.sendall(b"PYC1" + land["ticket"].encode() + struct.pack("<QQ", len(sent), CHUNK) +
                          struct.pack("<%dQ" % len(sent), *[len(b) for b in sent]) + b"".join(sent))
        put = {"op": "put", "name": "via_landing", "ticket": land["ticket"], "chunk": CHUNK,
               "sha256": [chunk_digests(b) for b in bufs]}
        if tamper:
            with pytest.raises(PycError) as ei:
                pyc_client.request(pkc, put)
            assert ei.value.ename == "IntegrityError" and "buffer 1 (chunk 0)" in ei.value.evalue
            assert eval_value(pkc, "'via_landing' in globals()") == "False"
            with pytest.raises(PycError) as ei:     # the ticket was used up
                pyc_client.request(pkc, put)
            assert ei.value.ename == "BadRequest"
        else:
            pyc_client.request(pkc, put)
            assert kernel_digest(pkc, "via_landing") == digest(a)
    assert landings(pkc) == 0


def test_direct_copy_falls_back_to_relay(pkc, kc2, monkeypatch):
    """A source kernel on another machine (here: a machine id that does not match) refuses to send; the
    copy goes through the client instead and the destination's landing is cancelled."""
    run_ok(pkc, "fb_x = np.arange(70_000)")
    real = pyc_client.request

    def other_machine(client, data, buffers=(), timeout=60, target=None):
        reply, bufs = real(client, data, buffers, timeout, target)
        if data.get("op") == "listen":
            reply = dict(reply, machine="another-boot/net:[1]")
        return reply, bufs

    monkeypatch.setattr(pyc_client, "request", other_machine)
    reply = pyc_client.copy(pkc, "fb_x", kc2)
    monkeypatch.undo()
    assert reply["path"] == "relay"
    assert eval_value(kc2, "int(fb_x.sum())") == str(sum(range(70_000)))
    assert landings(kc2) == 0
    with pytest.raises(PycError) as ei:
        pyc_client.request(pkc, {"op": "get", "name": "fb_x", "send_to": {"address": "pyc-pickle-1-00",
                                 "ticket": "0" * 32, "machine": "another-boot/net:[1]", "pid": 1, "uid": 0}})
    assert ei.value.ename == "NotLocal"


def test_direct_copy_errors(pkc, kc2):
    # an unknown name: the landing is cancelled, the error is the source's
    with pytest.raises(PycError) as ei:
        pyc_client.copy(pkc, "no_such_name_for_copy", kc2)
    assert ei.value.ename == "NameError"
    assert landings(kc2) == 0
    # the destination's size limit
    run_ok(kc2, "import os; os.environ['PYC_PICKLE_MAX_BYTES'] = '100000'")
    try:
        run_ok(pkc, "lim_x = np.zeros(100_000)")
        with pytest.raises(PycError) as ei:
            pyc_client.copy(pkc, "lim_x", kc2)
        assert ei.value.ename == "PickleTooLarge" and "100000" in ei.value.evalue
        assert eval_value(kc2, "'lim_x' in globals()") == "False"
    finally:
        run_ok(kc2, "del os.environ['PYC_PICKLE_MAX_BYTES']")
    assert landings(kc2) == 0
    # a listen nobody sends to expires; its ticket is then refused
    land, _ = pyc_client.request(kc2, {"op": "listen", "timeout": 0.3, "ticket": "1" * 32,
                                       "sender": {"pid": os.getpid(), "uid": os.getuid()}})
    land["ticket"] = "1" * 32
    import time

    time.sleep(0.8)
    assert landings(kc2) == 0
    with pytest.raises(PycError) as ei:
        pyc_client.request(kc2, {"op": "put", "name": "late", "ticket": land["ticket"], "chunk": CHUNK,
                                 "sha256": [[]]})
    assert ei.value.ename == "BadRequest" and "ticket" in ei.value.evalue
    # bad requests
    for data in ({"op": "listen", "timeout": -1}, {"op": "listen", "timeout": "soon"},
                 {"op": "listen", "timeout": 5},                                  # no ticket of the client's
                 {"op": "listen", "timeout": 5, "ticket": "2" * 32},              # no sender
                 {"op": "listen", "timeout": 5, "ticket": "short", "sender": {"pid": 1, "uid": 0}},
                 {"op": "get", "name": "lim_x", "send_to": {"port": 1}},
                 {"op": "put", "name": "x", "ticket": 7, "sha256": []}):
        with pytest.raises(PycError) as ei:
            pyc_client.request(kc2, data)
        assert ei.value.ename == "BadRequest", data
    assert pyc_client.request(kc2, {"op": "cancel", "ticket": "0" * 32})[0]["landing_error"] is None
    assert_alive(kc2)


def test_direct_path_keeps_other_local_processes_out(pkc, kc2):
    """What a local user who reads iopub learns (the landing's address, never the ticket) lets it neither
    receive a pickle nor feed one: the landing keeps its name bound, takes connections of the expected sender
    only (SO_PEERCRED), and the sender checks that the socket is the receiving kernel's."""
    import socket

    ticket = secrets.token_hex(16)
    me = pyc_client.request(pkc, {"op": "whoami"})[0]
    assert me["pid"] != os.getpid()
    land, _ = pyc_client.request(kc2, {"op": "listen", "timeout": 20, "ticket": ticket,
                                       "sender": {"pid": me["pid"], "uid": me["uid"]}})
    assert "ticket" not in land
    # The name cannot be taken over while the landing waits.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as thief:
        with pytest.raises(OSError):
            thief.bind("\0" + land["address"])
    # A process other than the sender is closed on unread, even with the right ticket.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.connect("\0" + land["address"])
        try:
            other.sendall(b"PYC1" + ticket.encode())
            other.settimeout(5)
            assert other.recv(1) == b""     # closed on it
        except (ConnectionResetError, BrokenPipeError):
            pass                            # closed before it wrote: the same
    pyc_client.request(kc2, {"op": "cancel", "ticket": ticket})
    # The sender refuses a socket that is not the receiving kernel's.
    run_ok(pkc, "trap_x = np.arange(10)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as trap:
        trap.bind("\0pyc-pickle-trap-%d" % os.getpid())
        trap.listen(1)
        with pytest.raises(PycError) as ei:
            pyc_client.request(pkc, {"op": "get", "name": "trap_x", "chunk": CHUNK, "send_to": {
                "address": "pyc-pickle-trap-%d" % os.getpid(), "ticket": ticket, "machine": me["machine"],
                "timeout": 5, "pid": land["pid"], "uid": land["uid"]}})
        assert ei.value.ename == "ConnectionError" and "not the receiving kernel" in ei.value.evalue
    # And a copy still works.
    reply = pyc_client.copy(pkc, "trap_x", kc2)
    assert reply["path"] == "direct"
    assert landings(kc2) == 0


def test_copy_while_source_changes(pkc, kc2):
    """An array changed in place while it is sent reaches the destination intact or not at all: the digests
    were taken from what was sent, and a torn buffer is refused."""
    run_ok(pkc, "\n".join([
        "import threading",
        "torn = np.zeros(2_000_000)",
        "torn_stop = threading.Event()",
        "def torn_writer():",
        "    i = 0",
        "    while not torn_stop.is_set():",
        "        torn[i % torn.size] += 1; i += 9973",
        "torn_thread = threading.Thread(target=torn_writer, daemon=True); torn_thread.start()",
    ]))
    try:
        outcomes = set()
        for direct in (True, False, True, False):
            try:
                pyc_client.copy(pkc, "torn", kc2, direct=direct, timeout=BIG_TIMEOUT)
                outcomes.add("ok")
            except PycError as e:
                assert e.ename == "IntegrityError", e
                outcomes.add("refused")
        if outcomes == {"refused"}:
            assert eval_value(kc2, "'torn' in globals()") == "False"
    finally:
        run_ok(pkc, "torn_stop.set(); torn_thread.join()")
    assert_alive(pkc)
    assert_alive(kc2)
