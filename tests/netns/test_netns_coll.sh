#!/usr/bin/env bash
# test_netns_coll.sh - collectives between two network namespaces: a nexard in each,
# joined by a veth pair, and 2 ranks of nexar-bench at each (4 ranks, one job, the
# coordinator in namespace A).  all_reduce, broadcast and all_gather from 8 B to
# NX_NETNS_COLL_MAX (default 8M), checked element by element against nexar-bench's
# reference (-c 1: integer-valued inputs, exact in any order), lossless and then with
# 1% random loss each way (nftables).  Any wrong element, failed op or timeout fails the
# test.  Rank 0's bench tables (time, algbw, busbw, #wrong) are printed, and then the
# algorithm that carried each collective between the namespaces, by size: the "algo" field
# of nexar-bench's -m FILE JSON lines (the table has no such column).
#   NEXARD=... NEXARCTL=... NEXAR_BENCH=... tests/netns/test_netns_coll.sh
# Exits 77 (skipped) where namespaces cannot be made (no CAP_NET_ADMIN / CAP_SYS_ADMIN).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${NEXARD:?NEXARD=path/to/nexard}" "${NEXARCTL:?NEXARCTL=path/to/nexarctl}"
: "${NEXAR_BENCH:?NEXAR_BENCH=path/to/nexar-bench}"
max=${NX_NETNS_COLL_MAX:-8M}


# shellcheck source=lib.sh
. "$here/lib.sh"
nx_netns_setup "$NEXARD" "$NEXARCTL"

fails=0
# algos FILE: from nexar-bench's -m FILE, per collective, the "algo" of each size's first
# measurement (out-of-place where the call has that form, else in-place) by ranges of sizes
# ("all_reduce: rd 8..16384 B, ring 32768..8388608 B").
algos() {
    local re='^{"collective":"\([^"]*\)".*"size":\([0-9]*\),.*"algo":"\([^"]*\)"'
    sed -n "s/$re.*/\1 \2 \3/p" "$1" |
        awk 'function out() { if (a != "") s = s (s == "" ? "" : ", ") a " " (lo == hi ? lo : lo ".." hi) " B" }
             function flush() { out(); if (c != "") print "  " c ": " s }
             $1 == c && $2 == hi { next }
             $1 != c { flush(); c = $1; s = ""; a = "" }
             $3 != a { out(); a = $3; lo = $2 }
             { hi = $2 }
             END { flush() }'
}

# job NAME LOSS: 4 ranks, 0 and 1 in namespace A, 2 and 3 in B.
job() {
    local name=$1 loss=$2 r ns node pids=() rc dropped=0
    nx_netns_loss "$loss"
    for r in 0 1 2 3; do
        if [ "$r" -lt 2 ]; then ns=$NX_NS_A node=a; else ns=$NX_NS_B node=b; fi
        ip netns exec "$ns" env NEXAR_JOB="netns-$name-$$" NEXAR_RANK=$r NEXAR_WORLD_SIZE=4 \
            NEXAR_LOCAL_RANK=$((r % 2)) NEXAR_SOCKET="$NX_NETNS_TMP/$node/nexard.sock" \
            NEXAR_COORD="$NX_NETNS_V4A:$NX_NETNS_PORT" NEXAR_TIMEOUT=60 \
            "$NEXAR_BENCH" -b 8 -e "$max" -f 8 -c 1 -w 2 -n 5 -m "$NX_NETNS_TMP/$name.json" \
            -t all_reduce,broadcast,all_gather >"$NX_NETNS_TMP/$name.$r.out" 2>&1 &
        pids+=($!)
    done
    rc=0
    for r in 0 1 2 3; do
        wait "${pids[$r]}" || { echo "FAIL: $name: rank $r exited $?"; rc=1; }
    done
    [ "$loss" -gt 0 ] && dropped=$(nx_netns_dropped)
    echo "== $name ($loss% loss each way${dropped:+, $dropped packets dropped}): rank 0's tables"
    grep -v '^#  *$' "$NX_NETNS_TMP/$name.0.out" || true
    if [ -s "$NX_NETNS_TMP/$name.json" ]; then
        echo "== $name: algorithms across the namespaces (nexar-bench -m)"
        algos "$NX_NETNS_TMP/$name.json"
    fi
    if [ "$rc" -ne 0 ]; then
        for r in 1 2 3; do sed "s/^/rank $r: /" "$NX_NETNS_TMP/$name.$r.out" | tail -n 5; done
        fails=$((fails + 1))
    elif [ "$loss" -gt 0 ] && [ "$dropped" -eq 0 ]; then
        echo "FAIL: $name: the loss rules dropped nothing"
        fails=$((fails + 1))
    fi
}

job lossless 0
job loss-1pct 1
nx_netns_loss 0

if [ "$fails" -ne 0 ]; then
    echo "$fails job(s) failed"
    export NX_NETNS_KEEP_LOGS=1 # read by the EXIT trap (lib.sh)
    exit 1
fi
echo "ok: every element of every collective bit-exact, lossless and under 1% loss"
