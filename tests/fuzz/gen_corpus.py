#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

The seeds are checked in; run this again (python3 tests/fuzz/gen_corpus.py) after a
change to proto/frame.h, proto/nexar.proto, struct nx_sqe or proto/wire.h.  Protobuf is
encoded by hand here so that the script needs nothing beyond Python.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- protobuf wire format (only what nexar.proto uses) ----------------------


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


def f_double(field, v):
    return varint(field << 3 | 1) + struct.pack("<d", v)


def f_packed(field, values):
    return f_bytes(field, b"".join(varint(v) for v in values))


# ---- frames (proto/frame.h) --------------------------------------------------

MAGIC = 0x3146584E
VERSION = 1
HELLO, HELLO_REPLY, JOIN, JOIN_REPLY, CTL, CTL_REPLY, ERROR = range(1, 8)
COMM_QUERY, COMM_REPLY = 11, 12


def frame(mtype, payload, magic=MAGIC, version=VERSION, flags=0, length=None):
    if length is None:
        length = len(payload)
    return struct.pack("<IHHII", magic, version, mtype, length, flags) + payload


hello = f_varint(1, 1) + f_varint(2, 1) + f_varint(3, 4242) + f_bytes(4, "0.1.0")
hello_ctl = f_varint(1, 1) + f_varint(2, 2) + f_varint(3, 4243)
hello_reply = f_varint(1, 1) + f_bytes(2, "0.1.0") + f_varint(3, 77)
join = (f_bytes(1, "demo") + f_varint(2, 3) + f_varint(3, 4) + f_varint(4, 3)
        + f_varint(5, 300000))
join_reply = (f_varint(1, 0) + f_varint(3, 5) + f_varint(4, 1) + f_varint(5, 3)
              + f_varint(6, 4) + f_varint(7, 285212672))
error = f_varint(1, 3) + f_bytes(2, "rank 2 called all_reduce(count=1000, f32, sum)")
ctl_ops = f_varint(1, 4)
rank_info = (f_varint(1, 1) + f_varint(2, 1) + f_varint(3, 999) + f_varint(4, 1000)
             + f_bytes(5, "waiting") + f_varint(6, 10) + f_varint(7, 9))
op_info = (f_varint(1, 1) + f_bytes(2, "demo") + f_varint(3, 17) + f_bytes(4, "all_reduce")
           + f_bytes(5, "all_reduce(count=1024, f32, sum)") + f_varint(6, 0)
           + f_varint(7, 1) + f_double(8, 12.5) + f_packed(9, [1, 3]) + f_bytes(10, "local"))
comm_info = (f_varint(1, 1) + f_bytes(2, "demo") + f_varint(3, 4) + f_bytes(4, "ok")
             + f_varint(5, 17) + f_bytes(6, rank_info))
status_info = (f_bytes(1, "0.1.0") + f_varint(2, 77) + f_double(3, 3.5) + f_varint(4, 4)
               + f_varint(5, 1) + f_varint(6, 1) + f_varint(7, 1 << 30) + f_bytes(9, "/run/nexar/nexard.sock"))
stats = b"".join(f_varint(i, i * 3) for i in range(1, 14))
comm_reply = (f_varint(1, 0) + f_packed(3, [2, 5]) + f_varint(4, 5)
              + f_bytes(5, "rank 2 (rank 2 of communicator 1) is gone"))
ctl_reply = (f_varint(1, 0) + f_bytes(3, status_info) + f_bytes(5, comm_info)
             + f_bytes(6, op_info) + f_bytes(7, stats))
CTL_CONFIG = 8
# nexarctl config's reply: ConfigEntry (key, value, source), the file, the note.
config_reply = (f_varint(1, 0)
                + f_bytes(11, f_bytes(1, "slot_bytes") + f_bytes(2, "4M")
                          + f_bytes(3, "config file"))
                + f_bytes(11, f_bytes(1, "socket") + f_bytes(3, "default"))
                + f_bytes(11, f_bytes(1, "log_level") + f_bytes(2, "debug")
                          + f_bytes(3, "config file or command line"))
                + f_bytes(11, b"")
                + f_bytes(12, "/etc/nexar/nexard.conf")
                + f_bytes(13, "the file changed since nexard read it"))

FRAME_SEEDS = {
    "hello": frame(HELLO, hello),
    "hello_join": frame(HELLO, hello) + frame(JOIN, join),
    "ctl_session": frame(HELLO, hello_ctl) + frame(CTL, ctl_ops) + frame(CTL, f_varint(1, 5)),
    "replies": (frame(HELLO_REPLY, hello_reply) + frame(JOIN_REPLY, join_reply)
                + frame(CTL_REPLY, ctl_reply) + frame(ERROR, error)),
    "empty_payloads": frame(HELLO, b"") + frame(CTL, b"") + frame(ERROR, b""),
    "bad_magic": frame(HELLO, hello, magic=0x12345678),
    "bad_version": frame(HELLO, hello, version=2),
    "bad_flags": frame(CTL, ctl_ops, flags=1),
    "too_long": frame(JOIN, b"", length=(1 << 20) + 1),
    "comm_query": (frame(HELLO, hello) + frame(JOIN, join) + frame(COMM_QUERY, f_varint(1, 1))
                   + frame(COMM_REPLY, comm_reply)),
    "truncated": frame(JOIN, join)[:-3],
    "ctl_config": (frame(HELLO, hello_ctl) + frame(CTL, f_varint(1, CTL_CONFIG))
                   + frame(CTL_REPLY, config_reply)),
    "ctl_future_command": frame(HELLO, hello_ctl) + frame(CTL, f_varint(1, CTL_CONFIG + 1)),
}

