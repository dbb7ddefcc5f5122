#!/usr/bin/env bash
# test_netns_names.sh - a host name that a rank or nexarctl gives never holds up nexard.
#
# nexard served every job of its node from one loop, and looked up the host name in a
# rank's NEXAR_COORD, in torchrun's MASTER_ADDR and in `nexarctl peer-test HOST:PORT` on
# that loop: while a name server did not answer, no op of any job on the node moved, and
# any local user could cause it.  Now the library and nexarctl look names up in their own
# process, and nexard takes numeric addresses only once it runs.
#
# Namespace A's resolver (/etc/netns/NS/resolv.conf, which `ip netns exec` mounts) points
# at namespace B, whose nftables drop every DNS query, so a lookup there waits
# NX_NAMES_STALL_S seconds (default 3) for each of its queries and fails.  While a rank with
# NEXAR_COORD=nx-no-such-host.invalid:PORT, a torchrun-style rank with that MASTER_ADDR
# and `nexarctl peer-test` to that name run in namespace A:
#  - a job of 2 ranks on A runs 8 B all_reduces and must finish in less than the stall;
#  - `nexarctl status` on A is asked every 0.2 s and must answer each time within 2 s;
#  - the rank fails nexar_init with NEXAR_ERR_INVALID naming NEXAR_COORD and the host;
#  - the torchrun rank runs as a job of its node (nexard's rule for a MASTER_ADDR it
#    cannot use);
#  - nexarctl peer-test fails naming the host, and nexard's log tells of no lookup.
# Then a job across A and B whose rank at A names the coordinator by a name that A's
# /etc/hosts knows (nxnames-a, added there for the test) forms and runs.
#   NEXARD=... NEXARCTL=... NEXAR_BENCH=... tests/netns/test_netns_names.sh
# Exits 77 (skipped) where namespaces cannot be made or the resolver does not stall.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${NEXARD:?NEXARD=path/to/nexard}" "${NEXARCTL:?NEXARCTL=path/to/nexarctl}"
: "${NEXAR_BENCH:?NEXAR_BENCH=path/to/nexar-bench}"
stall=${NX_NAMES_STALL_S:-3}
bad=nx-no-such-host.invalid

# shellcheck source=lib.sh
. "$here/lib.sh"
for tool in ip nft getent awk; do
    if ! command -v $tool >/dev/null; then
        echo "SKIP: $tool not installed (scripts/install-deps.sh installs iproute2, nftables)"
        exit 77
    fi
done
nx_netns_init "$NEXARD" "$NEXARCTL"
etc_ns=
names_cleanup() {
    [ -n "$etc_ns" ] && rm -rf "$etc_ns"
    nx_netns_cleanup
}
trap names_cleanup EXIT
if ! nx_netns_create; then
    echo "SKIP: cannot create network namespaces here: $(head -n 1 "$NX_NETNS_TMP/netns.err")"
    exit 77
fi
# Before the daemons start: `ip netns exec` mounts these over /etc/resolv.conf and
# /etc/hosts for everything it runs in namespace A.
etc_ns=/etc/netns/$NX_NS_A
if ! mkdir -p "$etc_ns" 2>/dev/null ||
    ! printf 'nameserver %s\noptions timeout:%s attempts:1\n' "$NX_NETNS_V4B" "$stall" \
        2>/dev/null >"$etc_ns/resolv.conf" ||
    ! { cat /etc/hosts; printf '%s nxnames-a\n' "$NX_NETNS_V4A"; } 2>/dev/null >"$etc_ns/hosts"
then
    echo "SKIP: cannot write $etc_ns (ip netns exec's per-namespace resolv.conf and hosts)"
    exit 77
fi
ip netns exec "$NX_NS_B" nft -f - <<EOF
table inet nxdns {
    chain input {
        type filter hook input priority 0; policy accept;
        udp dport 53 drop
        tcp dport 53 drop
    }
}
EOF
nx_netns_start_daemons

# secs_since T0: seconds since date +%s%N said T0, with two decimals.
secs_since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
# less A B: whether A < B (decimals).
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

t0=$(date +%s%N)
ip netns exec "$NX_NS_A" getent hosts "$bad" >/dev/null 2>&1 || true
took=$(secs_since "$t0")
if less "$took" "$((stall - 1))"; then
    echo "SKIP: a lookup in namespace A failed in ${took}s, not after ${stall}s: no stalled resolver here"
    exit 77
fi
echo "a lookup of $bad in namespace A takes ${took}s"

fails=0
sockA=$NX_NETNS_TMP/a/nexard.sock
inA() { ip netns exec "$NX_NS_A" "$@"; }

# `nexarctl status` on A every 0.2 s until the file stop exists; the slowest answer in ms.
poll_status() {
    local worst=0 t ms
    while [ ! -e "$NX_NETNS_TMP/stop" ]; do
        t=$(date +%s%N)
        "$NEXARCTL" --socket "$sockA" status >/dev/null 2>&1 || echo "status failed" >&2
        ms=$((($(date +%s%N) - t) / 1000000))
        [ "$ms" -gt "$worst" ] && worst=$ms
        sleep 0.2
    done
    echo "$worst" >"$NX_NETNS_TMP/worst"
}
poll_status &
poller=$!

# The steady job: 2 ranks on A, local.
t0=$(date +%s%N)
inA env NEXAR_JOB="names-steady-$$" NEXAR_RANK=0 NEXAR_WORLD_SIZE=2 NEXAR_SOCKET="$sockA" \
    "$NEXAR_BENCH" -t all_reduce -b 8 -e 8 -n 20000 -w 100 -c 1 >"$NX_NETNS_TMP/steady.0" 2>&1 &
