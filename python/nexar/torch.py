"""nexar.torch: the "nexar" backend of torch.distributed.

    import nexar.torch
    import torch.distributed as dist
    dist.init_process_group("nexar")        # under nexar-run or torchrun

Importing this module registers the backend.  The process group is a C++ subclass of
torch's ProcessGroup (nexar/c10d/) over the shim's nonblocking calls; a thread of its own
completes each op's Work and future, so nothing waits on the Python thread.  The process
joins the nexar job at the first group (nexar_init reads NEXAR_* or torchrun's RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT) and leaves it at exit.
"""
import atexit
import datetime
import importlib.machinery
import importlib.util
import os

import torch.distributed as _dist


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


def shutdown():
    """Completes the ops in flight and leaves the nexar job (also run at exit)."""
    _c10d.shutdown()


if "NEXAR" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("nexar", _create, extended_api=True)
atexit.register(shutdown)
