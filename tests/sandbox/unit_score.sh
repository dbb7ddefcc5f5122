#!/bin/sh
# unit_score.sh UNIT - systemd's own exposure score of the unit stays at 1.5 or below
# (issue 11).  The score alone proves nothing about nexard working under it: that is what
# the *_sandboxed tests do.
set -eu
out=$(systemd-analyze security --offline=true "$1" 2>&1) || true
score=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [ -z "$score" ]; then
    printf '%s\n' "$out" | tail -5
    echo "FAIL: no exposure level in systemd-analyze's output"
    exit 1
fi
printf '%s\n' "$out" | grep '✗' || true
if awk -v s="$score" 'BEGIN { exit !(s <= 1.5) }'; then
    echo "ok: exposure level $score (at most 1.5)"
else
    echo "FAIL: exposure level $score, above 1.5"
    exit 1
fi
