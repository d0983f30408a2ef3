"""Small random training traces in the DTR log format (for differential tests).

``generate(seed)`` returns the text of one trace: one JSON object per line, values as JSON
strings the way the released DTR logs write them. A trace has a forward pass (a chain of
layers with skip connections, weights as constants), a scalar loss, a ``BACKWARD``
annotation, a backward pass that consumes the saved forward activations in reverse order, and
an optimizer step that updates weights in place. Along the way it exercises every instruction
kind and the awkward cases an exact engine must get right:

* multi-output operators, aliasing outputs (``ALIAS`` = index of an argument; the ``MEMORY``
  line is then ignored), outputs that alias while siblings do not, repeated arguments;
* ``MUTATE`` (in-place operators), ``COPY`` (a second name for a tensor, later released),
  ``COPY_FROM`` (rebinding a name), ``RELEASE`` of dead tensors (eager eviction);
* zero-compute operators, zero-size outputs, many equal sizes and times (score ties);
* names left referenced at the end (they are rebuilt if needed and pinned).

Standard library only; deterministic for a given seed on every platform.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

__all__ = ["TraceWriter", "generate"]


def _dump(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class TraceWriter:
    """Emits DTR log lines and tracks which names hold a reference.

    Names are ``x<N>`` with N counting up. ``size[name]`` is the byte size of the storage
    the name refers to (an alias shares its argument's storage). ``live`` holds the names
    that currently own a reference; using or releasing any other name is a bug in the
    caller, so it raises at once.
    """

    def __init__(self, first_id: int = 0) -> None:
        self.lines: list[str] = []
        self.next_id = first_id
        self.size: dict[str, int] = {}
        self.live: set[str] = set()
        self.operators = 0  # CONSTANT + CALL + MUTATE lines written

    # -- helpers
    def _fresh(self) -> str:
        name = f"x{self.next_id}"
        self.next_id += 1
        return name

    def _need(self, name: str) -> None:
        if name not in self.live:
            raise ValueError(f"{name} holds no reference here")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    # -- instructions
    def annotate(self, what: str) -> None:
        self.lines.append(_dump({"INSTRUCTION": "ANNOTATE", "ANNOTATION": what}))

    def constant(self, nbytes: int) -> str:
        name = self._fresh()
        self.lines.append(_dump({"INSTRUCTION": "CONSTANT", "NAME": name}))
        self.lines.append(_dump({"INSTRUCTION": "MEMORY", "NAME": name, "MEMORY": str(nbytes)}))
        self.size[name] = nbytes
        self.live.add(name)
        self.operators += 1
        return name

    def call(
        self, op: str, args: list[str], outputs: list[int | tuple[str, int]], time: int
    ) -> list[str]:
        """One operator. Each output is a byte size, or ("alias", i): a view of args[i]."""
        for a in args:
            self._need(a)
        names = [self._fresh() for _ in outputs]
        self.lines.append(
            _dump(
                {
                    "INSTRUCTION": "CALL",
                    "NAME": op,
                    "ARGS": list(args),
                    "RESULT": names,
                    "TIME": str(time),
                }
            )
        )
        for name, out in zip(names, outputs, strict=True):
            if isinstance(out, tuple):
                base = args[out[1]]
                nbytes, alias = self.size[base], out[1]
            else:
                nbytes, alias = out, -1
            self.lines.append(_dump({"INSTRUCTION": "MEMORY", "NAME": name, "MEMORY": str(nbytes)}))
            self.lines.append(_dump({"INSTRUCTION": "ALIAS", "NAME": name, "ALIAS": str(alias)}))
            self.size[name] = nbytes
            self.live.add(name)
        self.operators += 1
        return names

    def mutate(self, op: str, args: list[str], which: list[int], time: int) -> None:
        """In-place operator: args[i] for i in `which` become new versions (same names)."""
        for a in args:
            self._need(a)
        self.lines.append(
            _dump(
                {
                    "INSTRUCTION": "MUTATE",
                    "NAME": op,
                    "ARGS": list(args),
                    "MUTATE": list(which),
                    "TIME": str(time),
                }
            )
        )
        self.operators += 1

    def copy(self, src: str) -> str:
        self._need(src)
        dst = self._fresh()
        self.lines.append(_dump({"INSTRUCTION": "COPY", "DST": dst, "SRC": src}))
        self.size[dst] = self.size[src]
        self.live.add(dst)
        return dst

    def copy_from(self, dst: str, src: str) -> None:
        """Rebind name `dst` to the tensor of `src` (dst's old tensor loses a reference)."""
        self._need(dst)
        self._need(src)
        self.lines.append(_dump({"INSTRUCTION": "COPY_FROM", "DST": dst, "SRC": src}))
        self.size[dst] = self.size[src]

    def release(self, name: str) -> None:
        self._need(name)
        self.lines.append(_dump({"INSTRUCTION": "RELEASE", "NAME": name}))
        self.live.discard(name)

    def rename(self, name: str) -> str:
        """The logs' common pattern: COPY to a new name, RELEASE the old one."""
        dst = self.copy(name)
        self.release(name)
        return dst


@dataclass
class _Layer:
    kind: str
    inp: str  # name of the layer's input activation (forward)
    out: str  # name of the layer's output activation (forward)
    saved: list[str] = field(default_factory=list)  # names kept for the backward pass
    weights: list[str] = field(default_factory=list)
    skip_from: int | None = None  # index of the layer whose output is added back in


def generate(seed: int, *, n_ops: int | None = None) -> str:
    """The text of one random trace.

    ``n_ops`` is about how many operators (constants included) the trace has; when not
    given it is drawn from the seed, between 15 and 80.
    """
    rng = random.Random(seed)
    if n_ops is None:
        # 15..80, small traces more often (they are the cheap ones to keep as fixtures)
        n_ops = 15 + int(66 * rng.random() ** 3)
    n_ops = max(8, n_ops)

    sizes = [4, 8, 8, 8, 12, 16, 16, 24, 32]  # few distinct values: ties are common
    small = [1, 1, 2, 4]

    def t(lo: int = 1, hi: int = 12) -> int:
        return 0 if rng.random() < 0.08 else rng.randint(lo, hi)

    w = TraceWriter(first_id=rng.randint(0, 200))
    # Lines before START are skipped by the replay; the real logs have some too.
    if rng.random() < 0.3:
        w.annotate("WARMUP")
    w.annotate("START")

    def weight() -> str:
        name = w.constant(rng.choice(small + [4, 8]))
        if rng.random() < 0.3:  # the logs copy parameters and drop the first name
            name = w.rename(name)
        return name

    x = (
        w.call("input", [], [rng.choice(sizes)], t())[0]
        if rng.random() < 0.5
        else w.constant(rng.choice(sizes))
    )
    layers: list[_Layer] = []
    forward_budget = int(n_ops * 0.5)

    # ------------------------------------------------------------------ forward
    while w.operators < forward_budget:
        kinds = ["dense", "dense", "norm", "relu", "relu_", "view", "dropout", "split", "zero"]
        if len(layers) >= 2:
            kinds += ["skip", "skip"]
        kind = rng.choice(kinds)
        layer = _Layer(kind=kind, inp=x, out=x)
        if kind == "dense":
            wt = weight()
            y = w.call(
                rng.choice(["linear", "conv2d", "mm"]), [x, wt], [rng.choice(sizes)], t(3, 20)
            )[0]
            layer.weights, layer.saved = [wt], [x]
        elif kind == "norm":
            g, b = weight(), weight()
            y, mean, rstd = w.call(
                "batch_norm", [x, g, b], [w.size[x], rng.choice(small), rng.choice(small)], t(2, 10)
            )
            layer.weights, layer.saved = [g, b], [x, mean, rstd]
        elif kind == "relu":
            y = w.call("relu", [x], [w.size[x]], t(1, 4))[0]
            layer.saved = [y]
        elif kind == "relu_":
            # in place: the name x now means the new version
            w.mutate("relu_", [x], [0], t(1, 4))
            y = x
            layer.saved = []
        elif kind == "view":
            y = w.call(
                rng.choice(["view", "transpose", "slice"]),
                [x],
                [("alias", 0)],
                rng.choice([0, 1, 1]),
            )[0]
        elif kind == "dropout":
            y, mask = w.call("dropout", [x], [w.size[x], rng.choice(sizes)], t(1, 5))
            layer.saved = [mask]
        elif kind == "split":
            # two views of the input, plus (sometimes) a fresh tensor beside them
            outs: list = [("alias", 0), ("alias", 0)]
            if rng.random() < 0.5:
                outs.append(rng.choice(sizes))
            parts = w.call("split", [x], outs, t(0, 2))
            y = w.call("cat", [parts[0], parts[1]], [w.size[x]], t(1, 6))[0]
            for p in parts[:2]:
                w.release(p)
            for p in parts[2:]:
                if rng.random() < 0.6:
                    w.release(p)  # dead at once: eager eviction
                else:
                    layer.saved.append(p)
        elif kind == "zero":
            # zero-compute and zero-size outputs
            y = w.call(rng.choice(["mul", "add"]), [x, x], [w.size[x]], 0)[0]
            if rng.random() < 0.5:
                e = w.call("empty", [], [0], 0)[0]
                layer.saved.append(e)
        else:  # skip connection from an earlier output still held
            candidates = [i for i, L in enumerate(layers[:-1]) if L.out in w.live and L.out != x]
            if not candidates:
                y = w.call("relu", [x], [w.size[x]], t(1, 4))[0]
                layer.kind, layer.saved = "relu", [y]
            else:
                i = rng.choice(candidates)
                y = w.call("add", [x, layers[i].out], [w.size[x]], t(1, 4))[0]
                layer.skip_from = i
        layer.out = y
        layers.append(layer)
        # the previous activation is dead unless saved, skipped to later, or viewed
        if x != y and x not in layer.saved and layer.kind != "view":
            keep = rng.random() < 0.35  # held for a later skip connection
            if not keep and not any(x in L.saved for L in layers):
                w.release(x)
        if rng.random() < 0.15 and y in w.live:
            twin = w.copy(y)  # a second name, dropped a little later
            layer.saved.append(twin)
        if rng.random() < 0.15 and y in w.live and y not in layer.saved:
            y = w.rename(y)
            layer.out = y
        x = y

    # ------------------------------------------------------------------ loss
    target = w.constant(rng.choice(sizes))
    loss = w.call("mse_loss", [x, target], [rng.choice(small)], t(1, 5))[0]
    w.annotate("BACKWARD")
    g = w.call("ones_like", [loss], [rng.choice(small)], 0)[0]
    g = w.call("mse_loss_backward", [g, x, target], [w.size[x]], t(1, 8))[0]
    w.release(target)

    # ------------------------------------------------------------------ backward
    grads: list[tuple[str, str]] = []  # (weight, gradient)
    pending: dict[int, list[str]] = {}  # layer index -> gradients flowing in via skips
    for i in range(len(layers) - 1, -1, -1):
        L = layers[i]
        for extra in pending.pop(i, []):
            g2 = w.call("add", [g, extra], [w.size[g]], t(1, 3))[0]
            w.release(g)
            w.release(extra)
            g = g2
        if L.out in w.live and L.out not in L.saved and rng.random() < 0.8:
            w.release(L.out)  # the forward output is no longer needed
        leftover = rng.random() < 0.1  # forget to drop a saved tensor now and then
        in_bytes = w.size.get(L.inp, w.size[g])
        if L.kind == "dense":
            gx, gw = w.call(
                L.kind + "_backward",
                [g, *[s for s in L.saved if s in w.live], L.weights[0]],
                [in_bytes, w.size[L.weights[0]]],
                t(3, 20),
            )
            grads.append((L.weights[0], gw))
        elif L.kind == "norm":
            outs = w.call(
                "batch_norm_backward",
                [g, *[s for s in L.saved if s in w.live], *L.weights],
                [in_bytes, w.size[L.weights[0]], w.size[L.weights[1]]],
                t(2, 10),
            )
            gx = outs[0]
            grads += [(L.weights[0], outs[1]), (L.weights[1], outs[2])]
        elif L.kind == "view":
            gx = w.call("view", [g], [("alias", 0)], 1)[0]
        elif L.kind == "relu_" and rng.random() < 0.5:
            w.mutate("threshold_backward_", [g], [0], t(1, 3))
            gx = w.copy(g)
        elif L.kind == "skip":
            gx = w.copy(g)  # the same gradient flows to both inputs of the add
            if L.skip_from is not None:
                pending.setdefault(L.skip_from, []).append(w.copy(g))
        else:
            gx = w.call(
                L.kind + "_backward", [g, *[s for s in L.saved if s in w.live]], [in_bytes], t(1, 6)
            )[0]
        w.release(g)
        if not leftover:
            for s in L.saved:
                if s in w.live:
                    w.release(s)
        if (
            L.inp in w.live
            and L.inp != L.out
            and rng.random() < 0.7
            and not any(L.inp in M.saved or L.inp == M.out for M in layers[:i])
        ):
            w.release(L.inp)
        g = gx
    for extras in pending.values():
        for extra in extras:
            w.release(extra)

    # ------------------------------------------------------------------ optimizer
    for wt, gw in grads:
        if wt not in w.live:
            continue
        r = rng.random()
        if r < 0.6:
            w.mutate(rng.choice(["add_", "sub_"]), [wt, gw], [0], t(1, 3))
            w.release(gw)
        elif r < 0.8:
            new = w.call("sub", [wt, gw], [w.size[wt]], t(1, 3))[0]
            w.copy_from(wt, new)
            w.release(new)
            w.release(gw)
        # else: the gradient stays referenced to the end (rebuilt and pinned there)
    for name in sorted(w.live, key=lambda n: int(n[1:])):
        if name != g and rng.random() < 0.3:
            w.release(name)
    return w.text()
