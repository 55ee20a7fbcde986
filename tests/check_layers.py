"""The layers of the build, checked from the objects themselves (`make check-layers`, and a test of `make check`).

Reads every library of the build and the objects of its two programs (pyc-kernel's kernel/, pyc's cli/)
with nm, ties each object's undefined symbols to the object that defines them, and fails on:

1. an edge between libraries against their order: libpyccrypto and libpycsha256 at the bottom, then
   libpyccommon, then libpycpidcache, libpycpy, libpycclient, libpycgateway, libpycserver, libpycstore and
   libpyclimits (which use only those below them, never each other), then libpyckernel, then the programs
   (which no library uses);
2. any circle between objects (a strongly connected component of more than one object): within a library or
   a program, the files form a tree of layers, so that each can be read, tested and changed knowing only
   what is below it.

`getpid` is not an edge: libpycpidcache defines it for the kernel (libzmq's fork checks), and every object that
calls getpid would otherwise seem to depend on it.

Usage: check_layers.py BUILDDIR
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
    "libpycserver.a": 2,
    "libpycstore.a": 2,
    "libpyclimits.a": 2,
    "libpyckernel.a": 3,
}
#: The programs' objects (not libraries): each program's folder in the build, its rank above every library.
PROGRAMS = {"kernel": 4, "cli": 4}
NOT_EDGES = {"getpid"}


def nm(args, path):
    out = subprocess.run(["nm", "-A"] + args + [path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            # "lib.a:object.o:address T symbol" or "dir/object.o:address T symbol" (defined), the same with
            # " U symbol" (undefined)
            names = parts[0].split(":")
            obj = names[1] if path.endswith(".a") else os.path.basename(path)
            yield obj, parts[-1]


def object_name(lib, obj):
    """libpyckernel_a-execute.o of libpyckernel.a -> kernel/execute.o; pyc_kernel-app.o of the program folder
    kernel -> pyc-kernel/app.o"""
    if lib in PROGRAMS:
        program, _, short = obj.partition("-")
        return "%s/%s" % (program.replace("_", "-"), short)
    prefix = lib[:-2].replace(".", "_") + "_a-"
    short = obj[len(prefix):] if obj.startswith(prefix) else obj
    return "%s/%s" % (lib[len("libpyc"):-2], short)


def inputs(builddir):
    """(unit, paths, rank): each library, and each program folder's objects."""
    for lib, rank in RANKS.items():
        path = os.path.join(builddir, lib)
        if os.path.exists(path):
            yield lib, [path], rank
    for folder, rank in PROGRAMS.items():
        d = os.path.join(builddir, folder)
        objs = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".o")) if os.path.isdir(d) else []
        if objs:
            yield folder, objs, rank


def graph_of(builddir):
    defined, uses, ranks = {}, collections.defaultdict(set), {}
    for unit, paths, rank in inputs(builddir):
        ranks[unit] = rank
        for path in paths:
            for obj, sym in nm(["--defined-only", "-g"], path):
                defined.setdefault(sym, (unit, object_name(unit, obj)))
            for obj, sym in nm(["-u"], path):
                uses[(unit, object_name(unit, obj))].add(sym)
    edges = collections.defaultdict(set)
    for node, syms in uses.items():
        for sym in syms - NOT_EDGES:
            target = defined.get(sym)
            if target is not None and target != node:
                edges[node].add(target)
    return edges, ranks


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


def main(builddir):
    edges, ranks = graph_of(builddir)
    if not edges:
        print("check-layers: no libraries in %s (build first)" % builddir)
        return 1
    problems = []
    for (unit, obj), targets in sorted(edges.items()):
        for tunit, tobj in sorted(targets):
            if tunit != unit and ranks[tunit] >= ranks[unit]:
                problems.append("%s uses %s: %s is not below %s" % (obj, tobj, tunit, unit))
    for comp in circles(edges):
        problems.append("a circle between objects: " + " ".join(sorted(obj for _, obj in comp)))
    for p in problems:
        print("check-layers: " + p)
    n_edges = sum(len(t) for t in edges.values())
    nodes = set(edges) | {t for ts in edges.values() for t in ts}
    print("check-layers: %d objects, %d edges, %s" % (len(nodes), n_edges,
                                                       "%d problems" % len(problems) if problems else "no circle"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
