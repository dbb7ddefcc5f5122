#!/usr/bin/env bash
# test_cert_reload.sh - a node gets new credentials while a job across nodes runs
# (SIGHUP, as `systemctl reload nexard` sends it), and nothing is lost:
#   - node0 starts with a certificate that ends ${SHORT}s after the start (certtool), node1
#     with one of 20 days; a 2-rank job across them checks every all_reduce exactly for
#     ${RUN}s, well past node0's end;
#   - a reload (nexarctl reload) with a key that does not match its certificate is
#     refused with the files named, exit 1, and the credentials in use stay; another
#     uid's reload is refused (exit 9);
#   - a reload with a certificate of another CA (node0 trusts both, node1 only its own)
#     is taken by node0, but node1 refuses the successor: the old connection serves on;
#   - a reload (nexarctl reload) with a new certificate moves the connection to a
#     successor made with it on
#     both nodes: the job runs on to its end, exact, no peer is lost, and node1 sees node0's
#     new end (nexarctl peers --json);
#   - without the reload (NX_RELOAD_SKIP=1, to see the test fail) the job dies when node0's
#     certificate ends.
#   NEXARD=... NEXARCTL=... ROLL_RANK=... tests/certs/test_cert_reload.sh
set -euo pipefail

ctl=${NEXARCTL:?NEXARCTL=path/to/nexarctl}
nexard=${NEXARD:?NEXARD=path/to/nexard}
rank=${ROLL_RANK:?ROLL_RANK=path/to/roll_rank}
SHORT=${NX_RELOAD_SHORT:-12} RUN=${NX_RELOAD_RUN:-18}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
nxc_init reload

"$ctl" certs ca --out ca --days 30 >/dev/null
"$ctl" certs node --ca ca --name node1 --ip 127.0.0.1 --out n1 --days 20 >/dev/null
"$ctl" certs node --ca ca --name node0 --ip 127.0.0.1 --out new --days 25 >/dev/null
"$ctl" certs ca --out fca --days 30 --name "another CA" >/dev/null
"$ctl" certs node --ca fca --name node0 --ip 127.0.0.1 --out foreign --days 25 >/dev/null
# node0's first certificate ends SHORT seconds from now.
mkdir n0
cat >n0/short.tmpl <<T
organization = "nexar"
unit = "nexar node"
cn = "node0"
ip_address = "127.0.0.1"
signing_key
tls_www_server
tls_www_client
activation_date = "$(date -u -d '-5 min' '+%Y-%m-%d %H:%M:%S')"
expiration_date = "$(date -u -d "+$SHORT sec" '+%Y-%m-%d %H:%M:%S')"
T
export TZ=UTC
certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile n0/node-key.pem \
    >/dev/null 2>&1
certtool --generate-certificate --load-privkey n0/node-key.pem --load-ca-certificate ca/ca.pem \
    --load-ca-privkey ca/ca-key.pem --template n0/short.tmpl --outfile n0/node.pem >/dev/null 2>&1
cp ca/ca.pem n0/ca.pem
cp ca/ca.pem n1/ca.pem
t0=$(date +%s)

for n in 0 1; do
    nxc_start $n --listen 127.0.0.1:0 --tls-ca "n$n/ca.pem" --tls-cert "n$n/node.pem" \
        --tls-key "n$n/node-key.pem"
done
a0=$(nxc_listen 0)

rpids=
for r in 0 1; do
    NEXAR_JOB=reload NEXAR_RANK=$r NEXAR_WORLD_SIZE=2 NEXAR_LOCAL_RANK=0 \
        NEXAR_SOCKET="$tmp/s$r" NEXAR_COORD="$a0" NEXAR_TIMEOUT=30 \
        "$rank" "$RUN" >"rank$r.txt" 2>&1 &
    rpids="$rpids $!"
done
sleep 2

# A key that is not the certificate's: refused, the credentials in use stay; nexarctl
# reload says so and fails.
cp n0/node-key.pem n0/good-key.pem
cp n1/node-key.pem n0/node-key.pem
rc=0
"$ctl" -s "$tmp/s0" reload >reload1.txt 2>&1 || rc=$?
[ "$rc" -eq 1 ] && ok "nexarctl reload of a mismatched key exits 1" ||
    fail "nexarctl reload of a mismatched key exited $rc"
