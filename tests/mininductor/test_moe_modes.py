"""Both MoEs under every mode on the GPU, eval and training, against eager: outputs, auxiliary loss and every
parameter's gradient over several batches, with no frame falling back to eager.  CUDA graphs (``reduce-overhead``)
and autotuning (``max-autotune``) exist only there, and ``reduce-overhead`` once gave the tutorial MoE wrong
outputs (cudagraphs.py, [Note: replayed outputs are new values]).  Skipped without MININDUCTOR_TEST_DEVICE=cuda."""
import copy

import pytest
import torch

import minidynamo
from minidynamo.examples.moe import friendly_from_tutorial, make_moe, make_moe_input

from .utils import DEVICE

pytestmark = pytest.mark.skipif(DEVICE != "cuda", reason="modes other than default need a GPU")


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("kind", ["tutorial", "friendly"])
@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_moe_equals_eager_under_every_mode(mode, kind, train):
    minidynamo.reset()
    tutorial = make_moe("tutorial", "small", seed=0)
    base = (tutorial if kind == "tutorial" else friendly_from_tutorial(tutorial)).to(DEVICE).train(train)
    eager, mine = base, copy.deepcopy(base)
    compiled = minidynamo.minicompile(mine, mode=mode)
    for seed in range(1, 5):
        x = make_moe_input("small", seed=seed).to(DEVICE)
        with torch.set_grad_enabled(train):
            (out, aux), (out_c, aux_c) = eager(x), compiled(x)
        torch.testing.assert_close(out_c, out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(torch.as_tensor(aux_c).float(), torch.as_tensor(aux).float(), atol=1e-6, rtol=1e-5)
        if train:
            (out.square().mean() + 0.01 * aux).backward()
            (out_c.square().mean() + 0.01 * aux_c).backward()
            for (name, p), p_c in zip(eager.named_parameters(), mine.parameters()):
                assert (p.grad is None) == (p_c.grad is None), name
                if p.grad is not None:
                    torch.testing.assert_close(p_c.grad, p.grad, atol=1e-5, rtol=1e-5, msg=name)
            eager.zero_grad(set_to_none=True)
            mine.zero_grad(set_to_none=True)
    counters = minidynamo.counters
    assert sum(counters["eager_fallback"].values()) == 0
    assert counters["stats"]["unique_graphs"] == (1 if kind == "friendly" else 9 if train else 7)
