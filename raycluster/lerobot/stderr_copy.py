"""stderr as it is, with a copy of what is written while it is in place (to quote a library's own error)."""

import io
import sys


class StderrCopy(io.TextIOBase):
    """stderr as it is, and a copy of what was written while it is in place."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def text(self) -> str:
        return self.copy.getvalue()

    def __enter__(self) -> "StderrCopy":
        sys.stderr = self
        return self

    def __exit__(self, *exc) -> None:
        sys.stderr = self.stream
