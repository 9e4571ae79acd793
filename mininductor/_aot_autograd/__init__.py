"""AOTAutograd's stages, one module each (mirrors ``torch/_functorch/_aot_autograd/``).

The entry point, and the driver that reads like the pipeline, is ``mininductor/aot_autograd.py``
(``aot_module``, ``aot_eager``, ``AOTGraphs``). Its stages live here, in processing order:

    schemas.py                     ViewAndMutationMeta: what one fake run of the graph tells us
    functional_utils.py            to_fun / from_fun: wrapping tensors for functionalization
    collect_metadata_analysis.py   collect_metadata: which inputs are mutated, which outputs require grad
    graph_capture_wrappers.py      the functions make_fx traces: the functionalized forward, the joint graph
    runtime_wrappers.py            what runs at call time: the autograd.Function, input mutation copy-back,
                                   outputs that are views, aliased inputs

Nothing is imported here, so that importing one stage does not import the others.
"""
