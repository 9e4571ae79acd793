"""The MoE workload: the tutorial Mixture-of-Experts, and a compile-friendly twin of it.

What goes in: a batch ``x`` of shape ``[batch, input_dim]``.
What comes out: ``(outputs, aux_loss)`` — ``outputs`` is ``[batch, output_dim]``; ``aux_loss`` is the
load-balancing loss (a 0-d tensor) while training and the Python float ``0.0`` in eval mode.

Why it exists: this is the program minicompile is built to compile. Two versions compute the same function:

* ``MoE`` is written the way a learner writes it (the seed tutorial): a gate, softmax, top-k, an auxiliary
  loss, then a Python loop over experts that picks each expert's samples with a boolean mask, truncates them
  to ``expert_capacity``, runs the expert and scatters the weighted result back with ``index_add_``.
  Boolean-mask indexing has a data-dependent shape and ``len(...)`` needs a value from the device, so a
  tracer must break the graph inside the loop. It is compiled *unmodified* to exercise graph breaks.
* ``MoEFriendly`` computes the same outputs and the same auxiliary loss with static shapes only (fixed
  capacity slots, one-hot dispatch/combine, batched matmuls over stacked expert weights), so a compiler can
  capture the whole forward as one graph.

Tiny example::

    >>> moe = make_moe("tutorial", "small", seed=0)
    >>> friendly = friendly_from_tutorial(moe)
    >>> x = make_moe_input("small", seed=1)
    >>> torch.allclose(moe(x)[0], friendly(x)[0], atol=1e-6)
    True

Upstream: no PyTorch file; this is the workload (seed document ``000``). The friendly form follows the
dispatch/combine formulation of GShard and the Switch Transformer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.autograd.profiler as profiler  # noqa: PLR0402 -- spelled as in the tutorial
import torch.nn.functional as F
from torch import nn

__all__ = [
    "MOE_SIZES",
    "Expert",
    "MoE",
    "MoEFriendly",
    "MoESize",
    "friendly_from_tutorial",
    "make_moe",
    "make_moe_input",
    "routing_events",
    "train_steps",
]


# ---------------------------------------------------------------------------------------------------------
# 1. The tutorial MoE, as a learner writes it.
# ---------------------------------------------------------------------------------------------------------


class Expert(nn.Module):
    """One expert: a two-layer MLP, Linear -> GELU -> Linear."""

    def __init__(self, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.GELU(),  # the exact (erf) GELU, smoother than ReLU around zero
            nn.Linear(hidden_dim, output_dim),
        )

    def forward(self, x):
        return self.net(x)


class MoE(nn.Module):
    """Sparse Mixture of Experts: every sample is sent to its ``top_k`` best experts.

    Each expert accepts at most ``expert_capacity`` (sample, expert) assignments per batch; the first ones in
    flat (sample-major) order win and the rest are dropped. ``forward`` returns ``(outputs, aux_loss)``.
    """

    def __init__(self, input_dim, num_experts, top_k, expert_capacity, hidden_dim, output_dim):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k  # experts per sample: the sparsity knob
        self.expert_capacity = expert_capacity  # at most this many assignments per expert per batch
        self.gate = nn.Linear(input_dim, num_experts)  # the router: one score per expert
        self.experts = nn.ModuleList(
            [Expert(input_dim, hidden_dim, output_dim) for _ in range(num_experts)])

    def forward(self, x):
        batch_size, input_dim = x.shape  # noqa: RUF059 -- the tutorial unpacks both
        device = x.device

        # Routing: score every expert, turn the scores into probabilities, keep the k best per sample.
        with profiler.record_function("MoE_Routing"):
            logits = self.gate(x)  # [batch_size, num_experts]
            probs = torch.softmax(logits, dim=-1)
            topk_probs, topk_indices = torch.topk(probs, self.top_k, dim=-1)  # [batch_size, top_k] each

        # Auxiliary loss, training only: pushes the router towards spreading work over all experts.
        if self.training:
            with profiler.record_function("MoE_Auxloss"):
                importance = probs.sum(0)  # [num_experts]: total probability mass each expert receives
                importance_loss = torch.var(importance) / (self.num_experts ** 2)
                mask = torch.zeros_like(probs, dtype=torch.bool)
                mask.scatter_(1, topk_indices, True)  # mask[b, e] is True when e is one of b's top-k
                routing_probs = probs * mask  # probabilities of the chosen experts only
                expert_usage = mask.float().mean(0)  # fraction of samples that chose each expert
                routing_weights = routing_probs.mean(0)  # mean routed probability per expert
                load_balance_loss = self.num_experts * (expert_usage * routing_weights).sum()
                aux_loss = importance_loss + load_balance_loss
        else:
            aux_loss = 0.0  # nothing to balance at inference time

        # Flatten the (sample, k) assignments: entry i says "sample_indices[i] goes to flat_indices[i]".
        flat_indices = topk_indices.view(-1)  # [batch_size * top_k]
        flat_probs = topk_probs.view(-1)  # [batch_size * top_k]
        sample_indices = torch.arange(batch_size, device=device)[:, None]\
            .expand(-1, self.top_k).flatten()  # [batch_size * top_k]: 0,0,1,1,... for top_k=2

        # All experts share one output width; read it off the first expert's last layer.
        output_dim = self.experts[0].net[-1].out_features
        outputs = torch.zeros(batch_size, output_dim, device=device)

        with profiler.record_function("MoE_Experts"):
            for expert_idx in range(self.num_experts):
                # Which assignments went to this expert? (a boolean mask: its length depends on the data)
                expert_mask = flat_indices == expert_idx
                expert_samples = sample_indices[expert_mask]
                expert_weights = flat_probs[expert_mask]

                # Capacity: keep only the first `expert_capacity` assignments, drop the overflow.
                if len(expert_samples) > self.expert_capacity:
                    expert_samples = expert_samples[:self.expert_capacity]
                    expert_weights = expert_weights[:self.expert_capacity]
                if len(expert_samples) == 0:
                    continue  # nobody chose this expert

                # Run the expert on its samples, weight by the router probability, add into the output rows.
                expert_output = self.experts[expert_idx](x[expert_samples])  # [n, output_dim]
                weighted_output = expert_output * expert_weights.unsqueeze(-1)
                outputs.index_add_(0, expert_samples, weighted_output)  # a sample collects top_k results

        return outputs, aux_loss


# ---------------------------------------------------------------------------------------------------------
# 2. The compile-friendly MoE: the same function with static shapes.
# ---------------------------------------------------------------------------------------------------------


class MoEFriendly(nn.Module):
    """The tutorial ``MoE``'s function without data-dependent shapes, so it captures as one graph.

    Step by step, with ``B`` samples, ``K = top_k``, ``E`` experts and ``C = expert_capacity``:

    1. Routing, as in the tutorial: ``gate -> softmax -> topk``. Same ops, so the same top-k choices (ties
       included).
    2. The auxiliary loss, as in the tutorial, but its top-k mask is a sum of one-hot rows instead of an
       in-place ``scatter_``.
    3. Capacity slots. The tutorial keeps, per expert, the first ``C`` assignments in flat ``(sample, k)``
       order. Here each assignment's position inside its expert is a running count: ``cumsum`` of the
       ``[B*K, E]`` one-hot over the flat order, minus 1. An assignment with position ``p < C`` owns slot
       ``p`` of its expert; one with ``p >= C`` matches no slot and is dropped — no branch needed.
    4. Dispatch. ``dispatch_mask[b, e, c]`` is 1 when sample ``b`` sits in slot ``c`` of expert ``e``; a
       contraction with ``x`` gathers a fixed ``[E, C, input_dim]`` block. Empty slots hold zero rows.
    5. Experts. All experts at once: batched matmuls over stacked weights ``w1 [E, in, hidden]``,
       ``b1 [E, hidden]``, ``w2 [E, hidden, out]``, ``b2 [E, out]``, with the exact GELU between.
    6. Combine. ``combine_weights[b, e, c]`` is the dispatch mask times the router probability; a
       contraction with the expert outputs gives ``[B, output_dim]``. Empty slots compute garbage
       (``b2 + w2 @ gelu(b1)``) but get weight 0, so they add nothing, not even to gradients.

    Why no graph breaks: every tensor's shape depends only on ``B`` and the constructor arguments — no
    boolean-mask indexing, no ``len()``/``.item()`` of device values, no Python ``if`` on tensor values. The
    only Python branch is on ``self.training``, which a compiler guards on. The price is fixed work:
    ``E * C`` expert rows are computed whether they are used or not (the tutorial computes at most
    ``B * K`` rows). Profiler regions are left out: they annotate the host timeline and do not change the
    function.

    Built with the same seed as a tutorial ``MoE`` of the same arguments, it holds the same weights (it draws
    random numbers in the same order); ``friendly_from_tutorial`` converts an existing one.
    """

    def __init__(self, input_dim: int, num_experts: int, top_k: int, expert_capacity: int,
                 hidden_dim: int, output_dim: int):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.expert_capacity = expert_capacity
        self.gate = nn.Linear(input_dim, num_experts)
        self.w1 = nn.Parameter(torch.empty(num_experts, input_dim, hidden_dim))
        self.b1 = nn.Parameter(torch.empty(num_experts, hidden_dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, hidden_dim, output_dim))
        self.b2 = nn.Parameter(torch.empty(num_experts, output_dim))
        self.reset_expert_parameters()

    @torch.no_grad()
    def reset_expert_parameters(self) -> None:
        """Initialise each expert exactly as the tutorial's ``Expert`` would (same RNG draws, same order)."""
        for e in range(self.num_experts):
            first = nn.Linear(self.w1.shape[1], self.w1.shape[2], device=self.w1.device, dtype=self.w1.dtype)
            second = nn.Linear(self.w2.shape[1], self.w2.shape[2], device=self.w2.device, dtype=self.w2.dtype)
            self._load_expert(e, first, second)

    @torch.no_grad()
    def _load_expert(self, e: int, first: nn.Linear, second: nn.Linear) -> None:
        # nn.Linear computes x @ weight.T, so the stacked weights hold the transposes.
        self.w1[e].copy_(first.weight.T)
        self.b1[e].copy_(first.bias)
        self.w2[e].copy_(second.weight.T)
        self.b2[e].copy_(second.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | float]:
        batch_size = x.shape[0]
        # 1. Routing.
        probs = torch.softmax(self.gate(x), dim=-1)  # [B, E]
        topk_probs, topk_indices = torch.topk(probs, self.top_k, dim=-1)  # [B, K]
        # The flat (sample, k) assignments, in the tutorial's order, as one-hot rows over the experts.
        expert_onehot = self._one_hot(topk_indices.reshape(-1), self.num_experts)  # [B*K, E]
        # 2. Auxiliary loss.
        if self.training:
            expert_mask = expert_onehot.view(batch_size, self.top_k, -1).sum(1)  # [B, E], 0/1
            aux_loss = self._aux_loss(probs, expert_mask)
        else:
            aux_loss = 0.0
        # 3. Capacity slots.
        slot_onehot = self._slot_one_hot(expert_onehot)  # [B*K, C]
        # 4. Dispatch: one 0/1 entry per (assignment, expert, slot), then fold the k axis into the sample.
        dispatch = (expert_onehot[:, :, None] * slot_onehot[:, None, :]).to(x.dtype)  # [B*K, E, C]
        dispatch = dispatch.view(batch_size, self.top_k, self.num_experts, self.expert_capacity)
        dispatch_mask = dispatch.sum(1)  # [B, E, C]: a sample's top-k experts are distinct, so still 0/1
        combine_weights = (dispatch * topk_probs[:, :, None, None]).sum(1)  # [B, E, C]
        expert_inputs = torch.einsum("bec,bd->ecd", dispatch_mask, x)  # [E, C, in]
        # 5. Experts, all at once.
        expert_outputs = self._run_experts(expert_inputs)  # [E, C, out]
        # 6. Combine: each sample sums its (at most K) weighted slot outputs.
        outputs = torch.einsum("bec,eco->bo", combine_weights, expert_outputs)  # [B, out]
        return outputs, aux_loss

    @staticmethod
    def _one_hot(indices: torch.Tensor, num_classes: int) -> torch.Tensor:
        # A comparison with arange instead of F.one_hot: a plain pointwise op that every backend lowers.
        classes = torch.arange(num_classes, device=indices.device)
        return (indices[:, None] == classes).long()

    def _slot_one_hot(self, expert_onehot: torch.Tensor) -> torch.Tensor:
        # position[i] = how many earlier assignments (in flat order) chose the same expert as assignment i.
        position = ((expert_onehot.cumsum(0) - 1) * expert_onehot).sum(1)  # [B*K]
        # Positions >= capacity match no slot: that is the tutorial's truncation, without a branch.
        return self._one_hot(position, self.expert_capacity)  # [B*K, C]

    def _aux_loss(self, probs: torch.Tensor, expert_mask: torch.Tensor) -> torch.Tensor:
        # The tutorial's formulas, term for term.
        importance = probs.sum(0)
        importance_loss = torch.var(importance) / (self.num_experts ** 2)
        routing_probs = probs * expert_mask
        expert_usage = expert_mask.to(probs.dtype).mean(0)
        routing_weights = routing_probs.mean(0)
        load_balance_loss = self.num_experts * (expert_usage * routing_weights).sum()
        return importance_loss + load_balance_loss

    def _run_experts(self, expert_inputs: torch.Tensor) -> torch.Tensor:
        # baddbmm(bias, a, b) = bias + a @ b, batched over experts; the bias broadcasts over the slots.
        hidden = torch.baddbmm(self.b1.unsqueeze(1), expert_inputs, self.w1)  # [E, C, hidden]
        hidden = F.gelu(hidden)  # exact GELU, like nn.GELU()
        return torch.baddbmm(self.b2.unsqueeze(1), hidden, self.w2)  # [E, C, out]


