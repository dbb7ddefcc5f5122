# shellcheck shell=bash
# lib.sh - two nexard daemons in two network namespaces joined by a veth pair, with
# random packet loss from nftables.  Sourced (bash) by tests/netns/test_netns.sh and
# tools/bench-transport; the caller has `set -euo pipefail`.
#
#   nx_netns_setup NEXARD NEXARCTL the tests' start: the tools, init, create, daemons;
#                                  exits 77 (skipped) where namespaces cannot be made
#   nx_netns_init NEXARD NEXARCTL  names for this run, a temp dir (mkdtemp), certificates,
#                                  and an EXIT/INT/TERM trap that undoes everything
#   nx_netns_create                namespaces $NX_NS_A, $NX_NS_B; veth 10.77.0.1 <-> .2,
#                                  fd77::1 <-> fd77::2; returns 1 when not permitted
#   nx_netns_start_daemons         nexard in each namespace, listening on both families
#                                  (with the arguments in NX_NETNS_DAEMON_ARGS, if set)
#   nx_netns_loss PERCENT          drop PERCENT% of packets each way (0: none)
#   nx_netns_peer_test BYTES STREAMS [v6]  peer-test from A to B; prints its JSON
#   nx_json_field JSON KEY         a number, boolean or string member of one JSON object
#
# Without netem the kernel cannot drop at random on its own; nftables numgen can. The
# rules sit in the input chain of each namespace, on its veth end, so both directions
# lose, datagram by datagram (see gso_max_segs below).

NX_NETNS_PORT=7470
NX_NETNS_V4A=10.77.0.1 NX_NETNS_V4B=10.77.0.2
NX_NETNS_V6A=fd77::1 NX_NETNS_V6B=fd77::2

nx_netns_cleanup() {
    local pid ns
    for pid in ${NX_NETNS_PIDS:-}; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in ${NX_NETNS_PIDS:-}; do
        # nexard stops in well under a second; do not let a stuck one hold the namespace.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
    NX_NETNS_PIDS=
    for ns in ${NX_NS_A:-} ${NX_NS_B:-}; do
        ip netns del "$ns" 2>/dev/null || true
    done
    if [ -n "${NX_NETNS_TMP:-}" ] && [ -d "$NX_NETNS_TMP" ]; then
        if [ -n "${NX_NETNS_KEEP_LOGS:-}" ]; then
            echo "logs kept in $NX_NETNS_TMP"
        else
            rm -rf "$NX_NETNS_TMP"
        fi
    fi
}

nx_netns_init() {
    NX_NEXARD=$1 NX_NEXARCTL=$2
    # Unique per run: two runs at once (meson, a developer) must not meet.
    local id
    id=$(printf '%x%04x' $$ $((RANDOM)))
    NX_NS_A=nxa-$id NX_NS_B=nxb-$id
    NX_VETH_A=nxa$id NX_VETH_B=nxb$id
    NX_VETH_A=${NX_VETH_A:0:15} NX_VETH_B=${NX_VETH_B:0:15}
    NX_NETNS_PIDS=
    NX_NETNS_TMP=$(mktemp -d /tmp/nexar-netns.XXXXXX)
    trap nx_netns_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$NX_NEXARCTL" certs ca --out "$NX_NETNS_TMP/ca" --days 30 >/dev/null
    local n ip4 ip6
    for n in a b; do
        if [ $n = a ]; then ip4=$NX_NETNS_V4A ip6=$NX_NETNS_V6A; else
            ip4=$NX_NETNS_V4B ip6=$NX_NETNS_V6B; fi
        "$NX_NEXARCTL" certs node --ca "$NX_NETNS_TMP/ca" --name "node-$n" --ip "$ip4" \
            --ip "$ip6" --days 30 --out "$NX_NETNS_TMP/$n" >/dev/null
    done
}

nx_netns_setup() {
    local tool
    for tool in ip nft; do
        if ! command -v $tool >/dev/null; then
            echo "SKIP: $tool not installed (scripts/install-deps.sh installs iproute2, nftables)"
            exit 77
        fi
    done
    nx_netns_init "$1" "$2"
    if ! nx_netns_create; then
        echo "SKIP: cannot create network namespaces here: $(head -n 1 "$NX_NETNS_TMP/netns.err")"
        exit 77
    fi
    nx_netns_start_daemons
}

