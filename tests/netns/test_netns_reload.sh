#!/usr/bin/env bash
# test_netns_reload.sh - handovers to new credentials under 1% random loss each way: a
# nexard in each of two network namespaces, one rank in each running exact i32
# all_reduces of 1 MiB (roll_rank) for NX_NETNS_RELOAD_S seconds (default 10), while each
# daemon gets SIGHUP twice (the same files: every reload hands the connection over all the
# same).  Every op must be exact, both daemons must have moved to successors, and no peer
# may be lost.  NX_NETNS_RELOAD_LOSS (default 1) sets the loss in percent: at 8, before the
# fixes of quic_rollfault, 2 runs of 26 ended with a reload the peer never saw.
#   NEXARD=... NEXARCTL=... ROLL_RANK=... tests/netns/test_netns_reload.sh
# Exits 77 (skipped) where namespaces cannot be made (no CAP_NET_ADMIN / CAP_SYS_ADMIN).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${NEXARD:?NEXARD=path/to/nexard}" "${NEXARCTL:?NEXARCTL=path/to/nexarctl}"
: "${ROLL_RANK:?ROLL_RANK=path/to/roll_rank}"
secs=${NX_NETNS_RELOAD_S:-10}

# shellcheck source=lib.sh
. "$here/lib.sh"
nx_netns_setup "$NEXARD" "$NEXARCTL"
nx_netns_loss "${NX_NETNS_RELOAD_LOSS:-1}"
read -r pid_a pid_b <<<"$NX_NETNS_PIDS"

fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

rpids=
for r in 0 1; do
    if [ $r = 0 ]; then ns=$NX_NS_A n=a; else ns=$NX_NS_B n=b; fi
    ip netns exec "$ns" env NEXAR_JOB="reload-$$" NEXAR_RANK=$r NEXAR_WORLD_SIZE=2 \
        NEXAR_LOCAL_RANK=0 NEXAR_SOCKET="$NX_NETNS_TMP/$n/nexard.sock" \
        NEXAR_COORD="$NX_NETNS_V4A:$NX_NETNS_PORT" NEXAR_TIMEOUT=60 \
        "$ROLL_RANK" "$secs" 262144 >"$NX_NETNS_TMP/rank$r.txt" 2>&1 &
    rpids="$rpids $!"
done
step=$((secs / 5 > 0 ? secs / 5 : 1))
for pid in $pid_a $pid_b $pid_a $pid_b; do
    sleep "$step"
    kill -HUP "$pid"
done
rc=0
for p in $rpids; do wait "$p" || rc=$?; done
cat "$NX_NETNS_TMP/rank0.txt" "$NX_NETNS_TMP/rank1.txt"
echo "datagrams dropped by the loss rules: $(nx_netns_dropped)"
if [ "$rc" -eq 0 ]; then ok "every all_reduce exact across 4 reloads at ${NX_NETNS_RELOAD_LOSS:-1}% loss"
else fail "the job failed (exit $rc)"; fi
for n in a b; do
    log=$NX_NETNS_TMP/$n/nexard.log
    moved=$(grep -c "moved to the successor connection" "$log" || true)
    if [ "$moved" -ge 2 ]; then ok "node $n moved to a successor $moved times"
    else fail "node $n moved $moved times (2 or more expected)"; cat "$log"; fi
    if grep -Eq "lost|successor connection failed" "$log"; then
        fail "node $n lost a peer or a successor:"; grep -E "lost|successor connection failed" "$log"
    else ok "node $n lost nothing"; fi
done

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all checks passed"
