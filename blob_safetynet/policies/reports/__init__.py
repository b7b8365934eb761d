"""How results are shown: one module per output format, the shared view and escaping."""
