"""minidynamo: a pure-Python PEP 523-style frame translator (bytecode -> torch.fx)."""
