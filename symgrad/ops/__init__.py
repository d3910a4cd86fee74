"""The op registry (``symgrad.ops.registry.REGISTRY``) and the modules that fill it.

Importing ``symgrad`` imports every op module, which registers its ops.
"""
