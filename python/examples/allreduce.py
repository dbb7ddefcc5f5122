"""A numpy all_reduce over nexar: nexar-run -n 4 python3 allreduce.py"""
import numpy as np

import nexar

with nexar.init() as world:
    x = np.full(4, world.rank + 1, dtype=np.float32)
    world.all_reduce(x, op="sum")
    print("rank %d of %d: all_reduce(sum) = %s" % (world.rank, world.size, x))
