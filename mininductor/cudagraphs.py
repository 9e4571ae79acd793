"""CUDA graphs for ``mode="reduce-overhead"``: record a compiled graph's call once, then replay it (mirrors
``torch/_inductor/cudagraph_trees.py``, without its trees: one recording per input signature and parameter set).

* ``CudaGraphRunner`` records ``call`` on static copies of the inputs and replays it: a replay costs one launch
  where the call it recorded made dozens, the saving ``reduce-overhead`` is for.
* ``is_static_input`` says which inputs keep their address from call to call (parameters, buffers, the outputs of
  another recording): those are recorded in place and never copied.
* ``copy_with_layout`` makes the static copy of any other input, with its strides and storage offset.

``CompiledGraph`` (compile_fx.py) decides when to record and keeps the recordings.
"""
from __future__ import annotations

import torch

from . import metrics


class CudaGraphRunner:
    """Replays ``call`` from a CUDA graph: inputs are copied into static buffers, outputs are the graph's own
    (static) tensors -- the next replay overwrites them, as with ``torch.compile(mode="reduce-overhead")``.

    [Note: static inputs]  Parameters and buffers keep their addresses from call to call, so the graph is
    recorded on the real tensors and they are never copied (upstream's cudagraph trees do the same): for the
    MoE that is 1 GB of weights a replay does not move.  So do the outputs of a recorded graph: every replay
    returns the same tensors, so a graph that consumes another's outputs is recorded on them too, as
    cudagraph trees record on the memory of the graph before ([Note: replayed outputs as static inputs]).
    Only the other inputs (activations made eagerly, the user's inputs) are copied in, and only those of them the
    graph mutates (``mutated``: their indices) are copied back out after a replay.  The warm-up runs before the
    capture work on copies of the in-place inputs the graph writes: the recording call changes them once, by
    its replay, as every later call does.

    [Note: replayed outputs are new values]  A replay returns the same output tensors as the last one, with new
    contents written by the GPU, not by a PyTorch op.  So each replay bumps their version counters
    (``torch.autograd.graph.increment_version``, the API for a kernel that writes behind autograd's back):
    anything that cached a result by (tensor, version) sees the change.  The tutorial MoE's loop does: its graph
    returns the next expert's mask, and the shared ``nonzero`` of minidynamo's native stretch
    ([Note: shared nonzero]) keyed on the same mask object and an unchanged version reused the previous
    expert's rows -- a wrong answer, found by running the tutorial under ``mode="reduce-overhead"``.  A tensor
    saved for a backward and then overwritten by a replay now fails the backward's version check, as eager does.

    One runner records one set of input shapes and one set of parameters: ``CompiledGraph`` keeps a runner per
    shape signature (a symbolic graph is called with many) and per set of parameter addresses (a graph several
    modules share), within ``config.cudagraph_max_shapes`` and ``config.cudagraph_max_static_variants``, and runs
    the others without a graph ([Note: one recording per shape and per set of parameters] in compile_fx.py).
    """

    def __init__(self, call, example_inputs: list, mutated: frozenset[int] = frozenset()) -> None:
        self.call = call
        self.mutated = mutated
        self.static_inputs = [x if is_static_input(x) else copy_with_layout(x) if isinstance(x, torch.Tensor) else x
                              for x in example_inputs]
        self.in_place = [k for k, x in enumerate(example_inputs) if is_static_input(x)]  # recorded on the real one
        warm_up = [x.clone() if k in mutated and k in self.in_place else x for k, x in enumerate(self.static_inputs)]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm up: compile and autotune outside the capture
                self.call(list(warm_up))
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            outputs = self.call(list(self.static_inputs))
        # [Note: replayed views are detached]  An output that is a view (``reinterpret_tensor`` of a buffer) was
        # made here under no_grad (inside an ``autograd.Function``'s forward): a view autograd marks "created in
        # no_grad mode".  Each replay bumps its version ([Note: replayed outputs are new values]), and autograd
        # refuses such a view once its version moved: saved for a backward, unpacking it raised "A view was
        # created in no_grad mode and its base ... has been modified inplace" (the tutorial MoE trained under
        # reduce-overhead, once the partitioner saved a view of a buffer).  ``detach()`` aliases the same memory
        # and version counter without being an autograd view, as a kernel's fresh output is not.
        self.static_outputs = type(outputs)(o.detach() if isinstance(o, torch.Tensor) and o._base is not None
                                            else o for o in outputs)
        for out in self.static_outputs:  # [Note: replayed outputs as static inputs]
            if isinstance(out, torch.Tensor):
                out._mininductor_cudagraph_output = True

    def __call__(self, inputs: list):
        if any(self.static_inputs[k].data_ptr() != inputs[k].data_ptr() for k in self.in_place):
            # Other parameters than the recorded ones (CompiledGraph keys runners by them, so only a caller that
            # bypasses it gets here): they must not be copied into the recorded parameters, which belong to a live
            # module. Run without the graph.
            return self.call(list(inputs))
        for dst, src in zip(self.static_inputs, inputs):
            if isinstance(dst, torch.Tensor) and dst.data_ptr() != src.data_ptr():
                dst.copy_(src)
                metrics.cudagraph_input_copies += 1
        self.graph.replay()
        for k in self.mutated:  # the replay updated the static copy: write it back into the caller's tensor
            dst, src = self.static_inputs[k], inputs[k]
            if dst.data_ptr() != src.data_ptr():
                src.copy_(dst)
                metrics.cudagraph_input_copies += 1
            else:  # recorded on the caller's own tensor: the replay changed it behind autograd's back
                torch.autograd.graph.increment_version(src)
        # [Note: replayed outputs are new values]
        torch.autograd.graph.increment_version([o for o in self.static_outputs if isinstance(o, torch.Tensor)])
        return self.static_outputs


