"""The nexar Python package (python/nexar) on real ranks: run by nexar-run, every rank runs
this module and each test is a collective, so every rank runs them in the same order.
Integer results are exact against numpy references; float16 and bfloat16 use small
integers, which both represent exactly, so they are exact too.

    nexar-run -n 3 python3 -m pytest -q tests/python/test_nexar.py
"""
import threading

import numpy as np
import pytest

import nexar


@pytest.fixture(scope="module")
def world():
    w = nexar.init()
    yield w
    nexar.finalize()


def ranks(world):
    return np.arange(world.size)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "float32", "float64", "float16"])
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_all_reduce(world, dtype, op):
    base = (np.arange(37) % 3 + world.rank + 1).astype(dtype)
    x = base.copy()
    world.all_reduce(x, op=op)
    every = [(np.arange(37) % 3 + r + 1).astype("int64") for r in range(world.size)]
    ref = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op](every, axis=0)
    if dtype == "uint8":
        ref = ref % 256
    np.testing.assert_array_equal(x, ref.astype(dtype))


def test_bfloat16_raw_buffer(world):
    # bfloat16 of small integers: the upper half of their float32 bits.
    vals = np.full(16, world.rank + 1, dtype=np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    world.all_reduce(bits, op="sum", dtype="bfloat16")
    got = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got, np.full(16, world.size * (world.size + 1) / 2))


def test_iall_reduce_and_test(world):
    x = np.full(1000, world.rank, dtype=np.int64)
    req = world.iall_reduce(x, op="max")
    while not req.test():
        pass
    assert req.done
    np.testing.assert_array_equal(x, world.size - 1)
    y = np.full(10, 1, dtype=np.int32)
    world.iall_reduce(y).wait()
    np.testing.assert_array_equal(y, world.size)


def test_broadcast_reduce(world):
    root = world.size - 1
    x = np.arange(100, dtype=np.int32) * (world.rank == root)
    world.broadcast(x, root=root)
    np.testing.assert_array_equal(x, np.arange(100))
    out = np.zeros(5, dtype=np.int64)
    world.reduce(np.full(5, world.rank, dtype=np.int64), out, op="sum", root=0)
    if world.rank == 0:
        np.testing.assert_array_equal(out, ranks(world).sum())


def test_gathers_and_scatters(world):
    n, s = 4, world.size
    mine = np.arange(n, dtype=np.int32) + 10 * world.rank
    every = np.zeros(n * s, dtype=np.int32)
    world.all_gather(mine, every)
    np.testing.assert_array_equal(every, np.concatenate([np.arange(n) + 10 * r for r in range(s)]))

    send = np.arange(n * s, dtype=np.int64) + world.rank
    part = np.zeros(n, dtype=np.int64)
    world.reduce_scatter(send, part, op="sum")
    ref = sum(np.arange(n * s) + r for r in range(s))
    np.testing.assert_array_equal(part, ref[world.rank * n:(world.rank + 1) * n])

    got = np.zeros(n * s, dtype=np.int32) if world.rank == 0 else None
    world.gather(mine, got, root=0)
    if world.rank == 0:
        np.testing.assert_array_equal(got, every)

    src = np.arange(n * s, dtype=np.int32) if world.rank == 0 else None
    recv = np.zeros(n, dtype=np.int32)
    world.scatter(src, recv, root=0)
    np.testing.assert_array_equal(recv, np.arange(n) + n * world.rank)

    a2a_send = np.array([100 * world.rank + d for d in range(s)], dtype=np.int64)
    a2a_recv = np.zeros(s, dtype=np.int64)
    world.all_to_all(a2a_send, a2a_recv)
    np.testing.assert_array_equal(a2a_recv, [100 * r + world.rank for r in range(s)])


