"""The torch.distributed backend (import nexar.torch) on real ranks: nexar-run starts them,
every rank runs this module, and each test is a collective, run by every rank in the same
order.  References are computed on each rank from every rank's inputs, which are a
function of the rank; integer results are exact, and so are float results of small
integers.  Float32 sums of arbitrary values are checked within 1e-6 relative.

    nexar-run -n 3 python3 -m pytest -q tests/python/test_torch.py
"""
import threading
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import nexar.torch  # noqa: E402,F401  (registers the backend)

INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
SMALL_FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def world():
    dist.init_process_group("nexar")
    yield dist.get_rank(), dist.get_world_size()
    dist.destroy_process_group()


def data(rank, n=37, dtype=torch.int64):
    """Rank r's input: small values that every type here holds exactly."""
    return ((torch.arange(n) % 3) + rank + 1).to(dtype)


def reduce_ref(size, op, n=37):
    every = torch.stack([data(r, n) for r in range(size)])
    return {dist.ReduceOp.SUM: every.sum(0), dist.ReduceOp.PRODUCT: every.prod(0),
            dist.ReduceOp.MIN: every.min(0).values, dist.ReduceOp.MAX: every.max(0).values}[op]


def test_backend_name(world):
    assert dist.get_backend() == "nexar"
    assert dist.get_rank() == int(__import__("os").environ["RANK"])


@pytest.mark.parametrize("dtype", INTS + SMALL_FLOATS)
@pytest.mark.parametrize("op", [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
                                dist.ReduceOp.MAX])
def test_all_reduce(world, dtype, op):
    rank, size = world
    if op == dist.ReduceOp.PRODUCT and dtype in (torch.float16, torch.bfloat16) and size > 3:
        pytest.skip("3^size leaves the exact range of 8-bit mantissas")
    x = data(rank, dtype=dtype)
    dist.all_reduce(x, op=op)
    ref = reduce_ref(size, op)
    if dtype in (torch.int8, torch.uint8):
        ref = ref.to(dtype)  # wraps as the fixed-width sum does
    assert torch.equal(x, ref.to(dtype)), (x, ref)


def test_all_reduce_float32_tolerance(world):
    rank, size = world
    gen = lambda r: torch.sin(torch.arange(1000, dtype=torch.float64) * (r + 1))  # noqa: E731
    x = gen(rank).float()
    dist.all_reduce(x)
    ref = sum(gen(r) for r in range(size))
    assert torch.allclose(x.double(), ref, rtol=1e-6, atol=1e-6 * size)


def test_avg(world):
    rank, size = world
    x = torch.full((10,), float(2 * rank))
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert torch.equal(x, torch.full((10,), float(size - 1)))


def test_bool_sum_is_or(world):
    rank, size = world
    x = torch.tensor([rank == 0, False, True])
    dist.all_reduce(x)
    assert x.tolist() == [True, False, True]


