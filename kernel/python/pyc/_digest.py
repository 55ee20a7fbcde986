"""The digests of the pickle transfer (comm target "pyc.pickle"): the one definition that both ends use.

This file is compiled into pyc-kernel as ``pyc._digest`` and installed, the same file, as
``pyc_client._digest`` (cli/python/pyc_client/_digest.py is a symbolic link to it), so that the kernel and
the client can never disagree on how a buffer is hashed.

The rules.  A pickle travels as protocol-5 buffers: the main pickle, then each out-of-band buffer.  Buffers
travel outside the signed frames of a Jupyter message, so their SHA-256 digests travel in the signed content
("sha256": a list with one entry per buffer) and are checked before anything is unpickled.  An entry is
either

  * a hex string, the SHA-256 of the whole buffer, or
  * a list of hex strings, the SHA-256 of each consecutive ``chunk``-byte piece of the buffer (the last one
    shorter; an empty buffer has the one digest of b""), where ``chunk`` travels beside "sha256".

Chunk digests exist so that several threads can hash one large buffer on both ends (one SHA-256 over 100 MiB
takes 58 ms on one core and cannot be split).  ``chunk`` is a whole number from CHUNK_MIN to CHUNK_MAX.

Frames.  A kernel takes frames of at most 256 MiB on shell from a peer it does not know yet
(PYC_MAX_MESSAGE_BYTES; README, "Security model"), so a buffer larger than FRAME_MAX travels in a put as
consecutive frames of FRAME_MAX bytes (the last shorter), and "frames" beside "sha256" gives, for each
buffer, the number of frames it took; the kernel joins them before it checks the digests, which are those
of the whole buffers.  A put whose buffers all fit in one frame has no "frames", as before it existed.
Answers (iopub, from the kernel to a client that chose to connect) are not split.

The `pyc` command (cli/transfer.c) speaks a subset: it asks for and sends whole-buffer digests only, hashing
in C; it splits frames by the same rule (PYC_PICKLE_FRAME_MAX in src/client/pickle.h).
"""

import hashlib
import hmac
import os
import threading

#: The comm target and the pickle protocol.
TARGET = "pyc.pickle"
PROTOCOL = 5
#: Smallest and largest chunk size of chunked digests.  The floor bounds the number of digests (65536 for
#: 4 GiB).
CHUNK_MIN = 64 << 10
CHUNK_MAX = 1 << 30
#: The chunk size pyc_client asks for and a kernel uses when it chooses: 25 digests for 100 MiB, enough to
#: keep two threads busy.
DEFAULT_CHUNK = 4 << 20
#: The largest frame a buffer of a put travels in (see "Frames" above): a kernel's default limit, so that a
#: buffer that fits is sent as it always was, without the copy that joining costs on arrival.
FRAME_MAX = 256 << 20
#: Threads that hash at once (hashlib releases the GIL over more than 2 KiB, so they run in parallel).
HASH_THREADS = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                             else (os.cpu_count() or 1)))
#: Below this many bytes one thread hashes: starting threads would cost more than it saves.
PARALLEL_MIN = 8 << 20


def sha256_hex(pieces):
    """The hex SHA-256 of each bytes-like piece, in order.  From PARALLEL_MIN bytes on, HASH_THREADS threads
    (the caller's among them) share the pieces, largest first: two threads take 100 MiB in 4 MiB pieces
    from 58 ms to 32 ms on the test machine."""
    sizes = [memoryview(p).nbytes for p in pieces]
    workers = min(HASH_THREADS, len(pieces))
    if workers < 2 or sum(sizes) < PARALLEL_MIN:
        return [hashlib.sha256(p).hexdigest() for p in pieces]
    out = [None] * len(pieces)
    todo = iter(sorted(range(len(pieces)), key=sizes.__getitem__, reverse=True))
    lock = threading.Lock()
    failed = []

    def work():
        try:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                out[i] = hashlib.sha256(pieces[i]).hexdigest()
        except BaseException as e:       # MemoryError: raised again below, in the caller's thread
            failed.append(e)

    helpers = [threading.Thread(target=work, name="pyc-sha256", daemon=True) for _ in range(workers - 1)]
    for t in helpers:
        t.start()
    work()
    for t in helpers:
        t.join()
    if failed:
        raise failed[0]
    return out


