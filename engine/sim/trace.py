"""DTR training traces: parsing the log format into a compact replay program.

A trace is one JSON object per line (see docs/DOMAIN.md). We turn it into a `Program`: a table of
operators (compute, output sizes, alias indices, argument tensors) and a schedule of four
kinds of steps (compute an operator, take a reference, release one, pin a tensor). Tensor ids
are assigned in operator order, constants included, so storage and operator numbers match
simrd's and the paper's ("storage 3131", "operator 2,270").

Malformed input raises `TraceError`, whose message is one line: file, line number, problem
(engine/sim/trace_lines.py reads the lines and fields); tests/test_trace_fuzz.py holds the
parser to this on mutated traces.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.sim.trace_lines import (
    KNOWN_INSTRUCTIONS,
    MAX_VALUE,
    Lines,
    TraceError,
    int_field,
    integer,
    required_field,
    show,
)

# Callers import the error and the format's constants from here.
__all__ = [
    "COMPUTE",
    "GET",
    "KNOWN_INSTRUCTIONS",
    "MAX_VALUE",
    "PIN",
    "RELEASE",
    "Program",
    "TraceError",
    "parse_file",
    "parse_text",
    "sha256_of",
]

# Schedule step kinds.
COMPUTE = 0  # argument: operator index (0-based)
GET = 1  # argument: tensor id; one more external reference to its storage
RELEASE = 2  # argument: tensor id; one reference fewer (eager eviction at zero)
PIN = 3  # argument: tensor id; make resident (rebuilding if needed) and pin for good


@dataclass
class Program:
    """A parsed trace, ready to replay. Operators are indexed from 0 (the paper's number is
    index + 1); tensors are numbered from 0 in operator order."""

    name: str
    sha256: str
    op_compute: list[int] = field(default_factory=list)
    op_sizes: list[tuple[int, ...]] = field(default_factory=list)
    op_aliases: list[tuple[int, ...]] = field(default_factory=list)
    op_args: list[tuple[int, ...]] = field(default_factory=list)
    op_first_tensor: list[int] = field(default_factory=list)
    op_is_constant: list[bool] = field(default_factory=list)
    schedule_kind: list[int] = field(default_factory=list)
    schedule_arg: list[int] = field(default_factory=list)
    op_sizes_total: list[int] = field(default_factory=list)
    n_tensors: int = 0

    @property
    def n_ops(self) -> int:
        return len(self.op_compute)

    @property
    def model_compute(self) -> int:
        return sum(self.op_compute)


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_text(
    text: str, *, path: str | Path = "<trace>", name: str = "", sha256: str = ""
) -> Program:
    """Parse trace text into a Program, exactly as simrd builds its schedule."""
    lines = Lines(path, text)
    if not lines.items:
        raise TraceError(path, 1, "empty trace file (no instructions)")
    # Replay starts after the START annotation.
    while True:
        if lines.done():
            raise TraceError(
                path, lines.last_line, "no ANNOTATE START line: the trace never starts"
            )
        _, obj = lines.next()
        if obj["INSTRUCTION"] == "ANNOTATE" and obj.get("ANNOTATION") == "START":
            break

    prog = Program(name=name or Path(str(path)).stem, sha256=sha256)
    names: dict[str, int] = {}  # trace name -> tensor id (insertion order decides end pins)
    refs: list[int] = []  # parse-time reference count per tensor
    tensor_storage_size: list[int] = []
    totals = {"TIME": 0, "MEMORY": 0}  # over the trace, each kept within MAX_VALUE

    def lookup(line: int, tname: object) -> int:
        if not isinstance(tname, str) or tname not in names:
            raise TraceError(path, line, f"unknown tensor name {show(tname)}")
        return names[tname]

    def add_op(
        line: int,
        compute: int,
        sizes: tuple[int, ...],
        aliases: tuple[int, ...],
        args: tuple[int, ...],
        const: bool,
    ) -> int:
        for key, amount in (("TIME", compute), ("MEMORY", sum(sizes))):
            totals[key] += amount
            if totals[key] > MAX_VALUE:
                raise TraceError(
                    path, line, f"the trace's {key} values add up to more than {MAX_VALUE}"
                )
        first = prog.n_tensors
        prog.op_compute.append(compute)
        prog.op_sizes.append(sizes)
        prog.op_aliases.append(aliases)
        prog.op_args.append(args)
        prog.op_first_tensor.append(first)
        prog.op_is_constant.append(const)
        prog.op_sizes_total.append(sum(sizes))
        for i, alias in enumerate(aliases):
            tensor_storage_size.append(
                sizes[i] if alias == -1 else tensor_storage_size[args[alias]]
            )
            refs.append(1)
        prog.n_tensors += len(sizes)
        prog.schedule_kind.append(COMPUTE)
        prog.schedule_arg.append(len(prog.op_compute) - 1)
        return first

    def step(kind: int, tensor: int) -> None:
        prog.schedule_kind.append(kind)
        prog.schedule_arg.append(tensor)

    def define(line: int, tname: object, tensor: int) -> None:
        if not isinstance(tname, str):
            raise TraceError(path, line, f"tensor name must be a string, got {show(tname)}")
        if tname in names:
            raise TraceError(path, line, f"tensor name {show(tname)} is defined twice")
        names[tname] = tensor

    while not lines.done():
        line, obj = lines.next()
        instr = obj["INSTRUCTION"]
        if instr == "CONSTANT":
            cname = required_field(path, line, obj, "NAME")
            if lines.done():
                raise TraceError(
                    path,
                    line,
                    f"CONSTANT {show(cname)} without its MEMORY line (truncated file?)",
                )
            mline, mem = lines.next()
            if mem["INSTRUCTION"] != "MEMORY" or mem.get("NAME") != cname:
                raise TraceError(
                    path,
                    mline,
                    f"expected the MEMORY line of CONSTANT {show(cname)}, got {mem['INSTRUCTION']}",
                )
            size = int_field(path, mline, mem, "MEMORY")
            t = add_op(mline, 0, (size,), (-1,), (), True)
            define(line, cname, t)
            step(PIN, t)
        elif instr == "COPY":
            src = lookup(line, required_field(path, line, obj, "SRC"))
            define(line, required_field(path, line, obj, "DST"), src)
            refs[src] += 1
            step(GET, src)
        elif instr == "RELEASE":
            released = required_field(path, line, obj, "NAME")
            t = lookup(line, released)
            if refs[t] <= 0:
                raise TraceError(
                    path, line, f"RELEASE of {show(released)}, which holds no reference any more"
                )
            refs[t] -= 1
            step(RELEASE, t)
        elif instr == "CALL":
            results = required_field(path, line, obj, "RESULT")
            if not isinstance(results, list) or not results:
                raise TraceError(path, line, "CALL needs a non-empty RESULT list")
            arg_names = required_field(path, line, obj, "ARGS")
            if not isinstance(arg_names, list):
                raise TraceError(path, line, "CALL field ARGS must be a list")
            required_field(path, line, obj, "NAME")
            compute = int_field(path, line, obj, "TIME")
            sizes: list[int] = []
            aliases: list[int] = []
            for rname in results:
                for expected in ("MEMORY", "ALIAS"):
                    if lines.done():
                        raise TraceError(
                            path,
                            line,
                            f"CALL result {show(rname)} without its {expected} line "
                            "(truncated file?)",
                        )
                    rline, robj = lines.next()
                    if robj["INSTRUCTION"] != expected or robj.get("NAME") != rname:
                        raise TraceError(
                            path,
                            rline,
                            f"expected the {expected} line of CALL result {show(rname)}, got "
                            f"{robj['INSTRUCTION']} {show(robj.get('NAME'))}",
                        )
                    if expected == "MEMORY":
                        sizes.append(int_field(path, rline, robj, "MEMORY"))
                    else:
                        alias = int_field(path, rline, robj, "ALIAS", lowest=-1)
                        if alias != -1 and not 0 <= alias < len(arg_names):
                            raise TraceError(
                                path,
                                rline,
                                f"ALIAS {alias} is not an argument index of the CALL "
                                f"(0..{len(arg_names) - 1} or -1)",
                            )
                        aliases.append(alias)
            args = tuple(lookup(line, a) for a in arg_names)
            sizes = [0 if aliases[i] != -1 else sizes[i] for i in range(len(sizes))]
            first = add_op(line, compute, tuple(sizes), tuple(aliases), args, False)
            for i, rname in enumerate(results):
                define(line, rname, first + i)
        elif instr == "MUTATE":
            arg_names = required_field(path, line, obj, "ARGS")
            mutate = required_field(path, line, obj, "MUTATE")
            if not isinstance(arg_names, list) or not isinstance(mutate, list):
                raise TraceError(path, line, "MUTATE fields ARGS and MUTATE must be lists")
            required_field(path, line, obj, "NAME")
            compute = int_field(path, line, obj, "TIME")
            args = tuple(lookup(line, a) for a in arg_names)
            idx: list[int] = []
            for m in mutate:
                mi = integer(m)
                if mi is None:
                    raise TraceError(path, line, f"MUTATE index {show(m)} is not an integer")
                if not 0 <= mi < len(args):
                    raise TraceError(
                        path,
                        line,
                        f"MUTATE index {mi} is not an argument index (0..{len(args) - 1})",
                    )
                idx.append(mi)
            # Mutated outputs are fresh storages the size of the mutated argument's storage.
            sizes_t = tuple(tensor_storage_size[names[arg_names[m]]] for m in idx)
            first = add_op(line, compute, sizes_t, tuple(-1 for _ in idx), args, False)
            for i, m in enumerate(idx):
                old = names[arg_names[m]]
                names[arg_names[m]] = first + i
                refs[old] -= 1
                step(RELEASE, old)
        elif instr == "COPY_FROM":
            dst_name = required_field(path, line, obj, "DST")
            old = lookup(line, dst_name)
            src = lookup(line, required_field(path, line, obj, "SRC"))
            names[dst_name] = src  # type: ignore[index]
            refs[old] -= 1
            refs[src] += 1
            step(RELEASE, old)
            step(GET, src)
        elif instr == "ANNOTATE":
            pass  # BACKWARD only marks the phase; it changes no decision
        else:  # MEMORY or ALIAS out of place
            raise TraceError(path, line, f"{instr} line outside a CONSTANT or CALL")

    # Every tensor still referenced at the end is made resident and pinned.
    for tensor in names.values():
        if refs[tensor] > 0:
            step(PIN, tensor)
    return prog


def parse_file(path: str | os.PathLike[str], *, name: str = "") -> Program:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TraceError(p, None, f"cannot read trace: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TraceError(p, line, "not UTF-8 text") from None
    if text and not text.endswith("\n"):
        # A trace writer always ends lines; a missing newline means the file was cut short.
        last = text.rsplit("\n", 1)[-1]
        try:
            if last.strip():
                json.loads(last)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            raise TraceError(
                p, text.count("\n") + 1, "truncated last line (invalid JSON)"
            ) from None
    return parse_text(text, path=p, name=name or p.stem, sha256=hashlib.sha256(data).hexdigest())
