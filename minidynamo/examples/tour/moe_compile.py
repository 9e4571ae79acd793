"""Steps 7 and 8 of the tour: the MoE of ``minidynamo/examples/moe.py`` compiled, reported and checked vs eager.

The MoE is the workload minicompile is built for (the reference size on a GPU, the small one on CPU). For each of
its two kinds -- the tutorial MoE compiled unmodified, then the compile-friendly one (one graph) -- the step prints
the graphs, the graph breaks (reason and ``moe.py:line``), the guards, the kernels generated (names, count, ATen
fallbacks) and the max abs difference from eager: eval outputs, then a train-mode forward (outputs, aux loss) and
its gradients.

[Note: the demo's MoE section]
Steps 7 and 8 compile one MoE each and keep it in ``MOE``; steps 9-11 (timings, profiler, artifacts) read it
through ``compiled_moe``, so a step that fails leaves the later ones to say "not yet available" on their own. The
backend is mininductor's "inductor", unchanged, wrapped only to keep each compiled graph (its output code names
the kernels) and to give each graph its own debug folder: ``debug_dir`` writes fixed file names, so graphs
sharing one would overwrite.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from minidynamo.examples.tour.console import clip, print_warnings, progress, quiet_warnings
from minidynamo.examples.tour.settings import DEVICE, MOE_SIZE, OUT

KERNEL_NAME = re.compile(r"\btriton_(?:poi|per|red)_fused_\w+")


@dataclasses.dataclass
class CompiledMoE:
    """One MoE kind: the eager module, its minicompiled wrapper, the graphs mininductor compiled for it."""

    kind: str
    model: torch.nn.Module
    compiled: Callable
    compiled_graphs: list  # what the inductor backend returned, one per Dynamo graph
    x: torch.Tensor
    report: Any = None  # minidynamo.explain(model)(x), eval mode
    torch_compiled: Callable | None = None  # torch.compile(model), made by step 9 unless it is skipped


MOE: dict[str, CompiledMoE] = {}  # kind -> what steps 7 and 8 made


def compiled_moe(kind: str) -> CompiledMoE:
    """What step 7 (``"tutorial"``) or 8 (``"friendly"``) made; an error naming the step if it failed."""
    if kind not in MOE:
        raise RuntimeError(f"the {kind} MoE was not compiled (step 7/8 failed)")
    return MOE[kind]


def compile_moe(kind: str) -> None:
    """Step 7/8: explain, compile (eval forward, then train step) and check one MoE kind against eager."""
    from minidynamo.examples import moe

    x = moe.make_moe_input(MOE_SIZE, seed=1, device=DEVICE)
    tutorial = moe.make_moe("tutorial", MOE_SIZE, device=DEVICE).eval()
    model = tutorial if kind == "tutorial" else moe.friendly_from_tutorial(tutorial).eval()
    size = moe.MOE_SIZES[MOE_SIZE]
    print(f"   {kind} MoE, {MOE_SIZE!r} size on {DEVICE}: {size.num_experts} experts, top-{size.top_k}, "
          f"capacity {size.expert_capacity}, batch {tuple(x.shape)}")
    entry = _compile(kind, model, x)
    _print_capture(entry)
    _print_kernels(entry)
    _check_against_eager(entry)
    MOE[kind] = entry


def _compile(kind: str, model: torch.nn.Module, x: torch.Tensor) -> CompiledMoE:
    import minidynamo
    import mininductor

    with progress(f"explaining {kind} MoE (tracing, no compiling)"), torch.no_grad(), quiet_warnings():
        report = minidynamo.explain(model)(x)
    minidynamo.counters.clear()
    mininductor.metrics.reset()
    graphs: list = []
    compiled = minidynamo.minicompile(model, backend=_recording_inductor(graphs, OUT / "debug" / kind))
    with progress(f"compiling {kind} MoE forward"), torch.no_grad(), quiet_warnings() as caught:
        compiled(x)
    print_warnings(caught)
    return CompiledMoE(kind, model, compiled, graphs, x, report)


def _recording_inductor(graphs: list, debug_root: Path) -> Callable:
    """The "inductor" backend, keeping each compiled graph and dumping it to ``debug_root/graph_<k>``."""
    import minidynamo
    import mininductor

    inductor = minidynamo.backends.lookup_backend("inductor")

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        with mininductor.config.patch(debug_dir=str(debug_root / f"graph_{len(graphs)}")):
            compiled = inductor(gm, example_inputs)
        graphs.append(compiled)
        return compiled

    return backend


def _print_capture(entry: CompiledMoE) -> None:
    report = entry.report
    print(f"   graphs: {report.graph_count}, graph breaks: {report.graph_break_count}, "
          f"guards: {len(report.out_guards)}")
    for (where, reason), n in collections.Counter(map(_break_site, report.break_reasons)).items():
        print(f"     break {n}x at {where}: {clip(reason, 100)}")


def _break_site(reason) -> tuple[str, str]:
    """``("moe.py:129", "data-dependent output shape: ...")``: where the user's code broke, and why."""
    frame = reason.user_stack[-1] if reason.user_stack else None
    where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"
    return where, reason.reason