def chunks(buf, chunk):
    """buf as consecutive views of chunk bytes (the last shorter); [empty view] for an empty buffer."""
    mv = memoryview(buf).cast("B")
    return [mv[i:i + chunk] for i in range(0, mv.nbytes, chunk)] or [mv]


def digests(buffers, chunk=None):
    """One hex digest per buffer (chunk None), or one list of chunk digests per buffer."""
    if chunk is None:
        return sha256_hex(buffers)
    pieces, counts = [], []
    for b in buffers:
        c = chunks(b, chunk)
        pieces.extend(c)
        counts.append(len(c))
    flat = sha256_hex(pieces)
    out, k = [], 0
    for n in counts:
        out.append(flat[k:k + n])
        k += n
    return out


def split(buffers, frame_max=FRAME_MAX):
    """The frames that carry buffers in a put, as views (nothing is copied), and the number of frames each
    buffer took: None when every buffer fits in one frame, so that such a put is sent as it always was."""
    frames, counts = [], []
    for b in buffers:
        mv = memoryview(b)
        if mv.nbytes <= frame_max:
            frames.append(b)
            counts.append(1)
            continue
        mv = mv.cast("B")
        parts = [mv[i:i + frame_max] for i in range(0, mv.nbytes, frame_max)]
        frames.extend(parts)
        counts.append(len(parts))
    return frames, (counts if len(frames) != len(counts) else None)


def check_counts(n, counts):
    """Raises ValueError unless counts lists, for each buffer, the number of frames (at least 1) it took, n in
    all."""
    if not (isinstance(counts, list) and all(type(c) is int and c >= 1 for c in counts) and sum(counts) == n):
        raise ValueError("\"frames\" must list, for each buffer, the number of frames (at least 1) it took, "
                         "%d in all; it is %r" % (n, counts if len(repr(counts)) < 200 else "too long"))


def join(frames, counts, alloc=bytearray):
    """The buffers that frames carry, counts[i] frames for buffer i (the inverse of split; counts None: one
    frame each).  A buffer of several frames is copied, once, into one writable block that alloc(size) gives
    (the kernel's is an anonymous mapping advised to use huge pages); every entry of frames is set to None as
    soon as it is taken, so that the caller's list does not keep it alive.  Raises ValueError when counts does
    not describe frames."""
    if counts is None:
        return list(frames)
    check_counts(len(frames), counts)
    out, k = [], 0
    for n in counts:
        if n == 1:
            out.append(frames[k])
            frames[k] = None
            k += 1
            continue
        views = [memoryview(f).cast("B") for f in frames[k:k + n]]
        whole = alloc(sum(v.nbytes for v in views))
        into, at = memoryview(whole), 0
        for j, v in enumerate(views):
            into[at:at + v.nbytes] = v
            at += v.nbytes
            views[j] = frames[k + j] = None
        out.append(whole)
        k += n
    return out


def is_hex(d):
    """True for a 64-digit hex string (either case)."""
    return isinstance(d, str) and len(d) == 64 and all(c in "0123456789abcdefABCDEF" for c in d)


def mismatch(buffers, wants, chunk=None, computed=None):
    """Checks buffers against wants (one entry per buffer, in either form; the caller has checked that the
    lengths agree and that list entries come with a chunk).  computed, when given, holds the chunk digests
    of the buffers already taken while they arrived (same chunk), so nothing is hashed again.  Returns None
    when every buffer matches, else the sentence that says which one does not; comparisons take constant
    time."""
    if computed is None:
        pieces, where = [], []
        for b, want in zip(buffers, wants):
            ps = chunks(b, chunk) if isinstance(want, list) else [b]
            pieces.extend(ps)
            where.append(len(ps))
        flat = sha256_hex(pieces)
        computed, k = [], 0
        for want, n in zip(wants, where):
            computed.append(flat[k:k + n] if isinstance(want, list) else flat[k])
            k += n
    for i, (have, want) in enumerate(zip(computed, wants)):
        if isinstance(want, str):
            if not isinstance(have, str) or not hmac.compare_digest(have, want.lower()):
                return "buffer %d does not match its SHA-256 digest" % i
            continue
        if len(have) != len(want):
            return "buffer %d has %d chunks of %d bytes but %d digests" % (i, len(have), chunk, len(want))
        for j, (h, w) in enumerate(zip(have, want)):
            if not hmac.compare_digest(h, str(w).lower()):
                return "buffer %d (chunk %d) does not match its SHA-256 digest" % (i, j)
    return None