def friendly_from_tutorial(moe: MoE) -> MoEFriendly:
    """A ``MoEFriendly`` holding a copy of ``moe``'s weights (experts stacked), on its device and dtype."""
    first, second = moe.experts[0].net[0], moe.experts[0].net[-1]
    with torch.device("meta"):  # allocate nothing and draw no random numbers: every value is overwritten
        friendly = MoEFriendly(first.in_features, moe.num_experts, moe.top_k, moe.expert_capacity,
                               first.out_features, second.out_features)
    friendly = friendly.to_empty(device=moe.gate.weight.device).to(moe.gate.weight.dtype)
    with torch.no_grad():
        friendly.gate.load_state_dict(moe.gate.state_dict())
        for e, expert in enumerate(moe.experts):
            friendly._load_expert(e, expert.net[0], expert.net[-1])
    return friendly.train(moe.training)


# ---------------------------------------------------------------------------------------------------------
# 3. Sizes, inputs and the document's tiny training loop.
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MoESize:
    """Constructor arguments of a MoE, plus the batch size it is run with."""

    input_dim: int
    num_experts: int
    top_k: int
    expert_capacity: int
    hidden_dim: int
    output_dim: int
    batch_size: int

    def args(self) -> tuple[int, int, int, int, int, int]:
        """Positional arguments for ``MoE(...)`` / ``MoEFriendly(...)``."""
        return (self.input_dim, self.num_experts, self.top_k, self.expert_capacity,
                self.hidden_dim, self.output_dim)


