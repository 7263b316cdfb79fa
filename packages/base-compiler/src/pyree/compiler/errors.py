"""The one error type the compiler raises for bad input; the CLI prints it without a traceback."""


class CompileError(Exception):
    """A problem in the user's input or options. ``location`` is ``file:line:col`` when known."""

    def __init__(self, message: str, location: str = ""):
        super().__init__(f"{location}: error: {message}" if location else f"error: {message}")
        self.message = message
        self.location = location
