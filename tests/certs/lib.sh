# shellcheck shell=bash
# lib.sh - what the daemon tests of tests/certs share, sourced after `set -euo pipefail`
# with $ctl (nexarctl) and $nexard set:
#   nxc_init NAME        skip (77) without certtool; a temp dir (mkdtemp), cd there, and
#                        an EXIT trap that stops the daemons and removes it
#   ok, fail, has FILE ERE WHAT, hasnt FILE ERE WHAT      checks, counted in $fails
#   nxc_start N [OPTS]   nexard N on $tmp/sN (pid in $pidN, log in logN), up when it answers
#   nxc_listen N         the QUIC address nexard N listens on
#   nxc_not_after PEM    a certificate's Not After (Unix time, as certtool reads it)
#   nxc_utc T            T as nexar writes dates: "2027-01-01 00:00:00 UTC"
#   nxc_finish           the verdict: exit 1 when a check failed

nxc_init() {
    if ! command -v certtool >/dev/null; then
        echo "SKIP: certtool (gnutls-bin) not installed"
        exit 77
    fi
    tmp=$(mktemp -d "/tmp/nexar-$1.XXXXXX")
    pids=
    fails=0
    trap nxc_cleanup EXIT
    cd "$tmp"
}

nxc_cleanup() {
    local p
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}

ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() {
    if grep -Eq -- "$2" "$1"; then ok "$3"; else fail "$3: no /$2/ in $1:"; cat "$1"; fi
}
hasnt() {
    if grep -Eq -- "$2" "$1"; then fail "$3: /$2/ in $1:"; grep -E -- "$2" "$1"; else ok "$3"; fi
}

nxc_start() {
    local n=$1
    shift
    mkdir -p "r$n"
    "$nexard" -f --socket "$tmp/s$n" --runtime-dir "$tmp/r$n" "$@" >"log$n" 2>&1 &
    pids="$pids $!"
    eval "pid$n=$!"
    for _ in $(seq 50); do
        "$ctl" -s "$tmp/s$n" status >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "nexard $n did not come up:"
    cat "log$n"
    exit 1
}

nxc_listen() {
    "$ctl" -s "$tmp/s$1" --json peers | grep -o '"listen":"[^"]*"' | cut -d'"' -f4
}

nxc_not_after() {
    date -u -d "$(certtool -i --infile "$1" | sed -n 's/^.*Not After: //p')" +%s
}

nxc_utc() { date -u -d "@$1" '+%Y-%m-%d %H:%M:%S UTC'; }

nxc_finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails check(s) failed"
        exit 1
    fi
    echo "all checks passed"
}
