"""The argument parser of the compiler's command-line tools."""

import argparse


class ToolParser(argparse.ArgumentParser):
    """A bad command line is one ``error:`` line (exit 2), not argparse's page of usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
