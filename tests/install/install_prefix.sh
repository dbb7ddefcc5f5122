#!/usr/bin/env bash
# install_prefix.sh - `meson install` into a temporary prefix, and the installed nexar
# used from there as a user would, with LD_LIBRARY_PATH unset:
#
#   prefix   every file `meson introspect --installed` lists lies under the prefix
#            (the systemd unit, sysusers and tmpfiles entries included), and exists;
#            the unit starts PREFIX/sbin/nexard with PREFIX/etc/nexar/nexard.conf
#   rpath    nexar-bench's RUNPATH is the prefix's libdir, and nothing of the build tree
#   run      PREFIX/bin/nexar-run -n 2 PREFIX/bin/nexar-bench exits 0, with the private
#            daemon PREFIX/sbin/nexard
#   man      man -M PREFIX/share/man finds every page (when scdoc is installed)
#   pkg      a rank program compiled with `pkg-config --cflags --libs nexarshim` and
#            -Wl,-rpath,$(pkg-config --variable=libdir nexarshim) runs under nexar-run
#   python   the installed examples (numpy all_reduce; DDP when nexar.torch was built)
#            run with the installed package, PYTHONPATH its dist-packages, nothing else
#
# The build dir of `meson test` has its prefix fixed at setup, so this test configures
# the source tree afresh (--prefix=TMP/prefix), builds only what is installed (1-2
# minutes on 2 cores) and installs it: no DESTDIR, which would leave the rpath pointing
# at a prefix that does not hold the files.  Exit 77 when NEXAR_SKIP_INSTALL_TEST is set.
#   NEXAR_SOURCE_ROOT=/path/to/nexar tests/install/install_prefix.sh
set -euo pipefail

if [ -n "${NEXAR_SKIP_INSTALL_TEST:-}" ]; then
    echo "SKIP: NEXAR_SKIP_INSTALL_TEST is set"
    exit 77
fi
src=${NEXAR_SOURCE_ROOT:?NEXAR_SOURCE_ROOT=the nexar source tree}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for p in meson ninja pkg-config readelf python3; do
    command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done
unset LD_LIBRARY_PATH NEXARD NEXAR_SOCKET NEXAR_JOB NEXAR_RANK NEXAR_WORLD_SIZE \
    NEXAR_SHIM_LIB NEXAR_C10D_LIB PYTHONPATH

