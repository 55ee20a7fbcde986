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
    {"op": "put", "name": "x", "sha256": [hex, ...]}           buffers: [main pickle, out-of-band...]
        -> {"status": "ok", "op": "put", "name": "x", "type": "...", "nbytes": N}
    {"op": "put", "names": null, "sha256": [...]}              the pickle holds a dict: merged into the
        -> {"status": "ok", "op": "put", "names": [...], "nbytes": N}   namespace (a list of names merges
                                                                        only those keys)

Chunked digests.  One SHA-256 over a 100 MiB buffer takes 58 ms on one core, and SHA-256 cannot be split.
A get may ask for "chunk": C (bytes, at least 65536): each entry of the answer's "sha256" is then a list,
the digests of the buffer's consecutive C-byte pieces (the last one shorter; an empty buffer has the one
digest of b""), and the answer says "chunk": C.  The pieces are hashed by several threads at once, here
and by whoever checks them.  A put accepts either form per buffer: a hex string (the whole buffer) or a
list of chunk digests, with "chunk" in the request.

Kernel to kernel without the client in between (pyc_client.copy, when both kernels run on the same machine
and network namespace; every step is a request of its own, signed with the receiving kernel's key):

    A: {"op": "whoami"}  -> {"status": "ok", "op": "whoami", "pid": P, "uid": U, "machine": M}
    B: {"op": "listen", "timeout": S, "ticket": T, "sender": {"pid": P, "uid": U}}
        -> {"status": "ok", "op": "listen", "address": ADDR, "machine": M, "pid": PB, "uid": UB}
       T (32 hex digits) is chosen by the client and travels only in signed requests on shell, never in an
       answer (answers go out on iopub, which any local process may read without the key).  B listens on the
       abstract Unix socket "\\0" + ADDR (Linux; abstract names belong to the network namespace and never
       reach the network) for S seconds (default 60), for one connection presenting T from process P of
       user U (SO_PEERCRED; connections of anyone else are closed unread), and keeps the name bound until a
       put or cancel claims the transfer or it expires, so that no other process can take the name.
    A: {"op": "get", "name": "x", "chunk": C, "send_to": {"address": ADDR, "ticket": T, "machine": M,
                                                          "timeout": S, "pid": PB, "uid": UB}}
        -> the answer of a get, without buffers, with "sent": true
       A refuses with "NotLocal" unless M is its own machine id (boot id and network namespace: the same
       abstract socket names then), connects, refuses ("ConnectionError") unless the listening process is PB
       of user UB (SO_PEERCRED), and writes the stream
           b"PYC1" + T (32 ASCII bytes) + u64 n + u64 C + n * u64 size + the n buffers' bytes
       (little-endian), hashing chunks while it sends; "ConnectionError" when that fails.  B receives into
       fresh memory and hashes each chunk as it lands.  (A Unix socket moved 100 MiB in 31-43 ms on the
       test machine, TCP over 127.0.0.1 in 47-59 ms.)
    B: {"op": "put", "name": "x", "ticket": T, "chunk": C, "sha256": [[...]], "nbytes": N}
        -> the answer of a put.  The buffers are the ones received under T; the digests (from A's signed
       answer, forwarded in this signed request) are compared with those B computed before anything is
       unpickled, exactly as for a put with message buffers.
    B: {"op": "cancel", "ticket": T}  -> {"status": "ok", "op": "cancel", "landing_error": null or
       [ename, evalue]}: gives up a transfer (the client sends it when A failed).
A transfer nobody claims with a put within its timeout is dropped.  The ticket and the peer checks keep
other processes out (a local user who reads iopub learns ADDR, nothing more); what may be unpickled is
decided by the digests alone.  At most MAX_LANDINGS transfers wait at once.

The pickle is protocol 5; out-of-band buffers (NumPy and pandas data) travel as raw frames of the Jupyter
message, not base64, and pickle.dumps does not copy them.  Buffers are outside the message's HMAC, so
their SHA-256 digests travel in the signed content: a put checks the number of buffers and every digest
before it unpickles anything (ename "IntegrityError" otherwise).  Before any work, a put whose buffers
total more than PYC_PICKLE_MAX_BYTES (environment of the kernel, read at each request; default 4 GiB) is
refused, and a get stops pickling as soon as the pickle grows past it (ename "PickleTooLarge").  Other
errors: "BadRequest" (malformed request), "NameError" (unknown name), the pickling or unpickling error
itself (TypeError, PicklingError, AttributeError...), "KeyboardInterrupt" (interrupted).

Optional request fields: "writable" (put, default true): NumPy arrays come out writable, like the
originals (false: read-only); either way they use the received memory as it is, without a copy.
"skip_main" (get of several names, default true): values that refer to functions or classes defined in the
kernel's __main__ are skipped, because a pickle stores those by reference and they cannot be loaded where
__main__ differs.

The namespace is that of __main__.  A whole-namespace get leaves out names that start with "_", modules,
and the kernel-like names In, Out, get_ipython, exit and quit without reporting them; values that cannot
be pickled are reported in "skipped" with the reason.

Trust: loading a pickle runs code.  A put is the same trust boundary as execute_request: whoever can send
one can already run any code in the kernel.
"""

import hashlib
import hmac
import os
import pickle
import secrets
import socket
import struct
import sys
import threading
import time
import types

from ._digest import (CHUNK_MAX, CHUNK_MIN, DEFAULT_CHUNK, HASH_THREADS, PROTOCOL, TARGET,  # noqa: F401
                      chunks as _chunks, digests as _digests, is_hex as _is_hex, mismatch as _mismatch,
                      sha256_hex as _sha256_hex)

DEFAULT_MAX_BYTES = 4 << 30
#: Transfers from another kernel waiting at once (op "listen").
MAX_LANDINGS = 16
#: The stream a kernel writes to another one starts with these four bytes.
STREAM_MAGIC = b"PYC1"
#: Names a whole-namespace get leaves out (besides "_..." names and modules).
KERNEL_NAMES = frozenset(("In", "Out", "get_ipython", "exit", "quit"))

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
    """The answer of a get and its buffers; with send_to (from _send_target) the buffers go to that other
    kernel instead, and the answer has none."""
    buffers = [main] + oob
    reply["protocol"] = PROTOCOL
    reply["nbytes"] = sum(memoryview(b).nbytes for b in buffers)
    if send_to is not None:
        reply["chunk"] = chunk = chunk or DEFAULT_CHUNK
        reply["sha256"] = _send(send_to, buffers, chunk)
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
    ns = _namespace()
    if names is None:
        out = []
        for k, v in list(ns.items()):
            if not isinstance(k, str) or k.startswith("_") or k in KERNEL_NAMES:
                continue
            if isinstance(v, types.ModuleType):
                continue
            out.append((k, v))
        return out
    missing = [n for n in names if n not in ns]
    if missing:
        raise RequestFailed("NameError", "%s not defined: %s" % (
            "name is" if len(missing) == 1 else "names are", ", ".join(repr(n) for n in missing)))
    return [(n, ns[n]) for n in names]


def _get_many(names, limit, skip_main, chunk=None, send_to=None):
    skipped = {}
    kept = {}
    for name, value in _candidates(names):
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
    if buffers:
        raise RequestFailed("BadRequest", "a put with a \"ticket\" takes its buffers from the transfer, "
                                          "not from the message")
    landing = _claim(data["ticket"])
    try:
        return _put_checked(data, buffers, limit, landing)
    except BaseException:
        landing.cancel()
        raise


def _checked(data, buffers, limit, landing):
    """The buffers to unpickle (the landing's when there is one) and their total size, all checked."""
    if landing is None:
        return buffers, _check_buffers(data, buffers, limit)
    buffers = landing.wait()
    return buffers, _check_buffers(data, buffers, limit, landing.digests, landing.chunk)


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


# ---- kernel to kernel -------------------------------------------------------------------------------------

#: The default chunk of a transfer to another kernel when the request names none.
#: A transfer's buffers from this size on land in huge-page-advised mappings (see _fresh_buffer).
MAP_MIN = 1 << 20

_landings = {}                  # ticket -> _Landing, until claimed by a put, cancelled or expired
_landings_lock = threading.Lock()


def _forget_landings():
    """In a forked child: the landings' threads stayed in the parent, and the lock may have been held by
    one of them at the fork."""
    global _landings_lock
    _landings_lock = threading.Lock()
    for landing in list(_landings.values()):
        landing.server.close()           # the child's copy of the descriptor; the parent's stays open
    _landings.clear()


os.register_at_fork(after_in_child=_forget_landings)


def _machine_id():
    """This kernel's boot and network namespace: two kernels with the same id reach each other on
    127.0.0.1.  None where that cannot be told (no /proc)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return "%s/%s" % (boot, os.readlink("/proc/self/ns/net"))
    except OSError:
        return None


def _recv_into_exact(sock, view):
    got, n = 0, view.nbytes
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the stream ended %d bytes early" % (n - got))
        got += k


def _recv_exact(sock, n):
    buf = bytearray(n)
    _recv_into_exact(sock, memoryview(buf))
    return bytes(buf)


def _fresh_buffer(size):
    """Writable memory for a received buffer.  From MAP_MIN on, an anonymous private mapping advised to
    use huge pages: faulting in 100 MiB of 4 KiB pages took 50 ms on the test machine, of 2 MiB pages
    11 ms.  The mapping is unmapped when the last array using it goes."""
    if size < MAP_MIN:
        return bytearray(size)
    import mmap

    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            m.madvise(advice)
        except OSError:
            pass
    return m


class _Hasher:
    """Hashes pieces on background threads as they are added (hashlib releases the GIL), so that hashing
    overlaps the sending or receiving of the next pieces."""

    def __init__(self):
        import queue

        self.queue = queue.SimpleQueue()
        self.out = {}
        self.failed = []
        self.stopped = False             # set when the digests are not wanted any more
        self.threads = [threading.Thread(target=self._work, name="pyc-sha256", daemon=True)
                        for _ in range(HASH_THREADS)]
        for t in self.threads:
            t.start()

    def _work(self):
        while True:
            item = self.queue.get()
            if item is None:
                return
            key, piece = item
            if self.stopped:
                continue
            try:
                self.out[key] = hashlib.sha256(piece).hexdigest()
            except BaseException as e:
                self.failed.append(e)

    def add(self, key, piece):
        self.queue.put((key, piece))

    def finish(self, wanted=True):
        """Waits for every piece; returns {key: hex digest}.  wanted=False skips the pieces not yet hashed
        (after a failure)."""
        self.stopped = not wanted
        for _ in self.threads:
            self.queue.put(None)
        for t in self.threads:
            t.join()
        if self.failed:
            raise self.failed[0]
        return self.out


class _Landing:
    """Where a pickle sent straight from another kernel lands (op "listen"): a listening abstract Unix
    socket and a thread that takes the first connection presenting the ticket, receives the stream into
    fresh writable memory and hashes each chunk as it completes.  The put that names the ticket waits for
    it (wait) and checks the digests; nobody else reads the buffers."""

    def __init__(self, limit, timeout, ticket, sender):
        self.ticket = ticket
        self.sender = sender                 # (pid, uid) that may connect
        self.limit = limit
        self.deadline = time.monotonic() + timeout
        self.address = "pyc-pickle-%d-%s" % (os.getpid(), secrets.token_hex(8))
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.server.bind("\0" + self.address)
            self.server.listen(4)
        except OSError:
            self.server.close()
            raise
        self.conn = None
        self.done = threading.Event()        # the transfer ended, well (buffers) or not (error)
        self.claimed = threading.Event()     # a put or a cancel took it out of _landings
        self.cancelled = False
        self.buffers = self.digests = self.chunk = None
        self.error = None                    # (ename, evalue)
        self.thread = threading.Thread(target=self._run, name="pyc-pickle-landing", daemon=True)

    def _left(self):
        left = self.deadline - time.monotonic()
        if self.cancelled:
            raise RequestFailed("Cancelled", "the transfer was cancelled")
        if left <= 0:
            raise RequestFailed("TimeoutError", "the pickle did not arrive from the other kernel in time")
        return left

    def _run(self):
        try:
            conn = self._accept()
            self.conn = conn
            with conn:
                self._receive(conn)
        except RequestFailed as e:
            self.error = (e.ename, e.evalue)
        except BaseException as e:
            if self.cancelled:
                self.error = ("Cancelled", "the transfer was cancelled")
            else:
                self.error = ("TransferFailed", "the pickle did not arrive from the other kernel: %s: %s" %
                              (type(e).__name__, e))
        finally:
            if self.error is not None:
                self.buffers = self.digests = None
            self.done.set()
        # The name stays bound until the transfer is claimed or expires: no other process may take it over
        # and receive a pickle meant for this kernel.  Nobody claims it in time: let it go.
        self.claimed.wait(max(0.0, self.deadline - time.monotonic()))
        self.server.close()
        with _landings_lock:
            if _landings.get(self.ticket) is self:
                del _landings[self.ticket]
                self.buffers = self.digests = None

    def _accept(self):
        """The first connection of the expected sender (process and user, SO_PEERCRED) that presents the
        ticket; others are closed (a connection of the sender gets 5 s to present it)."""
        want = STREAM_MAGIC + self.ticket.encode("ascii")
        while True:
            self.server.settimeout(self._left())
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue                     # _left() says whether time is up
            try:
                if _peer(conn) != self.sender:
                    conn.close()
                    continue
                conn.settimeout(min(5.0, self._left()))
                if hmac.compare_digest(_recv_exact(conn, len(want)), want):
                    return conn
            except OSError:
                pass
            conn.close()

    def _receive(self, conn):
        conn.settimeout(self._left())
        n, chunk = struct.unpack("<QQ", _recv_exact(conn, 16))
        if not 1 <= n <= 4096:
            raise RequestFailed("TransferFailed", "the stream announces %d buffers" % n)
        if not CHUNK_MIN <= chunk <= CHUNK_MAX:
            raise RequestFailed("TransferFailed", "the stream announces chunks of %d bytes" % chunk)
        sizes = struct.unpack("<%dQ" % n, _recv_exact(conn, 8 * n))
        if sum(sizes) > self.limit:
            raise _too_large(self.limit)
        buffers = [_fresh_buffer(size) for size in sizes]
        pieces = [_chunks(b, chunk) for b in buffers]
        hasher = _Hasher()
        try:
            for i, ps in enumerate(pieces):
                for j, piece in enumerate(ps):
                    conn.settimeout(self._left())
                    _recv_into_exact(conn, piece)
                    hasher.add((i, j), piece)
        except BaseException:
            hasher.finish(wanted=False)
            raise
        out = hasher.finish()
        self.digests = [[out[(i, j)] for j in range(len(ps))] for i, ps in enumerate(pieces)]
        self.chunk = chunk
        self.buffers = buffers

    def wait(self):
        """Waits for the transfer; returns its buffers (taken: the landing keeps no reference)."""
        if not self.done.wait(max(0.0, self.deadline - time.monotonic())):
            raise RequestFailed("TimeoutError", "the pickle did not arrive from the other kernel in time")
        if self.error is not None:
            raise RequestFailed(*self.error)
        buffers, self.buffers = self.buffers, None
        return buffers

    def cancel(self):
        """Stops the transfer where it is and drops what arrived."""
        self.cancelled = True
        self.claimed.set()
        for s in (self.server, self.conn):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)   # wakes a blocked accept or recv
                except OSError:
                    pass
        if self.done.is_set():
            self.buffers = self.digests = None


def _peer(sock):
    """(pid, uid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         struct.calcsize("3i")))
    return pid, uid


def _is_ticket(t):
    return isinstance(t, str) and len(t) == 32 and all(c in "0123456789abcdef" for c in t)


def _whoami():
    machine = _machine_id()
    if machine is None:
        raise RequestFailed("NotSupported", "this kernel cannot tell which machine it runs on (no /proc)")
    return {"status": "ok", "op": "whoami", "pid": os.getpid(), "uid": os.getuid(), "machine": machine}


def _listen(data, limit):
    timeout = data.get("timeout", 60)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 86400:
        raise RequestFailed("BadRequest", "\"timeout\" must be a number of seconds (0 to 86400)")
    ticket, sender = data.get("ticket"), data.get("sender")
    if not _is_ticket(ticket):
        raise RequestFailed("BadRequest", "a listen needs \"ticket\": 32 hex digits chosen by the client (the "
                                          "kernel never makes one: its answers can be read by others)")
    if (not isinstance(sender, dict) or not all(isinstance(sender.get(k), int) and not isinstance(
            sender.get(k), bool) for k in ("pid", "uid"))):
        raise RequestFailed("BadRequest", "a listen needs \"sender\": {\"pid\", \"uid\"} of the kernel that "
                                          "will send (its answer to \"whoami\")")
    machine = _machine_id()
    if machine is None:
        raise RequestFailed("NotSupported", "this kernel cannot tell which machine it runs on (no /proc)")
    with _landings_lock:
        if len(_landings) >= MAX_LANDINGS:
            raise RequestFailed("TooManyTransfers", "%d transfers already wait for their pickle" % MAX_LANDINGS)
        try:
            if ticket in _landings:
                raise RequestFailed("BadRequest", "a transfer already waits under this ticket")
            landing = _Landing(limit, timeout, ticket, (sender["pid"], sender["uid"]))
        except OSError as e:
            raise RequestFailed("ConnectionError", "cannot listen on a Unix socket: %s" % e)
        _landings[landing.ticket] = landing
    landing.thread.start()
    return {"status": "ok", "op": "listen", "address": landing.address, "machine": machine,
            "pid": os.getpid(), "uid": os.getuid()}


def _claim(ticket):
    """Takes the landing of ticket out of _landings: no other put or cancel can have it."""
    with _landings_lock:
        landing = _landings.pop(ticket, None) if isinstance(ticket, str) else None
    if landing is None:
        raise RequestFailed("BadRequest", "no transfer waits under this ticket (unknown, cancelled or expired)")
    landing.claimed.set()
    return landing


def _cancel(data):
    try:
        landing = _claim(data.get("ticket"))
    except RequestFailed:
        return {"status": "ok", "op": "cancel", "landing_error": None}
    landing.cancel()
    # The landing may have failed first (a pickle over the limit closes the connection, which is how the
    # sender failed): its thread ends at once once cancelled, so its error can be reported.
    landing.done.wait(1.0)
    error = landing.error if landing.done.is_set() else None
    return {"status": "ok", "op": "cancel", "landing_error": list(error) if error else None}


def _send_target(data):
    """The "send_to" of a get, checked: (address, ticket, timeout).  Raises NotLocal for another machine."""
    to = data.get("send_to")
    if not isinstance(to, dict):
        raise RequestFailed("BadRequest", "\"send_to\" must be an object (address, ticket, machine)")
    address, ticket, machine = to.get("address"), to.get("ticket"), to.get("machine")
    pid, uid = to.get("pid"), to.get("uid")
    timeout = to.get("timeout", 60)
    if (not isinstance(address, str) or not address.startswith("pyc-pickle-") or len(address) > 100
            or not _is_ticket(ticket) or not isinstance(machine, str)
            or not isinstance(pid, int) or not isinstance(uid, int)
            or not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 86400):
        raise RequestFailed("BadRequest", "\"send_to\" needs address, ticket (32 hex digits), machine, pid and "
                                          "uid, as "
                                          "answered by op \"listen\"")
    if machine != _machine_id():
        raise RequestFailed("NotLocal", "the receiving kernel runs on another machine or network namespace")
    return address, ticket, timeout, (pid, uid)


def _send(target, buffers, chunk):
    """Writes the stream to the landing at target, hashing chunks on other threads meanwhile.  Returns the
    chunk digests of each buffer."""
    address, ticket, timeout, listener = target
    sizes = [memoryview(b).nbytes for b in buffers]
    head = (STREAM_MAGIC + ticket.encode("ascii") + struct.pack("<QQ", len(buffers), chunk) +
            struct.pack("<%dQ" % len(buffers), *sizes))
    pieces = [_chunks(b, chunk) for b in buffers]
    hasher = _Hasher()
    try:
        for i, ps in enumerate(pieces):
            for j, piece in enumerate(ps):
                hasher.add((i, j), piece)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect("\0" + address)
            if _peer(sock) != listener:
                raise RequestFailed("ConnectionError", "the socket %s is not the receiving kernel's (another "
                                    "process holds the name)" % address)
            sock.sendall(head)
            for b in buffers:
                sock.sendall(b)
    except BaseException as e:
        hasher.finish(wanted=False)
        if isinstance(e, OSError):
            raise RequestFailed("ConnectionError", "could not send the pickle to the other kernel (%s): %s" %
                                (address, e))
        raise
    out = hasher.finish()
    return [[out[(i, j)] for j in range(len(ps))] for i, ps in enumerate(pieces)]


# ---- the target ------------------------------------------------------------------------------------------


def handle(data, buffers):
    """Runs one request; returns (answer data, answer buffers or None).  Raises RequestFailed."""
    if not isinstance(data, dict):
        raise RequestFailed("BadRequest", "the comm_open data must be an object")
    op = data.get("op")
    limit = max_bytes()
    if op == "get":
        chunk = _chunk_of(data)
        send_to = _send_target(data) if "send_to" in data else None
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
        return _listen(data, limit), None
    if op == "cancel":
        return _cancel(data), None
    if op == "whoami":
        return _whoami(), None
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
