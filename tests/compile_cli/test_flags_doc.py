"""docs/FLAGS.md lists every flag pyree-compile, pyree-run-module and pyree-benchmark-module
accept, each spelling of it."""

import re
from pathlib import Path

import pytest
from pyree.compiler.tools.compile import _parser as compile_parser
from pyree.runtime.tools.benchmark_module import _parser as benchmark_parser
from pyree.runtime.tools.run_module import _parser as run_parser

FLAGS_MD = (Path(__file__).parents[2] / "docs" / "FLAGS.md").read_text()


@pytest.mark.parametrize("parser", [compile_parser, run_parser, benchmark_parser])
def test_every_flag_is_documented(parser):
    tool = parser()
    if hasattr(tool, "flags"):  # the runtime tools' own flag table (runtime/tools/flags.py)
        flags = {name for flag in tool.flags for name in flag.names}
    else:  # pyree-compile's argparse parser
        flags = {flag for action in tool._actions for flag in action.option_strings}
    flags -= {"-h"}
    # the whole flag, not the start of a longer one (--iree-rocm-target vs -target-chip)
    missing = sorted(flag for flag in flags
                     if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", FLAGS_MD))
    assert not missing, f"docs/FLAGS.md does not list {missing}"
