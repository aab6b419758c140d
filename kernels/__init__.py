"""Real Triton kernels with their search spaces, inputs and references; imported as
``tunekit.kernels``. Used by the tests (under the interpreter), benchmarks and experiments."""
