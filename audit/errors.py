"""The one exception type the tool raises for bad input.

Its message is a single line that names the key, file or value at fault; the command-line
entry point prints it as ``error: <message>`` and exits with status 1, never a traceback.
"""


class AuditError(Exception):
    """Bad input or a failed precondition, described in one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # force one line
