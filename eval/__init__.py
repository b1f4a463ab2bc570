"""Evaluations (installed as ``judgetrain.eval``): one module per evaluation.
README: "Run folders".
"""
