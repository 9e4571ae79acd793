"""FxGraphCache: a graph equal to one compiled before (up to its placeholders' names) reuses that compile."""
import torch

import minidynamo
from mininductor import fx_graph_cache, metrics

from .utils import assert_same


def test_equal_graphs_with_other_parameter_names_share_one_compile():
    metrics.reset()
    torch.manual_seed(0)
    experts = [torch.nn.Linear(8, 8) for _ in range(3)]
    x = torch.randn(4, 8)
    results = []
    for e in experts:  # three compiles of the same computation over different parameters
        compiled = minidynamo.minicompile(lambda x, e=e: torch.nn.functional.gelu(e(x)))
        results.append(compiled(x))
    assert metrics.fx_graph_cache_hits == 2
    for got, e in zip(results, experts):
        assert_same(got, torch.nn.functional.gelu(e(x)), 1e-5, 1e-5)
    assert metrics.generated_kernel_count == 1  # one fused kernel (bias + gelu), compiled once, reused twice


def test_no_key_for_state_outside_the_inputs_or_reduce_overhead():
    gm = torch.fx.symbolic_trace(torch.nn.Linear(3, 3))  # parameters read with get_attr
    assert fx_graph_cache.cache_key(gm, [torch.randn(2, 3)], {}) is None
    plain = torch.fx.symbolic_trace(lambda x: x.sin())
    assert fx_graph_cache.cache_key(plain, [torch.randn(2)], {}) is not None
    assert fx_graph_cache.cache_key(plain, [torch.randn(2)], {"mode": "reduce-overhead"}) is None


def test_key_tells_shapes_dtypes_and_grad_mode_apart():
    plain = torch.fx.symbolic_trace(lambda x: x.sin())
    keys = {fx_graph_cache.cache_key(plain, [x], {}) for x in (torch.randn(2), torch.randn(3),
                                                              torch.randn(2, dtype=torch.float64))}
    with torch.no_grad():
        keys.add(fx_graph_cache.cache_key(plain, [torch.randn(2)], {}))
    assert len(keys) == 4


def test_a_loop_over_experts_compiles_its_body_once():
    # The tutorial MoE's shape: a loop whose body breaks on a data-dependent x[mask], selects layers[i], and
    # compares with i. i, a resumed loop's variable, is a symbol from the first compile, and layers[i] is read at run
    # time ([Note: a module list indexed by a symbolic int]); once the row count has changed it is a symbol too. So
    # the loop's resume function has three entries (2 rows; rows symbolic; the loop's end), each compiled once: no
    # per-size or per-value specialisation, and no graph left for FxGraphCache to share.
    metrics.reset()
    minidynamo.reset()
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(8))
    counts = [2, 2, 3, 2, 3, 2, 3, 3]  # rows per expert (never 0 or 1, which specialise)
    flat = torch.cat([torch.full((c,), e) for e, c in enumerate(counts)])[torch.randperm(20)]
    x = torch.randn(20, 4)

    def f(x, flat):
        out = torch.zeros(20, 4)
        for i in range(8):
            rows = torch.arange(20)[flat == i]  # data-dependent size: a graph break
            out.index_add_(0, rows, layers[i](x[rows]) * 2)
        return out

    with torch.no_grad():
        compiled = minidynamo.minicompile(f)
        assert_same(compiled(x, flat), f(x, flat), 1e-5, 1e-5)
    assert metrics.specialisations == 0 and metrics.fx_graph_cache_hits == 0
    assert sorted(len(v) for v in compiled._minidynamo_ctx.cache.values()) == [1, 3]
    assert minidynamo.counters["recompiles"]["total"] == 2
    kernels = metrics.generated_kernel_count
    with torch.no_grad():  # another routing: other row counts per expert, no new kernel
        flat2 = flat.flip(0).roll(3)
        assert_same(compiled(x, flat2), f(x, flat2), 1e-5, 1e-5)
    assert metrics.generated_kernel_count == kernels and metrics.specialisations == 0
