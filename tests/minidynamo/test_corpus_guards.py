"""Corpus: guards and recompiles -- a sequence of calls on one compiled callable.

For each scenario the frame_count after every call must equal real Dynamo's (computed live), every output must
equal eager's, and minidynamo's ``counters["recompiles"]["total"]`` must equal real Dynamo's frames - 1.
``expect_frames`` also pins what real Dynamo does, so the scenario documents the behaviour it tests.
Scenarios that change a shape or an int three times pass ``dynamic=False`` (static: one graph per size); the
``automatic_dynamic_*`` scenarios pin real Dynamo's default instead, where the first recompile on a size makes it
symbolic so later sizes reuse that graph.
Budget: ~10 s on 2 cores.
"""
import logging
import warnings

import pytest
import torch
from corpus import t
from corpus.harness import Step, assert_same, check_scenario, run_steps
from torch import nn

SCALE = 2.0
BIAS = torch.ones(3)
MODE = "sin"


def _scaled(x, n):
    return x * n + 1


def _flagged(x, flag):
    return x.relu() if flag else x.sigmoid()


def _shape_dependent(x):
    return x.reshape(-1) * x.shape[0]


def _uses_globals(x):
    y = x * SCALE + BIAS
    return y.sin() if MODE == "sin" else y.cos()


def _sum_list(xs):
    return sum(xs) * len(xs)


def _read_dict(d):
    return {k: v * 2 for k, v in d.items()}


def _read_attr(obj, x):
    return x * obj.n


def _read_global_obj(x):
    return x * _GLOBAL_OBJ.n


def _call_module(m, x):
    return m(x)


def _optional(x, maybe=None):
    return x * 2 if maybe is None else x + maybe


def _tuple_arg(x, dims):
    return x.reshape(dims) * len(dims)


def _contiguous_only(x):
    return x * 2 + x.is_contiguous()


def _list_of_tensors(xs):
    return torch.cat(xs)


def _call_global_helper(x):
    return HELPER(x) + 1


def _first_helper(x):
    return x.sin()


def _second_helper(x):
    return x.cos()


HELPER = _first_helper


def _steps(*arg_factories):
    return [Step(a) for a in arg_factories]


def _set_global(name, value):
    def before(_subject):
        globals()[name] = value
    return before


def _restore_globals():
    return {"SCALE": 2.0, "BIAS": torch.ones(3), "MODE": "sin"}


class _Obj:
    def __init__(self, n):
        self.n = n


_GLOBAL_OBJ = _Obj(2)


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.act = "relu"

    def forward(self, x):
        y = self.fc(x)
        y = y * 0.5 if self.training else y + 1
        return y.relu() if self.act == "relu" else y.tanh()


