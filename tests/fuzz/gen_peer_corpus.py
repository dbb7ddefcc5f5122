#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_peer_msg into tests/fuzz/corpus/fuzz_peer_msg/.

Each seed is one transport message as a peer daemon sends it: the 8-byte wire envelope
(proto/wire.h, type CTL) and a PeerMsg (proto/peer.proto), encoded by hand so that the
script needs nothing beyond Python.  Run it again after a change to peer.proto.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_peer_msg")


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(field, v):
    return varint(field << 3 | 0) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def f_packed(field, values):
    return f_bytes(field, b"".join(varint(v) for v in values))


def env(body, mtype=1, flags=0, version=1, magic=0x584E):
    return struct.pack("<HBBI", magic, version, mtype, flags) + body


def msg(field, sub, version=1):
    return f_varint(1, version) + f_bytes(field, sub)


def f_unpacked(field, values):
    """A repeated scalar as one field per value, which a decoder must also take."""
    return b"".join(f_varint(field, v) for v in values)


def register(job="j", key=7, uid=1000, world=4, ranks=(0, 1), addr="127.0.0.1:7001",
             version=1, timeout=0, withdraw=False, pids=None, packed=True):
    b = (f_bytes(1, job) + f_varint(2, key) + f_varint(3, uid) + f_varint(4, world) +
         f_packed(5, ranks) + f_bytes(6, addr) + f_varint(7, version))
    if timeout:
        b += f_varint(8, timeout)
    if withdraw:
        b += f_varint(9, 1)
    if pids is not None:
        b += (f_packed if packed else f_unpacked)(12, pids)
    return msg(2, b)


def register_reply(job="j", key=7, ranks=(1,), status=3, error="rank 1 already registered"):
    return msg(3, f_bytes(1, job) + f_varint(2, key) + f_packed(3, ranks) +
               f_varint(4, status) + f_bytes(5, error))


def rank_table(job="j", key=7, job_key=99, nodes=("127.0.0.1:7000", "[::1]:7001"),
               rank_node=(0, 0, 1, 1), node=1, timeout=0, rank_pid=None, rank_uid=None,
               packed=True):
    b = f_bytes(1, job) + f_varint(2, key) + f_varint(3, job_key)
    for n in nodes:
        b += f_bytes(4, n)
    b += f_packed(5, rank_node) + f_varint(6, node)
    if timeout:
        b += f_varint(7, timeout)
    rep = f_packed if packed else f_unpacked
    if rank_pid is not None:
        b += rep(10, rank_pid)
    if rank_uid is not None:
        b += rep(11, rank_uid)
    return msg(4, b)


def abort(job="j", key=99, status=6, reason="node 127.0.0.1:7001 was lost", comm=0,
          failed=()):
    return msg(5, f_bytes(1, job) + f_varint(2, key) + f_varint(3, status) +
               f_bytes(4, reason) + (f_varint(5, comm) if comm else b"") +
               (f_packed(8, failed) if failed else b""))


def shrink(job="j", key=99, comm=1, node=1, decide=False, failed=(3,), new_key=0, rnd=0):
    return msg(11, f_bytes(1, job) + f_varint(2, key) + f_varint(3, comm) + f_varint(4, node) +
               f_varint(5, int(decide)) + f_packed(6, failed) + f_varint(7, new_key) +
               f_varint(8, rnd))


def grow(job="j", key=99, comm=1, node=1, rnd=0, decide=False, add=2, joiners=1, nranks=3,
         new_key=0, first=0, job_node=(), status=0, error="", members=0):
    return msg(12, f_bytes(1, job) + f_varint(2, key) + f_varint(3, comm) + f_varint(4, node) +
               f_varint(5, rnd) + f_varint(6, int(decide)) + f_varint(7, add) +
               f_varint(8, joiners) + f_varint(9, nranks) + f_varint(10, new_key) +
               f_varint(11, first) + (f_packed(12, job_node) if job_node else b"") +
               f_varint(13, status) + f_bytes(14, error) + f_varint(15, members))


def joiner(job="j", key=77, uid=1000, addr="127.0.0.1:7009", joiners=2):
    return msg(13, f_bytes(1, job) + f_varint(2, key) + f_varint(3, uid) + f_bytes(4, addr) +
               f_varint(5, joiners) + f_varint(6, 1) + f_varint(7, 4 << 20))


def joiner_table(job="j", key=77, job_key=99, nodes=("127.0.0.1:7000", "127.0.0.1:7009"),
                 node=1):
    return msg(14, f_bytes(1, job) + f_varint(2, key) + f_varint(3, job_key) +
               b"".join(f_bytes(4, n) for n in nodes) + f_varint(5, node) +
               f_varint(6, 30000) + f_varint(7, 4 << 20))


def joiner_note(job="j", key=99, node=2, addr="127.0.0.1:7009", joiners=2):
    return msg(15, f_bytes(1, job) + f_varint(2, key) + f_varint(3, node) + f_bytes(4, addr) +
               f_varint(5, joiners))


def hello(addr="127.0.0.1:7002"):
    return msg(6, f_varint(1, 1) + f_bytes(2, addr))


def test_begin(tid=5, ch=0, chans=4, nbytes=1 << 20):
    return msg(7, f_varint(1, tid) + f_varint(2, ch) + f_varint(3, chans) + f_varint(4, nbytes))


def test_end(tid=5, ch=3, nbytes=1 << 20, msgs=1):
    return msg(8, f_varint(1, tid) + f_varint(2, ch) + f_varint(3, nbytes) + f_varint(4, msgs))


