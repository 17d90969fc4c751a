class InvalidInput(Exception):
    """The caller's input cannot be used. The message says what is wrong and how to fix it.

    Services raise it before they change anything, so a refused call changes nothing.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
