#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_ctl_reply into tests/fuzz/corpus/fuzz_ctl_reply/.

Each seed is one byte that picks the report nexarctl prints (0 status, 1 jobs, 2 comms,
3 ops, 4 stats, 5 peers, 6 config, 7 reload) and a CtlReply (proto/nexar.proto) as a
daemon answers it, some with what a hostile or broken daemon could send: huge and
negative numbers, NaN and infinities, control bytes and invalid UTF-8 in strings.
Protobuf is encoded by hand so that the script needs nothing beyond Python.  Run it again
after a change to the reports in nexar.proto.
"""
import os

from gen_corpus import f_bytes, f_double, f_packed, f_varint

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_ctl_reply")
STATUS, JOBS, COMMS, OPS, STATS, PEERS, CONFIG, RELOAD = range(8)
U64 = (1 << 64) - 1


def f_int64(field, v):
    """An int64 field: negative values as their two's complement (10 bytes)."""
    return f_varint(field, v & U64)


def status_info(uptime=3600.5, cert_end=1800000000, subject="O=nexar, CN=node0"):
    return (f_bytes(1, "0.1.0") + f_varint(2, 4242) + f_double(3, uptime) + f_varint(4, 2)
            + f_varint(5, 1) + f_varint(6, 1) + f_varint(7, 64 << 20) + f_varint(8, 30 << 20)
            + f_bytes(9, "/run/nexar/nexard.sock") + f_varint(10, 1 << 20)
            + f_int64(11, cert_end) + f_bytes(12, subject))


def rank(r, state="active"):
    return (f_varint(1, r) + f_varint(2, r) + f_varint(3, 1000 + r) + f_varint(4, 1000)
            + f_bytes(5, state) + f_varint(6, 10) + f_varint(7, 9) + f_varint(8, 4096))


def job(name="train", nodes=("10.0.0.1:7000", "10.0.0.2:7000")):
    m = (f_bytes(1, name) + f_varint(2, 4) + f_varint(3, 4) + f_bytes(4, "running")
         + f_varint(5, 1000) + f_bytes(7, nodes[0] if nodes else ""))
    for r in range(2):
        m += f_bytes(6, rank(r))
    for n in nodes:
        m += f_bytes(8, n)
    return m + f_packed(9, [0, 0, 1, 1]) + f_varint(10, 0) + f_bytes(11, "ring") + f_varint(12, 1)


def comm(state="ok"):
    return (f_varint(1, 3) + f_bytes(2, "train") + f_varint(3, 2) + f_bytes(4, state)
            + f_varint(5, 17) + f_bytes(6, rank(0)) + f_bytes(6, rank(1, "gone"))
            + f_packed(7, [1]) + f_varint(8, 2) + f_varint(9, 0))


def op(age=1.25):
    return (f_varint(1, 3) + f_bytes(2, "train") + f_varint(3, 17) + f_bytes(4, "all_reduce")
            + f_bytes(5, "all_reduce(count=1024, f32, sum)") + f_varint(6, 3)
            + f_varint(7, 16) + f_double(8, age) + f_packed(9, [1, 5])
            + f_bytes(10, "local-fanout-reduce + ring") + f_bytes(11, "part 2/16 (ring)"))


def stats(v=5):
    return b"".join(f_varint(i, v * i) for i in range(1, 14))


def lane(i, state="up", rtt=0.2):
    return (f_varint(1, i) + f_bytes(2, state) + f_double(3, rtt) + f_varint(4, 1 << 20)
            + f_varint(5, 7 << 20) + f_varint(6, 7 << 20) + f_varint(7, 900)
            + f_varint(8, 880) + f_varint(9, 1) + f_varint(10, 0) + f_varint(11, 2))


