"""The core every other app builds on: the models, the domain rules (memories.vocabulary,
validation, ranking and the reflect payload as pure functions) and the services the
interfaces call (memories.services), with the operator's admin and management commands.
It imports no other Taproot app."""