def _print_kernels(entry: CompiledMoE) -> None:
    import minidynamo
    import mininductor

    m = mininductor.metrics
    names = kernel_names(entry.compiled_graphs)
    print(f"   compiled: {minidynamo.counters['stats']['unique_graphs']} graph(s) -> {m.generated_kernel_count} "
          f"Triton kernel(s), {m.extern_call_count} extern call(s) (matmuls)")
    if m.matmul_choices:  # [Note: tf32x3 for skinny fp32 matmuls]
        print(f"   of those matmuls, {m.matmul_choices} time cuBLAS against our Triton template on the first call")
    print(f"   kernels: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}")
    fallbacks = collections.Counter(m.fallback_ops)
    print(f"   ATen fallbacks ({m.fallback_count}): "
          + (", ".join(f"{op} x{n}" for op, n in fallbacks.items()) or "none"))


def kernel_names(compiled_graphs: list) -> list[str]:
    """Kernel names, in order, read off each graph's output code (forward, and backward once it ran)."""
    names: list[str] = []
    for source in map(_output_codes, compiled_graphs):
        names += [n for n in KERNEL_NAME.findall("\n".join(source)) if n not in names]
    return names


def _output_codes(compiled: Callable) -> list[str]:
    aot = getattr(compiled, "aot_graphs", None)  # the training-capable path keeps forward and backward
    fns = [aot.compiled_fw, aot.compiled_bw] if aot is not None else [compiled]
    return [code for fn in fns if isinstance(code := getattr(fn, "source", None), str)]


def _check_against_eager(entry: CompiledMoE) -> None:
    """Max |compiled - eager|: eval outputs, then a train-mode forward (outputs, aux loss) and its gradients."""
    model, x = entry.model, entry.x
    with torch.no_grad(), quiet_warnings():
        print(f"   max abs diff vs eager, eval: outputs {_diff(entry.compiled(x)[0], model(x)[0]):.2e}")
    model.train()
    expected, expected_grads = _forward_backward(model, x)
    compiling = progress(f"compiling {entry.kind} MoE train step (forward + backward)")
    with compiling, quiet_warnings() as caught, _debug_dir_for_backward(entry.kind):
        got, got_grads = _forward_backward(entry.compiled, x, model)
    print_warnings(caught)
    grads = max(_diff(a, b) for a, b in zip(got_grads, expected_grads, strict=True))
    print(f"   max abs diff vs eager, train: outputs {_diff(got[0], expected[0]):.2e}, "
          f"aux loss {_diff(got[1], expected[1]):.2e}, gradients {grads:.2e}")
    _print_kernels(entry)  # now with the train-mode forward and the backward graphs
    model.eval()


def _forward_backward(fn: Callable, x: torch.Tensor, model: torch.nn.Module | None = None) -> tuple:
    model = model or fn
    model.zero_grad(set_to_none=True)
    outputs, aux = fn(x)
    (outputs.square().mean() + aux).backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    return (outputs.detach(), torch.as_tensor(aux).detach()), grads


def _debug_dir_for_backward(kind: str):
    """Backward graphs compile at the first ``backward()``, outside the backend: they dump to ``backward/``."""
    import mininductor

    return mininductor.config.patch(debug_dir=str(OUT / "debug" / kind / "backward"))


def _diff(a, b) -> float:
    return (torch.as_tensor(a).float() - torch.as_tensor(b).float()).abs().max().item()
