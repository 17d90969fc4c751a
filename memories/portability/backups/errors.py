class BackupError(Exception):
    """A backup or a restore that could not be done. The message is a sentence for the
    operator: what is wrong and what to do. A restore raises it before it changes
    anything, unless the message says otherwise."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
