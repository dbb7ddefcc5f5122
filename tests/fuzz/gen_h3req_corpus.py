#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_h3req into tests/fuzz/corpus/fuzz_h3req/.

Each seed is the header fields (and body) of one request to nexard's HTTP/3 inspection
endpoint, encoded as fuzz_h3req.c reads them: a field is its name's length (< 0x80), two
bytes of value length (big endian), the name and the value; a byte 0x80 | n is n bytes of
body.  Run it again after a change to that encoding.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_h3req")


def f(name, value):
    name, value = name.encode(), value.encode() if isinstance(value, str) else value
    return bytes([len(name)]) + struct.pack(">H", len(value)) + name + value


def get(path, method="GET", extra=()):
    return (f(":method", method) + f(":scheme", "https") + f(":authority", "10.0.0.1:7000")
            + f(":path", path) + b"".join(f(n, v) for n, v in extra))


SEEDS = {
    "status": get("/v1/status", extra=[("user-agent", "nexarctl/0.1.0")]),
    "peers_query": get("/v1/peers?x=1"),
    "every_route": b"".join(get("/v1/" + r) for r in ("jobs", "comms", "ops", "stats")),
    "not_found": get("/v1/nope"),
    "post": get("/v1/stats", method="POST"),
    "with_body": get("/v1/jobs") + bytes([0x85]) + b"",
    "pseudo_after": f(":method", "GET") + f("accept", "*/*") + f(":path", "/v1/ops")
    + f(":scheme", "https"),
    "twice": get("/v1/ops") + f(":path", "/v1/jobs"),
    "big": get("/v1/comms", extra=[("x-pad", "a" * 3000), ("x-pad2", "b" * 2000)]),
    "many": get("/v1/comms", extra=[("x-%d" % i, "v") for i in range(40)]),
    "crlf": get("/v1/status", extra=[("x-evil", "a\r\nb")]),
    "upper": get("/v1/status", extra=[("X-Upper", "1")]),
    "http_scheme": f(":method", "GET") + f(":scheme", "http") + f(":path", "/v1/status"),
    "no_path": f(":method", "GET") + f(":scheme", "https"),
    "empty": b"",
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