def test_result(tid=5, status=0, nbytes=4 << 20, msgs=4, bad=False, ch=0, off=0, error=""):
    b = f_varint(1, tid) + f_varint(2, status) + f_varint(3, nbytes) + f_varint(4, msgs)
    if bad:
        b += f_varint(5, 1) + f_varint(6, ch) + f_varint(7, off)
    if error:
        b += f_bytes(8, error)
    return msg(9, b)


def split(job="j", key=99, comm=1, seq=3, node=1, ranks=(2, 3), colors=(1, 0xFFFFFFFF),
          keys=(0, 5)):
    return msg(10, f_bytes(1, job) + f_varint(2, key) + f_varint(3, comm) + f_varint(4, seq) +
               f_varint(5, node) +
               f_packed(6, ranks) + f_packed(7, colors) + f_packed(8, keys))


SEEDS = {
    "register": env(register()),
    "register_withdraw": env(register(ranks=(3,), withdraw=True)),
    "register_timeout_v6": env(register(addr="[::1]:7000", timeout=3000)),
    "register_dup_ranks": env(register(ranks=(1, 1))),
    "register_rank_oob": env(register(ranks=(4,))),
    "register_bad_addr": env(register(addr="nohost")),
    "register_future_version": env(register(version=9)),
    "register_reply": env(register_reply()),
    "rank_table": env(rank_table()),
    "rank_table_idle_node": env(rank_table(rank_node=(0, 0, 0, 0))),
    "rank_table_dup_node": env(rank_table(nodes=("127.0.0.1:7000", "127.0.0.1:7000"))),
    "rank_table_node_oob": env(rank_table(node=2)),
    "abort": env(abort()),
    "abort_comm": env(abort(status=3, reason="all_reduce seq 4: mismatch", comm=0x1234)),
    "abort_ctrl_chars": env(abort(reason="a\nb")),
    "hello": env(hello()),
    "test_begin": env(test_begin()),
    "test_begin_chan_oob": env(test_begin(ch=4)),
    "test_end": env(test_end()),
    "test_result_bad": env(test_result(status=5, bad=True, ch=2, off=12345,
                                       error="stream 2: byte at offset 12345 differs")),
    "split": env(split()),
    "split_counts_differ": env(split(colors=(1,))),
    "split_derived_comm": env(split(comm=0x9E3779B97F4A7C15)),
    "split_comm_zero": env(split(comm=0)),
    "abort_failed_ranks": env(abort(comm=0x1234, failed=(1, 3))),
    "abort_failed_unsorted": env(abort(comm=0x1234, failed=(3, 1))),
    "shrink_ready": env(shrink()),
    "shrink_decide": env(shrink(decide=True, failed=(1, 2), new_key=0xABCDEF)),
    "shrink_decide_no_key": env(shrink(decide=True)),
    "grow_ready": env(grow()),
    "grow_decide": env(grow(decide=True, new_key=0x55AA, first=3, job_node=(0, 0, 1, 0, 2),
                            members=3)),
    "joiner": env(joiner()),
    "joiner_bad_addr": env(joiner(addr="nohost")),
    "joiner_table": env(joiner_table()),
    "joiner_table_node_oob": env(joiner_table(node=2)),
    "joiner_note": env(joiner_note()),
    "grow_mismatch": env(grow(decide=True, status=3, error="node A asked 2, node B 3")),
    "no_body": env(f_varint(1, 1)),
    "empty_ctl": env(b""),
    "data_envelope": env(b"\0" * 48, mtype=2),
    "bad_magic": env(hello(), magic=0x1234),
    "bare_body": hello(),
    # The optional pids of a Register (as many as its ranks, or none) and rank_pid /
    # rank_uid of a rank table (as many as rank_node, or none).
    "register_pids": env(register(pids=(4242, 4243))),
    "register_pids_unpacked": env(register(pids=(4242, 0), packed=False)),
    "register_pids_max": env(register(pids=(0xFFFFFFFF, 1))),
    "register_pids_over_32bit": env(register(pids=(1 << 40, (1 << 64) - 1))),
    "register_pids_short": env(register(pids=(4242,))),
    "register_pids_long": env(register(pids=(1, 2, 3))),
    "register_pids_empty_packed": env(register(pids=())),
    "register_withdraw_pids": env(register(ranks=(3,), withdraw=True, pids=(99,))),
    "rank_table_pids_uids": env(rank_table(rank_pid=(11, 12, 0, 14),
                                           rank_uid=(1000, 1000, 0, 1001))),
    "rank_table_pids_unpacked": env(rank_table(rank_pid=(11, 12, 0, 14),
                                               rank_uid=(1000,) * 4, packed=False)),
    "rank_table_pids_only": env(rank_table(rank_pid=(11, 12, 13, 14))),
    "rank_table_uids_only": env(rank_table(rank_uid=(0xFFFFFFFF,) * 4)),
    "rank_table_pid_short": env(rank_table(rank_pid=(11, 12, 13), rank_uid=(1000,) * 4)),
    "rank_table_uid_long": env(rank_table(rank_pid=(11, 12, 13, 14), rank_uid=(1000,) * 5)),
    "rank_table_pids_no_ranks": env(rank_table(rank_node=(), rank_pid=(11,), rank_uid=(1,))),
    "rank_table_pids_big_world": env(rank_table(rank_node=(0, 1) * 512,
                                                rank_pid=range(1024), rank_uid=(7,) * 1024)),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
