"""The run spec of `submit` (docs/socket-api.md, "The run spec").

The daemon ignores a key it does not know, so a misspelt one would be dropped in silence; the
client refuses it by name instead. A field a newer daemon knows goes through `submit_spec()`."""

import json
import os

from .stall import ON_STALL

RUN_SPEC_FIELDS = (
    "adapter", "prompt", "decisions", "decision_deadline_ms", "frame", "model_scenario",
    "model_endpoint", "model", "cwd", "vendor_env", "vendor_options", "requires", "keep_open",
    "labels", "deny_only", "budget", "hermetic", "upstream", "egress", "stall_after_ms", "on_stall",
    "park_after_ms",
)

# Stalls (docs/policies.md): at most 30 days; 0 is never.
MAX_STALL_AFTER_MS = 30 * 24 * 3600 * 1000


def _inline(value):
    # A scenario or frame given as a path is read and sent inline, as `metaharness submit` does.
    if isinstance(value, os.PathLike):
        with open(value, encoding="utf-8") as f:
            return json.load(f)
    return value


def build_run_spec(fields):
    unknown = sorted(set(fields) - set(RUN_SPEC_FIELDS))
    if unknown:
        raise TypeError(
            f"unknown run spec field(s) {', '.join(unknown)}; the run spec has {', '.join(RUN_SPEC_FIELDS)} "
            "(submit_spec() sends a spec unchecked)"
        )
    for needed in ("adapter", "prompt"):
        if needed not in fields:
            raise TypeError(f"the run spec needs {needed!r}")
    spec = {k: v for k, v in fields.items() if v is not None}
    # Stalls and parking (docs/policies.md): whole milliseconds, 0 (never) to 30 days.
    for key in ("stall_after_ms", "park_after_ms"):
        after = spec.get(key)
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)
                                  or not 0 <= after <= MAX_STALL_AFTER_MS):
            raise ValueError(f"{key} is {after!r}; expected whole milliseconds from 0 (never) to "
                             f"{MAX_STALL_AFTER_MS} (30 days)")
    if "on_stall" in spec and spec["on_stall"] not in ON_STALL:
        raise ValueError(f"on_stall is {spec['on_stall']!r}; expected one of {', '.join(ON_STALL)}")
    for key in ("model_scenario", "frame"):
        if key in spec:
            spec[key] = _inline(spec[key])
    return spec
