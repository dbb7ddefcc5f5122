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
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
nxc_init certexp

"$ctl" certs ca --out ca --days 30 >/dev/null
"$ctl" certs node --ca ca --name node0 --ip 127.0.0.1 --out n0 --days 3 >/dev/null
"$ctl" certs node --ca ca --name node1 --ip 127.0.0.1 --out n1 --days 20 >/dev/null

for n in 0 1; do
    nxc_start $n --listen 127.0.0.1:0 --tls-ca ca/ca.pem --tls-cert "n$n/node.pem" \
        --tls-key "n$n/node-key.pem"
done
nxc_start 2
a0=$(nxc_listen 0) a1=$(nxc_listen 1)
"$ctl" -s "$tmp/s0" peer-test "$a1" --bytes 1M >/dev/null

e0=$(nxc_not_after n0/node.pem) e1=$(nxc_not_after n1/node.pem)
d0=$(nxc_utc "$e0") d1=$(nxc_utc "$e1")

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

nxc_finish
