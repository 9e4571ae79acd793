"""Code generators: ``triton.py`` (one Triton kernel per fused node) and ``wrapper.py`` (the ``call`` module)."""