def test_nonblocking_forms(world):
    n, s, r = 3, world.size, world.rank
    reqs, outs = [], {}
    outs["red"] = np.zeros(n, dtype=np.int64)
    reqs.append(world.ireduce(np.full(n, r + 1, dtype=np.int64), outs["red"], root=0))
    outs["rs"] = np.zeros(n, dtype=np.int32)
    reqs.append(world.ireduce_scatter(np.ones(n * s, dtype=np.int32), outs["rs"]))
    outs["g"] = np.zeros(n * s, dtype=np.int32) if r == 0 else None
    reqs.append(world.igather(np.full(n, r, dtype=np.int32), outs["g"], root=0))
    outs["sc"] = np.zeros(n, dtype=np.int32)
    src = np.repeat(np.arange(s, dtype=np.int32), n) if r == 0 else None
    reqs.append(world.iscatter(src, outs["sc"], root=0))
    outs["a2a"] = np.zeros(s, dtype=np.int64)
    reqs.append(world.iall_to_all(np.arange(s, dtype=np.int64) + 10 * r, outs["a2a"]))
    outs["scan"] = np.full(n, r + 1, dtype=np.int64)
    reqs.append(world.iscan(outs["scan"]))
    outs["ex"] = np.full(n, r + 1, dtype=np.int64)
    reqs.append(world.iexscan(outs["ex"]))
    reqs.append(world.ibarrier())
    for q in reqs:
        q.wait()
    if r == 0:
        np.testing.assert_array_equal(outs["red"], s * (s + 1) // 2)
        np.testing.assert_array_equal(outs["g"], np.repeat(np.arange(s), n))
    np.testing.assert_array_equal(outs["rs"], s)
    np.testing.assert_array_equal(outs["sc"], r)
    np.testing.assert_array_equal(outs["a2a"], [10 * q + r for q in range(s)])
    np.testing.assert_array_equal(outs["scan"], (r + 1) * (r + 2) // 2)
    if r > 0:
        np.testing.assert_array_equal(outs["ex"], r * (r + 1) // 2)


def test_bucketed(world):
    a = np.full(5, world.rank, dtype=np.float32)
    b = np.full(1000, 2 * world.rank, dtype=np.float32)
    world.all_reduce_bucketed([a, b], op="sum")
    total = sum(range(world.size))
    np.testing.assert_array_equal(a, total)
    np.testing.assert_array_equal(b, 2 * total)
    c = np.full(7, world.rank + 1, dtype=np.int64)
    world.iall_reduce_bucketed([c], op="max").wait()
    np.testing.assert_array_equal(c, world.size)
    with pytest.raises(nexar.Error):
        world.all_reduce_bucketed([np.ones(2, np.float32), np.ones(2, np.int32)])


def test_scans(world):
    x = np.full(3, world.rank + 1, dtype=np.int64)
    world.scan(x, op="sum")
    np.testing.assert_array_equal(x, (world.rank + 1) * (world.rank + 2) // 2)
    y = np.full(3, world.rank + 1, dtype=np.int64)
    world.exscan(y, op="sum")
    if world.rank > 0:
        np.testing.assert_array_equal(y, world.rank * (world.rank + 1) // 2)


def test_send_recv_ring(world):
    s = world.size
    right, left = (world.rank + 1) % s, (world.rank - 1) % s
    out = np.arange(64, dtype=np.float64) + world.rank
    got = np.zeros(64, dtype=np.float64)
    rreq = world.irecv(got, left, tag=7)
    sreq = world.isend(out, right, tag=7)
    sreq.wait()
    rreq.wait()
    np.testing.assert_array_equal(got, np.arange(64) + left)
    # blocking forms, with a bytearray (any buffer) and an explicit dtype
    msg = bytearray(b"%02d" % world.rank * 4)
    into = bytearray(8)
    if world.rank % 2 == 0:
        world.send(msg, right, tag=9, dtype="uint8")
        world.recv(into, left, tag=9, dtype="uint8")
    else:
        world.recv(into, left, tag=9, dtype="uint8")
        world.send(msg, right, tag=9, dtype="uint8")
    assert bytes(into) == b"%02d" % left * 4
    world.sync()


def test_split(world):
    sub = world.split(color=world.rank % 2, key=world.size - world.rank)
    members = [r for r in range(world.size) if r % 2 == world.rank % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(world.rank)
    x = np.array([world.rank], dtype=np.int32)
    sub.all_reduce(x)
    assert x[0] == sum(members)
    sub.free()
    assert world.split(color=None) is None


def test_blocking_call_releases_the_gil(world):
    # Another Python thread runs while this one waits in a collective.
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)

    t = threading.Thread(target=ticker)
    t.start()
    x = np.ones(1 << 20, dtype=np.float32)
    for _ in range(5):
        world.all_reduce(x)
    stop.set()
    t.join()
    assert len(ticks) > 0
    np.testing.assert_array_equal(x[:4], world.size ** 5)


def test_errors(world):
    with pytest.raises(nexar.Error) as e:
        world.all_reduce(np.ones(4, dtype=np.float32), op="average")
    assert e.value.status == 1 and "average" in str(e.value)
    with pytest.raises(nexar.Error) as e:
        world.all_reduce(bytes(16), dtype="int32")
    assert e.value.status == 1 and "read-only" in str(e.value)
    with pytest.raises(nexar.Error) as e:
        world.all_gather(np.ones(3, dtype=np.int32), np.ones(3, dtype=np.int32))
    assert e.value.status == 1
    with pytest.raises(nexar.Error) as e:
        world.send(np.ones(2, dtype=np.int32), world.size, tag=1)
    assert e.value.status == 1 and e.value.name == "NEXAR_ERR_INVALID"
    with pytest.raises(nexar.Error):
        world.free()
    assert world.failed_ranks() == []


def test_forked_child_cannot_use_the_rank(world):
    # What a fork-based data-loader worker gets: a clear refusal, while the parent goes on.
    import os
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            world.all_reduce(np.ones(4, dtype=np.int32))
            msg = "no error"
        except nexar.Error as e:
            msg = "%s %s" % (e.name, e)
        except BaseException as e:  # anything else is a failure, reported to the parent
            msg = repr(e)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    os.waitpid(pid, 0)
    assert msg.startswith("NEXAR_ERR_INVALID"), msg
    assert "forked from rank %d (pid %d)" % (world.rank, parent) in msg, msg
    assert "pid %d" % pid in msg, msg
    x = np.full(5, world.rank + 1, dtype=np.int64)
    world.all_reduce(x)
    np.testing.assert_array_equal(x, world.size * (world.size + 1) // 2)


def test_torch_tensors(world):
    # Host torch tensors by address: bfloat16 (numpy has none) and an int64 in place.
    torch = pytest.importorskip("torch")
    b = torch.full((33,), float(world.rank + 1), dtype=torch.bfloat16)
    world.all_reduce(b, op="sum")
    assert b.dtype == torch.bfloat16
    assert b.float().tolist() == [world.size * (world.size + 1) / 2] * 33
    i = torch.arange(5, dtype=torch.int64) * (world.rank + 1)
    world.all_reduce(i, op="max")
    assert i.tolist() == [k * world.size for k in range(5)]
    with pytest.raises(nexar.Error, match="not contiguous"):
        world.all_reduce(torch.zeros(4, 4)[:, 0])
