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

The corpus families (recorded by ``experiments/run_h200_record_corpus.sh``, for testing whether
search strategies generalise to kernels they were not designed on):

* ``grouped_gemm``: G products of one N and K and different M, walked by persistent programs (178 configs).
* ``fp8_gemm``: float8_e4m3fn operands with per-tensor scales, bf16 output (184 configs).
* ``layernorm_backward``: dx, and dw, db through a locked partial-sum buffer and a second
  reduction kernel, as in Triton's tutorial (164 configs of the first kernel).
* ``conv2d``: implicit-GEMM 2D convolution, channels-last, stride and padding (150 configs).
* ``cross_entropy``: loss and gradient over a large vocabulary, fused (96 configs).
* ``fused_moe``: vLLM-style MoE GEMM over tokens sorted by expert (178 configs).

The held-out families of corpus v2, recorded after the default search's design was chosen, to
judge it once on kernels no design choice saw:

* ``w4a16_gemm``: int4 weights packed eight to a word, float16 activations, group scales (744 configs).
* ``gemv``: split-K matrix-vector product for decode, float32 atomics (780 configs).
* ``stencil2d``: a five-point Jacobi step on a float32 grid (720 configs).
* ``causal_conv1d``: Mamba's depthwise causal convolution with SiLU, channels-last (528 configs).
"""
