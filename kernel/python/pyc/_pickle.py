"""The comm target `pyc.pickle`: variables of the kernel out and in as pickles (DESIGN.md section 5).

One operation per comm.  The frontend opens a comm to target "pyc.pickle" with the request in the
comm_open's `data` (and, for a put, the pickle in the message's buffers); the kernel answers with exactly
one comm_msg on that comm and then closes it with comm_close.  Every failure is such an answer with
{"status": "error", "ename", "evalue"}: the kernel always goes on.

Requests (comm_open data) and answers (comm_msg data):

    {"op": "get", "name": "df"}
        -> {"status": "ok", "op": "get", "name": "df", "type": "pandas.core.frame.DataFrame",
            "protocol": 5, "nbytes": N, "sha256": [hex, ...]}
           buffers: [main pickle, out-of-band buffer 1, ...]
    {"op": "get", "names": null}        every picklable user name, as one pickled dict
    {"op": "get", "names": ["a", "b"]}  those names, as one pickled dict
        -> {"status": "ok", "op": "get", "names": [...], "skipped": {name: reason}, "type": "dict",
            "protocol": 5, "nbytes": N, "sha256": [...]}       buffers as above
           (for "names": null also "modules": [names bound to modules, left out])
    {"op": "put", "name": "x", "sha256": [hex, ...]}           buffers: [main pickle, out-of-band...]
        -> {"status": "ok", "op": "put", "name": "x", "type": "...", "nbytes": N}
    {"op": "put", "names": null, "sha256": [...]}              the pickle holds a dict: merged into the
        -> {"status": "ok", "op": "put", "names": [...], "nbytes": N}   namespace (a list of names merges
                                                                        only those keys)
    {"op": "put", ..., "frames": [n, ...]}     buffer i came in n consecutive frames (one over 256 MiB:
                                               pyc/_digest.py, "Frames"); joined before the digests are checked

Chunked digests.  One SHA-256 over a 100 MiB buffer takes 58 ms on one core, and SHA-256 cannot be split.
A get may ask for "chunk": C (bytes, at least 65536): each entry of the answer's "sha256" is then a list,
the digests of the buffer's consecutive C-byte pieces (the last one shorter; an empty buffer has the one
digest of b""), and the answer says "chunk": C.  The pieces are hashed by several threads at once, here
and by whoever checks them.  A put accepts either form per buffer: a hex string (the whole buffer) or a
list of chunk digests, with "chunk" in the request.

Kernel to kernel without the client in between (ops "whoami", "listen", "cancel", and "send_to" in a get,
"ticket" in a put): see pyc/_pickle_direct.py.

The pickle is protocol 5; out-of-band buffers (NumPy and pandas data) travel as raw frames of the Jupyter
message, not base64, and pickle.dumps does not copy them.  Buffers are outside the message's HMAC, so
their SHA-256 digests travel in the signed content: a put checks the number of buffers and every digest
before it unpickles anything (ename "IntegrityError" otherwise).  Before any work, a put whose buffers
total more than PYC_PICKLE_MAX_BYTES (environment of the kernel, read at each request; default 4 GiB) is
refused, and a get stops pickling as soon as the pickle grows past it (ename "PickleTooLarge").  Other
errors: "BadRequest" (malformed request), "NameError" (unknown name), the pickling or unpickling error
itself (TypeError, PicklingError, AttributeError...), "KeyboardInterrupt" (interrupted).

Optional request fields: "writable" (put, default true): NumPy arrays come out writable, like the
originals (false: read-only); either way they use the received memory as it is, without a copy (a buffer
that came in several frames is joined into one block first: one copy).
"skip_main" (get of several names, default true): values that refer to functions or classes defined in the
kernel's __main__ are skipped, because a pickle stores those by reference and they cannot be loaded where
__main__ differs.

The namespace is that of __main__.  A whole-namespace get leaves out names that start with "_" and the
kernel-like names In, Out, get_ipython, exit and quit without reporting them; names bound to modules are
left out too (a module pickles by reference at best: the receiver re-imports it) and listed in "modules",
so that a client can say so (`pyc cp a: b:` does); values that cannot be pickled are reported in "skipped"
with the reason.  Modules are not in "skipped": that lists what was lost, and pyc_client warns of it.

Trust: loading a pickle runs code.  A put is the same trust boundary as execute_request: whoever can send
one can already run any code in the kernel.
"""

