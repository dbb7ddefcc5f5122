#!/bin/sh
# run.sh NEXAR_RUN_ARGS... - the Python package's tests under nexar-run, every rank running
# pytest on tests/python/test_nexar.py with Debian's python3 (numpy, pytest).  Skips (77)
# where they are missing.
py=${NX_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    echo "SKIP: $py lacks numpy or pytest (python3-numpy, python3-pytest)"
    exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
exec "$NEXAR_RUN" --timeout 60 "$@" "$py" -m pytest -q -p no:cacheprovider \
    "$here/test_nexar.py"
