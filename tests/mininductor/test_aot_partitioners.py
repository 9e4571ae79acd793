"""mininductor.partitioners: the max-flow against networkx, and partitions of real joint graphs.

For each partition: forward + backward run on their own give the joint graph's results; the min-cut one never
recomputes a matmul or a reduction, and saves fewer bytes than saving everything. Budget: ~8 s.
"""
import math

import networkx as nx
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mininductor import aot_autograd, partitioners
from mininductor.partitioners import FlowNetwork


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 9) | st.just(math.inf)),
                min_size=1, max_size=25))
def test_min_cut_matches_networkx(edges):
    net, ref = FlowNetwork(), nx.DiGraph()
    for u, v, c in edges:
        if u == v:
            continue
        net.add_edge(u, v, c)
        cap = ref.get_edge_data(u, v, {"capacity": 0})["capacity"] + c
        ref.add_edge(u, v, capacity=cap)
    ref.add_nodes_from([0, 7])
    try:
        expected, _ = nx.minimum_cut(ref, 0, 7)
    except nx.NetworkXUnbounded:
        with pytest.raises(RuntimeError, match="no finite cut"):
            net.min_cut(0, 7)
        return
    side = net.min_cut(0, 7)
    assert 0 in side and 7 not in side
    cut = sum(c for (u, v), c in _capacities(edges).items() if u in side and v not in side)
    assert cut == expected


def _capacities(edges):
    caps = {}
    for u, v, c in edges:
        if u != v:
            caps[(u, v)] = caps.get((u, v), 0) + c
    return caps


def mlp(x, w1, b1, w2):
    return (F.gelu(x @ w1 + b1) @ w2).sum()


def attention(q, k, v):
    return ((q @ k.transpose(-1, -2)).softmax(-1) @ v).sum()


def norm_mlp(x, w, g):
    h = F.layer_norm(x @ w, (w.shape[1],), weight=g)
    return F.silu(h).pow(2).mean()


CASES = {
    "mlp": (mlp, [(4, 8), (8, 16), (16,), (16, 8)]),
    "attention": (attention, [(2, 5, 8), (2, 5, 8), (2, 5, 8)]),
    "norm_mlp": (norm_mlp, [(4, 8), (8, 8), (8,)]),
}


def _joint(name):
    fn, shapes = CASES[name]
    torch.manual_seed(0)
    args = [torch.randn(*s, requires_grad=True) for s in shapes]
    compiled = aot_autograd.aot_module(torch.fx.symbolic_trace(fn), args, aot_autograd.nop)
    return compiled.aot_graphs.joint_graph, args, fn


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("partition", ["default_partition", "min_cut_rematerialization_partition"])
def test_partition_runs_like_the_joint_graph(name, partition):
    joint, args, fn = _joint(name)
    fw_gm, bw_gm = getattr(partitioners, partition)(joint, None, num_fwd_outputs=1)
    primals = [a.detach() for a in args]
    loss, *saved = fw_gm(*primals)
    grads = bw_gm(*saved, torch.ones(()))
    expected_loss = fn(*args)
    expected = torch.autograd.grad(expected_loss, args)
    torch.testing.assert_close(loss, expected_loss.detach())
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_min_cut_recomputes_only_cheap_ops_and_saves_fewer_bytes(name):
    joint, _, _ = _joint(name)
    stats = {}
    for partition in (partitioners.default_partition, partitioners.min_cut_rematerialization_partition):
        fw_gm, bw_gm = partition(joint, None, num_fwd_outputs=1)
        stats[partition.__name__] = partitioners.partition_stats(fw_gm, bw_gm, 1)
        by_name = {n.name: n for n in bw_gm.graph.nodes}
        for name_ in stats[partition.__name__].recomputed:
            assert partitioners.is_recomputable(by_name[name_]), f"{partition.__name__} recomputed {name_}"
    assert stats["min_cut_rematerialization_partition"].saved_bytes <= stats["default_partition"].saved_bytes
    assert stats["default_partition"].recomputed == []


def test_mlp_min_cut_saves_pre_activation_not_gelu():
    joint, _, _ = _joint("mlp")
    fw_gm, bw_gm = partitioners.min_cut_rematerialization_partition(joint, None, num_fwd_outputs=1)
    stats = partitioners.partition_stats(fw_gm, bw_gm, 1)
    mms = [n for n in fw_gm.graph.nodes if n.target is torch.ops.aten.mm.default]
    gelu_out = mms[-1].args[0].name  # the GELU's output, input of the second matmul
    assert gelu_out not in stats.saved and gelu_out in stats.recomputed
    assert not any(n.target is torch.ops.aten.mm.default for n in bw_gm.graph.nodes if n.name in stats.recomputed)