nx_netns_create() {
    ip netns add "$NX_NS_A" 2>"$NX_NETNS_TMP/netns.err" || return 1
    ip netns add "$NX_NS_B" 2>>"$NX_NETNS_TMP/netns.err" || return 1
    # gso_max_segs 1: a UDP GSO batch (up to 64 datagrams in one skb) is cut into
    # datagrams when it leaves the veth, as a NIC would put them on the wire, so that the
    # loss rules drop single datagrams and not whole batches.
    ip link add "$NX_VETH_A" gso_max_segs 1 type veth peer name "$NX_VETH_B" gso_max_segs 1 \
        2>>"$NX_NETNS_TMP/netns.err" || return 1
    ip link set "$NX_VETH_A" netns "$NX_NS_A"
    ip link set "$NX_VETH_B" netns "$NX_NS_B"
    local ns dev ip4 ip6
    for ns in "$NX_NS_A" "$NX_NS_B"; do
        if [ "$ns" = "$NX_NS_A" ]; then dev=$NX_VETH_A ip4=$NX_NETNS_V4A ip6=$NX_NETNS_V6A
        else dev=$NX_VETH_B ip4=$NX_NETNS_V4B ip6=$NX_NETNS_V6B; fi
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$ip4/24" dev "$dev"
        # nodad: usable at once, instead of after duplicate address detection (~2 s).
        ip -n "$ns" addr add "$ip6/64" dev "$dev" nodad
        ip -n "$ns" link set "$dev" up
    done
}

nx_netns_start_daemons() {
    local n ns dir
    for n in a b; do
        if [ $n = a ]; then ns=$NX_NS_A; else ns=$NX_NS_B; fi
        dir=$NX_NETNS_TMP/$n
        mkdir -p "$dir/run"
        # [::] takes IPv4 too (v4-mapped), so one endpoint serves both families.
        ip netns exec "$ns" "$NX_NEXARD" --foreground --socket "$dir/nexard.sock" \
            --runtime-dir "$dir/run" --listen "[::]:$NX_NETNS_PORT" \
            --tls-ca "$dir/ca.pem" --tls-cert "$dir/node.pem" --tls-key "$dir/node-key.pem" \
            ${NX_NETNS_DAEMON_ARGS:-} >"$dir/nexard.log" 2>&1 &
        NX_NETNS_PIDS="$NX_NETNS_PIDS $!"
    done
    for n in a b; do
        local ok=
        for _ in $(seq 50); do
            if "$NX_NEXARCTL" --socket "$NX_NETNS_TMP/$n/nexard.sock" status >/dev/null 2>&1
            then ok=1; break; fi
            sleep 0.1
        done
        if [ -z "$ok" ]; then
            echo "nexard in namespace $n did not come up:" >&2
            cat "$NX_NETNS_TMP/$n/nexard.log" >&2
            return 1
        fi
    done
}

nx_netns_loss() {
    local pct=$1 ns dev
    for ns in "$NX_NS_A" "$NX_NS_B"; do
        ip netns exec "$ns" nft delete table inet nxloss 2>/dev/null || true
        [ "$pct" -gt 0 ] || continue
        if [ "$ns" = "$NX_NS_A" ]; then dev=$NX_VETH_A; else dev=$NX_VETH_B; fi
        ip netns exec "$ns" nft -f - <<EOF
table inet nxloss {
    chain input {
        type filter hook input priority 0; policy accept;
        iifname "$dev" numgen random mod 100 < $pct counter drop
    }
}
EOF
    done
}

# Packets the loss rules dropped so far, both namespaces, to show the loss was real.
nx_netns_dropped() {
    local ns
    for ns in "$NX_NS_A" "$NX_NS_B"; do
        ip netns exec "$ns" nft list table inet nxloss 2>/dev/null || true
    done | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}'
}

nx_netns_peer_test() {
    local bytes=$1 streams=$2 fam=${3:-v4} addr
    if [ "$fam" = v6 ]; then addr="[$NX_NETNS_V6B]:$NX_NETNS_PORT"; else
        addr="$NX_NETNS_V4B:$NX_NETNS_PORT"; fi
    "$NX_NEXARCTL" --socket "$NX_NETNS_TMP/a/nexard.sock" peer-test "$addr" --bytes "$bytes" \
        --streams "$streams" --timeout "${NX_NETNS_TIMEOUT:-60}" --json
}

nx_json_field() {
    printf '%s\n' "$1" | sed -n "s/.*\"$2\":\\(\"[^\"]*\"\\|[^,}]*\\).*/\\1/p" | tr -d '"'
}
