#!/bin/sh
# run.sh TEST.py NEXAR_RUN_ARGS... - one pytest module of tests/python under nexar-run,
# every rank running it with Debian's python3 (numpy, pytest; torch for test_torch.py).
# Skips (77) where they are missing.
py=${NX_PYTHON:-/usr/bin/python3}
test=$1
shift
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    echo "SKIP: $py lacks numpy or pytest (python3-numpy, python3-pytest)"
    exit 77
fi
case $test in
*torch*)
    if [ -z "$NEXAR_C10D_LIB" ] || ! "$py" -c 'import torch.distributed' 2>/dev/null; then
        echo "SKIP: no torch (python3-torch) or nexar.torch was not built (libtorch-dev)"
        exit 77
    fi ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
exec "$NEXAR_RUN" --timeout 60 "$@" "$py" -m pytest -q -p no:cacheprovider "$here/$test"