s0=$!
inA env NEXAR_JOB="names-steady-$$" NEXAR_RANK=1 NEXAR_WORLD_SIZE=2 NEXAR_SOCKET="$sockA" \
    "$NEXAR_BENCH" -t all_reduce -b 8 -e 8 -n 20000 -w 100 -c 1 >"$NX_NETNS_TMP/steady.1" 2>&1 &
s1=$!

# The names, all at once, from namespace A.
inA env NEXAR_JOB="names-bad-$$" NEXAR_RANK=0 NEXAR_WORLD_SIZE=2 NEXAR_SOCKET="$sockA" \
    NEXAR_COORD="$bad:$NX_NETNS_PORT" NEXAR_TIMEOUT=30 \
    "$NEXAR_BENCH" -b 8 -e 8 -n 1 >"$NX_NETNS_TMP/bad.out" 2>&1 &
b0=$!
inA env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR="$bad" MASTER_PORT=29500 \
    TORCHELASTIC_RUN_ID="names-$$" NEXAR_SOCKET="$sockA" NEXAR_TIMEOUT=30 \
    "$NEXAR_BENCH" -b 8 -e 8 -n 1 >"$NX_NETNS_TMP/torch.out" 2>&1 &
b1=$!
inA "$NEXARCTL" --socket "$sockA" peer-test "$bad:$NX_NETNS_PORT" --bytes 1M \
    >"$NX_NETNS_TMP/pt.out" 2>&1 &
b2=$!

rc=0; wait $s0 || rc=$?; wait $s1 || rc=$?
steady=$(secs_since "$t0")
if [ "$rc" -ne 0 ]; then
    echo "FAIL: the steady job failed (exit $rc):"; tail -n 5 "$NX_NETNS_TMP/steady.0"
    fails=$((fails + 1))
elif ! less "$steady" "$((stall - 1))"; then
    echo "FAIL: 20,000 all_reduces of the steady job took ${steady}s, as long as a lookup"
    fails=$((fails + 1))
else
    echo "ok: the steady job's 20,000 all_reduces took ${steady}s"
fi

rc=0; wait $b0 || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "NEXAR_COORD=$bad:$NX_NETNS_PORT" "$NX_NETNS_TMP/bad.out" ||
    ! grep -q "cannot resolve '$bad'" "$NX_NETNS_TMP/bad.out"; then
    echo "FAIL: the rank with NEXAR_COORD=$bad:$NX_NETNS_PORT (exit $rc):"
    cat "$NX_NETNS_TMP/bad.out"; fails=$((fails + 1))
else
    echo "ok: the rank with NEXAR_COORD=$bad:...: $(grep -m1 'cannot resolve' "$NX_NETNS_TMP/bad.out")"
fi
rc=0; wait $b1 || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: the torchrun rank with MASTER_ADDR=$bad (exit $rc):"
    cat "$NX_NETNS_TMP/torch.out"; fails=$((fails + 1))
else
    echo "ok: the torchrun rank with MASTER_ADDR=$bad ran as a job of its node"
fi
rc=0; wait $b2 || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "cannot resolve '$bad'" "$NX_NETNS_TMP/pt.out"; then
    echo "FAIL: nexarctl peer-test $bad:... (exit $rc):"; cat "$NX_NETNS_TMP/pt.out"
    fails=$((fails + 1))
else
    echo "ok: nexarctl peer-test: $(head -n 1 "$NX_NETNS_TMP/pt.out")"
fi

touch "$NX_NETNS_TMP/stop"
wait $poller
worst=$(cat "$NX_NETNS_TMP/worst")
if [ "$worst" -ge 2000 ]; then
    echo "FAIL: nexarctl status on A took ${worst} ms once while the names were looked up"
    fails=$((fails + 1))
else
    echo "ok: nexarctl status on A answered within ${worst} ms every time"
fi
if grep -q "resolve" "$NX_NETNS_TMP/a/nexard.log"; then
    echo "FAIL: nexard looked a name up:"; grep "resolve" "$NX_NETNS_TMP/a/nexard.log"
    fails=$((fails + 1))
fi

# A name that resolves (A's /etc/hosts) still names the coordinator of a job across.
pids=()
for r in 0 1; do
    if [ "$r" -eq 0 ]; then ns=$NX_NS_A node=a; else ns=$NX_NS_B node=b; fi
    ip netns exec "$ns" env NEXAR_JOB="names-across-$$" NEXAR_RANK=$r NEXAR_WORLD_SIZE=2 \
        NEXAR_SOCKET="$NX_NETNS_TMP/$node/nexard.sock" NEXAR_TIMEOUT=30 \
        NEXAR_COORD="$([ $r -eq 0 ] && echo nxnames-a || echo "$NX_NETNS_V4A"):$NX_NETNS_PORT" \
        "$NEXAR_BENCH" -t all_reduce,broadcast -b 8 -e 1M -f 32 -n 5 -c 1 \
        >"$NX_NETNS_TMP/across.$r" 2>&1 &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
if [ "$rc" -ne 0 ]; then
    echo "FAIL: the job across with NEXAR_COORD=nxnames-a:$NX_NETNS_PORT (exit $rc):"
    tail -n 5 "$NX_NETNS_TMP/across.0" "$NX_NETNS_TMP/across.1"; fails=$((fails + 1))
else
    echo "ok: a job across with NEXAR_COORD=nxnames-a:$NX_NETNS_PORT (a name in /etc/hosts) ran"
fi

if [ "$fails" -ne 0 ]; then
    export NX_NETNS_KEEP_LOGS=1
    exit 1
fi
echo "PASS"
