"""Globals: reading global tensors, constants, functions, modules and configs; assigning globals.

Programs that assign a global pass ``globals_=lambda: {...}``: the harness resets those names before each run and
compares their values afterwards.  (A global *rebinding between calls* is a guard scenario: test_corpus_guards.py.)
"""
import math

import torch
from torch import nn

from . import program, t

SCALE = 3.0
OFFSET = 2
WEIGHT = torch.linspace(-1.0, 1.0, 4)
CONFIG = {"act": "tanh", "depth": 2, "eps": 1e-5}
NAMES = ("a", "b")
GLOBAL_LINEAR = nn.Linear(4, 2)
STEP = 0
HISTORY = []
CACHE = {}
LAST = None


def _global_helper(x):
    return x * SCALE + OFFSET


@program(lambda: (t(4),))
def read_global_constants(x):
    return x * SCALE + OFFSET + math.tau


@program(lambda: (t(3, 4),))
def read_global_tensor(x):
    return x @ WEIGHT, WEIGHT.sum() + x


@program(lambda: (t(4),))
def read_global_config_dict(x):
    for _ in range(CONFIG["depth"]):
        x = torch.tanh(x) if CONFIG["act"] == "tanh" else torch.relu(x)
    return x + CONFIG["eps"], {n: x for n in NAMES}


@program(lambda: (t(2, 4),))
def call_global_function_and_module(x):
    return GLOBAL_LINEAR(_global_helper(x))


@program(lambda: (t(2),), globals_=lambda: {"STEP": 0})
def assign_global_int(x):
    global STEP
    STEP = STEP + 1
    return x * STEP


@program(lambda: (t(2),), globals_=lambda: {"LAST": None})
def assign_global_tensor(x):
    global LAST
    y = x + 1
    LAST = y * 2
    return y


@program(lambda: (t(2),), globals_=lambda: {"HISTORY": []})
def append_to_global_list(x):
    HISTORY.append(x * 2)
    HISTORY.append(len(HISTORY))
    return x + 1


@program(lambda: (t(2),), globals_=lambda: {"CACHE": {}})
def setitem_on_global_dict(x):
    CACHE["y"] = x.sin()
    CACHE[len(CACHE)] = "count"
    return CACHE["y"] + 1


@program(lambda: (t(3),))
def read_global_module_attribute(x):
    return x * torch.pi + math.e, torch.float32 is x.dtype


@program(lambda: (t(2, 4),))
def global_module_parameters(x):
    return x @ GLOBAL_LINEAR.weight.T + GLOBAL_LINEAR.bias


LAYERS = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
ACTIVATIONS = {"relu": torch.relu, "sig": torch.sigmoid}


@program(lambda: (t(3, 2),))
def iterate_global_modulelist(x):
    for layer in LAYERS:
        x = ACTIVATIONS["relu"](layer(x))
    return x


@program(lambda: (t(2),), globals_=lambda: {"STEP": 5, "HISTORY": []})
def read_modify_write_several_globals(x):
    global STEP
    STEP += len(HISTORY) + 1
    HISTORY.extend([STEP, STEP * 2])
    return x * STEP


RUNNING = torch.zeros(3)


@program(lambda: (t(3),), globals_=lambda: {"RUNNING": torch.zeros(3)})
def inplace_update_of_a_global_tensor(x):
    RUNNING.mul_(0.9).add_(x * 0.1)
    return x - RUNNING
