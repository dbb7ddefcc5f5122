#!/usr/bin/env python3
"""test_man.py - the man pages render cleanly and document what the programs accept.

For every page:

  render    `man --warnings=w -l PAGE` with MANWIDTH=80 exits 0, prints the page and
            nothing on stderr (no troff warning of any kind);

and, against the programs and sources as they are now:

  options   every option that `PROG --help` lists (long --name and short -x, parsed from
            the help text) is an item of the page: a line of the rendered page that
            starts with it, as "-s, --socket PATH" does (nexard, nexarctl, nexar-run,
            nexar-bench);
  commands  every command of `nexarctl --help` ("Commands:", "certs ca" for certs) is
            an item of nexarctl(8);
  keys      every key that the config parser accepts (nx_config_set() in
            daemon/base/config.c) is an item of nexard.conf(5) ("key = ...");
  api       every function and status of libshim/nexar.h, and every environment
            variable that libshim reads, appears in nexar(3).

So a new option, command, key or function without its entry in the page fails here.

Usage: test_man.py SRCROOT NAME.SECTION=PAGE...
Environment: NEXARD, NEXARCTL, NEXAR_RUN, NEXAR_BENCH (the built programs).
Exit 0 when everything holds, 1 with every miss printed, 77 without man(1).
"""
import os
import re
import shutil
import subprocess
import sys

# page -> the environment variable naming the program whose --help it documents
PROGRAMS = {
    "nexard.8": "NEXARD",
    "nexarctl.8": "NEXARCTL",
    "nexar-run.1": "NEXAR_RUN",
    "nexar-bench.1": "NEXAR_BENCH",
}

LONG_OPT = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
SHORT_OPT = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def render(page):
    """The page as man shows it on an 80-column terminal, or None."""
    env = dict(os.environ, MANWIDTH="80")
    env.pop("MAN_KEEP_FORMATTING", None)  # plain text, whatever the caller's setting
    p = subprocess.run(["man", "--warnings=w", "-l", page], env=env,
                       capture_output=True, text=True, timeout=60)
    name = os.path.basename(page)
    if p.returncode != 0:
        fail(f"{name}: man -l exited {p.returncode}: {p.stderr.strip()}")
        return None
    if p.stderr.strip():
        fail(f"{name}: man -l printed on stderr:\n{p.stderr.rstrip()}")
    if "NAME" not in p.stdout or len(p.stdout.splitlines()) < 10:
        fail(f"{name}: man -l rendered no page")
        return None
    print(f"ok: {name} renders ({len(p.stdout.splitlines())} lines, no warnings)")
    # A line may break after a hyphen (--daemon-\narg): join those back.
    return re.sub(r"-\n[ \t]+", "-", p.stdout)


def items(text):
    """The first words of every indented line: where a page defines its items."""
    return [line.strip() for line in text.splitlines() if line.startswith(" ")]


def is_item(text, word, follow=r"[\s,=]|$"):
    pat = re.compile(r"^(?:[-\w]+(?:[ =][^\s,]+)?,\s*)*" + re.escape(word) + "(?:" +
                     follow + ")")
    return any(pat.match(line) for line in items(text))


def help_text(var):
    prog = os.environ.get(var)
    if not prog:
        fail(f"${var} is not set (the program to ask for --help)")
        return None
    p = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        fail(f"{prog} --help exited {p.returncode}: {p.stderr.strip()}")
        return None
    return p.stdout


def check_options(name, text, helptext):
    opts = sorted(set(LONG_OPT.findall(helptext)) | set(SHORT_OPT.findall(helptext)))
    missing = [o for o in opts if not is_item(text, o)]
    for o in missing:
        fail(f"{name}: option {o} of --help is not an item of the page "
             f"(a line that starts with it)")
    print(f"ok: {name}: {len(opts) - len(missing)} of {len(opts)} options of --help "
          f"are items: {' '.join(opts)}")


