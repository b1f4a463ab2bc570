"""Evaluations (installed as ``judgetrain.eval``): one module per evaluation."""
