"""Settings read at call time, so tests can override them.

Recall's modules are imported when a setting of theirs is read, not with this module:
memories.recall reads its settings here, and importing its package loads the index.
"""

import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from memories.recall.embedding import Embedder
    from memories.recall.ranking import ActivationConfig, Profile


def activation_config() -> "ActivationConfig":
    """The active profile's ranking constants, weighing meaning as the active embedder
    does (memories.recall.ranking.Meaning), with any TAPROOT_ACTIVATION overrides."""
    constants = ranking_profile().activation
    semantic = embedder()
    if semantic is not None:
        constants = constants.with_meaning(semantic.meaning)
    overrides = getattr(settings, "TAPROOT_ACTIVATION", None) or {}
    if not overrides:
        return constants
    return dataclasses.replace(constants, **overrides)


def ranking_profile() -> "Profile":
    """The relevance profile recall uses and the index is built for (TAPROOT_RANKING)."""
    from memories.recall.ranking import PROFILES

    return PROFILES[settings.TAPROOT_RANKING]


def embedder() -> "Embedder | None":
    """The embedder recall by meaning uses (TAPROOT_EMBEDDER); None when it is off, and
    always for the seed profile, which ranks by words alone. One that cannot load raises
    EmbedderUnavailable (the server refuses to start on it)."""
    from memories.recall.embedding import embedder_named

    if not ranking_profile().idf:
        return None
    return embedder_named(settings.TAPROOT_EMBEDDER)


def meaning_model() -> str | None:
    """What recall by meaning runs on, in words (the embedder's label); None when recall
    ranks by words alone."""
    semantic = embedder()
    return semantic.label if semantic is not None else None


def catalog_window_days() -> int | None:
    """The optional cap on the catalog, in days untouched; None (0 or unset) leaves it off,
    so every live memory is a catalog candidate and the token budget alone decides."""
    days = int(settings.CATALOG_WINDOW_DAYS or 0)
    return days or None


def reflect_max_tokens() -> int:
    return int(settings.REFLECT_MAX_TOKENS)


def reflect_nudge_hours() -> int:
    """After this many hours without a taproot_reflect, remember and recall replies ask for one."""
    return int(settings.TAPROOT_REFLECT_NUDGE_HOURS)


def retry_window() -> timedelta:
    """How far back a remember or close is matched against what the account just stored."""
    return timedelta(minutes=int(settings.TAPROOT_RETRY_WINDOW_MINUTES))
