#!/bin/bash
# test_compare_mpi.sh - compare-mpi --rounds 3 on one node, small sizes: it exits 0, says
# how it judged, keeps every round's rows, and each row of its tables is the median round
# of those rows, worked out here from the kept rows (sort, not compare-mpi's awk).
#   COMPARE_MPI: the configured script (build/tools/compare-mpi).  Skips (77) without
#   mpicc and mpirun, or without ../shared/anchors/mpi_bench.c beside the source tree.
set -eu
: "${COMPARE_MPI:?}"
src=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "SKIP: no mpicc or mpirun (openmpi-bin, libopenmpi-dev)"
    exit 77
fi
if [ ! -f "$src/../shared/anchors/mpi_bench.c" ]; then
    echo "SKIP: no $src/../shared/anchors/mpi_bench.c"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/nexar-cmp.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

rc=0
"$COMPARE_MPI" --quick --cases 1x2 --max 8K --colls allreduce,allgather --rounds 3 \
    --keep "$dir/keep" > "$dir/out" 2> "$dir/err" || rc=$?
[ "$rc" = 0 ] || { cat "$dir/err"; fail "compare-mpi exited $rc"; }
grep -q "each size: its median round of 3" "$dir/out" || fail "no median-round line in the case header"
grep -q "targets (issue 4), ratios nexar / Open MPI from this run's median rounds (of 3)" \
    "$dir/out" || fail "the targets do not say they come from median rounds"
[ "$(grep -c '^# round [123] of 3' "$dir/err")" = 3 ] || fail "not 3 rounds on stderr"

# Every (collective, size) has 3 rows on each side, rounds 1, 2 and 3.
for side in nexar mpi; do
    all="$dir/keep/$side.rows.all"
    [ -s "$all" ] || { fail "$side.rows.all missing or empty"; continue; }
    bad=$(awk '{ n[$2 " " $3]++; r[$2 " " $3] = r[$2 " " $3] " " $7 }
               END { for (k in n) if (n[k] != 3) print k ":" r[k] }' "$all")
    [ -z "$bad" ] || fail "$side: not one row a round: $bad"
done

# The tables' times: the median of the three rounds' times, side by side.
# median SIDE COLL SIZE: the middle of the three times.
median() {
    awk -v c="$2" -v s="$3" '$2 == c && $3 == s { print $4 }' "$dir/keep/$1.rows.all" |
        sort -g | sed -n 2p
}
checked=0
while read -r coll; do
    while read -r size nt mt; do
        want_n=$(median nexar "$coll" "$size") want_m=$(median mpi "$coll" "$size")
        # The tables print two decimals, rounded by awk: within half a hundredth.
        awk -v a="$nt" -v b="$want_n" -v c="$mt" -v d="$want_m" \
            'BEGIN { exit !((a - b) ^ 2 <= 0.0051 ^ 2 && (c - d) ^ 2 <= 0.0051 ^ 2) }' ||
            fail "$coll $size: table has $nt $mt, the median rounds $want_n $want_m"
        checked=$((checked + 1))
    done < <(awk -v c="$coll" '/^# [a-z_]+, 2 ranks: nexar vs Open MPI/ { cur = $2; sub(",", "", cur) }
                               cur == c && /^ +[0-9]/ && $2 != "-" && $3 != "-" { print $1, $2, $3 }' \
                 "$dir/out")
done <<EOF
all_reduce
all_gather
EOF
[ "$checked" -ge 8 ] || fail "only $checked rows checked"
echo "checked $checked rows against the median of their rounds"
[ "$fails" = 0 ] || { cat "$dir/out"; exit 1; }
echo "PASS"