tmp=$(mktemp -d /tmp/nexar-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
build=$tmp/build

fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run LOG CMD...: runs CMD with its output in $tmp/LOG; on failure prints the log's tail.
run() {
    local log=$tmp/$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "'$*' exited $rc:"
        tail -n 40 "$log"
    fi
    return "$rc"
}

echo "# setup and build into $prefix"
t0=$(date +%s)
# --buildtype=plain: this checks where things go and that they run, not how fast; without
# -O2 -g the torch extension, most of this build, compiles in half the time.
run setup.log meson setup "$build" "$src" --prefix="$prefix" --buildtype=plain -Dcuda=disabled \
    -Dwerror=false -Dfuzz=false || exit 1
# Only what gets installed: the outputs of the build that are not there yet (files that
# configure_file wrote at setup have no rule to build them).
mapfile -t targets < <(meson introspect --installed "$build" | python3 -c '
import json, os, sys
build = sys.argv[1]
for path in json.load(sys.stdin):
    if path.startswith(build + "/") and not os.path.exists(path):
        print(os.path.relpath(path, build))' "$build")
run build.log ninja -C "$build" "${targets[@]}" || exit 1
run install.log meson install -C "$build" --no-rebuild || exit 1
ok "built ${#targets[@]} target(s) and installed in $(($(date +%s) - t0)) s"

# ---- prefix: every installed path under the prefix, and there
meson introspect --installed "$build" >"$tmp/installed.json"
outside=$(python3 -c '
import json, os, sys
prefix = sys.argv[2]
for dest in json.load(open(sys.argv[1])).values():
    if not dest.startswith(prefix + "/"):
        print("outside the prefix:", dest)
    elif not os.path.lexists(dest):
        print("not installed:", dest)' "$tmp/installed.json" "$prefix")
if [ -z "$outside" ]; then
    ok "all $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' \
        "$tmp/installed.json") installed paths lie under $prefix"
else
    fail "$outside"
fi
unit=$prefix/lib/systemd/system/nexard.service
for f in "$unit" "$prefix/lib/sysusers.d/nexar.conf" "$prefix/lib/tmpfiles.d/nexar.conf"; do
    if [ -f "$f" ]; then ok "installed ${f#"$prefix"/}"; else fail "no $f"; fi
done
want="ExecStart=$prefix/sbin/nexard --foreground -c $prefix/etc/nexar/nexard.conf"
if grep -qxF "$want" "$unit" 2>/dev/null; then
    ok "the unit says $want"
else
    fail "the unit lacks '$want': $(grep ExecStart "$unit" 2>/dev/null)"
fi

# ---- rpath: the installed nexar-bench finds the installed library
pc=$(find "$prefix" -name nexarshim.pc -print -quit)
libdir=$(dirname "$(dirname "$pc")")
runpath=$(readelf -d "$prefix/bin/nexar-bench" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p')
if [ "$runpath" = "$libdir" ]; then
    ok "nexar-bench RUNPATH $runpath"
else
    fail "nexar-bench RUNPATH is '$runpath', expected '$libdir'"
fi

# ---- run: the installed launcher, benchmark and daemon, no LD_LIBRARY_PATH
export TMPDIR=$tmp
if NEXAR_SOCKET=$tmp/none.sock run bench.log "$prefix/bin/nexar-run" -v -n 2 --timeout 60 \
        "$prefix/bin/nexar-bench" -b 8 -e 1K -n 2 -w 1 -c 1; then
    ok "nexar-run -n 2 nexar-bench -b 8 -e 1K: $(grep -c '^ *[0-9]' "$tmp/bench.log") rows"
else
    fail "installed nexar-run -n 2 nexar-bench failed"
fi
# nexar-run -v: "started private nexard PATH (pid N) at SOCKET"
daemon=$(sed -n 's/.*started private nexard \(.*\) (pid .*/\1/p' "$tmp/bench.log")
if [ -n "$daemon" ] && [ "$(realpath "$daemon")" = "$(realpath "$prefix/sbin/nexard")" ]; then
    ok "the private daemon was $daemon"
else
    fail "the private daemon was not $prefix/sbin/nexard: $(grep nexard "$tmp/bench.log")"
fi

# ---- man: the pages, where `man -M` looks
if command -v scdoc >/dev/null && command -v man >/dev/null; then
    for page in 8:nexard 5:nexard.conf 8:nexarctl 1:nexar-run 1:nexar-bench 3:nexar; do
        sec=${page%%:*} name=${page#*:}
        if found=$(man -M "$prefix/share/man" -w "$sec" "$name" 2>&1) &&
                [[ "$found" == "$prefix/"* ]]; then
            ok "man -M PREFIX/share/man $sec $name: ${found#"$prefix"/}"
        else
            fail "man -M $prefix/share/man -w $sec $name: $found"
        fi
    done
else
    echo "note: no scdoc or man: the man pages were not built, not checked"
fi

# ---- pkg: a program of the user's own, built and linked through the .pc file
export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pc_libdir=$(pkg-config --variable=libdir nexarshim)
if [ "$pc_libdir" = "$libdir" ]; then
    ok "pkg-config --variable=libdir nexarshim: $pc_libdir"
else
    fail "pkg-config --variable=libdir nexarshim is '$pc_libdir', expected '$libdir'"
fi
# shellcheck disable=SC2046,SC2086 # $CC and the flags are words
if run cc.log ${CC:-cc} -Wall -Wextra -Werror -o "$tmp/install_check" "$here/install_check.c" \
        $(pkg-config --cflags --libs nexarshim) -Wl,-rpath,"$pc_libdir"; then
    ok "compiled install_check.c with $(pkg-config --cflags --libs nexarshim) -Wl,-rpath,LIBDIR"
    if NEXAR_SOCKET=$tmp/none.sock run check.log "$prefix/bin/nexar-run" -n 3 --timeout 60 \
            "$tmp/install_check" && [ "$(grep -c 'sum 6$' "$tmp/check.log")" = 3 ]; then
        ok "nexar-run -n 3 install_check: every rank's sum is 6"
    else
        fail "install_check under nexar-run: $(cat "$tmp/check.log")"
    fi
else
    fail "install_check.c does not compile against the installed nexar"
fi

# ---- python: the installed package and examples, the shim found through _paths.py
pkgdir=$(find "$prefix" -path '*dist-packages/nexar' -type d -print -quit)
examples=$prefix/share/doc/nexar/examples
py=/usr/bin/python3
if [ -z "$pkgdir" ]; then
    echo "note: no Python package installed (no /usr/bin/python3 at setup)"
elif ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "note: no numpy: the Python examples were not run"
else
    export PYTHONPATH=${pkgdir%/nexar}
    if NEXAR_SOCKET=$tmp/none.sock run py.log "$prefix/bin/nexar-run" -n 2 --timeout 60 \
            "$py" "$examples/allreduce.py" &&
            [ "$(grep -o 'all_reduce(sum) = \[3\. 3\. 3\. 3\.\]' "$tmp/py.log" | wc -l)" = 2 ]; then
        ok "nexar-run -n 2 examples/allreduce.py with the installed package: both ranks 3"
    else
        fail "installed examples/allreduce.py: $(cat "$tmp/py.log")"
    fi
    if compgen -G "$pkgdir/_c10d*.so" >/dev/null; then
        if NEXAR_SOCKET=$tmp/none.sock run ddp.log "$prefix/bin/nexar-run" -n 2 --timeout 60 \
                "$py" "$examples/ddp.py" && grep -q '^step 50:' "$tmp/ddp.log"; then
            ok "nexar-run -n 2 examples/ddp.py with the installed nexar.torch: $(grep '^step 50:' "$tmp/ddp.log")"
        else
            fail "installed examples/ddp.py: $(tail -5 "$tmp/ddp.log")"
        fi
    else
        echo "note: nexar.torch was not built (no libtorch-dev): DDP not run"
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "every check passed"
