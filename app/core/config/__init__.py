"""The HeadroomConfig model: typed settings, validation with field paths, label selectors."""

from app.core.config.duration import DurationError, parse_duration_seconds
from app.core.config.errors import ConfigError
from app.core.config.pools import settings_for_node, settings_for_pod
from app.core.config.selector import (
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    parse_label_selector,
)
from app.core.config.settings import (
    DEFAULT_SETTINGS,
    PROPORTIONAL,
    NodePool,
    OwnerExclusion,
    PoolOverrides,
    Settings,
    WeightRule,
)
from app.core.config.validation import parse_config, validate_config

__all__ = [
    "DEFAULT_SETTINGS",
    "PROPORTIONAL",
    "ConfigError",
    "DurationError",
    "LabelSelector",
    "NodePool",
    "Operator",
    "OwnerExclusion",
    "PoolOverrides",
    "Requirement",
    "SelectorError",
    "Settings",
    "WeightRule",
    "parse_config",
    "parse_duration_seconds",
    "parse_label_selector",
    "settings_for_node",
    "settings_for_pod",
    "validate_config",
]
