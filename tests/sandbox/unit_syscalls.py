#!/usr/bin/env python3
"""unit_syscalls.py UNIT OUT - the system calls that UNIT's SystemCallFilter= lines allow,
one name per line, as systemd would compute them: each line adds its names (groups
expanded with `systemd-analyze syscall-filter`, recursively) to the allow list, or takes
them away when it starts with '~'.  The unit file is the only source: change its filter
and the sandboxed tests follow."""
import subprocess
import sys

_groups = {}


def group(name):
    if name not in _groups:
        out = subprocess.run(['systemd-analyze', 'syscall-filter', name], check=True,
                             capture_output=True, text=True).stdout
        names = set()
        for line in out.splitlines()[1:]:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            names |= group(line) if line.startswith('@') else {line}
        _groups[name] = names
    return _groups[name]


def expand(word):
    return group(word) if word.startswith('@') else {word}


def main():
    unit, out = sys.argv[1], sys.argv[2]
    allowed = None
    for line in open(unit):
        line = line.strip()
        if not line.startswith('SystemCallFilter='):
            continue
        value = line.split('=', 1)[1].strip()
        deny = value.startswith('~')
        names = set()
        for w in value.lstrip('~').split():
            names |= expand(w)
        if deny:
            if allowed is None:
                sys.exit('%s: a deny list before any allow list is not what nexard.service '
                         'uses; teach unit_syscalls.py about it' % unit)
            allowed -= names
        else:
            allowed = names if allowed is None else allowed | names
    if not allowed:
        sys.exit('%s: no SystemCallFilter= allow list' % unit)
    with open(out, 'w') as f:
        f.write('\n'.join(sorted(allowed)) + '\n')


if __name__ == '__main__':
    main()
