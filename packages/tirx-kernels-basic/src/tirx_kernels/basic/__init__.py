# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Native TIRx kernels (Apache-2.0).

Public ops: ``rmsnorm`` and ``matmul`` (re-exported here from ``tirx_kernels.basic.norm`` and
``tirx_kernels.basic.mm``) and ``tirx_kernels.basic.gemm.gemm``. ``gemm`` is not re-exported:
the name is its module's, and importing that module would replace a re-exported function on
this package.
"""

from __future__ import annotations

from tirx_kernels.core.exports import lazy_exports

# public name -> the op module (of this package) that defines it
_PUBLIC = {"matmul": "mm", "rmsnorm": "norm"}

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
