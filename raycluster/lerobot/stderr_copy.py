"""stderr as it is, with a copy of what is written while it is in place (to quote a library's own error)."""

import io
import sys


class StderrCopy(io.TextIOBase):
    """stderr as it is (unless ``echo`` is false: then only the copy), and a copy of what was written while it
    is in place."""

    def __init__(self, stream, echo: bool = True):
        self.stream, self.copy, self.echo = stream, io.StringIO(), echo

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text) if self.echo else len(text)

    def flush(self) -> None:
        self.stream.flush()

    def text(self) -> str:
        return self.copy.getvalue()

    def __enter__(self) -> "StderrCopy":
        sys.stderr = self
        return self

    def __exit__(self, *exc) -> None:
        sys.stderr = self.stream
