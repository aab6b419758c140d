"""The kernel suite decorated with ``tunekit.autotune``: each module's Space, the key its H200
recordings use, and the default strategy. What the shipped manifests (``manifests/``) name, and
what a user imports to call a suite kernel tuned."""

from __future__ import annotations

import tunekit

from . import attention as _attention
from . import matmul as _matmul
from . import matmul_splitk as _matmul_splitk
from . import rmsnorm as _rmsnorm
from . import softmax as _softmax
from . import vector_add as _vector_add

matmul = tunekit.autotune(space=_matmul.space(), key=["M", "N", "K"])(_matmul.matmul_kernel)
matmul_splitk = tunekit.autotune(space=_matmul_splitk.space(), key=["M", "N", "K"],
                                 reset_to_zero=["c_ptr"])(_matmul_splitk.matmul_splitk_kernel)
softmax = tunekit.autotune(space=_softmax.space(), key=["n_rows", "n_cols"])(_softmax.softmax_kernel)
rmsnorm = tunekit.autotune(space=_rmsnorm.space(), key=["n_rows", "n_cols"])(_rmsnorm.rmsnorm_kernel)
attention = tunekit.autotune(space=_attention.space(), key=["seq_len", "HEAD_DIM", "CAUSAL"])(
    _attention.attention_kernel)
vector_add = tunekit.autotune(space=_vector_add.space(), key=["n"])(_vector_add.add_kernel)
