#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_qrecord into tests/fuzz/corpus/fuzz_qrecord/.

Each seed is one control byte (fuzz_qrecord.c: split points; 0x80 | k stops the parse
after record k) and then the bytes of one QUIC stream as a peer daemon writes them
(daemon/transport/quic/quic_record.h).  Run it again after a change to the stream format.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_qrecord")
TMSG_MAX = 64 << 20
SWITCH = 0xFFFFFFFF


def pre(channel, magic=b"nxq1"):
    return magic + struct.pack(">Q", channel)


def rec(payload, length=None):
    return struct.pack(">I", len(payload) if length is None else length) + payload


def switch(channel):
    return struct.pack(">IQ", SWITCH, channel)


def body(n, seed=1):
    return bytes((i * 131 + seed) % 251 for i in range(n))


SEEDS = {
    "one": (0x00, pre(7) + rec(b"hello")),
    "empty_stream": (0x01, b""),
    "preamble_only": (0x02, pre(1 << 63)),
    "empty_records": (0x03, pre(1) + rec(b"") + rec(b"") + rec(b"x") + rec(b"")),
    "sizes": (0x11, pre(2) + b"".join(rec(body(n, n)) for n in (1, 3, 4, 12, 255, 1000))),
    "large": (0x25, pre(3) + rec(body(3000))),
    "switch": (0x07, pre(1) + rec(b"a") + switch(2) + rec(b"bb") + switch(3) + switch(4)
               + rec(b"ccc")),
    "switch_at_end": (0x08, pre(1) + rec(b"a") + switch(9)),
    "switch_same": (0x09, pre(5) + switch(5) + rec(b"same channel")),
    "stop_first": (0x80, pre(1) + rec(b"a") + rec(b"b") + rec(b"c")),
    "stop_empty": (0x81, pre(1) + rec(b"a") + rec(b"") + rec(b"c")),
    "stop_after_switch": (0x82, pre(1) + rec(b"a") + switch(2) + rec(b"b") + rec(b"c")),
    "bad_magic": (0x0A, pre(1, magic=b"nxq2") + rec(b"a")),
    "magic_as_length": (0x0B, pre(1) + rec(b"a") + b"nxq1" + rec(b"b")),
    "too_long": (0x0C, pre(1) + rec(b"abc", length=TMSG_MAX + 1)),
    "too_long_after": (0x0D, pre(1) + rec(b"ok") + rec(b"", length=0xFFFFFFFE)),
    "max_partial": (0x0E, pre(1) + rec(body(100), length=TMSG_MAX)),
    "partial": (0x0F, pre(1) + rec(b"a") + rec(body(40), length=41)),
    "cut_header": (0x10, pre(1) + rec(b"a") + b"\x00\x00"),
    "cut_preamble": (0x12, pre(1)[:7]),
    "cut_switch": (0x13, pre(1) + switch(2)[:9]),
    # Long enough to be offered streamed (NX_TSTREAM_MIN): every one, or every other.
    "streamed": (0x14, pre(4) + rec(body(5000, 3)) + rec(b"x") + rec(body(4096, 5))
                 + switch(6) + rec(body(9000, 7)) + rec(body(4095, 9))),
    "streamed_other": (0x15, pre(4) + rec(body(4096, 1)) + rec(body(6000, 2))
                       + rec(body(4200, 4))),
    "streamed_cut": (0x16, pre(4) + rec(body(5000, 3)) + rec(body(7000, 1), length=9000)),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (ctl, data) in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(bytes([ctl]) + data)


if __name__ == "__main__":
    main()
