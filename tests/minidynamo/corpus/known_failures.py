"""Corpus tests minidynamo is known to fail today, each with its cause: marked ``xfail(strict=True)``.

Strict means a fix shows up at once as XPASS -> a failure that asks for the entry to be deleted, so this list
can only shrink and never hides a regression elsewhere.  ``MINIDYNAMO_CORPUS_STRICT=1`` ignores the list (every
test runs as a plain test); the oracle self-test ignores it too.  Keys are pytest test names.
"""

KNOWN_FAILURES: dict[str, str] = {
    # Python constructs the translator refuses or breaks on (real Dynamo captures one graph)
    "test_program[control_flow.match_statement_on_constant]": "opcode MATCH_SEQUENCE: graph break",
    "test_program[mutation.mutate_object_list_attribute_setattr_delattr]": "opcode DELETE_ATTR: graph break",
    "test_program[control_flow.try_except_catches_python_error]":
        "WRONG BEHAVIOUR: a KeyError raised while tracing d['b'] escapes to the caller instead of reaching the "
        "user's `except KeyError`",
    "test_program[control_flow.raise_and_catch_inside]": "`raise ValueError(...)` caught in the same frame",
    "test_program[control_flow.user_defined_context_manager]":
        "`with` on a user class with __enter__/__exit__ ('object built inside the compiled function escapes it')",
    "test_program[control_flow.contextlib_nullcontext]": "`with contextlib.nullcontext()` (escapes, as above)",
    "test_program[contexts.autocast_disabled_on_cpu]": "`with torch.autocast('cpu', enabled=False)` (escapes)",
    "test_program[classes.dataclass_created_inside]":
        "a dataclass built in the frame and passed to dataclasses.asdict() (escapes, as above)",
    "test_program[containers.sorted_dict_items_and_fromkeys]": "dict.fromkeys(d, 0) on a DictVariable",
    "test_program[builtins.itertools_helpers]": "itertools.product/chain/accumulate: graph breaks (13 frames)",
    "test_program[torch_fns.torch_functions_via_getattr_and_tensor_methods_as_functions]":
        "unbound Tensor methods torch.Tensor.sum(x, 1) / torch.Tensor.relu(x): 'calling method_descriptor'",
    "test_program[builtins.issubclass_type_name_and_unbound_methods]":
        "unbound Tensor method torch.Tensor.add(x, 1): 'calling method_descriptor'",
    "test_program[functions.exception_raised_in_callee_caught_in_caller]":
        "WRONG BEHAVIOUR: `raise` inside an inlined callee breaks the graph, and the ValueError raised in the "
        "callee's resume function escapes the caller's `try/except ValueError`",
    "test_program[mutation.class_attribute_mutation]": "`type(self).instances += 1` (class attribute store): graph break",
    "test_program[classes.custom_descriptor_attribute]":
        "internal error: a user descriptor's __get__ is called with obj=None ('NoneType' has no attribute 'base')",
    # user objects: attribute stores that bypass Python's rules
    "test_program[classes.property_setter_on_input_object]":
        "WRONG VALUES: `obj.scale = 3.0` ignores the property setter (stores the attribute directly)",
    "test_program[classes.custom_setattr_on_input_object]":
        "WRONG VALUES: `obj.k = 3` ignores the class's __setattr__",
    "test_program[containers.dict_order_after_pop_and_reinsert]":
        "WRONG VALUES: dict.popitem() on a dict built in the frame does not remove the last item",
    "test_program[functions.closure_cell_mutated_across_calls]":
        "`nonlocal count; count += 1` in a compiled closure (cell of an enclosing, finished function)",
    # nn.Module features
    "test_program[modules.forward_hooks_on_submodule]": "modules with forward (pre-)hooks: graph break",
}
