"""Importers: models from other frameworks -> linalg-on-tensors MLIR text, through torch-mlir.

Optional extras (``pip install pyree-base-compiler[onnx]`` / ``[torch]``): nothing here is
imported by ``pyree.compiler`` until an importer is called, and each importer imports its
framework inside the call, so the core compiler never loads torch or onnx.
"""