def copy_with_layout(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` with its sizes, strides and storage offset, for a CUDA graph's static input.

    The graph was compiled for ``x``'s layout: ``clone()`` makes a view with gaps contiguous and drops its storage
    offset, and the recorded kernels (an ``as_strided`` of the input above all, which indexes the storage) then
    read the wrong elements -- wrong values under ``mode="reduce-overhead"`` only.  A tensor whose elements
    overlap (an ``expand``) cannot be copied into element by element; it keeps ``clone()``."""
    from ._aot_autograd.functional_utils import no_overlap
    if x.numel() == 0 or not no_overlap(x):
        return x.clone()
    extent = x.storage_offset() + sum((size - 1) * stride for size, stride in zip(x.shape, x.stride())) + 1
    storage = torch.empty(extent, dtype=x.dtype, device=x.device)
    # detached: an alias of the storage that autograd does not track as a view (see [Note: replayed views are
    # detached])
    return storage.as_strided(x.shape, x.stride(), x.storage_offset()).detach().copy_(x)


def is_static_input(x) -> bool:
    """Tensors whose address does not change between calls: parameters and buffers of modules, and the outputs
    of a recorded CUDA graph.

    [Note: replayed outputs as static inputs]  A replay returns the very tensors its recording made, rewritten.
    When the next graph takes one of them (the tutorial MoE: the routing graph's ``outputs`` buffer, which each
    expert's graph adds into, and its flattened indices), that graph is recorded on it, like on a parameter: no
    copy in, and no copy back out of what it writes.  The consumer's runner holds the tensor, so its memory is
    never handed to another tensor while the recording lives; a call that brings another tensor in its place
    gets a recording of its own (``CompiledGraph.runner`` keys recordings by these addresses).  Upstream's
    cudagraph trees get the same from one memory pool shared by the graphs of a tree."""
    return isinstance(x, torch.nn.Parameter) or getattr(x, "_is_param", False) or \
        getattr(x, "_dynamo_static_input_type", None) is not None or \
        getattr(x, "_mininductor_cudagraph_output", False)
