"""The vocabularies of the models, as Django choices, and who owns the records."""

from typing import TypeAlias

from django.contrib.auth import models as auth_models
from django.db import models

from memories import vocabulary

# Who owns memories, closings and snapshots: settings.AUTH_USER_MODEL, which Taproot
# leaves at Django's own user model.
User: TypeAlias = auth_models.User


class Category(models.TextChoices):
    IDENTITY = vocabulary.IDENTITY
    RELATIONSHIP = vocabulary.RELATIONSHIP
    ACTIVE_THREAD = vocabulary.ACTIVE_THREAD
    EPISODIC = vocabulary.EPISODIC
    ERROR = vocabulary.ERROR


class Salience(models.TextChoices):
    HIGH = vocabulary.HIGH
    MEDIUM = vocabulary.MEDIUM
    LOW = vocabulary.LOW


class Tier(models.TextChoices):
    """Where a memory stands in the reflect payload, by the window rule (SPEC §5)."""

    CORE = "core"
    CATALOG = "catalog"
    OMITTED = "omitted"
    ARCHIVED = "archived"


class EpistemicStatus(models.TextChoices):
    OBSERVED = vocabulary.OBSERVED
    INFERRED = vocabulary.INFERRED
    REPLICATED = vocabulary.REPLICATED
    CONTESTED = vocabulary.CONTESTED
    UNVALIDATED = vocabulary.UNVALIDATED


class ChangeSource(models.TextChoices):
    TOOL = "tool"
    DASHBOARD = "dashboard"
    ADMIN = "admin"
    MIGRATE = "migrate"
    IMPORT = "import"


class RevisionAction(models.TextChoices):
    """What a change recorded as a Revision was."""

    UPDATE = "update"
    PROMOTE = "promote"
    CURATE = "curate"
    EDIT_GIST = "edit gist"
    EDIT = "edit"  # a person's edit of the gist and of core or salience at once
    ARCHIVE = "archive"
    UNARCHIVE = "unarchive"
    COMPRESS = "compress"
    RESTORE = "restore"
    RESTORE_SNAPSHOT = "restore snapshot"
    NORMALISE = "normalise"
    IMPORT = "import"


class SuggestionKind(models.TextChoices):
    """What a suggestion proposes (memories.services.suggestions)."""

    PROMOTE = vocabulary.PROMOTE
    DEMOTE = vocabulary.DEMOTE
    ARCHIVE = vocabulary.ARCHIVE
