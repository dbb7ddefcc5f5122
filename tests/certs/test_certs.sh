#!/usr/bin/env bash
# test_certs.sh - `nexarctl certs`: a CA and node certificates that certtool
# (gnutls-bin) verifies, that a foreign CA does not, and the refusals that keep
# an operator from losing a key: overwrite without --force, a missing or wrong
# CA, an unwritable directory, bad names and addresses.
#   NEXARCTL=build/tools/nexarctl tests/certs/test_certs.sh
set -euo pipefail

ctl=${NEXARCTL:?NEXARCTL=path/to/nexarctl}
if ! command -v certtool >/dev/null; then
    echo "SKIP: certtool (gnutls-bin) not installed"
    exit 77
fi
tmp=$(mktemp -d /tmp/nexar-certs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_exit CODE PATTERN CMD...: the command exits CODE and says PATTERN on stderr.
expect_exit() {
    local want=$1 pat=$2 rc=0
    shift 2
    "$@" >out.txt 2>err.txt || rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$* exited $rc, expected $want: $(cat err.txt)"
    elif ! grep -q -- "$pat" err.txt; then
        fail "$* did not say '$pat': $(cat err.txt)"
    else
        ok "$* -> $rc ($(head -n 1 err.txt))"
    fi
}

verifies() { # CA-PEM CERT-PEM
    certtool --verify --load-ca-certificate "$1" --infile "$2" >verify.txt 2>&1
}

mode() { stat -c %a "$1"; }

# --- a CA and two nodes that verify --------------------------------------------------
"$ctl" certs ca --out ca --days 30 >/dev/null
"$ctl" certs node --ca ca --name node0 --ip 127.0.0.1 --ip ::1 --dns localhost \
    --dns node0.cluster.example --out n0 >/dev/null
"$ctl" certs node --ca ca --name node1 --ip 10.9.0.2 --out n1 --days 7 >/dev/null
for n in n0 n1; do
    if verifies ca/ca.pem "$n/node.pem"; then ok "$n verifies against the CA"; else
        fail "$n does not verify: $(cat verify.txt)"; fi
done
if verifies ca/ca.pem ca/ca.pem; then ok "the CA is self-signed and trusted"; else
    fail "the CA does not verify itself: $(cat verify.txt)"; fi
cmp -s ca/ca.pem n0/ca.pem && ok "the node directory holds a copy of ca.pem" ||
    fail "n0/ca.pem differs from ca/ca.pem"

# --- what the node certificate carries -----------------------------------------------
certtool -i --infile n0/node.pem >info.txt
for want in 'DNSname: node0' 'DNSname: localhost' 'DNSname: node0.cluster.example' \
    'IPAddress: 127.0.0.1' 'IPAddress: ::1' 'TLS WWW Server' 'TLS WWW Client' \
    'Certificate Authority (CA): FALSE' 'Digital signature' 'SECP256R1' \
    'Authority Key Identifier' 'OU=nexar node'; do
    grep -qF "$want" info.txt && ok "node cert has '$want'" || fail "node cert lacks '$want'"
done

# --- an operator's certificate: inspects, never a peer (proto/cert_check.h) ----------
"$ctl" certs operator --ca ca --name ops-alice --out op >out.txt
grep -q "operator certificate: op/operator.pem" out.txt && ok "operator files named" ||
    fail "operator output: $(cat out.txt)"
if verifies ca/ca.pem op/operator.pem; then ok "the operator verifies against the CA"; else
    fail "the operator does not verify: $(cat verify.txt)"; fi
certtool -i --infile op/operator.pem >opinfo.txt
for want in 'OU=nexar operator' 'CN=ops-alice' 'TLS WWW Client' 'Digital signature' \
    'Certificate Authority (CA): FALSE'; do
    grep -qF "$want" opinfo.txt && ok "operator cert has '$want'" ||
        fail "operator cert lacks '$want'"
done
for unwanted in 'TLS WWW Server' 'DNSname' 'IPAddress' 'OU=nexar node'; do
    grep -qF "$unwanted" opinfo.txt && fail "operator cert has '$unwanted'" ||
        ok "operator cert has no '$unwanted'"
done
[ "$(mode op/operator-key.pem)" = 600 ] && ok "operator key 0600" ||
    fail "operator key mode $(mode op/operator-key.pem)"
certtool -i --infile ca/ca.pem >cainfo.txt
for want in 'Certificate Authority (CA): TRUE' 'Path Length Constraint: 0' \
    'Certificate signing' 'CRL signing'; do
    grep -qF "$want" cainfo.txt && ok "CA has '$want'" || fail "CA lacks '$want'"
done
# --days 7 on the node; the CA's 30 days do not cut it.
end=$(date -d "$(certtool -i --infile n1/node.pem | sed -n 's/.*Not After: //p')" +%s)
left=$(((end - $(date +%s)) / 86400))
[ "$left" -ge 6 ] && [ "$left" -le 7 ] && ok "node1 valid for 7 days" ||
    fail "node1 valid for $left days, expected 7"
# A node asking for longer than its CA lives gets the CA's end, and is told.
"$ctl" certs node --ca ca --name node2 --out n2 --days 365 >out.txt
grep -q "cut to the CA's expiry" out.txt && ok "node validity cut to the CA's" ||
    fail "no note about the CA's expiry: $(cat out.txt)"

# --- permissions ---------------------------------------------------------------------
[ "$(mode ca)" = 700 ] && ok "CA dir 0700" || fail "CA dir mode $(mode ca)"
for k in ca/ca-key.pem n0/node-key.pem n1/node-key.pem; do
    [ "$(mode "$k")" = 600 ] && ok "$k 0600" || fail "$k mode $(mode "$k")"
done
for c in ca/ca.pem n0/node.pem n0/ca.pem; do
    [ "$(mode "$c")" = 644 ] && ok "$c 0644" || fail "$c mode $(mode "$c")"
done
# Not loosened by a permissive umask, not tightened into uselessness by a strict one.
(umask 000 && "$ctl" certs node --ca ca --name u --out u0 >/dev/null)
[ "$(mode u0/node-key.pem)" = 600 ] && ok "umask 000: key still 0600" ||
    fail "umask 000: key mode $(mode u0/node-key.pem)"

# --- a foreign CA --------------------------------------------------------------------
"$ctl" certs ca --out foreign --name "some other CA" >/dev/null
"$ctl" certs node --ca foreign --name intruder --ip 127.0.0.1 --out fx >/dev/null
if verifies ca/ca.pem fx/node.pem; then fail "a foreign node verifies against our CA"; else
    ok "a foreign node does not verify against our CA"; fi
if verifies foreign/ca.pem n0/node.pem; then fail "our node verifies against a foreign CA"; else
    ok "our node does not verify against the foreign CA"; fi
# A foreign CA certificate under our CA's name (same CN): still no.
"$ctl" certs ca --out twin --name "nexar cluster CA" >/dev/null
if verifies twin/ca.pem n0/node.pem; then fail "a CA with the same name verifies our node"; else
    ok "a CA with the same name but another key does not verify our node"; fi

# --- refusals ------------------------------------------------------------------------
before=$(sha256sum ca/ca.pem ca/ca-key.pem)
expect_exit 1 'use --force' "$ctl" certs ca --out ca
[ "$before" = "$(sha256sum ca/ca.pem ca/ca-key.pem)" ] && ok "the CA is untouched" ||
    fail "refused overwrite changed the CA"
expect_exit 1 'use --force' "$ctl" certs node --ca ca --name node0 --out n0
"$ctl" certs node --ca ca --name node0 --ip 127.0.0.1 --out n0 --force >/dev/null
verifies ca/ca.pem n0/node.pem && ok "--force replaces a node certificate" ||
    fail "after --force: $(cat verify.txt)"
expect_exit 1 "no such directory" "$ctl" certs node --ca nowhere --name a --out x
mkdir empty
expect_exit 1 "empty/ca.pem" "$ctl" certs node --ca empty --name a --out x
mkdir mixed && cp ca/ca.pem mixed/ && cp foreign/ca-key.pem mixed/
expect_exit 1 "is not the key of" "$ctl" certs node --ca mixed --name a --out x
mkdir notca && cp n0/node.pem notca/ca.pem && cp n0/node-key.pem notca/ca-key.pem
expect_exit 1 "not a CA certificate" "$ctl" certs node --ca notca --name a --out x
[ ! -e x ] && ok "no output directory left behind by refusals" || fail "x was created"
touch plainfile
expect_exit 1 "Not a directory" "$ctl" certs ca --out plainfile/ca
if [ "$(id -u)" = 0 ]; then
    # root writes anywhere: be somebody else for this one.
    mkdir -m 0755 locked
    expect_exit 9 "Permission denied" setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$ctl" certs ca --out "$tmp/locked/ca"
else
    mkdir -m 0500 locked
    expect_exit 9 "Permission denied" "$ctl" certs ca --out locked/ca
fi
expect_exit 1 "not an IPv4 or IPv6" "$ctl" certs node --ca ca --name a --ip 1.2.3 --out y
expect_exit 1 "not a valid DNS name" "$ctl" certs node --ca ca --name a --dns 'a..b' --out y
expect_exit 1 "--days" "$ctl" certs ca --out z --days 0
expect_exit 1 "--name NAME" "$ctl" certs node --ca ca --out y
expect_exit 1 'a node name is' "$ctl" certs node --ca ca --name 'bad name!' --out y
expect_exit 1 'a node name is' "$ctl" certs node --ca ca --name '-n0' --out y
[ ! -e y ] || fail "a refused name left y/ behind"
expect_exit 1 "--out DIR" "$ctl" certs ca
expect_exit 1 "unknown subcommand" "$ctl" certs server --out y
expect_exit 1 "--ip and --dns belong to 'certs node'" "$ctl" certs operator --ca ca \
    --name bob --ip 10.0.0.1 --out y
expect_exit 1 "who the operator is" "$ctl" certs operator --ca ca --out y

# --- a CA made with certtool (docs/operations.md) signs nexarctl node certs -----------
mkdir tca
certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile tca/ca-key.pem \
    2>/dev/null
printf 'cn = "certtool CA"\nca\ncert_signing_key\ncrl_signing_key\nexpiration_days = 30\n' \
    >tca/ca.tmpl
certtool --generate-self-signed --load-privkey tca/ca-key.pem --template tca/ca.tmpl \
    --outfile tca/ca.pem 2>/dev/null
"$ctl" certs node --ca tca --name mixed0 --ip 127.0.0.1 --out tn >/dev/null
verifies tca/ca.pem tn/node.pem && ok "a certtool CA signs a nexarctl node cert" ||
    fail "certtool CA + nexarctl node: $(cat verify.txt)"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all certificate checks passed"
