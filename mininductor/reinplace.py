"""Reinplacing: let a scatter write straight into the graph input it mutates, instead of into a copy.

What goes in: an ATen graph after functionalization, and which of its outputs are the new values of mutated inputs.
What comes out: ``reinplaceable_scatters(gm)`` -- the scatter nodes (``index_put``, ``scatter``, ``scatter_add``)
that may store into their input's own memory, each with that input's position.

Why: functionalization turns ``outputs.index_add_(0, idx, v)`` into ``new = scatter_add(outputs, 0, idx, v)``
(decomposition.index_add; ``idx`` broadcast over ``v``)
and a write-back of ``new`` into ``outputs``. Lowered as written that is three passes over ``outputs``: a copy
kernel (the functional op's fresh buffer), the scatter, and the write-back (a ``copy_``). When nothing reads the
old value of ``outputs`` after the scatter -- the input's only other use is that write-back -- the scatter can
update the input in place, and the copy and the write-back both vanish. The tutorial MoE does this once per
expert (``outputs.index_add_``): 2 of its ~6 launches per expert frame.

    before:  buf4 = copy of arg7; scatter v into buf4; ...; arg7.copy_(buf4)
    after:   scatter v into arg7                          (buf4 = arg7)

The two shapes of write-back we see:

* ``copy_(arg, new)`` nodes at the end of the graph (``trace_inference``, ``functionalize(remove="mutations")``);
* ``new`` returned as an extra output that the runtime copies into the input (AOTAutograd's inference path,
  ``gm.meta["input_mutations"]``: placeholder position -> output position; the runtime skips the copy when
  the graph returns the input itself).

Training forwards are reinplaced too, for the mutated inputs AOTAutograd offers (the new value requires grad and
is returned once; the runtime marks the input dirty: [Note: input mutations in training] in
``_aot_autograd/runtime_wrappers.py``). If the backward saves the old value, the placeholder has that reader too,
and the copy stays. There the scatter's input is AOTAutograd's clone of the input (``_grad_clone``, so that
autograd allows the in-place op in the joint graph); ``drop_input_clones`` lets the scatter read the input itself.

Upstream: ``torch/_inductor/fx_passes/reinplace.py`` (``reinplace_inplaceable_ops``), which rewrites the
functional scatter into its in-place op when the mutated input's old value has no later reader.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

SCATTERS = {aten.index_put.default, aten.scatter_add.default, aten.scatter.src, aten.scatter.value}


def reinplaceable_scatters(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, int]:
    """``{scatter node: placeholder position}`` for every scatter that may write into its input in place."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    output = next(iter(gm.graph.find_nodes(op="output")))
    outputs = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    returned_as = gm.meta.get("input_mutations", {})  # placeholder position -> output position
    found = {}
    for pos, p in enumerate(placeholders):
        scatters = [u for u in p.users if u.op == "call_function" and u.target in SCATTERS and u.args[0] is p]
        if len(scatters) != 1:
            continue
        (node,) = scatters
        others = [u for u in p.users if u is not node]
        written_back = all(_copies(u, p, node) for u in others) and len(others) == 1
        returned = not others and pos in returned_as and returned_as[pos] < len(outputs) and \
            outputs[returned_as[pos]] is node
        if written_back or returned:
            found[node] = pos
    return found


def drop_input_clones(gm: torch.fx.GraphModule, positions) -> None:
    """Make each ``clone(arg)`` that is the only use of the input ``arg`` at one of ``positions`` read ``arg``.

    A functional graph never writes its values, so a clone and its source are interchangeable wherever they are
    read: the graph computes the same values, and a scatter that read the clone may now be found writing into the
    input (``reinplaceable_scatters``).  An overlapping (``expand``ed) input keeps its copy there all the same
    (``non_overlapping``)."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    for pos in positions:
        if pos >= len(placeholders):
            continue
        users = list(placeholders[pos].users)
        if len(users) == 1 and users[0].op == "call_function" and users[0].target is aten.clone.default and \
                users[0].kwargs.get("memory_format") in (None, torch.preserve_format):
            users[0].replace_all_uses_with(placeholders[pos])
            gm.graph.erase_node(users[0])
    gm.recompile()


def non_overlapping(size, stride) -> bool:
    """May a scatter write a tensor of this layout in place: does every element have its own memory?

    An expanded input (stride 0) or an overlapping view is one eager's in-place ops refuse; written in place, its
    elements would alias.  Such inputs keep the copy (and the write-back raises, as eager does).  Sizes and strides
    must be plain numbers here; a symbolic one keeps the copy too."""
    dims = []
    for sz, st in zip(size, stride):
        try:
            sz, st = int(sz), int(st)
        except TypeError:  # a symbol
            return False
        if sz != 1:
            dims.append((st, sz))
    extent = 1  # the span of the dims with smaller strides
    for st, sz in sorted(dims):
        if st < extent:
            return False
        extent = st * sz
    return True


def _copies(user: torch.fx.Node, dst: torch.fx.Node, src: torch.fx.Node) -> bool:
    """Is ``user`` the write-back ``copy_(dst, src)``?"""
    return user.op == "call_function" and user.target is aten.copy_.default and \
        user.args[0] is dst and user.args[1] is src