def ctl_commands(helptext):
    m = re.search(r"^Commands:\n(.*?)(?:\n\s*\n|\Z)", helptext, re.S | re.M)
    cmds = []
    for line in (m.group(1).splitlines() if m else []):
        w = re.match(r"^  (\S+)(?: (\S+))?", line)
        if w:
            cmds.append(w.group(1) + (" " + w.group(2) if w.group(1) == "certs" else ""))
    return cmds


def check_commands(name, text, helptext):
    cmds = ctl_commands(helptext)
    if not cmds:
        fail(f"{name}: no 'Commands:' in nexarctl --help")
        return
    missing = [c for c in cmds if not is_item(text, c, r"\s|$")]
    for c in missing:
        fail(f"{name}: command '{c}' of nexarctl --help is not an item of the page")
    print(f"ok: {name}: {len(cmds) - len(missing)} of {len(cmds)} commands are items: "
          f"{', '.join(cmds)}")


def config_keys(src):
    with open(os.path.join(src, "daemon/base/config.c"), encoding="utf-8") as f:
        code = f.read()
    m = re.search(r"^int nx_config_set\(.*?^}", code, re.S | re.M)
    body = m.group(0) if m else ""
    keys = re.findall(r'strcmp\(key, "(\w+)"\)|\{"(\w+)", offsetof|SIZE_KEY\("(\w+)"', body)
    return sorted({k for t in keys for k in t if k})


def check_keys(name, text, src):
    keys = config_keys(src)
    if len(keys) < 10:
        fail(f"{name}: found only {len(keys)} keys in nx_config_set(): has config.c "
             f"changed shape? ({keys})")
        return
    missing = [k for k in keys if not is_item(text, k, r" =|\s*$")]
    for k in missing:
        fail(f"{name}: config key '{k}' (daemon/base/config.c) is not an item "
             f"('{k} = ...') of the page")
    print(f"ok: {name}: {len(keys) - len(missing)} of {len(keys)} config keys are items")


def check_api(name, text, src):
    with open(os.path.join(src, "libshim/nexar.h"), encoding="utf-8") as f:
        header = f.read()
    funcs = re.findall(r"NEXAR_API\s[^;(]*?\b(nexar_\w+)\s*\(", header)
    statuses = re.findall(r"^\s*(NEXAR_(?:OK|ERR_\w+))\s*=", header, re.M)
    env = set()
    shim = os.path.join(src, "libshim")
    for fn in sorted(os.listdir(shim)):
        if fn.endswith(".c"):
            with open(os.path.join(shim, fn), encoding="utf-8") as f:
                code = f.read()
            env |= set(re.findall(r'\b(?:get)?env\("(\w+)"\)', code))
            # the launchers' variables: the table of sources in env.c
            for row in re.findall(r"^\s*\{\"[^\"]*\",((?:\s*\"[A-Z_]+\",?)+)\}", code, re.M):
                env |= set(re.findall(r'"([A-Z_]+)"', row))
    if len(funcs) < 40 or len(statuses) < 10 or len(env) < 10:
        fail(f"{name}: found {len(funcs)} functions, {len(statuses)} statuses and "
             f"{len(env)} variables: has nexar.h or libshim changed shape?")
    words = set(re.findall(r"[\w$]+", text))
    for kind, names in (("functions", funcs), ("statuses", statuses),
                        ("environment variables", sorted(env))):
        missing = [n for n in names if n not in words and "$" + n not in words]
        for n in missing:
            fail(f"{name}: {n} ({kind} of the API) is not in the page")
        print(f"ok: {name}: {len(names) - len(missing)} of {len(names)} {kind} appear")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    if not shutil.which("man"):
        print("SKIP: man (man-db) is not installed")
        return 77
    src = sys.argv[1]
    for arg in sys.argv[2:]:
        name, _, page = arg.partition("=")
        text = render(page)
        if text is None:
            continue
        if name in PROGRAMS:
            helptext = help_text(PROGRAMS[name])
            if helptext is not None:
                check_options(name, text, helptext)
                if name == "nexarctl.8":
                    check_commands(name, text, helptext)
        elif name == "nexard.conf.5":
            check_keys(name, text, src)
        elif name == "nexar.3":
            check_api(name, text, src)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
