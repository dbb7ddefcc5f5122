#!/bin/sh
# test_shim_exports.sh LIB HEADER - the ABI libnexarshim exports is exactly the public API.
#
# nm -D --defined-only LIB must list:
#   - the version node NEXAR_0.1 (an absolute symbol), and
#   - functions named nexar_*, each versioned NEXAR_0.1,
# and nothing else: no helper of the shim (nx_*), no protobuf-c or proto/ code linked into
# it, no data.  The exported functions must be exactly those HEADER declares NEXAR_API:
# a public function the version script or the visibility hides fails too.
set -u
lib=$1
header=$2
nm=${NM:-nm}
if ! command -v "$nm" >/dev/null 2>&1; then
    echo "SKIP: $nm not found"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

if ! "$nm" -D --defined-only "$lib" >"$tmp/nm"; then
    echo "FAIL: $nm -D --defined-only $lib failed"
    exit 1
fi
echo "$(wc -l <"$tmp/nm") defined dynamic symbols in $lib"

# Every line: ADDRESS TYPE NAME[@@VERSION]
while read -r addr type name; do
    case "$type $name" in
    "A NEXAR_0.1") ;;
    "T nexar_"*@@NEXAR_0.1) echo "${name%@@NEXAR_0.1}" >>"$tmp/exported" ;;
    *)
        echo "FAIL: exported beyond the public API: $type $name"
        fail=1
        ;;
    esac
done <"$tmp/nm"
touch "$tmp/exported"
sort -o "$tmp/exported" "$tmp/exported"

# The functions the header declares: NEXAR_API ... nexar_NAME( on one line.
sed -n 's/^NEXAR_API[^(]*[ *]\(nexar_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u >"$tmp/declared"
ndecl=$(wc -l <"$tmp/declared")
napi=$(grep -c '^NEXAR_API ' "$header")
if [ "$ndecl" -ne "$napi" ]; then
    echo "FAIL: $napi NEXAR_API lines in $header, but only $ndecl function names read from them"
    fail=1
fi
if [ "$ndecl" -lt 40 ]; then
    echo "FAIL: only $ndecl public functions read from $header"
    fail=1
fi

comm -23 "$tmp/declared" "$tmp/exported" | while read -r f; do
    echo "FAIL: $f is declared NEXAR_API but not exported"
done
comm -13 "$tmp/declared" "$tmp/exported" | while read -r f; do
    echo "FAIL: $f is exported but not declared NEXAR_API in $header"
done
if ! cmp -s "$tmp/declared" "$tmp/exported"; then
    fail=1
fi

if [ "$fail" -eq 0 ]; then
    echo "ok: exactly the $ndecl NEXAR_API functions are exported, all nexar_*, versioned NEXAR_0.1"
fi
exit "$fail"