MOE_SIZES: dict[str, MoESize] = {
    # The document's experiment (about 268M expert parameters, ~1 GiB in fp32).
    "reference": MoESize(input_dim=1024, num_experts=32, top_k=4, expert_capacity=4,
                         hidden_dim=4096, output_dim=1024, batch_size=32),
    # A CPU-sized twin. 16 samples x top-2 = 32 assignments over 8 experts of capacity 4: on average exactly
    # full, so both overflowing and empty experts happen for some seeds.
    "small": MoESize(input_dim=32, num_experts=8, top_k=2, expert_capacity=4,
                     hidden_dim=64, output_dim=32, batch_size=16),
}


def make_moe(kind: str, size: str = "small", *, device: torch.device | str = "cpu", seed: int = 0,
             dtype: torch.dtype | None = None) -> MoE | MoEFriendly:
    """Build ``kind`` ("tutorial" or "friendly") at ``size`` ("small" or "reference").

    Weights are drawn on the CPU from ``seed`` (the global RNG is left untouched), so both kinds and every
    device get the same weights for the same seed.
    """
    classes = {"tutorial": MoE, "friendly": MoEFriendly}
    if kind not in classes:
        raise ValueError(f"unknown MoE kind {kind!r}; expected one of {sorted(classes)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = classes[kind](*MOE_SIZES[size].args())
    return model.to(device=device, dtype=dtype)


def make_moe_input(size: str = "small", *, batch_size: int | None = None, device: torch.device | str = "cpu",
                   seed: int = 0, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A ``[batch_size, input_dim]`` standard-normal batch, drawn on the CPU from ``seed``."""
    config = MOE_SIZES[size]
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size or config.batch_size, config.input_dim, generator=generator, dtype=dtype)
    return x.to(device)


@torch.no_grad()
def routing_events(model: MoE | MoEFriendly, x: torch.Tensor) -> dict[str, int]:
    """Count what the router does on ``x``: overflowing experts, empty experts, dropped assignments."""
    probs = torch.softmax(model.gate(x), dim=-1)
    topk_indices = torch.topk(probs, model.top_k, dim=-1).indices
    load = torch.bincount(topk_indices.reshape(-1), minlength=model.num_experts)
    return {
        "overflowing_experts": int((load > model.expert_capacity).sum()),
        "empty_experts": int((load == 0).sum()),
        "dropped_assignments": int((load - model.expert_capacity).clamp(min=0).sum()),
    }


def _moe_dims(model: nn.Module) -> tuple[int, int]:
    # Look through a torch.compile wrapper, then read (input_dim, output_dim) off either MoE kind.
    model = getattr(model, "_orig_mod", model)
    if hasattr(model, "experts"):
        return model.gate.in_features, model.experts[0].net[-1].out_features
    return model.gate.in_features, model.w2.shape[-1]


def train_steps(model: nn.Module, steps: int, *, bsz: int, lr: float = 5e-4, aux_alpha: float = 1e-2,
                seed: int = 0, device: torch.device | str | None = None,
                optimizer: torch.optim.Optimizer | None = None,
                dims: tuple[int, int] | None = None) -> list[float]:
    """The document's tiny training run: fit ``model`` to a fixed random linear map; return each step's loss.

    ``model`` may be a compiled wrapper of a MoE: it is only called. Each step draws ``x ~ N(0, 1)``, the target
    ``y = target_proj(x)`` (a fixed random ``Linear`` without bias), and minimises
    ``MSE(y_hat, y) + aux_alpha * aux`` with AdamW, clipping the gradient norm to 1. The optimizer is AdamW
    over ``model.parameters()`` unless one is passed (pass one when ``model`` has no ``parameters()``).
    Data and target come from a CPU generator seeded by ``seed``, so they are the same on every device;
    ``dims = (input_dim, output_dim)`` is read off the model unless given.
    """
    input_dim, output_dim = dims or _moe_dims(model)
    opt = optimizer if optimizer is not None else torch.optim.AdamW(model.parameters(), lr=lr)
    params = _parameters(opt)
    device = torch.device(device) if device is not None else params[0].device
    dtype = params[0].dtype  # data in the model's precision (fp64 in the equivalence tests)
    generator = torch.Generator().manual_seed(seed)
    target_proj = _fixed_target(input_dim, output_dim, generator).to(device=device, dtype=dtype)
    mse = nn.MSELoss()
    if isinstance(model, nn.Module):
        model.train()
    losses = []
    for _ in range(steps):
        x = torch.randn(bsz, input_dim, generator=generator, dtype=dtype).to(device)
        y = target_proj(x).detach()
        y_hat, aux = model(x)
        total_loss = mse(y_hat, y) + aux_alpha * aux
        opt.zero_grad(set_to_none=True)
        total_loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(total_loss.item())
    return losses


def _fixed_target(input_dim: int, output_dim: int, generator: torch.Generator) -> nn.Linear:
    # nn.Linear's default init range, drawn from our generator so the target does not touch the global RNG.
    target_proj = nn.Linear(input_dim, output_dim, bias=False)
    bound = 1.0 / math.sqrt(input_dim)
    with torch.no_grad():
        target_proj.weight.uniform_(-bound, bound, generator=generator)
    return target_proj.requires_grad_(False)


def _parameters(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


if __name__ == "__main__":
    # A quick look: both kinds agree, then train a few steps each.
    tutorial, friendly = make_moe("tutorial"), make_moe("friendly")
    x = make_moe_input(seed=1)
    print("routing:", routing_events(tutorial, x))
    print("max |tutorial - friendly|:", (tutorial(x)[0] - friendly(x)[0]).abs().max().item())
    for name, model in (("tutorial", tutorial), ("friendly", friendly)):
        print(name, [f"{loss:.4f}" for loss in train_steps(model, 5, bsz=16)])
