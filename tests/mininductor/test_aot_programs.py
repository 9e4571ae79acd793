"""Training-style programs through AOTAutograd (backend ``aot_eager`` under real Dynamo): losses, backward of
norms, attention, MLPs, embeddings -- values and gradients vs eager. And the MoE workload, 20 AdamW steps.

Budget: ~15 s on one CPU core (the two MoE runs are half of it).
"""
import math

import pytest
import torch
import torch.nn.functional as F

from minidynamo.examples.moe import make_moe, train_steps
from tests.mininductor.test_aot_autograd import Recorder, check, leaf


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def manual_layer_norm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * w + b


def swiglu_mlp(x, w1, w3, w2):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def log_softmax_nll(x, w, target):
    return F.nll_loss(F.log_softmax(x @ w, -1), target)


def embedding_bag(idx, table, w):
    return F.embedding(idx, table).mean(1) @ w


def clamp_where_softplus(x, w):
    h = x @ w
    return torch.where(h > 0, F.softplus(h), h.clamp(min=-1.0).exp()).sum(-1)


def head_split_attention(x, wq, wk, wv):
    b, t, d = x.shape
    q, k, v = [(x @ w).view(b, t, 2, d // 2).transpose(1, 2) for w in (wq, wk, wv)]
    p = (q @ k.transpose(-1, -2) / math.sqrt(d // 2)).softmax(-1)
    return (p @ v).transpose(1, 2).reshape(b, t, d)


def cumsum_and_norm(x, w):
    return torch.linalg.vector_norm((x @ w).cumsum(-1), dim=-1)


def huber_and_l1(x, w, y):
    p = x @ w
    return F.smooth_l1_loss(p, y) + F.l1_loss(p, y) + F.binary_cross_entropy_with_logits(p, y.sigmoid())


def group_norm_conv(x, w, gamma, beta):
    return F.group_norm(F.conv1d(x, w, padding=1), 2, gamma, beta).relu()


def gather_cat_split(x, w, idx):
    h = x @ w
    a, b = h.chunk(2, dim=-1)
    g = torch.gather(torch.cat([a * b, a - b], -1), 1, idx)
    return torch.stack([g.logsumexp(-1), g.std(-1)], 0) + F.normalize(h, dim=-1).index_select(1, idx[0])[0, 0]


def einsum_masked_kl(x, w, mask):
    h = torch.einsum("bi,ij->bj", x, w).masked_fill(mask, -1e4)
    return F.kl_div(F.log_softmax(h, -1), F.softmax(h.flip(0), -1).detach(), reduction="batchmean")


def conv_bn_pool(x, w, gamma, beta):
    h = F.conv2d(x, w, padding=1)
    h = F.batch_norm(h, None, None, gamma, beta, training=True)
    return F.max_pool2d(h.relu(), 2) + F.avg_pool2d(h, 2)


class TinyTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.emb = torch.nn.Embedding(11, 16, padding_idx=0)

    def forward(self, tokens):
        return self.layer(self.emb(tokens)).mean()


PROGRAMS = {
    "rms_norm": (rms_norm, lambda: (leaf(4, 16), leaf(16))),
    "manual_layer_norm": (manual_layer_norm, lambda: (leaf(4, 16), leaf(16), leaf(16))),
    "swiglu_mlp": (swiglu_mlp, lambda: (leaf(4, 8), leaf(8, 16), leaf(8, 16), leaf(16, 8))),
    "log_softmax_nll": (log_softmax_nll, lambda: (leaf(6, 8), leaf(8, 5), torch.randint(0, 5, (6,)))),
    "embedding": (embedding_bag, lambda: (torch.randint(0, 10, (4, 3)), leaf(10, 8), leaf(8, 4))),
    "clamp_where_softplus": (clamp_where_softplus, lambda: (leaf(4, 8), leaf(8, 8))),
    "head_split_attention": (head_split_attention, lambda: (leaf(2, 5, 8), leaf(8, 8), leaf(8, 8), leaf(8, 8))),
    "cumsum_and_norm": (cumsum_and_norm, lambda: (leaf(3, 6), leaf(6, 6))),
    "huber_and_l1": (huber_and_l1, lambda: (leaf(5, 4), leaf(4, 3), torch.randn(5, 3))),
    "group_norm_conv": (group_norm_conv, lambda: (leaf(2, 4, 7), leaf(4, 4, 3), leaf(4), leaf(4))),
    "gather_cat_split": (gather_cat_split, lambda: (leaf(3, 6), leaf(6, 8), torch.randint(0, 8, (3, 5)))),
    "einsum_masked_kl": (einsum_masked_kl, lambda: (leaf(4, 6), leaf(6, 5), torch.rand(4, 5) > 0.7)),
    "conv_bn_pool": (conv_bn_pool, lambda: (leaf(2, 3, 6, 6), leaf(4, 3, 3, 3), leaf(4), leaf(4))),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_training_program(name):
    torch.manual_seed(0)
    fn, make_args = PROGRAMS[name]
    rec = check(fn, *make_args())
    assert len(rec.graphs) == 1
    g = rec.graphs[0]
    assert g.bw_graph is not None and g.compiled_bw is not None and g.saved_bytes > 0


@pytest.mark.parametrize("kind", ["friendly", "tutorial"])
def test_moe_trains_20_adamw_steps_like_eager(kind):
    """The workload: same losses as eager within 1e-4 relative, every compiled graph has a backward."""
    torch._dynamo.reset()
    eager_losses = train_steps(make_moe(kind, "small", seed=0), 20, bsz=16)
    model = make_moe(kind, "small", seed=0)
    rec = Recorder()
    losses = train_steps(torch.compile(model, backend=rec, dynamic=False), 20, bsz=16,
                         optimizer=torch.optim.AdamW(model.parameters(), lr=5e-4))
    for step, (a, b) in enumerate(zip(losses, eager_losses)):
        assert abs(a - b) <= 1e-4 * abs(b), f"step {step}: {a} vs eager {b}"
    # the friendly MoE is one graph; real Dynamo breaks the tutorial's expert loop into several (3 in torch 2.13)
    assert len(rec.graphs) == 1 if kind == "friendly" else len(rec.graphs) >= 2
    assert all(g.bw_graph is not None and g.saved_bytes > 0 for g in rec.graphs)


def test_transformer_encoder_layer_with_embedding():
    torch.manual_seed(0)
    rec = check(None, torch.randint(0, 11, (2, 5)), module=TinyTransformer())
    assert all(g.bw_graph is not None for g in rec.graphs)
