"""``--trainer-set FIELD=VALUE``: one more trainer field for an experiment, validated as the trainer's
own config would validate it; the fields the demo derives from its own flags are refused."""

from __future__ import annotations

from typing import Any

# trainer fields the demo derives from its own flags or its layout: --trainer-set may not touch them
DEMO_OWNED_FIELDS = frozenset(
    {
        "model_name",
        "training_steps",
        "batch_size",
        "lr",
        "seed",
        "control",
        "save_path",
        "api_url",
        "weight_refresh",
        "device",
    }
)


def trainer_overrides(pairs: list[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` strings as validated trainer settings (values coerced as the trainer's config
    would); raises ``ValueError`` with one line naming the bad pair."""
    from pydantic import ValidationError

    from example_trainer.config import TrainingConfig

    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise ValueError(f"{pair!r} is not FIELD=VALUE")
        if name not in TrainingConfig.model_fields:
            raise ValueError(f"{name!r} is not a trainer field (see atropos-grpo --help)")
        if name in DEMO_OWNED_FIELDS:
            raise ValueError(f"{name!r} is set by the demo itself; use the demo's own flag")
        try:
            config = TrainingConfig.model_validate({"model_name": "m", name: raw})
        except ValidationError as e:
            reason = e.errors()[0]["msg"]
            raise ValueError(f"{name}={raw!r}: {reason}") from None
        values[name] = getattr(config, name)
    return values
