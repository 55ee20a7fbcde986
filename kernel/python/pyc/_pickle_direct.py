"""The pickle transfer from kernel to kernel, without the client in between (pyc._pickle's ops "whoami",
"listen", "cancel", "send_to" in a get and "ticket" in a put).

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
"""

import hashlib
import hmac
import os
import secrets
import socket
import struct
import threading
import time

from ._digest import CHUNK_MAX, CHUNK_MIN, HASH_THREADS, chunks as _chunks
from ._pickle import RequestFailed, _too_large

#: Transfers from another kernel waiting at once (op "listen").
MAX_LANDINGS = 16
#: The stream a kernel writes to another one starts with these four bytes.
STREAM_MAGIC = b"PYC1"

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
        if self.conn is None:
            # Linux wakes no accept on a listening Unix socket for its shutdown (which only refuses connections
            # from then on): a connection does.  Ours is not the sender's (or, when it is, finds the transfer
            # cancelled), so the thread ends now instead of at its deadline, and the cancel's wait for it
            # (cancel(), 1 s) does not run out.
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wake:
                    wake.settimeout(1.0)
                    wake.connect("\0" + self.address)
            except OSError:
                pass
        if self.conn is not None:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)   # wakes a blocked recv
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


def whoami():
    machine = _machine_id()
    if machine is None:
        raise RequestFailed("NotSupported", "this kernel cannot tell which machine it runs on (no /proc)")
    return {"status": "ok", "op": "whoami", "pid": os.getpid(), "uid": os.getuid(), "machine": machine}


def listen(data, limit):
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


def claim(ticket):
    """Takes the landing of ticket out of _landings: no other put or cancel can have it."""
    with _landings_lock:
        landing = _landings.pop(ticket, None) if isinstance(ticket, str) else None
    if landing is None:
        raise RequestFailed("BadRequest", "no transfer waits under this ticket (unknown, cancelled or expired)")
    landing.claimed.set()
    return landing


def cancel(data):
    try:
        landing = claim(data.get("ticket"))
    except RequestFailed:
        return {"status": "ok", "op": "cancel", "landing_error": None}
    landing.cancel()
    # The landing may have failed first (a pickle over the limit closes the connection, which is how the
    # sender failed): its thread ends at once once cancelled, so its error can be reported.
    landing.done.wait(1.0)
    error = landing.error if landing.done.is_set() else None
    if error is not None and error[0] == "Cancelled":
        error = None                 # this cancel's own doing, not a failure of the landing
    return {"status": "ok", "op": "cancel", "landing_error": list(error) if error else None}


def send_target(data):
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


def send(target, buffers, chunk):
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