has reload1.txt "reload: keeping the credentials in use: tls_cert n0/node.pem / tls_key n0/node-key.pem: " \
    "nexarctl reload says why, naming the files"
has log0 "error cluster: reload: keeping the credentials in use: tls_cert n0/node.pem / tls_key n0/node-key.pem: " \
    "the log says the same"
cp n0/good-key.pem n0/node-key.pem
# The node's credentials are root's and nexard's business: another uid is refused.
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
    chmod 755 "$tmp"
    rc=0
    setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" -s "$tmp/s0" reload \
        >reload2.txt 2>&1 || rc=$?
    [ "$rc" -eq 9 ] && ok "another uid's reload exits 9 (permission)" ||
        fail "another uid's reload exited $rc"
    has reload2.txt "uid 65534 may not reload nexard \(root or uid 0 only\)" "and says why"
    # So is a peer test: this daemon would dial where it is told and send up to 1 TiB.
    rc=0
    setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" -s "$tmp/s0" peer-test \
        "$(nxc_listen 1)" --bytes 1M >ptest.txt 2>&1 || rc=$?
    [ "$rc" -eq 9 ] && ok "another uid's peer-test exits 9 (permission)" ||
        fail "another uid's peer-test exited $rc"
    has ptest.txt "uid 65534 may not run a peer test \(root or uid 0 only\)" "and says why"
    has log0 "warn ctl: refused for pid [0-9]+: uid 65534 may not run a peer test" \
        "the log names the pid and the uid"
fi

# Another CA's certificate: node0 trusts that CA too now, node1 does not.
cp n0/node.pem n0/good.pem
cat ca/ca.pem fca/ca.pem >n0/ca.pem
cp foreign/node.pem n0/node.pem
cp foreign/node-key.pem n0/node-key.pem
kill -HUP "$pid0"
sleep 1
has log0 "warn quic: .*: successor connection failed \(.*certificate not signed by the cluster CA\); the old one goes on" \
    "node1 refuses a successor with another CA's certificate; node0 says so"
has log1 "warn quic: $a0: successor connection failed \(TLS: certificate not signed by the cluster CA\)" \
    "node1 says why"
cp ca/ca.pem n0/ca.pem

if [ -z "${NX_RELOAD_SKIP:-}" ]; then
    cp new/node.pem n0/node.pem.tmp && mv n0/node.pem.tmp n0/node.pem
    cp new/node-key.pem n0/node-key.pem.tmp && mv n0/node-key.pem.tmp n0/node-key.pem
    "$ctl" -s "$tmp/s0" reload >reload3.txt 2>&1 || fail "nexarctl reload failed: $(cat reload3.txt)"
    has reload3.txt "^reloaded: new credentials \(CN=node0,OU=nexar node,O=nexar, until .*\); 1 peer connection\(s\) to hand over" \
        "nexarctl reload says what it did"
fi

rc=0
for p in $rpids; do wait "$p" || rc=$?; done
elapsed=$(($(date +%s) - t0))
cat rank0.txt rank1.txt
if [ "$rc" -eq 0 ]; then ok "the job ran ${elapsed}s, past node0's first certificate (${SHORT}s), every op exact"
else fail "the job failed (exit $rc) after ${elapsed}s"; fi
[ "$elapsed" -gt "$SHORT" ] && ok "node0's first certificate ended during the job" ||
    fail "the job ended before node0's first certificate did"

has log0 "info cluster: reload: new credentials \\(CN=node0,OU=nexar node,O=nexar, until .*\\); 1 peer connection\\(s\\) to hand over" \
    "node0 took the new credentials"
has log0 "info quic: .*: moved to the successor connection" "node0 moved to the successor"
has log1 "info quic: $a0: moved to the successor connection" "node1 moved to the successor"
has log1 "info quic: $a0: successor connection up \\(inbound\\)" "node1 accepted node0's successor"
for n in 0 1; do
    grep -v "successor connection failed" "log$n" >"rest$n"
    hasnt "rest$n" "lost|expired|failed" "node$n lost no peer, and only the refused successor failed"
done
"$ctl" -s "$tmp/s1" --json peers >p1.json
has p1.json "\"addr\":\"$a0\",\"state\":\"up\"[^}]*\"cert_not_after\":$(nxc_not_after new/node.pem),\"handovers\":1,\"connections\":1," \
    "node1 sees node0 up with its new certificate's end, on one connection again"

nxc_finish
