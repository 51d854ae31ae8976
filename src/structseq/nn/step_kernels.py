"""The step kernels of the LSTM decoder loop (`structseq.models.lstm`): one autograd node per GEMM, attention
and LSTM cell of a step, whose shared gradients (weights, attention keys and memory) are formed once per batch
from operands the steps stash on a `Tape`, instead of being accumulated step by step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class Tape:
    """Operands that the steps of one forward pass stash (`fwd[i]` in forward, `bwd[i]` in backward) so that
    the gradient of a tensor every step uses is formed once, by `grads`, after the last step's backward.

    The tape holds detached tensors only and is emptied once the gradients are formed: the autograd nodes
    hold the tape, so a stashed tensor with a grad_fn would close a reference cycle through C++ nodes that
    Python's garbage collector cannot see, and every training step's graph would stay alive (a leak of ~25 MB
    per update at 256 units, fixed with tests/models/test_lstm.py::test_training_steps_do_not_keep_graphs)."""

    def __init__(self, grads):
        self.fwd: list[tuple[Tensor, ...]] = []
        self.bwd: dict[int, tuple[Tensor, ...]] = {}
        self._grads = grads

    def anchor(self, *shared: Tensor) -> Tensor:
        """An empty tensor that every taped step takes as input: its backward (computing the gradients of
        `shared`) runs only after all of theirs."""
        return TapeSink.apply(self, *shared)

    def pairs(self) -> list[tuple[tuple[Tensor, ...], tuple[Tensor, ...]]]:
        return [(f, self.bwd[i]) for i, f in enumerate(self.fwd) if i in self.bwd]

    def grads(self) -> tuple[Tensor | None, ...]:
        out = self._grads(self)
        self.fwd, self.bwd = [], {}
        return out


class TapeSink(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tape: Tape, *shared: Tensor) -> Tensor:
        ctx.tape = tape
        return shared[0].new_empty(0)

    @staticmethod
    def backward(ctx, _):
        return (None, *ctx.tape.grads())


def linear_grads(tape: Tape) -> tuple[Tensor | None]:
    pairs = tape.pairs()
    if not pairs:
        return (None,)
    x = torch.cat([f[0] for f, _ in pairs])
    dy = torch.cat([b[0] for _, b in pairs])
    return (dy.t() @ x,)


class StepLinear(torch.autograd.Function):
    """pre + x W^T, whose gradient for W the tape forms (one GEMM over all steps)."""

    @staticmethod
    def forward(ctx, pre: Tensor, x: Tensor, weight: Tensor, anchor: Tensor, tape: Tape) -> Tensor:
        ctx.tape, ctx.index, ctx.bias = tape, len(tape.fwd), pre.dim() == 1
        tape.fwd.append((x.detach(),))
        ctx.save_for_backward(weight)
        return torch.addmm(pre, x, weight.t())

    @staticmethod
    def backward(ctx, dy: Tensor):
        (weight,) = ctx.saved_tensors
        ctx.tape.bwd[ctx.index] = (dy,)
        dpre = dy.sum(0) if ctx.bias else dy
        return dpre, dy @ weight, None, dy.new_zeros(0), None


class TapedLinear:
    """x -> pre + x W^T for one weight used at every step (W: (out, in), autograd-tracked)."""

    def __init__(self, weight: Tensor):
        self.weight = weight
        self.tape = None
        if torch.is_grad_enabled() and weight.requires_grad:
            self.tape = Tape(linear_grads)
            self.anchor, self.detached = self.tape.anchor(weight), weight.detach()

    def __call__(self, pre: Tensor, x: Tensor) -> Tensor:
        if self.tape is None:
            return torch.addmm(pre, x, self.weight.t())
        return StepLinear.apply(pre, x, self.detached, self.anchor, self.tape)


def attention_grads(tape: Tape) -> tuple[Tensor | None, ...]:
    """d keys = sum_t d score_t (x) h_t, d memory = sum_t alpha_t (x) d context_t, as two batched products; and
    where the score bias is trained (the query's bias, `<e_j, b>`), d bias = sum_t d score_t."""
    pairs = tape.pairs()
    if not pairs:
        return (None,) * (3 if tape.bias_grad else 2)
    B = tape.batch

    def stacked(ts: list[Tensor]) -> Tensor:  # steps (n_t, D) -> (B, steps, D), zero rows past n_t
        return torch.stack([F.pad(t, (0, 0, 0, B - t.shape[0])) for t in ts], 1)

    h, alpha = stacked([f[0] for f, _ in pairs]), stacked([f[1] for f, _ in pairs])
    d_score, d_context = stacked([b[0] for _, b in pairs]), stacked([b[1] for _, b in pairs])
    grads = d_score.transpose(1, 2) @ h, alpha.transpose(1, 2) @ d_context
    return (*grads, d_score.sum(1)) if tape.bias_grad else grads


class StepAttention(torch.autograd.Function):
    """alpha = softmax(<keys_j, h> + bias_j), context = sum_j alpha_j memory_j; the gradients of the keys and
    the memory, shared by all steps, are formed by the tape."""

    @staticmethod
    def forward(ctx, h: Tensor, keys: Tensor, memory: Tensor, bias: Tensor, anchor: Tensor, tape: Tape):
        alpha = torch.baddbmm(bias[:, None], h[:, None], keys.transpose(1, 2))[:, 0].softmax(-1)
        context = torch.bmm(alpha[:, None], memory)[:, 0]
        ctx.tape, ctx.index = tape, len(tape.fwd)
        tape.fwd.append((h.detach(), alpha.detach()))
        ctx.save_for_backward(keys, memory, alpha)
        return alpha, context

    @staticmethod
    def backward(ctx, d_alpha: Tensor, d_context: Tensor):
        keys, memory, alpha = ctx.saved_tensors
        d_alpha = torch.baddbmm(d_alpha[:, None], d_context[:, None], memory.transpose(1, 2))[:, 0]
        d_score = alpha * (d_alpha - (d_alpha * alpha).sum(-1, keepdim=True))
        ctx.tape.bwd[ctx.index] = (d_score, d_context)
        return torch.bmm(d_score[:, None], keys)[:, 0], None, None, None, d_alpha.new_zeros(0), None


class TapedAttention:
    """Luong attention of one batch (keys, memory (B, S, H), additive score bias (B, S): the padding mask, plus
    the query bias's term where the model has one); a step may run on the first n rows."""

    def __init__(self, keys: Tensor, memory: Tensor, bias: Tensor):
        self.keys, self.memory, self.bias, self.tape = keys, memory, bias, None
        if torch.is_grad_enabled() and (keys.requires_grad or memory.requires_grad or bias.requires_grad):
            self.tape = Tape(attention_grads)
            self.tape.batch, self.tape.bias_grad = keys.shape[0], bias.requires_grad
            shared = (keys, memory, bias) if bias.requires_grad else (keys, memory)
            self.anchor = self.tape.anchor(*shared)
            self.keys, self.memory, self.bias = keys.detach(), memory.detach(), bias.detach()

    def __call__(self, h: Tensor) -> tuple[Tensor, Tensor]:
        n = h.shape[0]
        keys, memory, bias = self.keys[:n], self.memory[:n], self.bias[:n]
        if self.tape is None:
            alpha = torch.baddbmm(bias[:, None], h[:, None], keys.transpose(1, 2))[:, 0].softmax(-1)
            return alpha, torch.bmm(alpha[:, None], memory)[:, 0]
        return StepAttention.apply(h, keys, memory, bias, self.anchor, self.tape)


def cell_forward(gates: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """torch's LSTM cell on precomputed gates (B, 4H) in torch's order i, f, g, o: h, c and what backward needs."""
    H = c0.shape[1]
    s = gates.sigmoid()
    g = gates[:, 2 * H : 3 * H].tanh()
    c = torch.addcmul(s[:, H : 2 * H] * c0, s[:, :H], g)
    tc = c.tanh()
    return s[:, 3 * H :] * tc, c, (s, g, c0, tc)


class LSTMCellFunction(torch.autograd.Function):
    """The cell as one autograd node."""

    @staticmethod
    def forward(ctx, gates: Tensor, c0: Tensor) -> tuple[Tensor, Tensor]:
        h, c, saved = cell_forward(gates, c0)
        ctx.save_for_backward(*saved)
        return h, c

    @staticmethod
    def backward(ctx, dh: Tensor, dc: Tensor):
        s, g, c0, tc = ctx.saved_tensors
        i, f, _, o = s.chunk(4, 1)
        dc = dc + dh * o * (1 - tc * tc)
        d_gates = torch.cat(
            [dc * g * i * (1 - i), dc * c0 * f * (1 - f), dc * i * (1 - g * g), dh * tc * o * (1 - o)], 1
        )
        return d_gates, dc * f


def lstm_cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    if torch.is_grad_enabled() and (gates.requires_grad or c.requires_grad):
        return LSTMCellFunction.apply(gates, c)
    return cell_forward(gates, c)[:2]
