"""The distribution's version, below every module that prints it."""

__version__ = "0.1.0"
