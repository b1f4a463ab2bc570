"""Dataset builders (installed as ``judgetrain.data_builders``): one module per dataset family.
README: "Commands".
"""
