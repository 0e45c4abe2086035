"""The run spec of `submit` (docs/socket-api.md, "The run spec").

The daemon ignores a key it does not know, so a misspelt one would be dropped in silence; the
client refuses it by name instead. A field a newer daemon knows goes through `submit_spec()`."""

import json
import os

RUN_SPEC_FIELDS = (
    "adapter", "prompt", "decisions", "decision_deadline_ms", "frame", "model_scenario",
    "model_endpoint", "model", "cwd", "vendor_env", "vendor_options", "requires", "keep_open",
    "labels", "deny_only", "budget", "hermetic", "upstream", "egress",
)


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
    for key in ("model_scenario", "frame"):
        if key in spec:
            spec[key] = _inline(spec[key])
    return spec
