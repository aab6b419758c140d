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
             fail: str = "") -> None:
    """Join the job, make this rank's ``calls`` (kernel name in ``SPACES``, ``n``) in order, and
    write what happened to ``directory/rank{rank}.json``: per call the block launched and whether
    the output was right, or the error raised; the trials in this rank's store. With
    ``fail="always"`` every timing raises; with ``"first"``, every timing while the file
    ``directory/failing`` exists, which each rank deletes after its first call."""
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
            if fail == "always" or (fail == "first" and Path(directory, "failing").exists()):
                raise RuntimeError("injected: this timing fails")
            return float((next(measured) - rank) % 4 + 1)

        return tunekit.autotune(space=tunekit.Space(BLOCK=SPACES[name]), key=["n"], strategy="exhaustive",
                                store=store, finalists=1, ranks=mode, do_bench=bench)(vector_add.add_kernel)

    kernels = {name: kernel(name) for name in SPACES}
    result: dict = {"rank": rank, "calls": []}
    for name, n in calls[rank]:
        x, y, out = vector_add.inputs(n)
        try:
            vector_add.launch(kernels[name], x, y, out)
            result["calls"].append({"kernel": name, "n": n, "block": kernels[name].best_config.kwargs["BLOCK"],
                                    "correct": bool((out == x + y).all())})
        except Exception as error:
            result["calls"].append({"kernel": name, "n": n, "error": f"{type(error).__name__}: {error}"})
        Path(directory, "failing").unlink(missing_ok=True)
    result["trials"] = len(kernels["wide"].store.rows())
    Path(directory, f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()