def test_non_contiguous(world):
    rank, size = world
    m = torch.zeros(6, 4, dtype=torch.int64)
    m[:, 1] = torch.arange(6) + rank
    col = m[:, 1]
    assert not col.is_contiguous()
    dist.all_reduce(col)
    assert m[:, 1].tolist() == [size * k + size * (size - 1) // 2 for k in range(6)]
    assert m[:, 0].tolist() == [0] * 6


def test_async_work_and_future(world):
    rank, size = world
    x = data(rank)
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    (value,) = fut.wait()
    assert work.is_completed() and work.is_success()
    assert torch.equal(value, reduce_ref(size, dist.ReduceOp.SUM))
    assert torch.equal(x, value)


def test_completes_without_wait(world):
    # The group's own thread finishes the Work and its future: nobody calls wait().
    rank, size = world
    x = torch.ones(1 << 20)
    fut = dist.all_reduce(x, async_op=True).get_future()
    deadline = time.monotonic() + 30
    while not fut.done():
        assert time.monotonic() < deadline, "the future never completed"
        time.sleep(0.001)
    assert torch.equal(x, torch.full((1 << 20,), float(size)))


def test_wait_releases_the_gil(world):
    # Rank 0 joins the barrier 0.3 s late; meanwhile the others wait in Work.wait(), and
    # another Python thread of theirs keeps running.
    rank, size = world
    ticks, stop = [0], threading.Event()

    def ticker():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    if rank == 0:
        time.sleep(0.3)
    start = time.monotonic()
    dist.barrier(async_op=True).wait()
    waited = time.monotonic() - start
    stop.set()
    t.join()
    if rank != 0 and waited > 0.2:
        assert ticks[0] > 50, (ticks[0], waited)


def test_failed_op_names_rank_and_op(world):
    # Counts that differ between ranks: every rank's Work fails with MISMATCH and the
    # shim's text.  On a group of its own, since a failed communicator stays failed.
    rank, size = world
    if size < 2:
        pytest.skip("one rank")
    g = dist.new_group(list(range(size)))
    work = dist.all_reduce(torch.zeros(4 + rank), group=g, async_op=True)
    with pytest.raises(RuntimeError) as e:
        work.wait()
    text = str(e.value)
    assert text.startswith("nexar allreduce (rank %d of %d): NEXAR_ERR_MISMATCH: " %
                           (rank, size)), text
    assert "rank" in text.split("NEXAR_ERR_MISMATCH: ", 1)[1], text
    assert not work.is_success()
    dist.destroy_process_group(g)


def test_forked_child(world):
    # A child forked from a rank (a checkpoint writer, a worker that exits through the
    # interpreter's atexit): a collective raises and names the fork, and shutdown(), which
    # frees the groups' communicators and leaves the job, returns without touching the
    # parent's rings (the shim refuses those calls in a forked child; nexar_finalize does
    # nothing there).  The parent's group goes on, exact.
    import os
    import signal
    rank, size = world
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            try:
                dist.all_reduce(torch.ones(4))
                msg = "no error"
            except RuntimeError as e:
                msg = str(e)
            nexar.torch.shutdown()
            msg += "|shutdown returned"
        except BaseException as e:
            msg = repr(e)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    deadline = time.time() + 20
    while time.time() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
        time.sleep(0.05)
    else:
        if time.time() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    assert "forked from rank %d" % rank in msg and "NEXAR_ERR_INVALID" in msg, msg
    assert msg.endswith("|shutdown returned"), msg
    x = data(rank)
    dist.all_reduce(x)
    assert torch.equal(x, reduce_ref(size, dist.ReduceOp.SUM)), x


@pytest.mark.filterwarnings("ignore:torch.distributed.all_reduce_coalesced")
def test_allreduce_coalesced(world):
    rank, size = world
    a, b = data(rank, 5), data(rank, 9) * 2
    dist.all_reduce_coalesced([a, b])
    assert torch.equal(a, reduce_ref(size, dist.ReduceOp.SUM, 5))
    assert torch.equal(b, reduce_ref(size, dist.ReduceOp.SUM, 9) * 2)


def test_broadcast(world):
    rank, size = world
    root = size - 1
    x = data(rank, dtype=torch.float32)
    dist.broadcast(x, src=root)
    assert torch.equal(x, data(root, dtype=torch.float32))


def test_reduce(world):
    rank, size = world
    x = data(rank)
    dist.reduce(x, dst=0, op=dist.ReduceOp.MAX)
    if rank == 0:
        assert torch.equal(x, reduce_ref(size, dist.ReduceOp.MAX))


def test_all_gather(world):
    rank, size = world
    out = [torch.zeros(2, 3, dtype=torch.int32) for _ in range(size)]
    dist.all_gather(out, data(rank, 6, torch.int32).view(2, 3))
    for r in range(size):
        assert torch.equal(out[r], data(r, 6, torch.int32).view(2, 3))


def test_all_gather_into_tensor(world):
    rank, size = world
    out = torch.zeros(size * 7, dtype=torch.int64)
    fn = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    fn(out, data(rank, 7))
    assert torch.equal(out, torch.cat([data(r, 7) for r in range(size)]))


def test_gather_scatter(world):
    rank, size = world
    root = 1 % size
    out = [torch.zeros(4, dtype=torch.int64) for _ in range(size)] if rank == root else None
    dist.gather(data(rank, 4), out, dst=root)
    if rank == root:
        for r in range(size):
            assert torch.equal(out[r], data(r, 4))
    got = torch.zeros(3, dtype=torch.int64)
    parts = [data(r, 3) * 10 for r in range(size)] if rank == root else None
    dist.scatter(got, parts, src=root)
    assert torch.equal(got, data(rank, 3) * 10)


def test_reduce_scatter(world):
    rank, size = world
    ins = [data(rank, 4) + 100 * j for j in range(size)]
    out = torch.zeros(4, dtype=torch.int64)
    dist.reduce_scatter(out, ins)
    assert torch.equal(out, reduce_ref(size, dist.ReduceOp.SUM, 4) + 100 * rank * size)


def test_reduce_scatter_tensor(world):
    rank, size = world
    inp = torch.cat([data(rank, 5) * (j + 1) for j in range(size)])
    out = torch.zeros(5, dtype=torch.int64)
    fn = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    fn(out, inp)
    assert torch.equal(out, reduce_ref(size, dist.ReduceOp.SUM, 5) * (rank + 1))


def test_all_to_all_single_even(world):
    rank, size = world
    inp = torch.tensor([100 * rank + j for j in range(size) for _ in range(2)])
    out = torch.zeros(2 * size, dtype=torch.int64)
    dist.all_to_all_single(out, inp)
    assert out.tolist() == [100 * i + rank for i in range(size) for _ in range(2)]


def test_all_to_all_single_uneven(world):
    rank, size = world
    # rank i sends j + 1 rows of 3 to rank j, each row 1000 i + 10 j + k.
    in_splits = [j + 1 for j in range(size)]
    inp = torch.cat([torch.tensor([[1000 * rank + 10 * j + k] * 3 for k in range(j + 1)])
                     for j in range(size)])
    out_splits = [rank + 1] * size
    out = torch.zeros(sum(out_splits), 3, dtype=torch.int64)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    ref = torch.cat([torch.tensor([[1000 * i + 10 * rank + k] * 3 for k in range(rank + 1)])
                     for i in range(size)])
    assert torch.equal(out, ref)


def test_all_to_all_list(world):
    rank, size = world
    ins = [torch.full((j + 1,), 10 * rank + j, dtype=torch.float64) for j in range(size)]
    outs = [torch.zeros(rank + 1, dtype=torch.float64) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for i in range(size):
        assert outs[i].tolist() == [float(10 * i + rank)] * (rank + 1)


def test_send_recv_ring(world):
    rank, size = world
    if size < 2:
        pytest.skip("one rank")
    to, frm = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(8, dtype=torch.int32)
    if rank % 2 == 0:
        dist.send(data(rank, 8, torch.int32), to, tag=7)
        dist.recv(got, frm, tag=7)
    else:
        dist.recv(got, frm, tag=7)
        dist.send(data(rank, 8, torch.int32), to, tag=7)
    assert torch.equal(got, data(frm, 8, torch.int32))
    s = dist.isend(data(rank, 3) * 5, to, tag=9)
    got = torch.zeros(3, dtype=torch.int64)
    dist.irecv(got, frm, tag=9).wait()
    s.wait()
    assert torch.equal(got, data(frm, 3) * 5)


def test_barrier_and_new_group_of_everyone(world):
    rank, size = world
    dist.barrier()
    g = dist.new_group(list(range(size)))
    x = torch.tensor([rank + 1])
    dist.all_reduce(x, group=g)
    assert x.item() == size * (size + 1) // 2
    dist.destroy_process_group(g)


def test_new_group_of_some_ranks(world):
    """Every rank calls new_group; the members' ops see the members only (ranks 0 and 3 on
    two nodes under torch_n2, so the group crosses them), the others are outside it, and
    the world's ops still match on every rank."""
    rank, size = world
    members = [size - 1, 0]  # torch sorts them: rank 0 is the group's rank 0
    g = dist.new_group(members)
    if rank in (0, size - 1):
        assert dist.get_rank(g) == (0 if rank == 0 else 1)
        assert dist.get_world_size(g) == 2
        x = data(rank)
        dist.all_reduce(x, group=g)
        assert torch.equal(x, data(0) + data(size - 1))
        out = [torch.zeros(37, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(out, data(rank), group=g)
        assert torch.equal(out[0], data(0)) and torch.equal(out[1], data(size - 1))
        y = torch.full((5,), rank + 10)
        dist.broadcast(y, src=size - 1, group=g)  # src is a world rank
        assert torch.equal(y, torch.full((5,), size - 1 + 10))
    else:
        assert dist.get_rank(g) == -1
    x = data(rank)
    dist.all_reduce(x)
    assert torch.equal(x, reduce_ref(size, dist.ReduceOp.SUM))
    dist.destroy_process_group(g)


def test_overlapping_subgroups(world):
    """Evens and odds, then the first two ranks and the last two, which overlap both:
    each op runs on its own group, interleaved with the others' ops, and sums exactly the
    group's ranks.  (torch 1.13's new_subgroups_by_enumeration, which makes such a
    partition, refuses to run without CUDA.)"""
    rank, size = world
    evens, odds = list(range(0, size, 2)), list(range(1, size, 2))
    groups = [dist.new_group(evens), dist.new_group(odds)]
    low, high = dist.new_group([0, 1]), dist.new_group([size - 2, size - 1])
    parity = evens if rank % 2 == 0 else odds
    mine = groups[rank % 2]
    x = torch.tensor([rank + 1] * 3)
    dist.all_reduce(x, group=mine)
    assert x.tolist() == [sum(r + 1 for r in parity)] * 3
    for g, ranks in ((low, [0, 1]), (high, [size - 2, size - 1])):
        if rank in ranks:
            y = torch.tensor([10 * (rank + 1)])
            dist.all_reduce(y, group=g)
            assert y.item() == sum(10 * (r + 1) for r in ranks)
    dist.barrier()
    for g in groups + [low, high]:
        dist.destroy_process_group(g)


def test_subgroup_needs_every_rank(world):
    """A group of some ranks made without the others (the creator called directly, as
    torch would for a member had the others not entered new_group) is refused with a
    text, not left to hang; the world stays usable."""
    rank, size = world
    with pytest.raises(RuntimeError, match=r"new_group of 1 of the world's %d ranks on rank "
                       r"%d: the ranks outside the group took no part" % (size, rank)):
        nexar.torch.ProcessGroupNexar(0, 1, __import__("datetime").timedelta(seconds=5),
                                      [rank])
    x = torch.tensor([1])
    dist.all_reduce(x)
    assert x.item() == size


def test_errors_name_op_and_rank(world):
    rank, size = world
    with pytest.raises(RuntimeError, match=r"nexar allreduce \(rank %d of %d\): reduce op" %
                       (rank, size)):
        dist.all_reduce(torch.zeros(3, dtype=torch.int64), op=dist.ReduceOp.BXOR)
    with pytest.raises(RuntimeError, match=r"nexar allreduce \(rank %d of %d\): tensors of "
                       r"Short are not supported" % (rank, size)):
        dist.all_reduce(torch.zeros(3, dtype=torch.int16))
    with pytest.raises(RuntimeError, match="AVG needs a floating-point tensor"):
        dist.all_reduce(torch.zeros(3, dtype=torch.int32), op=dist.ReduceOp.AVG)
    with pytest.raises(RuntimeError, match="any source is not supported"):
        dist.recv(torch.zeros(1))
    # Refused before submission: the group stays usable.
    x = torch.tensor([1])
    dist.all_reduce(x)
    assert x.item() == size


def test_gloo_agrees_exactly_on_integers(world):
    rank, size = world
    gloo = dist.new_group(list(range(size)), backend="gloo")
    gen = torch.Generator().manual_seed(1234 + rank)
    base = torch.randint(-1000, 1000, (4099,), generator=gen, dtype=torch.int64)
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
        a, b = base.clone(), base.clone()
        dist.all_reduce(a, op=op)
        dist.all_reduce(b, op=op, group=gloo)
        assert torch.equal(a, b)
    dist.destroy_process_group(gloo)
