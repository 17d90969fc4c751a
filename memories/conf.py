"""Settings read at call time, so tests can override them."""

import dataclasses

from django.conf import settings

from memories.ranking import DEFAULT_ACTIVATION, PROFILES, ActivationConfig, Profile


def activation_config() -> ActivationConfig:
    overrides = getattr(settings, "TAPROOT_ACTIVATION", None) or {}
    if not overrides:
        return DEFAULT_ACTIVATION
    return dataclasses.replace(DEFAULT_ACTIVATION, **overrides)


def ranking_profile() -> Profile:
    """The relevance profile recall uses and the index is built for (TAPROOT_RANKING)."""
    return PROFILES[settings.TAPROOT_RANKING]


def catalog_window_days() -> int:
    return int(settings.CATALOG_WINDOW_DAYS)


def reflect_max_tokens() -> int:
    return int(settings.REFLECT_MAX_TOKENS)
