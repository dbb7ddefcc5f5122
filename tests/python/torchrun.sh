#!/bin/sh
# torchrun.sh - the DDP check (ddp_train.py) launched by torchrun rather than nexar-run:
# nexar_init takes torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT,
# and a nexard answering at NEXAR_SOCKET (a private one here) serves the ranks.
# Skips (77) without torchrun or the torch backend.
py=${NX_PYTHON:-/usr/bin/python3}
torchrun=$(command -v torchrun)
if [ -z "$torchrun" ] || [ -z "$NEXAR_C10D_LIB" ] || ! "$py" -c 'import torch.distributed' 2>/dev/null; then
    echo "SKIP: no torchrun (python3-torch) or nexar.torch was not built"
    exit 77
fi
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
"$NEXARD" -f --socket "$dir/sock" --runtime-dir "$dir" --log-level warn 2>"$dir/log" &
pid=$!
i=0
while [ ! -S "$dir/sock" ]; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
        echo "FAIL: nexard did not start"; cat "$dir/log"; exit 1
    fi
    sleep 0.1
done
here=$(cd "$(dirname "$0")" && pwd)
# --redirects 1 --tee 1: Debian 12's torchrun (torch 1.13 on Python 3.11) cannot parse its
# default of 0 (Std.from_str finds no flag of value 0 under 3.11's Flag iteration) and
# fails with "'NoneType' object has no attribute 'get'"; one stream parses.
NEXAR_SOCKET="$dir/sock" NEXAR_TIMEOUT=60 timeout 240 \
    "$py" "$torchrun" --standalone --nproc_per_node 2 --redirects 1 --tee 1 "$here/ddp_train.py"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: torchrun exited $rc; nexard's log:"; cat "$dir/log"; }
exit $rc
