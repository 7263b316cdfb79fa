"""What pyree does to an ONNX model before torch-mlir converts it, as IREE layers its own
conversions over torch-mlir's. Each rewrite exists because torch-mlir alone refuses, crashes
on, or converts to a wrong answer models that ONNX's own node tests contain; each module's
docstring says which and why. In the order ``import_here`` runs them:

- ``types``: element types pyree has no counterpart for are refused by name (torch-mlir
  aborted the process on a Cast to UINT4);
- ``run_time_inputs``: inputs given at run time that torch-mlir needs known (Reduce axes,
  Split sizes, CenterCropPad's shape) are specialised to what the declared shapes allow, with
  a check on entry that refuses other values;
- ``functions``: ops torch-mlir cannot convert (or converts into a dead end, or wrongly) are
  replaced by their ONNX function bodies (Attention, RotaryEmbedding, Gelu, the losses...);
- ``nodes``: nodes torch-mlir converts wrongly are rewritten into ops it converts right
  (unsigned Div and Mod, QLinearMatMul with zero points that are inputs); among them, from
  ``control_flow``, Loop with a condition that can turn false (torch-mlir dropped it and ran
  all M trips: the condition is carried and freezes the carried values) and Scan with
  reversed directions or axes other than 0 (ignored or refused: Transposes and Gathers of
  the reversed positions around a forward Scan along axis 0);
- ``fold``: shape arithmetic is computed, so torch-mlir sees the static shapes the model has.
"""
