"""A rank of a ``torch.distributed`` (gloo) job for the tests of ``tunekit.ranks``, importable by
the processes a test spawns. Each rank tunes a vector add exhaustively into a store of its own,
with timings that depend on the rank: the i-th config measured on rank r takes
``(i - r) % 4 + 1`` ms, so a rank tuning alone would choose config r."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

BLOCKS = [128, 256, 512, 1024]


def run_rank(rank: int, world: int, directory: str, mode: str, sizes: list[int], fail: bool = False) -> None:
    """Join the job, call the kernel once with ``n = sizes[rank]`` and write what happened to
    ``directory/rank{rank}.json``: the config launched, whether the output is right, the trials
    in this rank's store, or the error raised. With ``fail``, every timing raises."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch.distributed as dist

    import tunekit
    from tunekit.kernels import vector_add

    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank, world_size=world)
    measured = itertools.count()

    def bench(fn, **_):
        fn()
        if fail:
            raise RuntimeError("injected: this timing fails")
        return float((next(measured) - rank) % len(BLOCKS) + 1)

    result: dict = {"rank": rank}
    try:
        kernel = tunekit.autotune(space=tunekit.Space(BLOCK=BLOCKS), key=["n"], strategy="exhaustive",
                                  store=str(Path(directory) / f"store{rank}.db"), finalists=1, ranks=mode,
                                  do_bench=bench)(vector_add.add_kernel)
        x, y, out = vector_add.inputs(sizes[rank])
        vector_add.launch(kernel, x, y, out)
        result.update(block=kernel.best_config.kwargs["BLOCK"], correct=bool((out == x + y).all()),
                      trials=len(kernel.store.rows()))
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
    Path(directory, f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()
