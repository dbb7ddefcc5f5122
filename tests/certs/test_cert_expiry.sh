#!/usr/bin/env bash
# test_cert_expiry.sh - nexard says ahead of time when a certificate proof ends, since on
# that date every peer closes its connections with the node (transport.md):
#   - node0's certificate ends in 3 days, node1's in 20 (one CA of 30 days);
#   - `nexarctl status` shows each node's subject and end (JSON: the certificate's own
#     Not After as certtool reads it), with "ROTATE IT SOON" inside 14 days only;
#   - node0 warns about itself in its log at start, node1 does not; node1 warns about
#     its peer node0 when they connect; `nexarctl peers` gives each peer's end, and says
#     the near one in words;
#   - the same status over remote inspection (HTTP/3); none on a daemon without network;
#   - nexar-run's simulated nodes (NEXAR_RUN) get a year, and warn of nothing.
#   NEXARD=build/daemon/nexard NEXARCTL=build/tools/nexarctl tests/certs/test_cert_expiry.sh
set -euo pipefail

ctl=${NEXARCTL:?NEXARCTL=path/to/nexarctl}
nexard=${NEXARD:?NEXARD=path/to/nexard}
if ! command -v certtool >/dev/null; then
    echo "SKIP: certtool (gnutls-bin) not installed"
    exit 77
fi
tmp=$(mktemp -d /tmp/nexar-certexp.XXXXXX)
pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"

fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { # FILE ERE WHAT
    if grep -Eq -- "$2" "$1"; then ok "$3"; else fail "$3: no /$2/ in $1:"; cat "$1"; fi
}
hasnt() { # FILE ERE WHAT
    if grep -Eq -- "$2" "$1"; then fail "$3: /$2/ in $1:"; cat "$1"; else ok "$3"; fi
}

"$ctl" certs ca --out ca --days 30 >/dev/null
"$ctl" certs node --ca ca --name node0 --ip 127.0.0.1 --out n0 --days 3 >/dev/null
"$ctl" certs node --ca ca --name node1 --ip 127.0.0.1 --out n1 --days 20 >/dev/null

start() { # N [nexard options]
    local n=$1
    shift
    mkdir -p "r$n"
    "$nexard" -f --socket "$tmp/s$n" --runtime-dir "$tmp/r$n" "$@" >"log$n" 2>&1 &
    pids="$pids $!"
    for _ in $(seq 50); do
        "$ctl" -s "$tmp/s$n" status >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "nexard $n did not come up:"; cat "log$n"; exit 1
}
for n in 0 1; do
    start $n --listen 127.0.0.1:0 --tls-ca ca/ca.pem --tls-cert "n$n/node.pem" \
        --tls-key "n$n/node-key.pem"
done
start 2
listen_of() { "$ctl" -s "$tmp/s$1" --json peers | grep -o '"listen":"[^"]*"' | cut -d'"' -f4; }
a0=$(listen_of 0) a1=$(listen_of 1)
"$ctl" -s "$tmp/s0" peer-test "$a1" --bytes 1M >/dev/null

not_after() { date -u -d "$(certtool -i --infile "$1" | sed -n 's/^.*Not After: //p')" +%s; }
utc() { date -u -d "@$1" '+%Y-%m-%d %H:%M:%S UTC'; }
e0=$(not_after n0/node.pem) e1=$(not_after n1/node.pem)
d0=$(utc "$e0") d1=$(utc "$e1")

"$ctl" -s "$tmp/s0" --json status >st0.json
has st0.json "\"cert_not_after\":$e0[,}]" "node0's status: the end is its certificate's Not After"
has st0.json '"cert_subject":"CN=node0,OU=nexar node' "node0's status: its subject"
"$ctl" -s "$tmp/s0" status >st0.txt
has st0.txt "certificate +CN=node0,OU=nexar node.*, proves this node until $d0 \\(in (2\\.9|3\\.0) days\\): ROTATE IT SOON" \
    "node0's status says its end, and to rotate"
"$ctl" -s "$tmp/s1" status >st1.txt
has st1.txt "proves this node until $d1 \\(in (19\\.9|20\\.0) days\\)\$" "node1's status: 20 days"
hasnt st1.txt "ROTATE" "node1's status asks for nothing"
"$ctl" -s "$tmp/s2" --json status >st2.json
has st2.json '"cert_not_after":null,"cert_subject":null' "no network: no certificate"
"$ctl" -s "$tmp/s2" status >st2.txt
hasnt st2.txt "certificate" "no network: no certificate row"

has log0 "warn cluster: this node's certificate proof \\(tls_cert n0/node.pem\\) ends at $d0, in (2\\.9|3\\.0) days" \
    "node0 warns about itself at start"
hasnt log1 "this node's certificate proof" "node1 does not warn about itself"
has log1 "warn quic: $a0: its certificate proof ends at $d0, in (2\\.9|3\\.0) days" \
    "node1 warns about its peer node0"
hasnt log0 "its certificate proof ends" "node0 does not warn about node1"

"$ctl" -s "$tmp/s1" --json peers >p1.json
has p1.json "\"addr\":\"$a0\"[^}]*\"cert_not_after\":$e0," "node1's peers: node0's end"
"$ctl" -s "$tmp/s0" --json peers >p0.json
has p0.json "\"addr\":\"$a1\"[^}]*\"cert_not_after\":$e1," "node0's peers: node1's end"
"$ctl" -s "$tmp/s1" peers >p1.txt
has p1.txt "^$a0 certificate proof ends at $d0 \\(in (2\\.9|3\\.0) days\\)\$" \
    "node1's peers table says node0's near end"
"$ctl" -s "$tmp/s0" peers >p0.txt
hasnt p0.txt "certificate proof ends" "node0's peers table: node1's end is far"

"$ctl" --remote "$a0" --tls-ca ca/ca.pem --tls-cert n1/node.pem --tls-key n1/node-key.pem \
    status >remote.txt
has remote.txt "proves this node until $d0" "remote inspection shows the same"

# nexar-run's throwaway cluster outlasts any run: its daemons warn of nothing.
if [ -n "${NEXAR_RUN:-}" ]; then
    "$NEXAR_RUN" -v --nodes 2 -n 2 true >run.txt 2>&1 || { fail "nexar-run failed"; cat run.txt; }
    has run.txt "this node's certificate .* \(in 365\.0 days\)" "nexar-run's nodes: a year"
    hasnt run.txt "certificate proof" "nexar-run's nodes warn of nothing"
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all checks passed"
