"""The runtime's command-line tools: pyree-run-module, pyree-benchmark-module, pyree-dump-module and
pyree-check-module, shaped after IREE's tools of the same names."""
