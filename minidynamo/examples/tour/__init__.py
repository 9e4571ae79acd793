"""The stages of ``make demo``'s tour, one module per concept; ``minidynamo/examples/demo.py`` runs them in order.

    settings          where artifacts go, GPU or CPU (Triton's interpreter), the MoE size, quick mode
    console           how a step prints: its heading, progress lines, warnings gathered, clipped and indented text
    running_example   steps 1-6: the environment, then capture, guards, bytecode, a break, a picture, kernels
    moe_compile       steps 7-8: each MoE compiled and reported (breaks, guards, kernels) and checked vs eager
    timing            step 9: the timing table, eager / torch.compile / minicompile
    profiling         step 10: what torch.profiler sees of a compiled forward
    artifacts         step 11: pictures of the MoEs and a listing of ``out/``
"""
