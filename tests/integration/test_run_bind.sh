#!/bin/sh
# test_run_bind.sh - nexar-run --nodes K puts each simulated node's daemon and ranks on
# that node's share of the CPUs (--bind node, the default), --bind rank also each rank on
# its own share of its node's (one node too, while the node has a CPU for each rank), and
# --bind none leaves them where nexar-run was.  The expected sets are computed here from
# this process's own affinity, independently of tools/run/bind.c.
#   NEXAR_RUN, NEXARCTL: the binaries.  Skips (77) on a machine with one CPU.
set -eu
: "${NEXAR_RUN:?}" "${NEXARCTL:?}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/nexar-bind.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0

# The CPUs we may use, one per line, in order.
cpus=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status | tr ',' '\n' |
       awk -F- '{ if (NF == 1) print $1; else for (c = $1; c <= $2; c++) print c }')
n=$(echo "$cpus" | wc -l)
if [ "$n" -lt 2 ]; then
    echo "SKIP: one CPU, nothing to share out"
    exit 77
fi
all=$(echo "$cpus" | paste -sd, -)

# expect K NODE: the comma list node NODE of K gets.
expect() {
    if [ "$1" -ge "$n" ]; then
        echo "$cpus" | sed -n "$(($2 % n + 1))p"
    else
        echo "$cpus" | sed -n "$(($2 * n / $1 + 1)),$((($2 + 1) * n / $1))p" | paste -sd, -
    fi
}

# share LIST J K: rank J of K's share of the comma list LIST: its own block when K is
# at most the list's length, else the whole list.
share() {
    m=$(echo "$1" | tr ',' '\n' | wc -l)
    if [ "$3" -gt "$m" ]; then echo "$1"; return; fi
    echo "$1" | tr ',' '\n' | sed -n "$(($2 * m / $3 + 1)),$((($2 + 1) * m / $3))p" | paste -sd, -
}

# A list as the kernel prints it ("0-3,6") as a comma list.
expand() {
    echo "$1" | tr ',' '\n' |
        awk -F- '{ if (NF == 1) print $1; else for (c = $1; c <= $2; c++) print c }' |
        paste -sd, -
}

# Every rank writes its rank, its node's daemon's pid, and its own and the daemon's CPUs.
cat > "$dir/prog.sh" <<'EOF'
#!/bin/sh
pid=$("$NEXARCTL" -s "$NEXAR_SOCKET" --json status | sed 's/.*"pid":\([0-9]*\).*/\1/')
own=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
dmn=$(awk '/^Cpus_allowed_list:/ {print $2}' "/proc/$pid/status")
echo "$NEXAR_RANK $pid $own $dmn" > "$OUT/rank.$NEXAR_RANK"
EOF
chmod +x "$dir/prog.sh"

# check K NP BIND
check() {
    k=$1 np=$2 bind=$3
    rm -f "$dir"/rank.*
    if ! OUT=$dir NEXARCTL=$NEXARCTL "$NEXAR_RUN" -q --nodes "$k" -n "$np" --bind "$bind" \
            "$dir/prog.sh"; then
        echo "FAIL: nexar-run --nodes $k -n $np --bind $bind exited non-zero"
        fails=$((fails + 1))
        return
    fi
    r=0
    while [ "$r" -lt "$np" ]; do
        node=$((r * k / np))
        # One node's CPUs are all of them.
        if [ "$bind" = none ] || [ "$k" = 1 ]; then want=$all; else want=$(expect "$k" "$node"); fi
        dwant=$want
        if [ "$bind" = rank ]; then
            # Its index among its node's ranks, and how many those are (blocks: rank i
            # is on node i*k/np).
            j=0 nl=0 i=0
            while [ "$i" -lt "$np" ]; do
                if [ $((i * k / np)) = "$node" ]; then
                    [ "$i" -lt "$r" ] && j=$((j + 1))
                    nl=$((nl + 1))
                fi
                i=$((i + 1))
            done
            want=$(share "$want" "$j" "$nl")
        fi
        if [ ! -s "$dir/rank.$r" ]; then
            echo "FAIL: --nodes $k -n $np: rank $r wrote nothing"
            fails=$((fails + 1))
        else
            read -r _ pid own dmn < "$dir/rank.$r"
            own=$(expand "$own") dmn=$(expand "$dmn")
            if [ "$own" != "$want" ] || [ "$dmn" != "$dwant" ]; then
                echo "FAIL: --nodes $k -n $np --bind $bind: rank $r (node $node) on" \
                     "CPUs $own, its daemon (pid $pid) on $dmn; expected $want, $dwant"
                fails=$((fails + 1))
            fi
        fi
        r=$((r + 1))
    done
    echo "ok: --nodes $k -n $np --bind $bind ($n CPUs: $all)"
}

check 2 2 node
check 2 4 node
check 3 5 node
check "$((n + 1))" "$((n + 1))" node    # more nodes than CPUs: CPU i mod n
check 2 2 none
check 1 2 rank
check 1 "$n" rank
check 1 "$((n + 1))" rank                 # more ranks than CPUs: the node's, unbound
check 2 4 rank
check 2 2 rank

# A bad value is a usage error (64) before anything starts.
rc=0
"$NEXAR_RUN" --nodes 2 -n 2 --bind cores true 2> "$dir/err" || rc=$?
if [ "$rc" != 64 ] || ! grep -q -- "--bind expects node, rank or none" "$dir/err"; then
    echo "FAIL: --bind cores: exit $rc, $(cat "$dir/err")"
    fails=$((fails + 1))
fi

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
