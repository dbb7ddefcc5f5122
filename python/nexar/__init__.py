"""nexar: Python bindings of libnexarshim (nexar.h).

ctypes, not a C extension: the shim's ABI is plain C with opaque handles and C scalars, so
ctypes reaches every function with no build step of its own, and it releases the GIL for
the whole of each foreign call, so a rank blocked in a collective never holds up the
interpreter's other threads.  Buffers are anything with the buffer protocol (numpy arrays,
bytearray, memoryview, array.array), or host torch tensors (bfloat16 included); ops that
write need a writable, C-contiguous one.

    import nexar, numpy as np
    with nexar.init() as world:
        x = np.full(1024, world.rank + 1, dtype=np.float32)
        world.all_reduce(x, op="sum")
        world.iall_reduce(x, op="max").wait()

Every failure raises nexar.Error, with .status (nexar_status_t) and the shim's text.
"""
import ctypes
import ctypes.util
import os

__all__ = ["Error", "Comm", "Request", "init", "STATUS", "DTYPES", "OPS"]

STATUS = {
    0: "NEXAR_OK", 1: "NEXAR_ERR_INVALID", 2: "NEXAR_ERR_UNAVAILABLE",
    3: "NEXAR_ERR_MISMATCH", 4: "NEXAR_ERR_TIMEOUT", 5: "NEXAR_ERR_PEER_LOST",
    6: "NEXAR_ERR_ABORTED", 7: "NEXAR_ERR_NOMEM", 8: "NEXAR_ERR_UNSUPPORTED",
    9: "NEXAR_ERR_PERMISSION", 10: "NEXAR_ERR_INTERNAL",
}
# numpy dtype names (and the explicit names for raw buffers) -> nexar_dtype_t
DTYPES = {
    "float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "int8": 4, "uint8": 5,
    "int32": 6, "uint32": 7, "int64": 8, "uint64": 9,
}
_SIZES = {0: 4, 1: 8, 2: 2, 3: 2, 4: 1, 5: 1, 6: 4, 7: 4, 8: 8, 9: 8}
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3}
UNDEFINED = 0xFFFFFFFF


class Error(Exception):
    """A nexar call failed: .status is the nexar_status_t value, .name its name."""

    def __init__(self, status, text):
        self.status = status
        self.name = STATUS.get(status, "NEXAR_ERR_%d" % status)
        super().__init__("%s: %s" % (self.name, text))


def _load():
    # NEXAR_SHIM_LIB (a build tree), then the library of the prefix this package was
    # installed with (so that no prefix needs LD_LIBRARY_PATH), then the loader's path.
    path = os.environ.get("NEXAR_SHIM_LIB")
    if not path:
        try:
            from ._paths import LIBDIR
            installed = os.path.join(LIBDIR, "libnexarshim.so.0")
            path = installed if os.path.exists(installed) else None
        except ImportError:
            pass
    path = path or ctypes.util.find_library("nexarshim") or "libnexarshim.so.0"
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("nexar: cannot load libnexarshim (%s); install nexar (ninja -C build "
                          "install) or name the library in NEXAR_SHIM_LIB" % e) from e


_lib = _load()
_P = ctypes.c_void_p
_lib.nexar_last_error.restype = ctypes.c_char_p
_lib.nexar_comm_rank.argtypes = [_P]
_lib.nexar_comm_size.argtypes = [_P]
_lib.nexar_comm_algorithm.argtypes = [_P]
_lib.nexar_comm_algorithm.restype = ctypes.c_char_p


def _check(status):
    if status != 0:
        text = _lib.nexar_last_error()
        raise Error(status, text.decode("utf-8", "replace") if text else STATUS.get(status))


def _dtype_of(buf, dtype):
    """The nexar dtype of buf: explicit (a name of DTYPES), else from its format."""
    if dtype is not None:
        if dtype not in DTYPES:
            raise Error(1, "unknown dtype %r (one of %s)" % (dtype, ", ".join(DTYPES)))
        return DTYPES[dtype]
    name = getattr(getattr(buf, "dtype", None), "name", None)
    if name in DTYPES:
        return DTYPES[name]
    fmt = memoryview(buf).format
    by_fmt = {"f": 0, "d": 1, "e": 2, "b": 4, "B": 5, "i": 6, "I": 7, "l": 8, "q": 8,
              "L": 9, "Q": 9}
    if fmt in by_fmt:
        return by_fmt[fmt]
    raise Error(1, "cannot tell the dtype of a buffer of format %r: pass dtype=" % fmt)


def _is_torch_tensor(buf):
    return type(buf).__module__.startswith("torch") and hasattr(buf, "data_ptr")


