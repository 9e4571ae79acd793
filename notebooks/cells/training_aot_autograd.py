"""Notebook 09 · Training: AOTAutograd and the partitioner.

What it teaches: the joint graph, the min-cut partition (saved vs recomputed, pictured), gradients checked against
eager, and an input mutated in place.
The cells of ``notebooks/09_training_aot_autograd.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "09_training_aot_autograd"
TITLE = "Training: AOTAutograd and the partitioner"


def cells() -> list:
    return [
        md("""
# 09 · Training: AOTAutograd and the partitioner

**What you will learn**: how a compiled graph gets a *generated* backward -- the joint graph that traces forward and
backward together, the cut that splits it into a forward and a backward graph, which tensors the forward saves for
the backward and which it recomputes there, and how an in-place update of an input survives.

**Motivation**: the backward of a model is about twice the work of its forward. If the compiler only generated the
forward, training would still run one eager kernel per backward op, with every intermediate kept alive. So the
backward has to be a graph too, *before* the first call: ahead-of-time autograd (chapter 9)."""),
        code(SETUP),
        md("""
## The joint graph

`training_artifacts` captures the first graph of a function with minidynamo and runs mininductor's AOTAutograd on
it (`mininductor/aot_autograd.py`, after `torch/_functorch/aot_autograd.py`). `make_fx` traces a function that runs
the graph *and* `torch.autograd.grad`: the autograd engine writes every backward formula into the same ATen graph.
Its inputs are the *primals* (parameters are ordinary inputs here) and the *tangents* (the output's gradient)."""),
        code("""
from mininductor import viz as iviz
mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
x = torch.randn(8, 16)

def loss_fn(x):
    return mlp(x).pow(2).mean()

g = iviz.training_artifacts(loss_fn, x)
joint = g.joint_graph.print_readable(print_output=False)
print("\\n".join(joint.splitlines()[:16]), "\\n    ...")  # the forward half; the backward follows in the same graph"""),
        md("""
## The cut

The partitioner (`mininductor/partitioners.py`) cuts the joint graph in two. What crosses the cut, from forward to
backward, are the **saved tensors**. The min-cut partitioner prices each candidate by its bytes and lets the
backward *recompute* cheap pointwise ops instead of saving them. In the picture: blue runs in the forward graph,
orange in the backward, green in both (recomputed), and the saved tensors have a red outline.

One rule of ours that upstream lacks: a tensor of the caller (a graph input, or a view of one) is saved only where
eager's autograd saves it too. Here the caller's tensors that are saved are the input `primals_1` and `permute_1`,
the second weight's transpose that its matmul's backward reads, rather than the weight `primals_4` itself
(chapter 9)."""),
        code("print(g.stats)\niviz.draw_partition(g)"),
        md("The two graphs the cut produced. The forward returns the loss, then the saved tensors; the backward "
           "takes the saved tensors and the tangent, and starts by recomputing the GELU from `addmm`:"),
        code("print(g.fw_graph.code)\nprint(g.bw_graph.code[:1200], '...')"),
        md("""
## Measurement: what recomputation saves

`default_partition` saves whatever the backward reads. `min_cut_rematerialization_partition` (the default, as in
Inductor) saves fewer bytes: the GELU's terms are recomputed from the matmul output, inside a backward kernel where
they cost almost nothing."""),
        code("""
from mininductor import partitioners
from mininductor.aot_autograd import aot_module, nop
gm, inputs = iviz.capture_graph(loss_fn, x)
for partition in (partitioners.default_partition, partitioners.min_cut_rematerialization_partition):
    graphs = aot_module(gm, inputs, fw_compiler=nop, partition_fn=partition).aot_graphs
    print(f"{partition.__name__:36s} saves {graphs.num_saved} tensors, {graphs.saved_bytes:5d} bytes;"
          f" recomputes {graphs.num_recomputed} ops")"""),
        md("""
## Check against eager: values and gradients

`minicompile` does all of this when an input requires grad. The compiled forward and backward become one
`torch.autograd.Function`, so `loss.backward()` reaches the generated backward kernels like any other node."""),
        code("""
import copy
from mininductor import metrics
metrics.reset()
compiled_mlp = copy.deepcopy(mlp)
compiled = minicompile(compiled_mlp)
loss, expected = compiled(x).pow(2).mean(), mlp(x).pow(2).mean()
torch.testing.assert_close(loss, expected)
print("forward kernels:", metrics.generated_kernel_count)
loss.backward()                                # the backward graph is compiled at the first backward()
expected.backward()
for (name, p), q in zip(mlp.named_parameters(), compiled_mlp.parameters()):
    torch.testing.assert_close(q.grad, p.grad)
print("gradients match eager; kernels, forward + backward:", metrics.generated_kernel_count)"""),
        md("""
## In-place updates of inputs

A graph that mutates an input is *functionalized*: `seen.add_(1)` becomes `add = seen + 1`, the graph returns
`add` as an extra output, and the runtime copies it back into `seen` after the graph ran. The graphs stay pure
functions, and `mutated_inputs` lists which inputs get a copy-back. Below, the forward returns `add` twice: after
the loss as `seen`'s new value, and again as the one tensor saved for the backward (`w`'s gradient is the updated
`seen`, which is also what eager saves)."""),
        code("""
def count_calls(w, seen):
    seen.add_(1)
    return (w * seen).sum()

w, seen = torch.randn(4, requires_grad=True), torch.zeros(())
ga = iviz.training_artifacts(count_calls, w, seen)   # capturing runs the function once: seen is 1 now
print("graph inputs mutated in place (copied back after the graph):", ga.mutated_inputs)
print(ga.fw_graph.code)
w_eager, seen_eager = w.detach().clone().requires_grad_(), seen.clone()
minicompile(count_calls)(w, seen).backward()
count_calls(w_eager, seen_eager).backward()
torch.testing.assert_close(seen, seen_eager); torch.testing.assert_close(w.grad, w_eager.grad)
print("seen:", seen.item(), "| w.grad:", w.grad.tolist(), "-- as in eager")"""),
        md("""
## How upstream differs

Upstream's AOTAutograd (`torch/_functorch/_aot_autograd/`) also handles tensor subclasses, outputs that alias
inputs in training graphs, RNG state (functionalized so recomputed dropout masks match), double backward and
activation checkpointing policies; its min-cut partitioner weighs ops by a runtime estimate and bans recomputing
ops that read too much memory. Ours keeps the same three steps -- collect metadata, trace the joint graph, partition
-- in about 1,300 lines (`aot_autograd.py`, `_aot_autograd/`, `partitioners.py`)."""),
    ]
