"""A rank of a ``torch.distributed`` (gloo) job for the tests of ``tunekit.ranks``, importable by
the processes a test spawns. Each rank calls vector adds tuned exhaustively into a store of its
own, with timings that depend on the rank: the i-th config a rank measures for a kernel takes
``(i - rank) % 4 + 1`` ms, so ranks tuning alone choose different configs."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

#: Two kernels with different Spaces: the same key means different decisions for each.
SPACES = {"wide": [128, 256, 512, 1024], "narrow": [512, 1024, 2048, 4096]}


def run_rank(rank: int, world: int, directory: str, mode: str, calls: list[list[tuple[str, int]]],
             fail: bool = False) -> None:
    """Join the job, make this rank's ``calls`` (kernel name in ``SPACES``, ``n``) in order, and
    write what happened to ``directory/rank{rank}.json``: per call the block launched and whether
    the output was right, the trials in this rank's store per kernel, or the error raised. With
    ``fail``, every timing raises."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch.distributed as dist

    import tunekit
    from tunekit.kernels import vector_add

    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank, world_size=world)
    store = str(Path(directory) / f"store{rank}.db")

    def kernel(name: str):
        measured = itertools.count()

        def bench(fn, **_):
            fn()
            if fail:
                raise RuntimeError("injected: this timing fails")
            return float((next(measured) - rank) % 4 + 1)

        return tunekit.autotune(space=tunekit.Space(BLOCK=SPACES[name]), key=["n"], strategy="exhaustive",
                                store=store, finalists=1, ranks=mode, do_bench=bench)(vector_add.add_kernel)

    kernels = {name: kernel(name) for name in SPACES}
    result: dict = {"rank": rank, "calls": []}
    try:
        for name, n in calls[rank]:
            x, y, out = vector_add.inputs(n)
            vector_add.launch(kernels[name], x, y, out)
            result["calls"].append({"kernel": name, "n": n, "block": kernels[name].best_config.kwargs["BLOCK"],
                                    "correct": bool((out == x + y).all())})
        result["trials"] = len(kernels["wide"].store.rows())
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
    Path(directory, f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()
