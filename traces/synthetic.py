"""A small, fixed, realistic-looking training trace that ships with the project.

``synthetic_trace_text()`` writes one training step of a small residual CNN followed by an
MLP head (batch 32, 3x32x32 images, float32) in the DTR log format: parameters as constants
(copied and renamed the way the released logs do), convolution / batch-norm / in-place ReLU
blocks with residual additions, max pooling with indices, a flattening view, linear layers
with transposed-weight views, dropout, a log-softmax / NLL loss, the matching backward pass,
and an in-place SGD step. Sizes are real byte counts for those shapes; times are
nanosecond-scale costs proportional to the arithmetic, with a fixed jitter.

It is deterministic (no randomness beyond a fixed-seed jitter) and uses the standard
library only. ``main()`` writes it to ``traces/synthetic-mlp.log``:

    python -m traces.synthetic
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

try:
    from traces.random_traces import TraceWriter
except ImportError:  # run as a file: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from traces.random_traces import TraceWriter

SYNTHETIC_TRACE_NAME = "synthetic-mlp"

F32 = 4
BATCH = 32


def synthetic_trace_text() -> str:
    jitter = random.Random(2020)
    w = TraceWriter(first_id=1000)

    def cost(flops: float, floor: int = 2000) -> int:
        """Nanoseconds for `flops` multiply-adds on a modest GPU, with fixed jitter."""
        return max(floor, int(flops / 4.0 * jitter.uniform(0.9, 1.1)))

    def param(*shape: int) -> str:
        n = F32
        for d in shape:
            n *= d
        name = w.constant(n)
        return w.rename(name)

    params: list[str] = []

    def new_param(*shape: int) -> str:
        p = param(*shape)
        params.append(p)
        return p

    def numel(name: str) -> int:
        return w.size[name] // F32

    w.annotate("START")

    # ---------------------------------------------------------------- parameters
    # stem conv 3->16, three stages of two residual blocks (16, 32, 64 channels)
    conv_w: dict[str, str] = {}
    bn: dict[str, tuple[str, str, str, str]] = {}

    def conv_params(key: str, cin: int, cout: int, k: int) -> None:
        conv_w[key] = new_param(cout, cin, k, k)
        g, b = new_param(cout), new_param(cout)
        rm, rv = param(cout), param(cout)  # running statistics: buffers, not trained
        bn[key] = (g, b, rm, rv)

    conv_params("stem", 3, 16, 3)
    stages = [(16, 32), (32, 16), (64, 8)]  # (channels, spatial size)
    cin = 16
    for si, (ch, _hw) in enumerate(stages):
        for bi in range(2):
            conv_params(f"s{si}b{bi}c1", cin if bi == 0 else ch, ch, 3)
            conv_params(f"s{si}b{bi}c2", ch, ch, 3)
            if bi == 0 and cin != ch:
                conv_params(f"s{si}down", cin, ch, 1)
            cin = ch
    fc = [(64 * 4 * 4, 256), (256, 128), (128, 10)]
    fc_params = [(new_param(o, i), new_param(o)) for i, o in fc]
    lr = w.constant(F32)

    image = w.constant(BATCH * 3 * 32 * 32 * F32)
    labels = w.constant(BATCH * 8)

    # ---------------------------------------------------------------- forward
    saved: list[tuple] = []  # backward records, consumed in reverse

    def conv_bn(x: str, key: str, cout: int, hw_out: int, k: int, relu: bool, record: bool = True):
        cin_ = w.size[conv_w[key]] // (F32 * cout * k * k)
        out_bytes = BATCH * cout * hw_out * hw_out * F32
        flops = BATCH * cout * hw_out * hw_out * cin_ * k * k
        y = w.call("cudnn_convolution", [x, conv_w[key]], [out_bytes], cost(flops))[0]
        g, b, rm, rv = bn[key]
        z, mean, invstd, reserve = w.call(
            "cudnn_batch_norm",
            [y, g, b, rm, rv],
            [out_bytes, cout * F32, cout * F32, 0],
            cost(numel(y) * 4),
        )
        w.release(reserve)
        rec = ("conv", key, x, y, z, mean, invstd)
        if not record:
            return z, rec
        saved.append(rec)
        if relu:
            w.mutate("relu_", [z], [0], cost(numel(z), 1000))
            saved.append(("relu", z, False))
        return z

    x = conv_bn(image, "stem", 16, 32, 3, relu=True)
    cin = 16
    for si, (ch, hw) in enumerate(stages):
        for bi in range(2):
            h = conv_bn(x, f"s{si}b{bi}c1", ch, hw, 3, relu=True)
            h = conv_bn(h, f"s{si}b{bi}c2", ch, hw, 3, relu=False)
            down = None
            shortcut = x
            if bi == 0 and cin != ch:
                shortcut, down = conv_bn(x, f"s{si}down", ch, hw, 1, relu=False, record=False)
            w.mutate("add_", [h, shortcut], [0], cost(numel(h), 1000))
            if down is not None:
                w.release(shortcut)
            saved.append(("residual", down))
            w.mutate("relu_", [h], [0], cost(numel(h), 1000))
            saved.append(("relu", h, False))
            x = h
            cin = ch
    pooled, indices = w.call(
        "max_pool2d_with_indices", [x], [w.size[x] // 4, w.size[x] // 4 * 2], cost(numel(x))
    )
    saved.append(("pool", x, indices))
    flat = w.call("view", [pooled], [("alias", 0)], 1100)[0]
    w.release(pooled)
    x = flat
    for li, ((wt, bias), (fin, fout)) in enumerate(zip(fc_params, fc, strict=True)):
        wt_t = w.call("t", [wt], [("alias", 0)], 1000)[0]
        y = w.call("addmm", [bias, x, wt_t], [BATCH * fout * F32], cost(BATCH * fin * fout))[0]
        saved.append(("linear", li, x, wt_t))
        if li < len(fc) - 1:
            w.mutate("relu_", [y], [0], cost(numel(y), 1000))
            saved.append(("relu", y, True))
            d, mask = w.call("fused_dropout", [y], [w.size[y], numel(y)], cost(numel(y) * 2))
            saved.append(("dropout", y, mask))
            y = d
        x = y
    logp = w.call("log_softmax", [x], [w.size[x]], cost(numel(x) * 8))[0]
    w.release(x)
    loss, total_weight = w.call("nll_loss_forward", [logp, labels], [F32, F32], cost(BATCH * 4))

    # ---------------------------------------------------------------- backward
    w.annotate("BACKWARD")
    grad = w.call("ones_like", [loss], [F32], 2000)[0]
    grad = w.call(
        "nll_loss_backward", [grad, logp, labels, total_weight], [w.size[logp]], cost(numel(logp))
    )[0]
    w.release(total_weight)
    grad2 = w.call(
        "_log_softmax_backward_data", [grad, logp], [w.size[logp]], cost(numel(logp) * 4)
    )[0]
    w.release(grad)
    w.release(logp)
    grad = grad2

    param_grads: dict[str, str] = {}
    residual_grads: list[str] = []

    def conv_backward(rec: tuple, grad: str) -> str:
        """Batch-norm then convolution backward; returns the gradient of the input."""
        _, key, x_in, y, z, mean, invstd = rec
        g, b, rm, rv = bn[key]
        gy, gg, gb = w.call(
            "cudnn_batch_norm_backward",
            [y, grad, g, rm, rv, mean, invstd],
            [w.size[y], w.size[g], w.size[b]],
            cost(numel(y) * 6),
        )
        w.release(grad)
        for n in (mean, invstd, y):
            w.release(n)
        cout = w.size[g] // F32
        k = 1 if key.endswith("down") else 3
        flops = numel(gy) * (w.size[conv_w[key]] // (F32 * cout * k * k)) * k * k
        gx, gw = w.call(
            "cudnn_convolution_backward",
            [x_in, gy, conv_w[key]],
            [w.size[x_in], w.size[conv_w[key]]],
            cost(flops * 2),
        )
        w.release(gy)
        if z in w.live and z != x_in:
            w.release(z)
        param_grads[conv_w[key]], param_grads[g], param_grads[b] = gw, gg, gb
        return gx

    while saved:
        rec = saved.pop()
        kind = rec[0]
        if kind == "relu":
            _, out, last_use = rec
            g2 = w.call("threshold_backward", [grad, out], [w.size[grad]], cost(numel(grad), 1000))[
                0
            ]
            w.release(grad)
            if last_use:
                w.release(out)
            grad = g2
        elif kind == "dropout":
            _, y, mask = rec
            g2 = w.call("_masked_scale", [grad, mask], [w.size[grad]], cost(numel(grad), 1000))[0]
            w.release(grad)
            w.release(mask)
            grad = g2
        elif kind == "linear":
            li, x_in, wt_t = rec[1], rec[2], rec[3]
            wt, bias = fc_params[li]
            fin, fout = fc[li]
            wt_tt = w.call("t", [wt_t], [("alias", 0)], 1000)[0]
            gx = w.call("mm", [grad, wt_tt], [BATCH * fin * F32], cost(BATCH * fin * fout))[0]
            grad_t = w.call("t", [grad], [("alias", 0)], 1000)[0]
            gw_t = w.call("mm", [grad_t, x_in], [fin * fout * F32], cost(BATCH * fin * fout))[0]
            gb = w.call("sum", [grad], [fout * F32], cost(numel(grad), 1000))[0]
            gw = w.call("t", [gw_t], [("alias", 0)], 1000)[0]
            for n in (wt_tt, grad_t, gw_t, wt_t, grad):
                w.release(n)
            if li > 0:
                w.release(x_in)
            param_grads[wt], param_grads[bias] = gw, gb
            grad = gx
        elif kind == "pool":
            _, x_in, indices = rec
            g_un = w.call("view", [grad], [("alias", 0)], 1000)[0]
            w.release(grad)
            gx = w.call(
                "max_pool2d_with_indices_backward",
                [g_un, x_in, indices],
                [w.size[x_in]],
                cost(numel(x_in) * 2),
            )[0]
            w.release(g_un)
            w.release(indices)
            w.release(flat)
            grad = gx
        elif kind == "residual":
            # the gradient of h + shortcut flows to both branches
            down = rec[1]
            if down is None:
                residual_grads.append(w.copy(grad))
            else:
                residual_grads.append(conv_backward(down, w.copy(grad)))
        elif kind == "conv":
            gx = conv_backward(rec, grad)
            if rec[1].endswith("c1") and residual_grads:
                # start of a residual block: add the shortcut branch's gradient
                extra = residual_grads.pop()
                g2 = w.call("add", [gx, extra], [w.size[gx]], cost(numel(gx), 1000))[0]
                w.release(gx)
                w.release(extra)
                gx = g2
            grad = gx
    w.release(grad)  # gradient with respect to the image: unused
    for extra in residual_grads:
        w.release(extra)

    # ---------------------------------------------------------------- SGD step
    for p in params:
        gp = param_grads.get(p)
        if gp is None:
            continue
        w.mutate("add_", [p, gp, lr], [0], cost(numel(p), 1000))
        w.release(gp)
    w.release(image)
    w.release(labels)
    # the loss stays referenced: it is pinned at the end with the parameters
    return w.text()


def main() -> None:
    out = Path(__file__).resolve().parent / f"{SYNTHETIC_TRACE_NAME}.log"
    text = synthetic_trace_text()
    out.write_text(text)
    print(f"wrote {out} ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    main()
