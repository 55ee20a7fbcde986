"""What a snapshot of the kernel cannot hold (README, "Time travel").

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


def losses(kernel_ports=()):
    """Sentences naming what a snapshot taken now does not hold; [] when it holds everything."""
    out = []
    names = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if names:
        out.append("%d thread%s other than the main one (%s): not in the snapshot"
                   % (len(names), "s" if len(names) != 1 else "", ", ".join(sorted(names)[:5])
                      + (", ..." if len(names) > 5 else "")))
    conns = _connections(set(kernel_ports))
    if conns:
        out.append("%d open network connection%s: shared with the snapshot, which finds it as the kernel "
                   "leaves it" % (len(conns), "s" if len(conns) != 1 else ""))
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
        gpu = sorted({lib for lib in _GPU_LIBRARIES if lib in maps})
    except OSError:
        gpu = []
    if gpu or "torch.cuda" in sys.modules and getattr(sys.modules["torch.cuda"], "is_initialized", lambda: False)():
        out.append("GPU contexts (%s loaded): a fork does not copy them; do not use the GPU after a restore"
                   % (", ".join(gpu) or "torch.cuda"))
    return out
