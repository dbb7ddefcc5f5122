#!/usr/bin/env bash
# test_netns.sh - two real nexard daemons in two network namespaces joined by a veth
# pair, with certificates from `nexarctl certs`, and `nexarctl peer-test` between them:
# lossless, then 1% and 5% random loss each way (nftables in one namespace), over 1 stream
# and 1% also over 4 (as a communicator's collectives use several channels), then over
# IPv6.  Every transfer must arrive bit-exact (peer-test verifies each byte); the GB/s of
# each is reported.
#   NEXARD=build/daemon/nexard NEXARCTL=build/tools/nexarctl tests/netns/test_netns.sh
# Environment: NX_NETNS_BYTES (lossless, default 256M), NX_NETNS_LOSS_BYTES (1% loss,
# default 256M), NX_NETNS_LOSS5_BYTES (5% loss, default 64M: QUIC's congestion control
# holds a few packets in flight there, ~10 MB/s), NX_NETNS_KEEP_LOGS=1 keeps the logs.
# Exits 77 (skipped) where namespaces cannot be made (no CAP_NET_ADMIN / CAP_SYS_ADMIN).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${NEXARD:?NEXARD=path/to/nexard}" "${NEXARCTL:?NEXARCTL=path/to/nexarctl}"
bytes=${NX_NETNS_BYTES:-256M}
loss_bytes=${NX_NETNS_LOSS_BYTES:-256M}
loss5_bytes=${NX_NETNS_LOSS5_BYTES:-64M}

if ! "$NEXARCTL" --help 2>&1 | grep -q peer-test; then
    echo "SKIP: this nexarctl has no peer-test"
    exit 77
fi

# shellcheck source=lib.sh
. "$here/lib.sh"
nx_netns_setup "$NEXARD" "$NEXARCTL"

fails=0
results=()
# run NAME LOSS BYTES STREAMS FAMILY: one peer-test, checked and recorded.
run() {
    local name=$1 loss=$2 n=$3 streams=$4 fam=$5 out rc=0 dropped=0
    nx_netns_loss "$loss"
    out=$(nx_netns_peer_test "$n" "$streams" "$fam") || rc=$?
    [ "$loss" -gt 0 ] && dropped=$(nx_netns_dropped)
    local gbps verified bad seconds got
    gbps=$(nx_json_field "$out" gbps)
    verified=$(nx_json_field "$out" verified)
    bad=$(nx_json_field "$out" bad)
    seconds=$(nx_json_field "$out" seconds)
    got=$(nx_json_field "$out" bytes_verified)
    if [ "$rc" -ne 0 ] || [ "$verified" != true ] || [ "$bad" != false ] ||
        [ "$got" != "$(nx_json_field "$out" bytes)" ]; then
        echo "FAIL: $name: peer-test exited $rc: $out"
        fails=$((fails + 1))
        return 0
    fi
    if [ "$loss" -gt 0 ] && [ "$dropped" -eq 0 ]; then
        echo "FAIL: $name: the loss rules dropped nothing"
        fails=$((fails + 1))
    fi
    printf 'ok: %-16s %5s over %d stream(s): %.3f GB/s in %.2f s, every byte verified%s\n' \
        "$name" "$n" "$streams" "$gbps" "$seconds" \
        "$([ "$loss" -gt 0 ] && echo ", $dropped packets dropped")"
    results+=("$(printf '%-16s %6s %7s %8s %10.3f %9s' "$name" "$fam" "$loss%" "$n" "$gbps" \
        "$dropped")")
}

run lossless 0 "$bytes" 1 v4
run lossless-4str 0 "$bytes" 4 v4
run loss-1pct 1 "$loss_bytes" 1 v4
run loss-1pct-4str 1 "$loss_bytes" 4 v4
run loss-5pct 5 "$loss5_bytes" 1 v4
run ipv6 0 64M 1 v6
nx_netns_loss 0

echo
echo "veth between two namespaces, nexard <-> nexard (QUIC, TLS_AES_128_GCM_SHA256)"
printf '%-16s %6s %7s %8s %10s %9s\n' test family loss bytes GB/s dropped
printf '%s\n' "${results[@]}"
# ratio LOSSY LOSSLESS: GB/s of the one over the other, from the table above.
ratio() {
    printf '%s\n' "${results[@]}" | awk -v a="$1" -v b="$2" \
        '$1 == a { x = $5 } $1 == b { y = $5 } END { if (x && y) printf "%.2f", x / y; else printf "-" }'
}
echo "1% loss / lossless: $(ratio loss-1pct lossless) over 1 stream, $(ratio loss-1pct-4str lossless-4str) over 4"
"$NEXARCTL" --socket "$NX_NETNS_TMP/a/nexard.sock" peers || true

if [ "$fails" -ne 0 ]; then
    echo "$fails transfer(s) failed"
    export NX_NETNS_KEEP_LOGS=1 # read by the EXIT trap (lib.sh)
    exit 1
fi
