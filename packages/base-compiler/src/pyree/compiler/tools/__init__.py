"""Command-line tools of the compiler distribution (``pyree-compile``)."""