class _Buf:
    """A buffer's address and element count, keeping the exported view alive."""

    def __init__(self, buf, dtype, writable):
        if _is_torch_tensor(buf):
            self._from_tensor(buf, dtype)
            return
        self.dtype = _dtype_of(buf, dtype)
        view = memoryview(buf)
        if not view.c_contiguous:
            raise Error(1, "the buffer is not C-contiguous")
        if writable and view.readonly:
            raise Error(1, "the buffer is read-only, and this op writes it")
        self.view = view.cast("B") if view.ndim != 1 or view.format != "B" else view
        self.nbytes = view.nbytes
        if self.nbytes % _SIZES[self.dtype]:
            raise Error(1, "the buffer's size is not a whole number of elements")
        self.count = self.nbytes // _SIZES[self.dtype]
        if self.nbytes == 0:
            self.ptr = None
        elif view.readonly:
            # ctypes takes no pointer to read-only memory: the address of a copy's bytes
            # would be wrong for in-place ops, but read-only buffers are only ever inputs.
            self._keep = ctypes.create_string_buffer(bytes(self.view), self.nbytes)
            self.ptr = ctypes.cast(self._keep, _P)
        else:
            self._keep = (ctypes.c_char * self.nbytes).from_buffer(self.view)
            self.ptr = ctypes.cast(self._keep, _P)


    def _from_tensor(self, t, dtype):
        # torch tensors have no buffer protocol (and numpy no bfloat16): their address.
        name = str(t.dtype).replace("torch.", "")
        self.dtype = _dtype_of(None, dtype or {"float": "float32", "double": "float64",
                                               "half": "float16", "int": "int32",
                                               "long": "int64"}.get(name, name))
        if t.device.type != "cpu":
            raise Error(1, "a torch tensor on %s: host tensors only" % t.device)
        if not t.is_contiguous():
            raise Error(1, "the tensor is not contiguous")
        self.nbytes = t.numel() * t.element_size()
        if self.nbytes % _SIZES[self.dtype]:
            raise Error(1, "the tensor's size is not a whole number of elements")
        self.count = self.nbytes // _SIZES[self.dtype]
        self.view = t
        self.ptr = ctypes.c_void_p(t.data_ptr()) if self.nbytes else None


class _Iov(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("count", ctypes.c_size_t)]


def _op(op):
    if op not in OPS:
        raise Error(1, "unknown op %r (one of %s)" % (op, ", ".join(OPS)))
    return OPS[op]


class Request:
    """A nonblocking op in flight: wait() or test() it; it keeps its buffers alive."""

    def __init__(self, handle, keep):
        self._h = handle
        self._keep = keep
        self.done = False

    def wait(self):
        if not self.done:
            self.done = True
            h, self._h = self._h, None
            _check(_lib.nexar_wait(h))
            self._keep = None

    def test(self):
        if self.done:
            return True
        flag = ctypes.c_int(0)
        status = _lib.nexar_test(self._h, ctypes.byref(flag))
        if flag.value:
            self.done = True
            self._h = None
            self._keep = None
        _check(status)
        return bool(flag.value)


