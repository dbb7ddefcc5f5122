"""nexar.torch: the "nexar" backend of torch.distributed.

    import nexar.torch
    import torch.distributed as dist
    dist.init_process_group("nexar")        # under nexar-run or torchrun

Importing this module registers the backend.  The process group is a C++ subclass of
torch's ProcessGroup (nexar/c10d/) over the shim's nonblocking calls; a thread of its own
completes each op's Work and future, so nothing waits on the Python thread.  The process
joins the nexar job at the first group (nexar_init reads NEXAR_* or torchrun's RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT) and leaves it at exit.  Groups of
some of the ranks are split off the world as every rank enters torch's new_group
(_wrap_group_helper).
"""
import atexit
import datetime
import importlib.machinery
import importlib.util
import os

import torch.distributed as _dist
import torch.distributed.distributed_c10d as _c10d_mod


def _load():
    # NEXAR_C10D_LIB names the extension in a build tree (tests); installed, it sits
    # beside this file.
    path = os.environ.get("NEXAR_C10D_LIB")
    if not path:
        try:
            from . import _c10d
        except ImportError as e:
            raise ImportError("nexar.torch: the extension nexar._c10d is not installed; it is "
                              "built when meson finds libtorch-dev and pybind11 "
                              "(docs/python.md): %s" % e) from e
        return _c10d
    loader = importlib.machinery.ExtensionFileLoader("nexar._c10d", path)
    spec = importlib.util.spec_from_file_location("nexar._c10d", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


_c10d = _load()
ProcessGroupNexar = _c10d.ProcessGroupNexar


def _create(opts, pg_options=None):
    timeout = opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return ProcessGroupNexar(opts.group_rank, opts.group_size, timeout,
                             list(opts.global_ranks_in_group))


def _is_nexar(backend):
    # torch 1.13 passes a Backend (a str); later versions may pass "cpu:nexar,cuda:nexar".
    return backend is not None and "nexar" in str(backend).lower()


def _wrap_group_helper():
    """torch.distributed.new_group must be called by every rank, but it calls a backend's
    creator on the group's members only, while nexar makes a communicator with a split
    that every rank of the world joins.  Every rank enters _new_process_group_helper (the
    members' creator is called from there), so the split is made there, on every rank,
    in the order of the program's new_group calls."""
    helper = _c10d_mod._new_process_group_helper
    if getattr(helper, "_nexar_wrapped", False):
        return

    def wrapped(group_size, group_rank, global_ranks_in_group, backend, store, *args,
                **kwargs):
        ranks = list(global_ranks_in_group or [])
        if ranks and _is_nexar(backend) and len(ranks) < _dist.get_world_size():
            timeout = kwargs.get("timeout")
            if not isinstance(timeout, datetime.timedelta):
                timeout = _c10d_mod.default_pg_timeout
            _c10d.subgroup_split(ranks, timeout)
        return helper(group_size, group_rank, global_ranks_in_group, backend, store, *args,
                      **kwargs)

    wrapped._nexar_wrapped = True
    _c10d_mod._new_process_group_helper = wrapped


def shutdown():
    """Completes the ops in flight and leaves the nexar job (also run at exit)."""
    _c10d.shutdown()


if "NEXAR" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("nexar", _create, extended_api=True)
_wrap_group_helper()
atexit.register(shutdown)
