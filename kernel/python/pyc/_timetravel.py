"""Time travel from Python (README, "Time travel"): the magics %snapshot, %snapshots and %restore, which ask the
kernel through _pyc.kernel_call (it takes or restores once the cell has been handled), and what a snapshot
cannot hold.

A snapshot is a fork of the kernel's process: it holds every object, picklable or not, but only the main
thread, and the descriptors without their other end's state.  losses() names what a snapshot taken now
leaves behind, so that the kernel can say so when it is taken and again when it is restored:

  - threads other than the main one (a fork has one thread: theirs stop existing in the snapshot);
  - open network connections (the snapshot shares the socket with the live kernel until one side closes it;
    a restored kernel finds the peer in whatever state the live one left it);
  - GPU contexts (a driver's state lives in the device and its driver threads, which a fork does not copy).
"""

import os
import sys
import threading

# States of /proc/net/tcp* that are a connection (ESTABLISHED, SYN_SENT, SYN_RECV, CLOSE_WAIT).
_CONNECTED = {"01", "02", "03", "08"}
_GPU_LIBRARIES = ("libcuda.so", "libnvidia-ml", "libamdhip64", "libhsa-runtime", "libze_loader", "libOpenCL")


def _connections(kernel_ports):
    inodes = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return []
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) < 10 or cols[9] not in inodes or cols[3] not in _CONNECTED:
                        continue
                    local, remote = cols[1], cols[2]
                    if int(local.rsplit(":", 1)[1], 16) in kernel_ports:
                        continue         # the kernel's own clients: they reconnect by themselves
                    found.append(remote)
        except OSError:
            continue
    return found


def losses(kernel_ports=(), into="the snapshot", gpu_after="after a restore"):
    """Sentences naming what a fork made now (a snapshot, into="the snapshot"; forked sessions, into="the
    forked sessions", gpu_after="in them") does not carry; [] when it carries everything."""
    out = []
    names = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if names:
        out.append("%d thread%s other than the main one (%s): not in %s"
                   % (len(names), "s" if len(names) != 1 else "", ", ".join(sorted(names)[:5])
                      + (", ..." if len(names) > 5 else ""), into))
    conns = _connections(set(kernel_ports))
    if conns:
        out.append("%d open network connection%s: shared with %s, which find%s it as the kernel leaves it"
                   % (len(conns), "s" if len(conns) != 1 else "", into, "s" if into == "the snapshot" else ""))
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
        gpu = sorted({lib for lib in _GPU_LIBRARIES if lib in maps})
    except OSError:
        gpu = []
    if gpu or "torch.cuda" in sys.modules and getattr(sys.modules["torch.cuda"], "is_initialized", lambda: False)():
        out.append("GPU contexts (%s loaded): a fork does not copy them; do not use the GPU %s"
                   % (", ".join(gpu) or "torch.cuda", gpu_after))
    return out


# ---- the magics (pyc._magics' table names them) --------------------------------------------------------------


def _kernel_call(op, **args):
    import json

    import _pyc
    from pyc._magics import UsageError

    answer = json.loads(_pyc.kernel_call(op, json.dumps(args)))
    if answer.get("status") != "ok":
        raise UsageError(answer.get("evalue", "the kernel refused %s" % op))
    return answer


def magic_snapshot(line, frame):
    """%snapshot [NAME]: a snapshot of the kernel's state as this cell leaves it, taken when the cell ends
    (a name taken again is the newer state); %snapshot -d NAME drops one."""
    from pyc._magics import UsageError

    words = line.split()
    if words[:1] == ["-d"]:
        if len(words) != 2:
            raise UsageError("%snapshot -d NAME")
        _kernel_call("snapshot.drop", name=words[1])
        print("snapshot %s dropped" % words[1])
        return None
    if len(words) > 1:
        raise UsageError("%snapshot [NAME]  (one word)")
    answer = _kernel_call("snapshot.take", **({"name": words[0]} if words else {}))
    print("snapshot %s: taken when this cell ends (%%restore %s goes back to it)" % (answer["name"], answer["name"]))
    return None


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return "%.0f %s" % (n, unit) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1024.0
    return str(n)


def magic_snapshots(line, frame):
    """%snapshots: the kernel's snapshots, oldest first: name, the cells they hold, when taken, and the memory
    each really holds (the pages written since, on either side)."""
    import time

    answer = _kernel_call("snapshot.list")
    snaps = answer.get("snapshots", [])
    if not snaps:
        print("no snapshots (%snapshot NAME takes one)")
        return None
    width = max(len(s["name"]) for s in snaps)
    for i, s in enumerate(snaps):
        held = s.get("bytes")
        print("%-*s  -%-3d In[%d]  %s  %s%s" % (width, s["name"], len(snaps) - i, s["execution_count"],
                                           time.strftime("%H:%M:%S", time.localtime(s["taken"])),
                                           _size(held) if held is not None else "?",
                                           "  (automatic)" if s.get("automatic") else ""))
        for lost in s.get("not_carried") or []:
            print("%*s  not in it: %s" % (width, "", lost))
    restored = answer.get("restored")
    if restored:
        print("restored from %s (In[%d]) at %s" % (restored.get("name"), restored.get("execution_count", 0),
                                                   time.strftime("%H:%M:%S", time.localtime(restored.get("at", 0)))))
    return None


def magic_restore(line, frame):
    """%restore NAME | -N: the kernel goes back to the snapshot NAME (or the Nth newest) once this cell ends;
    the execution count goes on, and In keeps every cell."""
    from pyc._magics import UsageError

    words = line.split()
    if len(words) != 1:
        raise UsageError("%restore NAME  or  %restore -N  (%snapshots lists them)")
    answer = _kernel_call("snapshot.restore", name=words[0])
    print("restoring %s (the state after In[%d]) when this cell ends" % (answer["restoring"],
                                                                      answer["execution_count"]))
    for lost in answer.get("not_carried") or []:
        print("  not in the snapshot: %s" % lost)
    return None