import os
import pickle
import sys
import types

from ._digest import (CHUNK_MAX, CHUNK_MIN, DEFAULT_CHUNK, PROTOCOL, TARGET,  # noqa: F401
                      check_counts as _check_counts, digests as _digests, is_hex as _is_hex, join as _join,
                      mismatch as _mismatch)
from ._shell import is_kernel_name

DEFAULT_MAX_BYTES = 4 << 30

_MISSING = object()


class RequestFailed(Exception):
    """Ends a request with an error answer {"status": "error", "ename", "evalue"}."""

    def __init__(self, ename, evalue):
        super().__init__(evalue)
        self.ename = ename
        self.evalue = evalue


def max_bytes():
    """The size limit in bytes (PYC_PICKLE_MAX_BYTES, read at each request)."""
    raw = os.environ.get("PYC_PICKLE_MAX_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
    except ValueError:
        raise RequestFailed("BadConfig", "PYC_PICKLE_MAX_BYTES=%r is not a whole number of bytes" % raw)
    return value


def _namespace():
    return sys.modules["__main__"].__dict__


def _type_name(obj):
    t = type(obj)
    mod = getattr(t, "__module__", None)
    qual = getattr(t, "__qualname__", t.__name__)
    return qual if mod in (None, "builtins") else "%s.%s" % (mod, qual)


def _error_of(exc):
    return type(exc).__name__, str(exc)


def _direct():
    """pyc._pickle_direct, which imports this module (RequestFailed), hence imported here when first used."""
    from . import _pickle_direct

    return _pickle_direct


def _too_large(limit):
    return RequestFailed("PickleTooLarge", "the pickle is larger than the limit of %d bytes "
                                           "(PYC_PICKLE_MAX_BYTES)" % limit)


# ---- pickling --------------------------------------------------------------------------------------------


class _Sink:
    """The file the pickler writes the main pickle to; stops it once the whole pickle passes the limit."""

    def __init__(self, limit, keep=True):
        self.keep = keep
        self.parts = []
        self.size = 0
        self.oob = 0
        self.limit = limit

    def write(self, data):
        if not isinstance(data, bytes):
            # a large bytes-like object is handed over as it is: keep a copy (it may change)
            data = memoryview(data).tobytes()
        n = len(data)
        self.size += n
        if self.size + self.oob > self.limit:
            raise _TooLarge
        if self.keep:
            self.parts.append(data)
        return n

    def value(self):
        return b"".join(self.parts)


class _TooLarge(Exception):
    pass


class _Pickler(pickle.Pickler):
    """A pickler that notes the functions and classes of __main__ it stores (they are stored by reference)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.main_refs = []

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            self.main_refs.append(getattr(obj, "__qualname__", getattr(obj, "__name__", "?")))
        return NotImplemented


def _dump(obj, limit, watch_main=False, keep=True):
    """Pickles obj (protocol 5).  Returns (main pickle, out-of-band buffers as flat memoryviews, names of
    __main__ functions/classes referred to); keep=False only tries (the pickle comes back empty)."""
    sink = _Sink(limit, keep)
    oob = []

    def on_buffer(pb):
        raw = _flat(pb)
        sink.oob += raw.nbytes
        if sink.size + sink.oob > limit:
            raise _TooLarge
        oob.append(raw)
        return False          # out of band

    if watch_main:
        p = _Pickler(sink, protocol=PROTOCOL, buffer_callback=on_buffer)
    else:
        p = pickle.Pickler(sink, protocol=PROTOCOL, buffer_callback=on_buffer)
    try:
        p.dump(obj)
    except _TooLarge:
        raise _too_large(limit) from None
    refs = p.main_refs if watch_main else []
    return sink.value(), oob, refs


def _flat(pb):
    try:
        return pb.raw()
    except BufferError:          # neither C- nor Fortran-contiguous: rare outside NumPy
        return memoryview(memoryview(pb).tobytes())


# ---- digests (the rules are in _digest.py) --------------------------------------------------------------


def _chunk_of(data):
    """The "chunk" of a request: None, or a whole number in [CHUNK_MIN, CHUNK_MAX]."""
    chunk = data.get("chunk")
    if chunk is None:
        return None
    if not isinstance(chunk, int) or isinstance(chunk, bool) or not CHUNK_MIN <= chunk <= CHUNK_MAX:
        raise RequestFailed("BadRequest", "\"chunk\" must be a whole number of bytes from %d to %d" %
                            (CHUNK_MIN, CHUNK_MAX))
    return chunk


def _answer_pickle(reply, main, oob, chunk=None, send_to=None):
    """The answer of a get and its buffers; with send_to (from pyc._pickle_direct.send_target) the buffers go to that other
    kernel instead, and the answer has none."""
    buffers = [main] + oob
    reply["protocol"] = PROTOCOL
    reply["nbytes"] = sum(memoryview(b).nbytes for b in buffers)
    if send_to is not None:
        reply["chunk"] = chunk = chunk or DEFAULT_CHUNK
        reply["sha256"] = _direct().send(send_to, buffers, chunk)
        reply["sent"] = True
        return reply, None
    if chunk is not None:
        reply["chunk"] = chunk
    reply["sha256"] = _digests(buffers, chunk)
    return reply, buffers


def _get_one(name, limit, chunk=None, send_to=None):
    ns = _namespace()
    if name not in ns:
        raise RequestFailed("NameError", "name %r is not defined" % name)
    obj = ns[name]
    try:
        main, oob, _ = _dump(obj, limit)
    except RequestFailed:
        raise
    except RecursionError as e:
        raise RequestFailed("RecursionError", "cannot pickle %r: %s" % (name, e))
    except Exception as e:
        ename, evalue = _error_of(e)
        raise RequestFailed(ename, "cannot pickle %r (%s): %s" % (name, _type_name(obj), evalue))
    return _answer_pickle({"status": "ok", "op": "get", "name": name, "type": _type_name(obj)}, main, oob, chunk,
                          send_to)


def _candidates(names):
    """The (name, value) pairs a get of several names pickles, and the names of modules it leaves out (only
    for the whole namespace: modules asked for by name are tried like any value)."""
    ns = _namespace()
    if names is None:
        out, modules = [], []
        for k, v in list(ns.items()):
            if not isinstance(k, str) or k.startswith("_") or is_kernel_name(k):
                continue
            if isinstance(v, types.ModuleType):
                modules.append(k)
                continue
            out.append((k, v))
        return out, sorted(modules)
    missing = [n for n in names if n not in ns]
    if missing:
        raise RequestFailed("NameError", "%s not defined: %s" % (
            "name is" if len(missing) == 1 else "names are", ", ".join(repr(n) for n in missing)))
    return [(n, ns[n]) for n in names], None


def _get_many(names, limit, skip_main, chunk=None, send_to=None):
    skipped = {}
    kept = {}
    candidates, modules = _candidates(names)
    for name, value in candidates:
        # each value alone first, to find the ones that cannot be pickled (out-of-band buffers cost
        # nothing here: they are neither copied nor kept)
        try:
            _, _, refs = _dump(value, limit, watch_main=skip_main, keep=False)
        except RequestFailed as e:
            if e.ename == "PickleTooLarge":
                raise
            skipped[name] = "%s: %s" % (e.ename, e.evalue)
            continue
        except Exception as e:
            skipped[name] = "%s: %s" % _error_of(e)
            continue
        if refs:
            skipped[name] = ("refers to %s defined in the kernel's __main__ (pickled by reference, so it "
                             "cannot be loaded elsewhere)" % ", ".join(sorted(set(refs))))
            continue
        kept[name] = value
    try:
        main, oob, _ = _dump(kept, limit)
    except RequestFailed:
        raise
    except Exception as e:
        ename, evalue = _error_of(e)
        raise RequestFailed(ename, "cannot pickle the namespace: %s" % evalue)
    reply = {"status": "ok", "op": "get", "names": list(kept), "skipped": skipped, "type": "dict"}
    if modules is not None:
        reply["modules"] = modules
    return _answer_pickle(reply, main, oob, chunk, send_to)


# ---- unpickling ------------------------------------------------------------------------------------------


def _check_buffers(data, buffers, limit, computed=None, computed_chunk=None):
    """Size, count and SHA-256 of every buffer, before anything is unpickled.  computed: the chunk digests
    of the buffers already taken (by a landing, with chunk computed_chunk); else they are hashed here."""
    if not buffers:
        raise RequestFailed("BadRequest", "a put needs the pickle in the message's buffers")
    total = 0
    for b in buffers:
        total += memoryview(b).nbytes
    if total > limit:
        raise _too_large(limit)
    digests = data.get("sha256")
    if not isinstance(digests, list) or not all(
            _is_hex(d) or (isinstance(d, list) and all(_is_hex(x) for x in d)) for d in digests):
        raise RequestFailed("BadRequest", "a put needs \"sha256\": a list with, for each buffer, its hex "
                                          "SHA-256 or the list of those of its chunks")
    chunk = _chunk_of(data)
    if chunk is None and any(isinstance(d, list) for d in digests):
        raise RequestFailed("BadRequest", "chunk digests need \"chunk\", the size of a chunk")
    if len(digests) != len(buffers):
        raise RequestFailed("IntegrityError", "the message has %d buffers but %d digests" %
                            (len(buffers), len(digests)))
    nbytes = data.get("nbytes")
    if nbytes is not None and nbytes != total:
        raise RequestFailed("IntegrityError", "the buffers hold %d bytes, the request says %r" % (total, nbytes))
    if computed is not None and (chunk != computed_chunk or not all(isinstance(d, list) for d in digests)):
        raise RequestFailed("IntegrityError", "the digests are not those of %d-byte chunks, as sent" %
                            computed_chunk)
    why = _mismatch(buffers, digests, chunk, computed)
    if why is not None:
        raise RequestFailed("IntegrityError", why)
    return total


def _load(buffers, writable):
    main = buffers[0]
    if writable:
        # The kernel hands received frames over as writable views (and a landing's buffers are writable):
        # a copy is made only for a read-only buffer from elsewhere.
        rest = []
        for i in range(1, len(buffers)):
            b = buffers[i]
            if memoryview(b).readonly:
                b = bytearray(b)
                buffers[i] = None      # drop the read-only copy as soon as possible
            rest.append(b)
    else:
        rest = [memoryview(b).toreadonly() for b in buffers[1:]]
    try:
        return pickle.loads(main, buffers=rest)
    except RecursionError as e:
        raise RequestFailed("RecursionError", "cannot unpickle: %s" % e)
    except Exception as e:
        ename, evalue = _error_of(e)
        raise RequestFailed(ename, "cannot unpickle: %s" % evalue)


def _valid_name(name):
    import keyword

    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _put(data, buffers, limit):
    """A put; with "ticket", of the buffers another kernel sent under that ticket (op "listen")."""
    if "ticket" not in data:
        return _put_checked(data, buffers, limit, None)
    if buffers or "frames" in data:
        raise RequestFailed("BadRequest", "a put with a \"ticket\" takes its buffers from the transfer, "
                                          "not from the message")
    landing = _direct().claim(data["ticket"])
    try:
        return _put_checked(data, buffers, limit, landing)
    except BaseException:
        landing.cancel()
        raise


def _checked(data, buffers, limit, landing):
    """The buffers to unpickle (the landing's when there is one) and their total size, all checked."""
    if landing is None:
        buffers = _joined(data, buffers, limit)
        return buffers, _check_buffers(data, buffers, limit)
    buffers = landing.wait()
    return buffers, _check_buffers(data, buffers, limit, landing.digests, landing.chunk)


def _joined(data, frames, limit):
    """The buffers of a put whose large buffers came in several frames ("frames": the count per buffer; see
    pyc/_digest.py), each joined into one block; the size limit is checked before anything is copied."""
    counts = data.get("frames")
    if counts is None:
        return frames
    if sum(memoryview(f).nbytes for f in frames) > limit:
        raise _too_large(limit)
    try:
        _check_counts(len(frames), counts)
    except ValueError as e:
        raise RequestFailed("BadRequest", str(e))
    digests = data.get("sha256")
    if isinstance(digests, list) and len(digests) != len(counts):
        raise RequestFailed("IntegrityError", "\"frames\" names %d buffers but there are %d digests" %
                            (len(counts), len(digests)))
    try:
        return _join(frames, counts, _direct()._fresh_buffer)
    except OSError as e:      # mmap(2) refused: the memory limit (RLIMIT_DATA) or the machine
        raise MemoryError("cannot join a buffer that came in several frames (a put needs room for its "
                          "buffers over 256 MiB twice while they are joined): %s" % (e.strerror or e))


def _put_checked(data, buffers, limit, landing):
    writable = data.get("writable", True)
    if "name" in data:
        name = data["name"]
        if not _valid_name(name):
            raise RequestFailed("BadRequest", "\"name\" must be a Python identifier, not %r" % (name,))
        buffers, total = _checked(data, buffers, limit, landing)
        obj = _load(buffers, writable)
        _namespace()[name] = obj
        return {"status": "ok", "op": "put", "name": name, "type": _type_name(obj), "nbytes": total}
    names = data.get("names", _MISSING)
    if names is _MISSING:
        raise RequestFailed("BadRequest", "a put needs \"name\" (a string) or \"names\" (null or a list)")
    if names is not None and not (isinstance(names, list) and all(_valid_name(n) for n in names)):
        raise RequestFailed("BadRequest", "\"names\" must be null or a list of Python identifiers")
    buffers, total = _checked(data, buffers, limit, landing)
    obj = _load(buffers, writable)
    if not isinstance(obj, dict):
        raise RequestFailed("TypeError", "a put of \"names\" needs a pickled dict, not %s" % _type_name(obj))
    bad = [k for k in obj if not _valid_name(k)]
    if bad:
        raise RequestFailed("BadRequest", "the dict has keys that are not Python identifiers: %s" %
                            ", ".join(repr(k) for k in bad[:5]))
    if names is not None:
        missing = [n for n in names if n not in obj]
        if missing:
            raise RequestFailed("NameError", "not in the pickled dict: %s" % ", ".join(repr(n) for n in missing))
        obj = {n: obj[n] for n in names}
    _namespace().update(obj)
    return {"status": "ok", "op": "put", "names": list(obj), "nbytes": total}


# ---- the target ------------------------------------------------------------------------------------------


def handle(data, buffers):
    """Runs one request; returns (answer data, answer buffers or None).  Raises RequestFailed."""
    if not isinstance(data, dict):
        raise RequestFailed("BadRequest", "the comm_open data must be an object")
    op = data.get("op")
    limit = max_bytes()
    if op == "get":
        chunk = _chunk_of(data)
        send_to = _direct().send_target(data) if "send_to" in data else None
        if "name" in data:
            name = data["name"]
            if not isinstance(name, str):
                raise RequestFailed("BadRequest", "\"name\" must be a string")
            return _get_one(name, limit, chunk, send_to)
        names = data.get("names", _MISSING)
        if names is _MISSING:
            raise RequestFailed("BadRequest", "a get needs \"name\" (a string) or \"names\" (null or a list)")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise RequestFailed("BadRequest", "\"names\" must be null or a list of strings")
        return _get_many(names, limit, bool(data.get("skip_main", True)), chunk, send_to)
    if op == "put":
        return _put(data, buffers, limit), None
    if op == "listen":
        return _direct().listen(data, limit), None
    if op == "cancel":
        return _direct().cancel(data), None
    if op == "whoami":
        return _direct().whoami(), None
    raise RequestFailed("BadRequest", "unknown op %r (expected \"get\", \"put\", \"listen\", \"cancel\" or "
                                      "\"whoami\")" % (op,))


def target(comm, open_msg):
    """The comm target: answers the request in the comm_open with one comm_msg, then closes the comm."""
    content = open_msg.get("content") or {}
    data = content.get("data")
    buffers = open_msg.get("buffers")
    if not isinstance(buffers, list):     # else the very list, so that _load can drop each copy it is done with
        buffers = list(buffers or ())
    out_buffers = None
    try:
        reply, out_buffers = handle(data, buffers)
    except RequestFailed as e:
        reply = {"status": "error", "ename": e.ename, "evalue": e.evalue}
    except MemoryError as e:
        reply = {"status": "error", "ename": "MemoryError", "evalue": str(e) or "out of memory"}
    except BaseException as e:      # KeyboardInterrupt, or SystemExit raised while unpickling: the kernel goes on
        reply = {"status": "error", "ename": type(e).__name__, "evalue": str(e)}
    if isinstance(data, dict) and isinstance(data.get("op"), str):
        reply.setdefault("op", data["op"])
    try:
        comm.send(reply, buffers=out_buffers)
    except BaseException as e:
        comm.send({"status": "error", "ename": type(e).__name__, "evalue": "could not send the answer: %s" % e})
    finally:
        comm.close()
