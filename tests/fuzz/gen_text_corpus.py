#!/usr/bin/env python3
"""Writes the seed corpora of the text parsers' targets into tests/fuzz/corpus/<target>/:

  fuzz_config  nexard config files (daemon/base/config.c): the shipped example with every key
               set, each key at its limits, and the ways a line can be wrong;
  fuzz_algo    NEXAR_ALGO / `algo` texts (daemon/algo/algo_choose.c), after one control byte
               (fuzz_algo.c: the size of the error buffer, minus one).

Run it again after a key or an algorithm is added.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

EVERY_KEY = """\
socket = /run/nexar/nexard.sock
runtime_dir = /run/nexar
log_level = debug
slot_bytes = 4M
slots = 4
heap_bytes = 256M
sq_entries = 256
cq_entries = 256
op_timeout_s = 300
p2p_eager_bytes = 64M
max_clients = 1024
max_pending = 4096
max_world_size = 65536
max_timeout_s = 86400
workers = 4
allow_uids = 1000, 1001,*
listen = 0.0.0.0:7000
advertise = 10.0.0.12:7000
tls_ca = /etc/nexar/tls/ca.pem
tls_cert = /etc/nexar/tls/node.pem
tls_key = /etc/nexar/tls/node-key.pem
peer_idle_timeout_ms = 5000
keepalive_ms = 1000
formation_timeout_s = 60
quic_window_bytes = 64M
quic_stream_window_bytes = 16M
quic_max_udp_payload = 1452
quic_cc = cubic
quic_lanes = 4
inspect = off
inspect_max_conns = 8
peer_reads = off
single_copy = off
algo = all_reduce=ring,broadcast=tree
"""

LIMITS = """\
slot_bytes = 4K
slot_bytes = 1G
slots = 2
slots = 64
heap_bytes = 0
heap_bytes = 64G
sq_entries = 8
cq_entries = 65536
op_timeout_s = 604800
p2p_eager_bytes = 1099511627776
max_clients = 1048576
max_pending = 16
max_world_size = 1048576
max_timeout_s = 604800
workers = 64
peer_idle_timeout_ms = 200
keepalive_ms = 600000
quic_window_bytes = 4G
quic_max_udp_payload = 65527
inspect_max_conns = 64
inspect = yes
log_level = warning
allow_uids = 4294967294
"""

CONFIG_SEEDS = {
    "every_key": EVERY_KEY,
    "limits": LIMITS,
    "comments": "# a comment\n\n   \t\n  slots = 8   # trailing comment\n#slots = x\n",
    "unset_strings": "listen = 0.0.0.0:7000\nlisten =\nalgo = barrier=dissemination\nalgo =\n",
    "no_newline_at_end": "log_level = error",
    "crlf": "slots = 2\r\nlog_level = info\r\n",
    "no_equals": "slots 4\n",
    "unknown_key": "slots = 4\nslotz = 4\n",
    "bad_size": "slot_bytes = 4097\n",
    "bad_suffix": "heap_bytes = 1T\n",
    "size_overflow": "p2p_eager_bytes = 18446744073709551616\n",
    "not_pow2": "sq_entries = 100\n",
    "negative": "slots = -1\n",
    "empty_value": "slots =\n",
    "bad_level": "log_level = loud\n",
    "bad_uids": "allow_uids = 1000,root\n",
    "too_many_uids": "allow_uids = " + ",".join(str(1000 + i) for i in range(65)) + "\n",
    "bad_algo": "algo = all_reduce=tree\n",
    "long_socket": "socket = /" + "s" * 120 + "\n",
    "empty_socket": "socket =\n",
    "empty_key": "= 4\n",
    "long_line": "# " + "c" * 1100 + " slots = 3\nslots = 5\n",
    "nul_byte": "slots = 4\0 garbage\nworkers = 2\n",
}

ALGO_SEEDS = {
    "two": (255, "all_reduce=ring,broadcast=tree"),
    "every_kind": (255, "all_reduce=hd,broadcast=ring,reduce=tree,all_gather=rd,"
                        "reduce_scatter=hd,gather=tree,scatter=tree,all_to_all=pairwise,"
                        "scan=hillis-steele,exscan=hillis-steele,all_reduce_bucketed=rd,"
                        "barrier=dissemination"),
    "auto": (255, "all_reduce=auto"),
    "trailing_comma": (255, "broadcast=ring,"),
    "empty": (255, ""),
    "twice": (255, "reduce=tree,reduce=ring"),
    "unsupported": (255, "gather=ring"),
    "unknown_kind": (40, "allreduce=ring"),
    "unknown_algo": (8, "all_reduce=butterfly"),
    "no_equals": (0, "all_reduce"),
    "empty_item": (255, "all_reduce=ring,,broadcast=tree"),
    "two_equals": (255, "all_reduce=ring=rd"),
    "not_collective": (255, "send=ring"),
    "long_name": (63, "all_reduce=" + "r" * 300),
    "nul_inside": (255, "barrier=dissemination\0all_reduce=x"),
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def main():
    with open(os.path.join(ROOT, "systemd", "nexard.conf"), "rb") as f:
        shipped = f.read()
    write("fuzz_config", dict(CONFIG_SEEDS, shipped=shipped))
    write("fuzz_algo", {name: bytes([ctl]) + text.encode()
                        for name, (ctl, text) in ALGO_SEEDS.items()})


if __name__ == "__main__":
    main()