SCENARIOS = {
    "same_inputs_hit_the_cache": (lambda: _scaled, _steps(*[lambda: (t(3), 2)] * 3), [1, 1, 1], {}),
    "new_dtype_recompiles": (lambda: _scaled, _steps(lambda: (t(3), 2), lambda: (t(3, dtype=torch.float64), 2),
                                                     lambda: (t(3), 2)), [1, 2, 2], {}),
    "new_shape_recompiles": (lambda: _shape_dependent, _steps(lambda: (t(3, 2),), lambda: (t(4, 2),)), [1, 2], {}),
    "new_shapes_static": (lambda: _shape_dependent,
                          _steps(lambda: (t(3, 2),), lambda: (t(4, 2),), lambda: (t(5, 2),), lambda: (t(3, 2),)),
                          [1, 2, 3, 3], {"dynamic": False}),
    "new_ndim_recompiles": (lambda: _shape_dependent, _steps(lambda: (t(6),), lambda: (t(2, 3),)), [1, 2], {}),
    "new_constant_arg_recompiles": (lambda: _scaled, _steps(lambda: (t(3), 2), lambda: (t(3), 3)), [1, 2], {}),
    "new_constant_args_static": (lambda: _scaled, _steps(lambda: (t(3), 2), lambda: (t(3), 3), lambda: (t(3), 4),
                                                         lambda: (t(3), 2)), [1, 2, 3, 3], {"dynamic": False}),
    "float_constant_arg_recompiles": (lambda: _scaled, _steps(lambda: (t(3), 0.5), lambda: (t(3), 1.5)),
                                      [1, 2], {}),
    "bool_flag_recompiles_once_each": (lambda: _flagged, _steps(lambda: (t(3), True), lambda: (t(3), False),
                                                                lambda: (t(3), True)), [1, 2, 2], {}),
    "requires_grad_change_recompiles": (lambda: _scaled, _steps(lambda: (t(3), 2),
                                                                lambda: (t(3, requires_grad=True), 2)), [1, 2], {}),
    "tensor_values_do_not_recompile": (lambda: _scaled, _steps(lambda: (t(3), 2), lambda: (t(3) * 100, 2)),
                                       [1, 1], {}),
    "list_length_change_recompiles": (lambda: _sum_list, _steps(lambda: ([t(2), t(2)],),
                                                                lambda: ([t(2), t(2), t(2)],)), [1, 2], {}),
    "dict_keys_change_recompiles": (lambda: _read_dict, _steps(lambda: ({"a": t(2)},), lambda: ({"b": t(2)},),
                                                               lambda: ({"a": t(2)},)), [1, 2, 2], {}),
    "object_attribute_change_recompiles": (lambda: _read_attr, _steps(lambda: (_Obj(2), t(2)),
                                                                      lambda: (_Obj(3), t(2))), [1, 2], {}),
    "none_then_tensor_recompiles": (lambda: _optional, _steps(lambda: (t(3),), lambda: (t(3), t(3)),
                                                               lambda: (t(3), None)), [1, 2, 2], {}),
    "tuple_of_ints_change_recompiles": (lambda: _tuple_arg, _steps(lambda: (t(6), (2, 3)), lambda: (t(6), (3, 2)),
                                                                   lambda: (t(6), (2, 3))), [1, 2, 2], {}),
    "non_contiguous_input": (lambda: _contiguous_only, _steps(lambda: (t(3, 4),), lambda: (t(4, 3).t(),)),
                             [1, 2], {}),
    "shapes_inside_a_list_static": (lambda: _list_of_tensors, _steps(lambda: ([t(2), t(3)],),
                                                                     lambda: ([t(2), t(3)],),
                                                                     lambda: ([t(2), t(4)],)),
                                    [1, 1, 2], {"dynamic": False}),
    # Real Dynamo's default (dynamic=None): after one shape/int recompile the size becomes symbolic.
    "automatic_dynamic_shapes": (lambda: _shape_dependent,
                                 _steps(lambda: (t(3, 2),), lambda: (t(4, 2),), lambda: (t(5, 2),), lambda: (t(6, 2),)),
                                 [1, 2, 2, 2], {}),
    "automatic_dynamic_ints": (lambda: _scaled, _steps(lambda: (t(3), 2), lambda: (t(3), 3), lambda: (t(3), 4)),
                               [1, 2, 2], {}),
    "string_arg_change_recompiles": (lambda: _flagged, _steps(lambda: (t(3), "a"), lambda: (t(3), "")),
                                     [1, 2], {}),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_guard_scenario(md, name):
    make, steps, expect, kwargs = SCENARIOS[name]
    check_scenario(md, make, steps, expect_frames=expect, **kwargs)


def test_global_constant_rebinding_recompiles(md):
    steps = [Step(lambda: (t(3),)), Step(lambda: (t(3),), _set_global("SCALE", 5.0)),
             Step(lambda: (t(3),), _set_global("MODE", "cos"))]
    check_scenario(md, lambda: _uses_globals, steps, expect_frames=[1, 2, 3], globals_=_restore_globals)


def test_global_tensor_rebinding_uses_the_new_value(md):
    """A global tensor is a graph input guarded on its metadata: a same-shaped new tensor needs no recompile,
    and the result must use the new values (not a stale constant)."""
    steps = [Step(lambda: (t(3),)), Step(lambda: (t(3),), _set_global("BIAS", torch.full((3,), 7.0))),
             Step(lambda: (t(3),), _set_global("BIAS", torch.zeros(3, dtype=torch.float64)))]
    check_scenario(md, lambda: _uses_globals, steps, expect_frames=[1, 1, 2], globals_=_restore_globals)


def test_global_function_rebinding_recompiles(md):
    steps = [Step(lambda: (t(3),)), Step(lambda: (t(3),), _set_global("HELPER", _second_helper)),
             Step(lambda: (t(3),), _set_global("HELPER", _first_helper))]
    check_scenario(md, lambda: _call_global_helper, steps, expect_frames=[1, 2, 2],
                   globals_=lambda: {"HELPER": _first_helper})


def test_global_object_attribute_change_recompiles(md):
    steps = [Step(lambda: (t(2),)), Step(lambda: (t(2),), lambda _: setattr(_GLOBAL_OBJ, "n", 5))]
    check_scenario(md, lambda: _read_global_obj, steps, expect_frames=[1, 2],
                   globals_=lambda: {"_GLOBAL_OBJ": _Obj(2)})


def test_two_functions_have_separate_caches(md):
    """Recompiles are counted per code object; compiling a second function is not a recompile."""
    cnt = md.CompileCounter()
    f, g = md.minicompile(_flagged, backend=cnt), md.minicompile(_scaled, backend=cnt)
    x = t(3)
    assert_same([f(x, True), g(x, 2), f(x, True), g(x, 2)], [_flagged(x, True), _scaled(x, 2)] * 2)
    assert cnt.frame_count == 2
    if not md.oracle:
        assert md.counters["recompiles"]["total"] == 0


def test_eval_train_switching_recompiles(md):
    steps = [Step(lambda: (t(2, 3),)), Step(lambda: (t(2, 3),), lambda m: m.eval()),
             Step(lambda: (t(2, 3),), lambda m: m.train()), Step(lambda: (t(2, 3),), lambda m: m.eval())]
    check_scenario(md, _Branchy, steps, expect_frames=[1, 2, 2, 2])


def test_module_attribute_change_recompiles(md):
    steps = [Step(lambda: (t(2, 3),)), Step(lambda: (t(2, 3),), lambda m: setattr(m, "act", "tanh"))]
    check_scenario(md, _Branchy, steps, expect_frames=[1, 2])


def test_parameter_replaced_by_same_shaped_parameter(md):
    def replace(m):
        m.fc.weight = nn.Parameter(torch.ones(3, 3))
    steps = [Step(lambda: (t(2, 3),)), Step(lambda: (t(2, 3),), replace)]
    check_scenario(md, _Branchy, steps)


def test_parameter_update_needs_no_recompile(md):
    """An optimizer-style in-place parameter update changes the output but not the guards."""
    def bump(m):
        with torch.no_grad():
            m.fc.weight.add_(1.0)
    steps = [Step(lambda: (t(2, 3),)), Step(lambda: (t(2, 3),), bump)]
    check_scenario(md, _Branchy, steps, expect_frames=[1, 1])


def test_different_module_instance(md):
    """Another instance of the same module class: real Dynamo (which inlines nn.Modules and makes their
    parameters graph inputs) reuses the graph; a differently-shaped instance recompiles."""
    steps = [Step(lambda: (nn.Linear(3, 2), t(4, 3))), Step(lambda: (nn.Linear(3, 2), t(4, 3))),
             Step(lambda: (nn.Linear(3, 4), t(4, 3)))]
    check_scenario(md, lambda: _call_module, steps, expect_frames=[1, 1, 2])


def _warned_about_recompiles(caught, caplog) -> bool:
    messages = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    return any("recompil" in m.lower() or "limit" in m.lower() for m in messages)


def test_recompile_limit_falls_back_to_eager_with_a_warning(md, monkeypatch, caplog):
    if md.config is not torch._dynamo.config:
        monkeypatch.setattr(md.config, "recompile_limit", 2)
    steps = [Step(lambda n=n: (t(3), n)) for n in range(5)]
    with torch._dynamo.config.patch(recompile_limit=2):
        frames = check_scenario(md, lambda: _scaled, steps, expect_frames=[1, 2, 2, 2, 2], dynamic=False,
                                check_recompiles=False)
        md.reset()
        caplog.clear()
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            outs, ours = run_steps(lambda: _scaled, steps, md.minicompile, md.CompileCounter(), dynamic=False)
    assert frames[-1] == 2 and ours == [1, 2, 2, 2, 2]
    assert_same(outs, run_steps(lambda: _scaled, steps)[0], "eager fallback past the limit")
    assert _warned_about_recompiles(caught, caplog), "hitting recompile_limit must warn"
