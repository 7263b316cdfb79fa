"""The one signal from pyree's command-line tools to the drivers: this process is a tool run.

A tool process runs one module on devices nothing else in the process uses, so a driver may size
process-wide state of its GPU library for that alone, where a library process (torch beside
pyree, say) may need the library's defaults. The tools set ``PYREE_TOOL_PROCESS=1`` in their own
environment before any driver starts; a driver reads it (hal-cuda: one hardware work queue,
packages/hal-cuda/README.md). An environment variable, so that a driver in C sees it as well.
"""

VARIABLE = "PYREE_TOOL_PROCESS"
