"""The argument parser of the compiler's command-line tools."""

import argparse


class ToolParser(argparse.ArgumentParser):
    """A bad command line is one ``error:`` line (exit 2), not argparse's page of usage; every
    tool answers ``--version``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        from pyree.compiler.version import __version__

        self.add_argument("--version", action="version",
                          version=f"{self.prog} {__version__} (pyree-base-compiler)")

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