# ---- daemon-to-daemon messages (proto/wire.h) --------------------------------

W_MAGIC, W_VERSION = 0x584E, 1
W_CTL, W_DATA, W_TEST, W_P2P = 1, 2, 3, 4
W_LAST = 0x1
W_ACK = 0x1  # P2P


def wire_env(wtype, flags=0, magic=W_MAGIC, version=W_VERSION):
    return struct.pack("<HBBI", magic, version, wtype, flags)


def wire_data(wtype, payload, flags=0, job=7, comm=3, seq=42, step=1, sig=0xC0FFEE,
              offset=0, length=None, src=1, kind=None, dtype=0, redop=0, root=0, count=None,
              pad=0, **env):
    if length is None:
        length = len(payload)
    if kind is None:  # DATA carries the op's signature, TEST none
        kind = 1 if wtype == W_DATA else 0
    if count is None:
        count = 1 << 20 if wtype == W_DATA else 0
    return (wire_env(wtype, flags, **env)
            + struct.pack("<QQQIIQIIBBBBIQ", job, comm, seq, step, sig, offset, length, src,
                          kind, dtype, redop, pad, root, count)
            + payload)


# A PeerMsg as peer_msg.c sends it: version = 1, then a oneof member (field 2, empty).
peer_msg = f_varint(1, 1) + f_bytes(2, b"")

def wire_p2p(payload, flags=0, job=7, comm=3, k=5, tag=9, src=1, dst=2, dtype=0,
             count=None, offset=0, length=None, pad=0, **env):
    if count is None:
        count = (offset + len(payload) + 3) // 4
    return (wire_env(W_P2P, flags, **env)
            + struct.pack("<QQQIIIB3xQQII", job, comm, k, tag, src, dst, dtype, count,
                          offset, len(payload) if length is None else length, pad)
            + payload)


WIRE_SEEDS = {
    "p2p": wire_p2p(bytes(range(40)), count=100, offset=16),
    "p2p_ack": wire_p2p(b"", flags=W_ACK, count=1 << 20, offset=1 << 19),
    "p2p_empty_msg": wire_p2p(b"", count=0),
    "p2p_past_end": wire_p2p(b"abcdefgh", count=1, dtype=4),
    "p2p_bad_dtype": wire_p2p(b"", dtype=10, count=0),
    "p2p_ack_payload": wire_p2p(b"x", flags=W_ACK),
    "p2p_self": wire_p2p(b"", src=3, dst=3, count=0),
    "p2p_padding": wire_p2p(b"", pad=1, count=0),
    "ctl": wire_env(W_CTL) + peer_msg,
    "data_empty": wire_data(W_DATA, b""),
    "data_last": wire_data(W_DATA, bytes(range(64)), flags=W_LAST, offset=1 << 20, step=3),
    "data_large": wire_data(W_DATA, bytes(i * 7 % 251 for i in range(4096)), seq=1 << 40),
    "test": wire_data(W_TEST, b"\xa5" * 100, job=0x1234, seq=9),
    "max_offset": wire_data(W_DATA, b"abcd", offset=(1 << 64) - 4),
    "bad_magic": wire_data(W_DATA, b"x", magic=0x4E58),
    "bad_version": wire_data(W_DATA, b"x", version=2),
    "bad_type": wire_env(9) + peer_msg,
    "bad_flags": wire_data(W_TEST, b"x", flags=W_LAST),
    "ctl_empty": wire_env(W_CTL),
    "length_lies": wire_data(W_DATA, b"xyz", length=4),
    "offset_wraps": wire_data(W_DATA, b"abcd", offset=(1 << 64) - 3),
    "truncated": wire_data(W_DATA, b"")[:30],
    "data_sig_padding": wire_data(W_DATA, b"x", pad=1),
    "test_with_sig": wire_data(W_TEST, b"x", count=5),
}

# ---- descriptors (proto/shm_abi.h) -------------------------------------------

K = dict(all_reduce=1, broadcast=2, reduce=3, all_gather=4, reduce_scatter=5, gather=6,
         scatter=7, all_to_all=8, scan=9, exscan=10, bucketed=11, barrier=12, send=13,
         recv=14, split=15, free=16, abort=17, shrink=18, grow=19, pulled=20)
DIRECT = 0x01
CMA = 0x04


def sqe(kind, dtype=0, redop=0, flags=0, seq=0, count=0, peer=0, tag=0, in_off=0,
        out_off=0, chunk=0, comm=1, user=0x1234):
    return struct.pack("<QIBBBBQQIIQQII", user, comm, K[kind], dtype, redop, flags, seq,
                       count, peer, tag, in_off, out_off, chunk, 0)


