#!/bin/sh
# gen-certs.sh DIR [N [SHORT_S]] - test certificates for the QUIC transport (certtool,
# gnutls-bin).
#   DIR/ca.pem ca.key                 the cluster CA
#   DIR/node0.pem node0.key ... N-1   node certificates signed by it (127.0.0.1, ::1, localhost)
#   DIR/foreign-ca.pem foreign.pem foreign.key   a node certificate from another CA
#   DIR/operator.pem .key             an operator's (OU "nexar operator", TLS client only)
#   certificates of the cluster CA unfit for a peer (proto/cert_check.h):
#     srvonly   TLS server only          clionly   TLS client only
#     codesign  code signing only        noeku     no extended key usage
#     nodigsig  key usage without digitalSignature
#     norole    server + client, but no nexar role (no OU)
#   DIR/short.pem .key                a node certificate that expires SHORT_S seconds from
#                                     now (only when SHORT_S is given)
# ECDSA P-256 keeps generation fast.  Quiet unless something fails.
set -eu
dir=$1
n=${2:-4}
short=${3:-}
mkdir -p "$dir"
cd "$dir"

key() { certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile "$1" 2>/dev/null; }

ca() { # name cn
    key "$1.key"
    printf 'cn = "%s"\nca\ncert_signing_key\ncrl_signing_key\nexpiration_days = 30\n' "$2" >"$1.tmpl"
    certtool --generate-self-signed --load-privkey "$1.key" --template "$1.tmpl" \
        --outfile "$1.pem" 2>/dev/null
}

# leaf NAME CA TEMPLATE-LINES...: a certificate of CA with those template lines.
leaf() {
    name=$1 issuer=$2
    shift 2
    key "$name.key"
    printf '%s\n' "$@" >"$name.tmpl"
    certtool --generate-certificate --load-privkey "$name.key" --load-ca-certificate "$issuer.pem" \
        --load-ca-privkey "$issuer.key" --template "$name.tmpl" --outfile "$name.pem" 2>/dev/null
}

host='dns_name = "localhost"
ip_address = "127.0.0.1"
ip_address = "::1"'
days='expiration_days = 30'

node() { # name cn ca
    leaf "$1" "$3" "cn = \"$2\"" 'unit = "nexar node"' "$host" 'tls_www_server' \
        'tls_www_client' 'signing_key' "$days"
}

ca ca "nexar test cluster CA"
i=0
while [ "$i" -lt "$n" ]; do
    node "node$i" "node$i" ca
    i=$((i + 1))
done
ca foreign-ca "some other CA"
node foreign "intruder" foreign-ca

leaf operator ca 'cn = "ops-test"' 'unit = "nexar operator"' 'tls_www_client' 'signing_key' "$days"
leaf srvonly ca 'cn = "srvonly"' 'unit = "nexar node"' "$host" 'tls_www_server' 'signing_key' "$days"
leaf clionly ca 'cn = "clionly"' 'unit = "nexar node"' "$host" 'tls_www_client' 'signing_key' "$days"
leaf codesign ca 'cn = "codesign"' 'unit = "nexar node"' "$host" 'code_signing_key' 'signing_key' "$days"
leaf noeku ca 'cn = "noeku"' 'unit = "nexar node"' "$host" 'signing_key' "$days"
# certtool adds digitalSignature to every ECDSA leaf: this one has an RSA key.
certtool --generate-privkey --key-type=rsa --bits=2048 --outfile nodigsig.key 2>/dev/null
printf '%s\n' 'cn = "nodigsig"' 'unit = "nexar node"' "$host" 'tls_www_server' 'tls_www_client' \
    'encryption_key' "$days" >nodigsig.tmpl
certtool --generate-certificate --load-privkey nodigsig.key --load-ca-certificate ca.pem \
    --load-ca-privkey ca.key --template nodigsig.tmpl --outfile nodigsig.pem 2>/dev/null
leaf norole ca 'cn = "norole"' "$host" 'tls_www_server' 'tls_www_client' 'signing_key' "$days"
if [ -n "$short" ]; then
    until=$(date -u -d "+$short sec" '+%Y-%m-%d %H:%M:%S')
    leaf short ca 'cn = "short"' 'unit = "nexar node"' "$host" 'tls_www_server' \
        'tls_www_client' 'signing_key' "expiration_date = \"$until\""
fi
rm -f ./*.tmpl