class Comm:
    """A communicator: an ordered set of ranks of the job."""

    def __init__(self, handle, world=False):
        self._h = ctypes.c_void_p(handle)
        self._world = world

    @property
    def rank(self):
        return _lib.nexar_comm_rank(self._h)

    @property
    def size(self):
        return _lib.nexar_comm_size(self._h)

    @property
    def algorithm(self):
        a = _lib.nexar_comm_algorithm(self._h)
        return a.decode() if a else None

    def _start(self, fn, args, keep, blocking):
        if blocking:
            _check(fn(self._h, *args))
            return None
        req = ctypes.c_void_p()
        _check(fn(self._h, *args, ctypes.byref(req)))
        return Request(req, keep)

    # ---- collectives -------------------------------------------------------------
    def all_reduce(self, buf, op="sum", dtype=None):
        b = _Buf(buf, dtype, True)
        self._start(_lib.nexar_all_reduce, (b.ptr, _sz(b.count), b.dtype, _op(op)), b, True)

    def iall_reduce(self, buf, op="sum", dtype=None):
        b = _Buf(buf, dtype, True)
        return self._start(_lib.nexar_iall_reduce, (b.ptr, _sz(b.count), b.dtype, _op(op)),
                           b, False)

    def broadcast(self, buf, root=0, dtype=None):
        b = _Buf(buf, dtype, True)
        self._start(_lib.nexar_broadcast, (b.ptr, _sz(b.count), b.dtype, root), b, True)

    def ibroadcast(self, buf, root=0, dtype=None):
        b = _Buf(buf, dtype, True)
        return self._start(_lib.nexar_ibroadcast, (b.ptr, _sz(b.count), b.dtype, root), b,
                           False)

    def reduce(self, send, recv, op="sum", root=0, dtype=None, _blocking=True):
        s = _Buf(send, dtype, False)
        r = _Buf(recv, dtype, True) if recv is not None else None
        if self.rank == root:
            self._need(r is not None and r.count == s.count, "recv at the root must hold count")
        return self._start(_lib.nexar_ireduce if not _blocking else _lib.nexar_reduce,
                           (s.ptr, r.ptr if r else None, _sz(s.count), s.dtype, _op(op), root),
                           (s, r), _blocking)

    def ireduce(self, send, recv, op="sum", root=0, dtype=None):
        return self.reduce(send, recv, op, root, dtype, _blocking=False)

    def all_gather(self, send, recv, dtype=None):
        s, r = _Buf(send, dtype, False), _Buf(recv, dtype, True)
        self._need(r.count == s.count * self.size, "recv must hold size x send")
        self._start(_lib.nexar_all_gather, (s.ptr, r.ptr, _sz(s.count), s.dtype), (s, r),
                    True)

    def iall_gather(self, send, recv, dtype=None):
        s, r = _Buf(send, dtype, False), _Buf(recv, dtype, True)
        self._need(r.count == s.count * self.size, "recv must hold size x send")
        return self._start(_lib.nexar_iall_gather, (s.ptr, r.ptr, _sz(s.count), s.dtype),
                           (s, r), False)

    def reduce_scatter(self, send, recv, op="sum", dtype=None, _blocking=True):
        s, r = _Buf(send, dtype, False), _Buf(recv, dtype, True)
        self._need(s.count == r.count * self.size, "send must hold size x recv")
        fn = _lib.nexar_reduce_scatter if _blocking else _lib.nexar_ireduce_scatter
        return self._start(fn, (s.ptr, r.ptr, _sz(r.count), r.dtype, _op(op)), (s, r),
                           _blocking)

    def ireduce_scatter(self, send, recv, op="sum", dtype=None):
        return self.reduce_scatter(send, recv, op, dtype, _blocking=False)

    def gather(self, send, recv, root=0, dtype=None, _blocking=True):
        s = _Buf(send, dtype, False)
        r = _Buf(recv, dtype, True) if recv is not None else None
        if self.rank == root:
            self._need(r is not None and r.count == s.count * self.size,
                       "recv at the root must hold size x send")
        fn = _lib.nexar_gather if _blocking else _lib.nexar_igather
        return self._start(fn, (s.ptr, r.ptr if r else None, _sz(s.count), s.dtype, root),
                           (s, r), _blocking)

    def igather(self, send, recv, root=0, dtype=None):
        return self.gather(send, recv, root, dtype, _blocking=False)

    def scatter(self, send, recv, root=0, dtype=None, _blocking=True):
        r = _Buf(recv, dtype, True)
        s = _Buf(send, dtype, False) if send is not None else None
        if self.rank == root:
            self._need(s is not None and s.count == r.count * self.size,
                       "send at the root must hold size x recv")
        fn = _lib.nexar_scatter if _blocking else _lib.nexar_iscatter
        return self._start(fn, (s.ptr if s else None, r.ptr, _sz(r.count), r.dtype, root),
                           (s, r), _blocking)

    def iscatter(self, send, recv, root=0, dtype=None):
        return self.scatter(send, recv, root, dtype, _blocking=False)

    def all_to_all(self, send, recv, dtype=None, _blocking=True):
        s, r = _Buf(send, dtype, False), _Buf(recv, dtype, True)
        self._need(s.count == r.count and s.count % self.size == 0,
                   "send and recv must both hold size x count")
        fn = _lib.nexar_all_to_all if _blocking else _lib.nexar_iall_to_all
        return self._start(fn, (s.ptr, r.ptr, _sz(s.count // self.size), s.dtype), (s, r),
                           _blocking)

    def iall_to_all(self, send, recv, dtype=None):
        return self.all_to_all(send, recv, dtype, _blocking=False)

    def scan(self, buf, op="sum", dtype=None, _blocking=True):
        b = _Buf(buf, dtype, True)
        fn = _lib.nexar_scan if _blocking else _lib.nexar_iscan
        return self._start(fn, (b.ptr, _sz(b.count), b.dtype, _op(op)), b, _blocking)

    def iscan(self, buf, op="sum", dtype=None):
        return self.scan(buf, op, dtype, _blocking=False)

    def exscan(self, buf, op="sum", dtype=None, _blocking=True):
        b = _Buf(buf, dtype, True)
        fn = _lib.nexar_exscan if _blocking else _lib.nexar_iexscan
        return self._start(fn, (b.ptr, _sz(b.count), b.dtype, _op(op)), b, _blocking)

    def iexscan(self, buf, op="sum", dtype=None):
        return self.exscan(buf, op, dtype, _blocking=False)

    def all_reduce_bucketed(self, bufs, op="sum", dtype=None, _blocking=True):
        """One all_reduce over the concatenation of bufs (one dtype), each in place."""
        bs = [_Buf(b, dtype, True) for b in bufs]
        self._need(len(bs) > 0, "no buffers")
        self._need(all(b.dtype == bs[0].dtype for b in bs), "the buffers' dtypes differ")
        iov = (_Iov * len(bs))(*[_Iov(b.ptr, b.count) for b in bs])
        fn = _lib.nexar_all_reduce_bucketed if _blocking else _lib.nexar_iall_reduce_bucketed
        return self._start(fn, (iov, _sz(len(bs)), bs[0].dtype, _op(op)), (bs, iov),
                           _blocking)

    def iall_reduce_bucketed(self, bufs, op="sum", dtype=None):
        return self.all_reduce_bucketed(bufs, op, dtype, _blocking=False)

    def barrier(self):
        _check(_lib.nexar_barrier(self._h))

    def ibarrier(self):
        req = ctypes.c_void_p()
        _check(_lib.nexar_ibarrier(self._h, ctypes.byref(req)))
        return Request(req, None)

    # ---- point to point --------------------------------------------------------------
    def send(self, buf, dest, tag=0, dtype=None):
        b = _Buf(buf, dtype, False)
        self._start(_lib.nexar_send, (b.ptr, _sz(b.count), b.dtype, dest,
                                      ctypes.c_uint32(tag)), b, True)

    def isend(self, buf, dest, tag=0, dtype=None):
        b = _Buf(buf, dtype, False)
        return self._start(_lib.nexar_isend, (b.ptr, _sz(b.count), b.dtype, dest,
                                              ctypes.c_uint32(tag)), b, False)

    def recv(self, buf, src, tag=0, dtype=None):
        b = _Buf(buf, dtype, True)
        self._start(_lib.nexar_recv, (b.ptr, _sz(b.count), b.dtype, src,
                                      ctypes.c_uint32(tag)), b, True)

    def irecv(self, buf, src, tag=0, dtype=None):
        b = _Buf(buf, dtype, True)
        return self._start(_lib.nexar_irecv, (b.ptr, _sz(b.count), b.dtype, src,
                                              ctypes.c_uint32(tag)), b, False)

    def sync(self):
        _check(_lib.nexar_sync(self._h))

    # ---- communicators ---------------------------------------------------------------
    def split(self, color, key=0):
        """MPI_Comm_split; color None (NEXAR_UNDEFINED) gives None."""
        out = ctypes.c_void_p()
        c = UNDEFINED if color is None else color
        _check(_lib.nexar_comm_split(self._h, ctypes.c_uint32(c), ctypes.c_uint32(key),
                                     ctypes.byref(out)))
        return Comm(out.value) if out.value else None

    def free(self):
        if self._world:
            raise Error(1, "the world communicator is freed by finalize()")
        if self._h:
            h, self._h = self._h, None
            _check(_lib.nexar_comm_free(h))

    def abort(self):
        _check(_lib.nexar_comm_abort(self._h))

    def failed_ranks(self):
        n = ctypes.c_size_t(0)
        _check(_lib.nexar_comm_failed_ranks(self._h, None, _sz(0), ctypes.byref(n)))
        arr = (ctypes.c_uint32 * max(n.value, 1))()
        _check(_lib.nexar_comm_failed_ranks(self._h, arr, _sz(n.value), ctypes.byref(n)))
        return list(arr[:n.value])

    def shrink(self):
        out = ctypes.c_void_p()
        _check(_lib.nexar_comm_shrink(self._h, ctypes.byref(out)))
        return Comm(out.value)

    def grow(self, add):
        out = ctypes.c_void_p()
        _check(_lib.nexar_comm_grow(self._h, ctypes.c_uint32(add), ctypes.byref(out)))
        return Comm(out.value)

    def _need(self, cond, what):
        if not cond:
            raise Error(1, what)


def _sz(n):
    return ctypes.c_size_t(n)


class _World(Comm):
    """The world communicator of nexar_init(); a context manager that finalizes."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        finalize()
        return False


def init():
    """nexar_init(): the world communicator (use it in a with statement)."""
    out = ctypes.c_void_p()
    _check(_lib.nexar_init(ctypes.byref(out)))
    return _World(out.value, world=True)


def finalize():
    """nexar_finalize()."""
    _check(_lib.nexar_finalize())


def last_error():
    t = _lib.nexar_last_error()
    return t.decode("utf-8", "replace") if t else ""
