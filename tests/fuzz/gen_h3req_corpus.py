#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_h3req into tests/fuzz/corpus/fuzz_h3req/.

Each seed is the header fields (and body) of one request to nexard's HTTP/3 inspection
endpoint, encoded as fuzz_h3req.c reads them: a field is its name's length (< 0x80), two
bytes of value length (big endian), the name and the value; a byte 0x80 | n is n bytes of
body.  Besides the routes, the seeds ask for the body's format (?format=, Accept with
q-values), well and badly.  Run it again after a change to that encoding or to what
daemon/transport/quic/h3_req.c reads.
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
    # /v1/config (CTL_CONFIG) and the body's format: ?format= (json, protobuf, else 400;
    # the last one given wins) and Accept's media ranges weighed by their q-values.
    "config": get("/v1/config"),
    "config_json": get("/v1/config?format=json"),
    "format_protobuf": get("/v1/jobs?format=protobuf", extra=[("accept", "application/json")]),
    "format_xml": get("/v1/ops?format=xml"),
    "format_empty": get("/v1/ops?format="),
    "format_bare": get("/v1/ops?format&x=1"),
    "format_case": get("/v1/ops?format=JSON"),
    "format_repeated": get("/v1/stats?format=json&format=protobuf"),
    "format_repeated_bad": get("/v1/stats?format=json&format=xml"),
    "format_lookalikes": get("/v1/stats?formats=xml&xformat=xml&format_=1&&pretty"),
    "format_fragment": get("/v1/peers?x=1#format=xml"),
    "format_query_only": get("/v1/status?"),
    "format_not_found": get("/v1/nope?format=json"),
    "format_post": get("/v1/status?format=json", method="POST"),
    "format_then_twice": get("/v1/status?format=json") + f(":path", "/v1/status?format=xml"),
    "accept_json": get("/v1/status", extra=[("accept", "application/json")]),
    "accept_q": get("/v1/jobs", extra=[("accept", "application/x-protobuf;q=0.1, "
                                                  "application/json;q=0.9")]),
    "accept_q_prefers_pb": get("/v1/jobs", extra=[("accept", "application/json;q=0.5,"
                                                             "application/x-protobuf")]),
    "accept_q_equal": get("/v1/jobs", extra=[("accept", "application/json;q=0.5, "
                                                        "application/x-protobuf;q=0.500")]),
    "accept_q_zero": get("/v1/comms", extra=[("accept", "application/json;q=0")]),
    "accept_q_forms": get("/v1/comms", extra=[("accept", "application/json;q=1., "
                                                         "application/x-protobuf;q=0.")]),
    "accept_q_huge": get("/v1/comms", extra=[("accept", "application/json;q=" + "9" * 40)]),
    "accept_q_bad": get("/v1/comms", extra=[("accept", "application/json;q=1.5, "
                                                       "application/json;q=1.0001, "
                                                       "application/json;q=-1, "
                                                       "application/json;q=.5, "
                                                       "application/json;q=, "
                                                       "application/json;q=0.x")]),
    "accept_wildcards": get("/v1/ops", extra=[("accept", "*/*;q=0.1, application/*;q=0.8, "
                                                         "application/x-protobuf;q=0.2")]),
    "accept_case_ows": get("/v1/ops", extra=[("accept", " Application/JSON \t; \tQ=0.7 ,\t"
                                                        "application/X-Protobuf ; q=0.6 ")]),
    "accept_params": get("/v1/ops", extra=[("accept", "application/json; charset=utf-8; "
                                                      "q=0.9; level=1")]),
    "accept_malformed": get("/v1/ops", extra=[("accept", "json, /json, application/, ;q=1, "
                                                         ",,, application/json;;q=1, /, ; ,"
                                                         "application/json q=1, */")]),
    "accept_twice": get("/v1/stats", extra=[("accept", "application/x-protobuf;q=0.3"),
                                            ("accept", "application/json;q=0.4")]),
    "accept_many": get("/v1/stats", extra=[("accept", ", ".join(
        "application/json;q=0.%03d" % i for i in range(140)))]),
    "accept_and_format": get("/v1/peers?format=protobuf&format=json",
                             extra=[("accept", "application/x-protobuf")]),
    "accept_upper_name": get("/v1/peers", extra=[("Accept", "application/json")]),
    "accept_crlf": get("/v1/peers", extra=[("accept", "application/json\r\n")]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