def peer(addr="10.0.0.2:7000", state="up", since=12.5, rtt=0.31, lanes=0,
         cert_end=1800000000, reason=""):
    m = (f_bytes(1, addr) + f_bytes(2, state) + f_varint(3, 1) + f_double(4, rtt)
         + f_double(5, rtt / 2) + f_double(6, 0.05) + f_varint(7, 2 << 20)
         + f_varint(8, 64 << 20) + f_varint(9, 64 << 20) + f_varint(10, 50000)
         + f_varint(11, 49000) + f_varint(12, 3) + f_varint(13, 64) + f_varint(14, 64)
         + f_varint(15, 0) + f_varint(16, 2) + f_bytes(17, "TLS_AES_128_GCM_SHA256")
         + f_bytes(18, reason) + f_double(19, since) + f_varint(20, 1)
         + f_bytes(21, "train") + f_int64(22, cert_end) + f_varint(23, 1)
         + f_varint(24, 1))
    for i in range(lanes):
        m += f_bytes(25, lane(i))
    return m


def config_entry(key, value, source="default"):
    return f_bytes(1, key) + f_bytes(2, value) + f_bytes(3, source)


def reply(*fields):
    return b"".join(fields)


SEEDS = {
    "status": (STATUS, reply(f_bytes(3, status_info()))),
    "status_absent": (STATUS, b""),
    "status_extremes": (STATUS, reply(f_bytes(3, status_info(
        uptime=float("inf"), cert_end=-(1 << 62), subject="\x1b[31mCN=\xff\xfe")))),
    # The fuzz phase found this one: end - now overflowed in the "ROTATE IT SOON" test.
    "status_cert_int64_min": (STATUS, reply(f_bytes(3, status_info(cert_end=-(1 << 63))))),
    "jobs": (JOBS, reply(f_bytes(4, job()), f_bytes(4, job("local", ())))),
    "jobs_hostile": (JOBS, reply(f_bytes(4, job("a\nFORGED LINE\x7f\xc0\xaf", ("x" * 300,))))),
    "comms": (COMMS, reply(f_bytes(5, comm()), f_bytes(5, comm("failed: rank 1 gone")))),
    "ops": (OPS, reply(f_bytes(6, op()), f_bytes(6, op(1e300)))),
    "ops_nan": (OPS, reply(f_bytes(6, op(float("nan"))))),
    "stats": (STATS, reply(f_bytes(7, stats()))),
    "stats_max": (STATS, reply(f_bytes(7, b"".join(f_int64(i, -1) for i in range(1, 14))))),
    "peers": (PEERS, reply(f_bytes(10, "10.0.0.1:7000"), f_bytes(8, peer()))),
    "peers_lanes": (PEERS, reply(f_bytes(10, "10.0.0.1:7000"), f_bytes(8, peer(lanes=4)),
                                 f_bytes(8, peer("[::1]:7001", "lost", reason="idle timeout")))),
    "peers_extremes": (PEERS, reply(f_bytes(10, "10.0.0.1:7000"), f_bytes(8, peer(
        since=1e300, rtt=-1.0, lanes=2, cert_end=(1 << 62))), f_bytes(8, peer(
        since=float("-inf"), rtt=float("nan"), cert_end=-5)))),
    "peers_cert_int64_min": (PEERS, reply(f_bytes(8, peer(cert_end=-(1 << 63))))),
    "peers_no_network": (PEERS, reply()),
    "config": (CONFIG, reply(f_bytes(11, config_entry("slot_bytes", "4194304")),
                             f_bytes(11, config_entry("quic_lanes", "4", "config file")),
                             f_bytes(12, "/etc/nexar/nexard.conf"))),
    "config_note": (CONFIG, reply(f_bytes(11, config_entry("listen", "", "config file or "
                                                           "command line")),
                                  f_bytes(13, "read from a pipe"))),
    "reload": (RELOAD, reply(f_bytes(14, "reloaded: 3 connections handed over"))),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (report, body) in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(bytes([report]) + body)


if __name__ == "__main__":
    main()