def limits(slot_shift, slots, heap, size, rank, local=False, cma=False):
    """Raw limit bytes as fuzz_sqe.c decodes them: slot_bytes = 64 << slot_shift,
    slots staging slots, heap bytes of heap, comm_size = size, comm_rank = rank, and
    the communicator's plan bits: local (bit 32 of the slot word), single copy (33)."""
    plan = int(local) | (int(cma) << 1)
    return struct.pack("<QQII", (heap << 8) | (slots - 1), slot_shift | (plan << 32),
                       size - 1, rank)


MIB = 1 << 20
L4 = limits(16, 4, 256 * MIB, 4, 0)       # 4 MiB slots, 4 ranks, rank 0
L4R2 = limits(16, 4, 256 * MIB, 4, 2)     # the same as rank 2
SMALL = limits(6, 2, 0, 8, 7)             # 4 KiB slots, no heap, 8 ranks, rank 7
L2LOCAL = limits(16, 4, 256 * MIB, 2, 1, local=True)  # 2 ranks on one node, rank 1
L2CMA = limits(16, 4, 256 * MIB, 2, 1, local=True, cma=True)  # the same, single copy

SQE_SEEDS = {
    "all_reduce_staged": sqe("all_reduce", count=1000, redop=0) + L4,
    "all_reduce_chunk3": sqe("all_reduce", dtype=1, count=2_000_000, chunk=3,
                             in_off=8 * MIB, out_off=8 * MIB) + L4,
    "broadcast_direct": sqe("broadcast", dtype=2, flags=DIRECT, count=1 << 20, peer=1,
                            in_off=16 * MIB, out_off=16 * MIB) + L4R2,
    "reduce_nonroot": sqe("reduce", dtype=6, redop=3, count=4096, peer=0, in_off=4 * MIB,
                          out_off=4 * MIB) + L4R2,
    "all_gather": sqe("all_gather", dtype=5, count=100, out_off=1024) + L4,
    # A local plan: 2 MiB of f32 broadcast in 4 chunks of 512 KiB (the last one), and
    # an all_gather of 1 MiB a block in 6 chunks (the last one, short).
    "broadcast_local_chunk3": sqe("broadcast", count=1 << 19, peer=0, chunk=3) + L2LOCAL,
    "all_gather_local_chunk5": sqe("all_gather", count=1 << 18, chunk=5,
                                   out_off=4 * MIB) + L2LOCAL,
    "reduce_scatter": sqe("reduce_scatter", dtype=3, redop=1, count=10) + L4,
    "all_to_all_direct": sqe("all_to_all", dtype=8, flags=DIRECT, count=512,
                             in_off=16 * MIB, out_off=32 * MIB) + L4,
    "scatter_small": sqe("scatter", dtype=9, count=64, peer=7, out_off=2048) + SMALL,
    "exscan": sqe("exscan", dtype=7, redop=2, count=3) + SMALL,
    "send": sqe("send", count=10, peer=1, tag=7) + L4,
    "recv": sqe("recv", dtype=4, count=10, peer=3, tag=7, out_off=4 * MIB) + L4,
    "split": sqe("split", peer=2, tag=5) + L4,
    "barrier": sqe("barrier") + L4,
    "abort": sqe("abort") + L4,
    "shrink": sqe("shrink") + L4,
    "grow": sqe("grow", peer=2) + L4,
    # Peer reads: a rank read chunk 3 of op 9; and one that also names a count (refused).
    "pulled": sqe("pulled", seq=9, chunk=3) + L2LOCAL,
    "pulled_with_count": sqe("pulled", seq=9, chunk=3, count=4) + L2LOCAL,
    # Single copy: rank 1's all_gather of 1 MiB a block names its buffers and the slot for
    # its table; a broadcast staged on a single-copy plan (refused); a reader's failure
    # notice (EFAULT, rank 0).
    "all_gather_cma": sqe("all_gather", count=1 << 18, flags=CMA, in_off=0x7f0012340000,
                          out_off=0x7f0056780000, tag=2) + L2CMA,
    "broadcast_cma_staged": sqe("broadcast", count=1 << 18, peer=0) + L2CMA,
    "pulled_failed": sqe("pulled", seq=9, peer=0, tag=14) + L2CMA,
    # The fuzzer's find: an op without data flagged single-copy (refused).
    "shrink_cma_flag": sqe("shrink", flags=CMA) + L2CMA,
    "bad_kind": sqe("all_reduce", count=1)[:12] + b"\x63" + sqe("all_reduce", count=1)[13:] + L4,
    "outside_arena": sqe("all_reduce", flags=DIRECT, count=1 << 40) + L4,
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def main():
    # fuzz_frame's first byte seeds the split points.
    write("fuzz_frame", {name: bytes([i * 37 % 256]) + data
                         for i, (name, data) in enumerate(FRAME_SEEDS.items())})
    write("fuzz_sqe", SQE_SEEDS)
    write("fuzz_wire", WIRE_SEEDS)


if __name__ == "__main__":
    main()
