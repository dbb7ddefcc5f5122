#!/usr/bin/env python3
"""test_layers.py - nexard's layers hold (docs/architecture.md, "Layers").

The include paths of daemon/meson.build already make most wrong includes fail to
compile; this test states the arrows once more, file by file, and checks what the
compiler cannot:

  includes  every #include "..." of daemon/ and cuda/ names a header of an allowed
            layer (algo/ may use adapter.h alone of adapter/, cuda/ only log.h and mem.h
            of base/), and no header outside daemon/, proto/ and cuda/ but nexar.h;
  symbols   every undefined symbol of a layer's static library that another layer's
            library defines comes from an allowed layer, so a hand-written extern
            declaration cannot go around the include paths either;
  cycles    no cycle of references between object files spans two folders (a cycle
            inside one folder is that folder's business).

Usage: test_layers.py SRCROOT NM LIB.a...   (meson passes the built libraries)
Exit 0 when everything holds, 1 with every violation printed.
"""
import collections
import os
import re
import subprocess
import sys

# layer -> the layers it may use (itself always).  proto is below everything.
ALLOWED = {
    "base": {"proto"},
    "adapter": {"base", "proto"},
    "algo": {"adapter", "base", "proto"},
    "transport": {"base", "proto"},
    "quic": {"transport", "base", "proto"},
    "loop": {"transport", "base", "proto"},
    "lanes": {"quic", "transport", "base", "proto"},
    "node": {"algo", "adapter", "base", "proto"},
    "cluster": {"node", "algo", "adapter", "transport", "quic", "lanes", "base", "proto"},
    "ctl": {"cluster", "node", "algo", "adapter", "transport", "quic", "lanes", "base",
            "proto"},
    "cuda": {"adapter", "base", "proto"},
}
# (user layer, used layer) -> the only headers of it the user may include
ONLY_HEADERS = {
    ("algo", "adapter"): {"adapter.h"},
    ("cuda", "base"): {"log.h", "mem.h"},
}
# folder (relative to the source root) -> layer
FOLDERS = {
    "daemon/base": "base",
    "daemon/adapter": "adapter",
    "daemon/algo": "algo",
    "daemon/transport": "transport",
    "daemon/transport/quic": "quic",
    "daemon/transport/loop": "loop",
    "daemon/transport/lanes": "lanes",
    "daemon/node": "node",
    "daemon/cluster": "cluster",
    "daemon/ctl": "ctl",
    "cuda": "cuda",
    "proto": "proto",
}
# built library (file name) -> layer
LIBS = {
    "libnx_base.a": "base",
    "libnx_adapter.a": "adapter",
    "libnx_reduce.a": "adapter",
    "libnx_algo.a": "algo",
    "libnx_transport.a": "transport",
    "libnx_quic.a": "quic",
    "libnx_loop.a": "loop",
    "libnx_lanes.a": "lanes",
    "libnx_node.a": "node",
    "libnx_cluster.a": "cluster",
    "libnx_ctl.a": "ctl",
    "libnx_cuda.a": "cuda",
    "libnx_devhost.a": "cuda",
    "libnx_cuda_kernels.a": "cuda",
    "libnx_proto.a": "proto",
}
GENERATED = {"nexar.pb-c.h": "proto", "peer.pb-c.h": "proto", "nexar.h": "proto"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

problems = []


def headers(root):
    """header name -> layer, for every header a layer may be asked for."""
    where = dict(GENERATED)
    for folder, layer in FOLDERS.items():
        d = os.path.join(root, folder)
        for name in os.listdir(d):
            if name.endswith(".h"):
                if name in where and where[name] != layer:
                    problems.append(f"header {name} exists in two layers ({where[name]}, "
                                    f"{layer}): an include would be ambiguous")
                where[name] = layer
    return where


def check_includes(root):
    where = headers(root)
    nfiles = 0
    for folder, layer in FOLDERS.items():
        if layer == "proto":
            continue
        d = os.path.join(root, folder)
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h", ".cu")):
                continue
            nfiles += 1
            path = os.path.join(folder, name)
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                used = where.get(os.path.basename(inc))
                if used is None:
                    problems.append(f"{path}: includes \"{inc}\", a header of no layer")
                    continue
                if used == layer:
                    continue
                if used not in ALLOWED[layer]:
                    problems.append(f"{path}: includes \"{inc}\" of {used}/, which {layer}/ "
                                    f"may not use")
                    continue
                only = ONLY_HEADERS.get((layer, used))
                if only and os.path.basename(inc) not in only:
                    problems.append(f"{path}: includes \"{inc}\" of {used}/; {layer}/ may "
                                    f"use only {', '.join(sorted(only))} there")
    return nfiles


def member_name(m):
    """'.../libnx_node.a.p/matcher.c.o' (meson's thin archives) -> 'matcher.c'"""
    m = os.path.basename(m)
    return m[:-2] if m.endswith(".o") else m


def nm_archive(nm, lib):
    """[(member, kind, symbol)]: kind 'D' for a definition, 'U' for a use."""
    out = subprocess.run([nm, "-A", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    res = []
    for line in out.splitlines():
        m = re.match(r"^[^:]+:([^:]+):\s*\S*\s+([A-Za-z])\s+(\S+)$", line)
        if m and m.group(2) in "TDBRCV":
            res.append((member_name(m.group(1)), "D", m.group(3)))
    out = subprocess.run([nm, "-A", "--undefined-only", lib], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"^[^:]+:([^:]+):\s+U\s+(\S+)$", line)
        if m:
            res.append((member_name(m.group(1)), "U", m.group(2)))
    return res


def check_symbols(nm, libs):
    defined = {}  # symbol -> (layer, lib, member)
    uses = []  # (layer, lib, member, symbol)
    for lib in libs:
        layer = LIBS.get(os.path.basename(lib))
        if layer is None:
            problems.append(f"{lib}: a library of no layer (add it to LIBS)")
            continue
        for member, kind, sym in nm_archive(nm, lib):
            if kind == "D":
                defined[sym] = (layer, os.path.basename(lib), member)
            else:
                uses.append((layer, os.path.basename(lib), member, sym))
    edges = collections.defaultdict(set)
    for layer, lib, member, sym in uses:
        d = defined.get(sym)
        if d is None:
            continue  # a system library's
        dlayer, dlib, dmember = d
        if dlayer != layer and dlayer not in ALLOWED[layer]:
            problems.append(f"{lib}({member}) uses {sym} of {dlib}({dmember}): {layer}/ may "
                            f"not use {dlayer}/")
        edges[(layer, member)].add((dlayer, dmember))
    return edges


def check_cycles(edges):
    """Tarjan's strongly connected components over object files."""
    index, low, onstack, stack, sccs = {}, {}, set(), [], []
    counter = [0]
    nodes = set(edges) | {v for vs in edges.values() for v in vs}

    def visit(v):
        # Iterative, so that a long chain never hits Python's recursion limit.
        work = [(v, iter(sorted(edges.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        onstack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    onstack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in onstack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        onstack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    sccs.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    inside = []
    for comp in sccs:
        if len(comp) < 2:
            continue
        layers = {layer for layer, _ in comp}
        names = ", ".join(f"{layer}/{m}" for layer, m in sorted(comp))
        if len(layers) > 1:
            problems.append(f"a cycle of references spans {', '.join(sorted(layers))}: {names}")
        else:
            inside.append(names)
    return inside


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    root, nm, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
    nfiles = check_includes(root)
    edges = check_symbols(nm, libs)
    inside = check_cycles(edges)
    print(f"{nfiles} files' includes, {len(libs)} libraries' symbols, "
          f"{sum(len(v) for v in edges.values())} references between object files")
    for names in inside:
        print(f"cycle inside one folder (allowed): {names}")
    for p in problems:
        print(f"FAIL {p}")
    if problems:
        return 1
    print("ok: every include and every reference follows the layers; no cycle spans two "
          "folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
