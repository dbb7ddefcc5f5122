#!/bin/sh
# gen-certs.sh DIR [N] - test certificates for the QUIC transport (certtool, gnutls-bin).
#   DIR/ca.pem ca.key                 the cluster CA
#   DIR/node0.pem node0.key ... N-1   node certificates signed by it (127.0.0.1, ::1, localhost)
#   DIR/foreign-ca.pem foreign.pem foreign.key   a node certificate from another CA
# ECDSA P-256 keeps generation fast.  Quiet unless something fails.
set -eu
dir=$1
n=${2:-4}
mkdir -p "$dir"
cd "$dir"

key() { certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile "$1" 2>/dev/null; }

ca() { # name cn
    key "$1.key"
    printf 'cn = "%s"\nca\ncert_signing_key\ncrl_signing_key\nexpiration_days = 30\n' "$2" >"$1.tmpl"
    certtool --generate-self-signed --load-privkey "$1.key" --template "$1.tmpl" \
        --outfile "$1.pem" 2>/dev/null
}

node() { # name cn ca
    key "$1.key"
    printf '%s\n' "cn = \"$2\"" 'dns_name = "localhost"' 'ip_address = "127.0.0.1"' \
        'ip_address = "::1"' 'tls_www_server' 'tls_www_client' 'signing_key' \
        'expiration_days = 30' >"$1.tmpl"
    certtool --generate-certificate --load-privkey "$1.key" --load-ca-certificate "$3.pem" \
        --load-ca-privkey "$3.key" --template "$1.tmpl" --outfile "$1.pem" 2>/dev/null
}

ca ca "nexar test cluster CA"
i=0
while [ "$i" -lt "$n" ]; do
    node "node$i" "node$i" ca
    i=$((i + 1))
done
ca foreign-ca "some other CA"
node foreign "intruder" foreign-ca
rm -f ./*.tmpl
