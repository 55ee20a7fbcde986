"""The layers of the build, checked from the objects themselves (`make check-layers`, and a test of `make check`).

Reads every library of the build with nm, ties each object's undefined symbols to the object of the same
library set that defines them, and fails on:

1. an edge between libraries against their order: libpyccrypto and libpycsha256 at the bottom, then
   libpyccommon, then libpycpidcache, libpycpy, libpycclient and libpycgateway (which use only those below
   them, never each other), then libpyckernel;
2. a circle between objects (a strongly connected component of more than one object) that is not the one
   circle still known: tests/layers-known-circles.txt names its objects, and it may only shrink -- a new
   circle, or a known one that takes in another object, fails; a known object that left its circle must be
   taken off the list (so that the list stays true and cannot grow back silently).

`getpid` is not an edge: libpycpidcache defines it for the kernel (libzmq's fork checks), and every object that
calls getpid would otherwise seem to depend on it.

Usage: check_layers.py BUILDDIR SRCDIR
"""

import collections
import os
import subprocess
import sys

#: Each library's rank: an object may use only objects of its own library or of a library ranked lower.
RANKS = {
    "libpyccrypto.a": 0,
    "libpycsha256.a": 0,
    "libpyccommon.a": 1,
    "libpycpidcache.a": 2,
    "libpycpy.a": 2,
    "libpycclient.a": 2,
    "libpycgateway.a": 2,
    "libpyckernel.a": 3,
}
NOT_EDGES = {"getpid"}


def nm(args, lib):
    out = subprocess.run(["nm", "-A"] + args + [lib], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            # "lib.a:object.o:address T symbol" (defined) or "lib.a:object.o: U symbol" (undefined)
            yield parts[0].split(":")[1], parts[-1]


def object_name(lib, obj):
    """libpyckernel_a-execute.o of libpyckernel.a -> kernel/execute.o"""
    prefix = lib[:-2].replace(".", "_") + "_a-"
    short = obj[len(prefix):] if obj.startswith(prefix) else obj
    return "%s/%s" % (lib[len("libpyc"):-2], short)


def graph_of(builddir):
    defined, uses = {}, collections.defaultdict(set)
    for lib in RANKS:
        path = os.path.join(builddir, lib)
        if not os.path.exists(path):
            continue
        for obj, sym in nm(["--defined-only", "-g"], path):
            defined.setdefault(sym, (lib, object_name(lib, obj)))
        for obj, sym in nm(["-u"], path):
            uses[(lib, object_name(lib, obj))].add(sym)
    edges = collections.defaultdict(set)
    for node, syms in uses.items():
        for sym in syms - NOT_EDGES:
            target = defined.get(sym)
            if target is not None and target != node:
                edges[node].add(target)
    return edges


def circles(edges):
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    nodes = set(edges) | {t for ts in edges.values() for t in ts}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            step = next(it, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = counter[0]
                    counter[0] += 1
                    stack.append(step)
                    on.add(step)
                    work.append((step, iter(sorted(edges.get(step, ())))))
                elif step in on:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    n = stack.pop()
                    on.discard(n)
                    comp.add(n)
                    if n == node:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def main(builddir, srcdir):
    edges = graph_of(builddir)
    if not edges:
        print("check-layers: no libraries in %s (build first)" % builddir)
        return 1
    problems = []
    for (lib, obj), targets in sorted(edges.items()):
        for tlib, tobj in sorted(targets):
            if tlib != lib and RANKS[tlib] >= RANKS[lib]:
                problems.append("%s uses %s: %s is not below %s" % (obj, tobj, tlib, lib))
    known_path = os.path.join(srcdir, "tests", "layers-known-circles.txt")
    known = set()
    with open(known_path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                known.add(line)
    in_circles = set()
    for comp in circles(edges):
        names = {obj for _, obj in comp}
        in_circles |= names
        if not names <= known:
            problems.append("a circle between objects: %s (new in it: %s)"
                            % (" ".join(sorted(names)), " ".join(sorted(names - known))))
    for name in sorted(known - in_circles):
        problems.append("%s is in no circle any more: take it off %s" % (name, known_path))
    for p in problems:
        print("check-layers: " + p)
    n_edges = sum(len(t) for t in edges.values())
    print("check-layers: %d objects, %d edges, %d objects in the known circle%s" %
          (len(edges), n_edges, len(in_circles), "" if not problems else "; %d problems" % len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
