# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What a compiled TIRx kernel's generated host function launches, for one call shape.

The host function of ``tvm_tirx.tirx.compile`` unpacks its packed arguments, checks them and
ends in ``call_ffi_kernel`` calls: a kernel name, the kernel's parameters and its launch
dimensions, each an expression over the arguments. :func:`launch_spec` reads those
expressions from the host code (``toolchain.host_code``) and evaluates them for the shapes of
example arguments: every parameter becomes a tensor's data pointer, a scalar argument read
per call, or a constant; a TMA descriptor the host code encodes (``tensormap_encode_tiled``)
becomes a :class:`TensorMap` the launcher encodes per call from the tensor's address. It
answers ``None`` for host code it does not fully understand (a call it does not know, a
launch under a condition, an unknown launch field), and the caller keeps the host function.
TMA descriptors, dynamic shared memory and clusters are taken unless
``TIRX_KERNELS_DIRECT_LAUNCH_TMA=0`` (read at import; their GPU runs: core/docs/overhead.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .toolchain import walk

# the host code's calls a spec may pass over: argument unpacking, checks, set-device, launch
_KNOWN_CALLS = {
    "tirx.abi_field_get",
    "tirx.tensor_data_ptr",
    "tirx.reinterpret",
    "tirx.decl_tensor",
    "prim.if_then_else",
    "tirx.handle_add_byte_offset",
    "tirx.assume_aligned",
    "tirx.throw_last_error",
    "tirx.isnullptr",
    "tirx.call_extern",  # only TVMBackendSetDevice: checked below
    "tirx.call_ffi_kernel",
    "tirx.likely",
}
_TMA_CALLS = {"tirx.stack_alloca", "tirx.address_of", "tirx.cuda.tensormap_encode_tiled"}
TMA = os.environ.get("TIRX_KERNELS_DIRECT_LAUNCH_TMA", "1") != "0"
_DIMS = ("grid.x", "grid.y", "grid.z", "block.x", "block.y", "block.z")
_CLUSTER = ("cluster.x", "cluster.y", "cluster.z")
_SMEM = "dynamic_smem_bytes"
# CUtensorMapDataType of a descriptor dtype (cuda.h), as TVM's runtime encodes it
_CU_TENSOR_MAP_DTYPES = {
    "uint8": 0,
    "int8": 0,
    "float8_e4m3fn": 0,
    "float8_e5m2": 0,
    "uint16": 1,
    "int16": 1,
    "uint32": 2,
    "int32": 3,
    "uint64": 4,
    "int64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
# kernel attributes that are the kernel's own (launch bounds), not the launch's
_COMPILE_TIME_ATTRS = {"min_blocks_per_sm", "required_block_size"}
_FIELD_DATA, _FIELD_SHAPE, _FIELD_VALUE, _FIELD_ELEMENT = 1, 2, 15, 17  # abi_field_get fields
# how a kernel parameter is made (direct_launch.cc: ParamKind)
POINTER, F32, I32, I64, CONST_I32, CONST_I64, CONST_F32, TENSOR_MAP = range(8)
_SCALAR_KINDS = {"float32": F32, "int32": I32, "int64": I64}
_CONST_KINDS = {"int32": CONST_I32, "int64": CONST_I64}


class Unsupported(Exception):
    """Host code this module does not reproduce (the caller keeps the host function)."""


@dataclass
class TensorMap:
    """A tiled TMA descriptor of tensor argument ``arg`` (cuTensorMapEncodeTiled's operands:
    sizes innermost first, byte strides of the outer dimensions)."""

    arg: int
    dtype: int  # CUtensorMapDataType
    dims: list[int]
    strides: list[int]
    box: list[int]
    element_strides: list[int]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    def words(self) -> list[int]:
        """The launcher's encoding (direct_launch.cc: MapSpec)."""
        head = [self.arg, self.dtype, len(self.dims), self.interleave, self.swizzle]
        body = [*self.dims, *self.strides, *self.box, *self.element_strides]
        return [*head, self.l2_promotion, self.oob_fill, *body]


@dataclass
class Launch:
    kernel: str
    dims: list[int]  # grid xyz, block xyz: a constant, or -(i + 1) for int argument i
    params: list[tuple[int, int]] = field(default_factory=list)  # (kind, argument or value)
    smem: int = 0  # dynamic shared memory bytes
    cluster: list[int] = field(default_factory=lambda: [1, 1, 1])
    maps: list[TensorMap] = field(default_factory=list)  # TENSOR_MAP params index these
    # int arguments folded into constants (a grid from a size argument): (argument, value),
    # which each call must pass again
    pinned: list[tuple[int, int]] = field(default_factory=list)


def _op(node: Any) -> str:
    return str(node.op).split('"')[1] if "Op.get" in str(node.op) else str(node.op)


def _dtype(node: Any) -> str:
    return str(getattr(node.ty, "dtype", node.ty))


class _Evaluator:
    """Evaluates host expressions for example arguments: ("const", v), ("arg", i) (packed
    argument i), ("ptr", i) (tensor i's data), ("shape", i), ("scalar", i, dtype). An int
    scalar inside arithmetic takes its example value and is recorded in ``pinned``."""

    def __init__(self, binds: dict, args_var: Any, examples: tuple):
        self.binds, self.args_var, self.examples = binds, args_var, examples
        self.pinned: dict[int, int] = {}

    def _const(self, v: tuple) -> tuple:
        """``v`` as a constant: an int scalar argument pinned to its example value."""
        if v[0] == "scalar" and v[2] in _CONST_KINDS and isinstance(self.examples[v[1]], int):
            self.pinned[v[1]] = self.examples[v[1]]
            return ("const", self.examples[v[1]])
        return v

    def __call__(self, e: Any) -> tuple:
        kind = type(e).__name__
        if kind == "IntImm":
            return ("const", int(e.value))
        if kind == "Var":
            if e.same_as(self.args_var):
                return ("args",)
            value = self.binds.get(e.__chandle__())
            if value is not None:
                return self(value)
            raise Unsupported(f"unbound variable {e}")
        if kind == "Cast":
            v = self(e.value)
            if v[0] == "const":
                return v if _dtype(e) in _CONST_KINDS else ("float-const",)
            if v[0] in ("arg", "scalar"):
                return ("scalar", v[1], _dtype(e))
            raise Unsupported(f"cast of {v}")
        if kind in ("Select",):
            a, b = self(e.true_value), self(e.false_value)
            if a[:2] == b[:2] and a[0] == "scalar":
                return ("scalar", a[1], _dtype(e))
            raise Unsupported(f"select of {a}, {b}")
        if kind in _ARITH:
            a, b = self._const(self(e.a)), self._const(self(e.b))
            if a[0] == b[0] == "const":
                return ("const", _ARITH[kind](a[1], b[1]))
            raise Unsupported(f"{kind} of {a}, {b}")
        if kind == "Call":
            return self.call(e)
        if kind == "TensorLoad":  # address_of(T[0, ...]): the tensor's data
            if any(self(i) != ("const", 0) for i in e.indices):
                raise Unsupported(f"an address inside a tensor: {e}")
            return self(e.source)
        raise Unsupported(f"expression {kind}")

    def call(self, e: Any) -> tuple:
        op, args = _op(e), e.args
        if op in (
            "tirx.tensor_data_ptr",
            "tirx.decl_tensor",
            "tirx.reinterpret",
            "tirx.address_of",
        ):
            return self(args[0])
        if op == "tirx.handle_add_byte_offset":  # a tensor object's DLTensor
            return self(args[0])
        if op == "prim.if_then_else":
            a, b = self(args[1]), self(args[2])
            if a == b:
                return a
            raise Unsupported(f"if_then_else of {a}, {b}")
        if op == "tirx.abi_field_get":
            base, index, fld = self(args[0]), int(args[1].value), int(args[2].value)
            if base == ("args",) and fld == _FIELD_VALUE:
                return ("arg", index)
            if base[0] in ("arg", "ptr") and fld == _FIELD_DATA:
                return ("ptr", base[1])
            if base[0] in ("arg", "ptr") and fld == _FIELD_SHAPE:
                return ("shape", base[1])
            if base[0] == "shape" and fld == _FIELD_ELEMENT:
                return ("const", int(self.examples[base[1]].shape[index]))
            raise Unsupported(f"field {fld} of {base}")
        raise Unsupported(f"call {op}")


_ARITH: dict[str, Callable[[int, int], int]] = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b,
    "FloorMod": lambda a, b: a % b,
    "Min": min,
    "Max": max,
}


def _walk(host: Any) -> tuple[dict, list, dict]:
    """(variable -> bound value, the launches in order, descriptor -> its encoding call);
    Unsupported for host code with a call it does not know, a loop, or a launch under a
    condition."""
    binds: dict = {}
    launches: list = []
    encodes: dict = {}  # descriptor variable -> its tensormap_encode_tiled call
    problems: list = []  # raising inside the walk's callback would cross the FFI

    def visit(node, _facts):
        kind = type(node).__name__
        if kind == "Bind":
            binds[node.var.__chandle__()] = node.value
        elif kind == "If":
            walk(
                node,
                lambda n, _: (
                    problems.append("a launch under a condition") if _is_launch(n) else None
                ),
            )
        elif kind == "Call":
            op = _op(node)
            if op in _TMA_CALLS and not TMA:
                problems.append("TMA descriptors (TIRX_KERNELS_DIRECT_LAUNCH_TMA=0)")
            elif op == "tirx.cuda.tensormap_encode_tiled":
                encodes[node.args[0].__chandle__()] = node
            elif op not in _KNOWN_CALLS | _TMA_CALLS:
                problems.append(f"host call {op}")
            elif op == "tirx.call_extern" and "TVMBackendSetDevice" not in str(node.args[0]):
                problems.append(f"host call {node.args[0]}")
            elif op == "tirx.call_ffi_kernel":
                launches.append(node)
        elif kind in ("For", "While"):
            problems.append(f"host {kind} loop")

    walk(host.body, visit, order="pre")
    if problems:
        raise Unsupported(problems[0])
    return binds, launches, encodes


def _is_launch(node: Any) -> bool:
    return type(node).__name__ == "Call" and _op(node) == "tirx.call_ffi_kernel"


def launch_spec(host: Any, examples: tuple) -> list[Launch] | None:
    """The launches of ``host`` (``toolchain.host_code``) for arguments shaped as ``examples`` (the
    call's arguments in order: tensors with ``.shape``, scalars), or ``None``."""
    try:
        binds, calls, encodes = _walk(host)
        launches = []
        for call in calls:
            evaluate = _Evaluator(binds, host.params[1], examples)
            launch = _launch(call, evaluate, encodes)
            launch.pinned = sorted(evaluate.pinned.items())
            launches.append(launch)
        return launches or None
    except Unsupported:
        return None


def _launch(call: Any, evaluate: _Evaluator, encodes: dict) -> Launch:
    attrs = call.attrs
    fields = [str(f) for f in attrs.launch_fields]
    compiled_in = {str(k) for k in attrs.kernel_attrs} <= _COMPILE_TIME_ATTRS
    known = fields[:6] == list(_DIMS) and set(fields[6:]) <= {*_CLUSTER, _SMEM}
    if not known or len(attrs.launch_params) or not compiled_in:
        raise Unsupported(f"launch fields {fields}, attributes {attrs.kernel_attrs}")
    n = int(attrs.num_kernel_args)
    name, params, values = call.args[0].value, call.args[1 : 1 + n], call.args[1 + n :]
    launch = Launch(str(name), [])
    for field_name, e in zip(fields, values):
        v = evaluate(e)
        if field_name not in _DIMS:
            v = evaluate._const(v)
        if field_name in _DIMS and v[0] == "scalar" and v[2] in ("int32", "int64"):
            launch.dims.append(-(v[1] + 1))
        elif v[0] != "const":
            raise Unsupported(f"launch field {field_name}: {v}")
        elif field_name in _DIMS:
            launch.dims.append(v[1])
        elif field_name == _SMEM:
            launch.smem = v[1]
        else:
            launch.cluster[_CLUSTER.index(field_name)] = v[1]
    if not TMA and (launch.smem or launch.cluster != [1, 1, 1]):
        raise Unsupported("dynamic shared memory or clusters (TIRX_KERNELS_DIRECT_LAUNCH_TMA=0)")
    for e in params:
        encode = encodes.get(e.__chandle__()) if type(e).__name__ == "Var" else None
        if encode is not None:
            launch.params.append((TENSOR_MAP, len(launch.maps)))
            launch.maps.append(_tensor_map(encode, evaluate))
            continue
        v, dtype = evaluate(e), _dtype(e)
        if v[0] == "ptr":
            launch.params.append((POINTER, v[1]))
        elif v[0] == "scalar" and v[2] == dtype and dtype in _SCALAR_KINDS:
            launch.params.append((_SCALAR_KINDS[dtype], v[1]))
        elif v[0] == "const" and dtype in _CONST_KINDS:
            launch.params.append((_CONST_KINDS[dtype], v[1]))
        else:
            raise Unsupported(f"kernel parameter {e}: {v}")
    return launch


def _tensor_map(encode: Any, evaluate: _Evaluator) -> TensorMap:
    """The :class:`TensorMap` of a ``tensormap_encode_tiled`` call: its address a tensor
    argument's data, every size a constant of the call's shapes."""
    attrs, args = encode.attrs, encode.args
    rank = int(attrs.rank)
    address = evaluate(args[1])
    if address[0] != "ptr":
        raise Unsupported(f"a TMA descriptor of {address}")
    numbers = []
    for e in args[2:]:
        v = evaluate._const(evaluate(e))
        if v[0] != "const":
            raise Unsupported(f"a TMA descriptor operand {e}: {v}")
        numbers.append(v[1])
    forced = int(attrs.force_cu_dtype)
    dtype = forced if forced >= 0 else _CU_TENSOR_MAP_DTYPES.get(str(attrs.descriptor_dtype))
    if dtype is None:
        raise Unsupported(f"a TMA descriptor of dtype {attrs.descriptor_dtype}")
    dims, rest = numbers[:rank], numbers[rank:]
    strides, rest = rest[: rank - 1], rest[rank - 1 :]
    box, element_strides = rest[:rank], rest[rank:]
    return TensorMap(
        address[1],
        dtype,
        dims,
        strides,
        box,
        element_strides,
        int(attrs.interleave),
        int(attrs.swizzle),
        int(attrs.l2_promotion),
        int(attrs.oob_fill),
    )
