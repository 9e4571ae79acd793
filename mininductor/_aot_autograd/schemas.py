"""ViewAndMutationMeta: the record of what the graph does to its inputs and what it returns.

What goes in: nothing -- ``collect_metadata`` (``collect_metadata_analysis.py``) fills one in from a fake run of
the functionalized graph. What comes out: the facts every later stage reads: which inputs are mutated in place,
which outputs (and new values of mutated inputs) require grad, which outputs are constants rather than tensors, and
the outputs' fake values (the tangents' shapes). They fix the signatures of the forward, joint and backward graphs.

Mirrors ``torch/_functorch/_aot_autograd/schemas.py`` (``ViewAndMutationMeta``, much smaller: no
``InputAliasInfo``/``OutputAliasInfo`` per input and output, no subclass or RNG metadata).
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import torch
import torch.utils._pytree as pytree


@dataclasses.dataclass
class ViewAndMutationMeta:
    """What one fake run of the functionalized graph tells us (upstream's class of the same name, much smaller).

    ``outputs`` are the flat outputs of ``gm``: a tensor's slot holds ``TENSOR``, any other value (an int, None)
    is kept as a constant, since only tensors travel through the compiled graphs.
    """

    TENSOR: ClassVar[object] = type("TensorOutput", (), {"__repr__": lambda self: "<tensor>"})()

    num_inputs: int
    mutated_inputs: list[int]  # indices of inputs whose data ``gm`` changes in place
    input_requires_grad: list[bool]
    outputs: list[Any]  # TENSOR for a tensor output, else the constant value
    output_requires_grad: list[bool]  # one per *tensor* output
    mutation_requires_grad: list[bool]  # one per mutated input: does its new value require grad?
    out_spec: pytree.TreeSpec
    fw_output_vals: list[torch.Tensor]  # fake values of the forward's outputs (shapes/dtypes of the tangents)
    # tensor outputs that are views made under no_grad of a tensor that requires grad: eager gives them
    # ``requires_grad=True`` and no ``grad_fn`` (they get no gradient); [Note: outputs that are views]
    no_grad_views: list[int] = dataclasses.field(default_factory=list)
    # tensor outputs that eager returns as a mutated input itself (geometry None) or as a view of one
    # (``(size, stride, offset from the input's)``), re-made from the input after the mutation is applied;
    # output index -> (input index, geometry): [Note: outputs that alias mutated inputs] in runtime_wrappers.py
    mutated_input_aliases: dict[int, tuple[int, tuple | None]] = dataclasses.field(default_factory=dict)
    # tensor output -> the input whose memory it shares (any input, mutated or not)
    output_of_input: dict[int, int] = dataclasses.field(default_factory=dict)
    # outputs that share an input's memory and require grad but whose history does not reach that input (a view
    # of a view made under no_grad): not re-made from the input ([Note: outputs that are views])
    cut_from_input: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        from mininductor.runtime import unflattener
        self.all_tensors = all(o is self.TENSOR for o in self.outputs)
        self.unflatten = unflattener(self.out_spec)

    @property
    def num_tensor_outputs(self) -> int:
        return len(self.output_requires_grad)

    @property
    def num_fw_outputs(self) -> int:
        """Outputs of the compiled forward before the saved tensors: user tensors, then mutated inputs' values."""
        return self.num_tensor_outputs + len(self.mutated_inputs)

    @property
    def fw_output_requires_grad(self) -> list[bool]:
        return self.output_requires_grad + self.mutation_requires_grad
