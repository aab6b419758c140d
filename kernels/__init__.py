"""Real Triton kernels with their search spaces, inputs and references; imported as
``tunekit.kernels``. Used by the tests (under the interpreter, at small sizes), benchmarks and
experiments (on a GPU, at real sizes).

Each module holds the ``@triton.jit`` kernel, ``space()`` (a constrained ``tunekit.Space``),
``inputs(...)`` (seeded random tensors, the output poisoned with NaN or zeroed where the
kernel accumulates), ``launch(kernel, *tensors, **meta)`` and ``reference(...)`` (PyTorch):

* ``vector_add``: launch-bound; the hot-path benchmark.
* ``matmul``: the tutorial-style GEMM and the 1,152-config space of design.md.
* ``matmul_hopper``: a Hopper GEMM (tensor descriptors, persistent, warp-specialized, subtiled
  epilogue, clusters); its H200 space is 3,508 configs.
* ``matmul_splitk``: split-K GEMM into a float32 output, for skinny (decode-like) shapes.
* ``softmax``: row softmax with an online max and sum over column tiles.
* ``rmsnorm``: RMSNorm forward.
* ``attention``: FlashAttention-style forward, causal or not.
* ``attention_hopper``: the same with tensor descriptors, exp2 with the scale folded in, the
  causal loop split at the diagonal and a heavy-first order; its H200 space is 90 configs.
"""
