"""A program as the C runtime (engine/sim/_native/core.c) copies it in: flat typed arrays,
built once per program and kept for the next runs of the same one."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.sim.trace import Program


@dataclass(frozen=True)
class ProgramArrays:
    """A program as flat typed arrays, the form the C runtime copies in."""

    n_tensors: int
    op_compute: array
    op_first: array
    op_nout: array
    op_args_off: array
    op_args: array
    op_total: array
    tensor_size: array
    tensor_storage: array
    tensor_op: array
    storage_size: array
    step_kind: array
    step_arg: array


_ARRAYS: dict[int, tuple[Program, ProgramArrays]] = {}


def program_arrays(program: Program) -> ProgramArrays:
    cached = _ARRAYS.get(id(program))
    if cached is not None and cached[0] is program:
        return cached[1]
    n = program.n_tensors
    tensor_size = array("q", bytes(8 * n))
    tensor_storage = array("i", bytes(4 * n))
    tensor_op = array("i", bytes(4 * n))
    storage_size = array("q", bytes(8 * n))
    args_off = array("i", [0])
    args = array("i")
    for op, first in enumerate(program.op_first_tensor):
        op_args = program.op_args[op]
        args.extend(op_args)
        args_off.append(len(args))
        for i, alias in enumerate(program.op_aliases[op]):
            t = first + i
            tensor_op[t] = op
            tensor_size[t] = program.op_sizes[op][i]
            s = t if alias == -1 else tensor_storage[op_args[alias]]
            tensor_storage[t] = s
            if alias == -1:
                storage_size[s] = program.op_sizes[op][i]
    built = ProgramArrays(
        n_tensors=n,
        op_compute=array("q", program.op_compute),
        op_first=array("i", program.op_first_tensor),
        op_nout=array("i", [len(s) for s in program.op_sizes]),
        op_args_off=args_off,
        op_args=args,
        op_total=array("q", program.op_sizes_total),
        tensor_size=tensor_size,
        tensor_storage=tensor_storage,
        tensor_op=tensor_op,
        storage_size=storage_size,
        step_kind=array("b", program.schedule_kind),
        step_arg=array("i", program.schedule_arg),
    )
    if len(_ARRAYS) > 16:
        _ARRAYS.clear()
    _ARRAYS[id(program)] = (program, built)
    return built
