#!/usr/bin/env python3
"""Validates ATIF trajectory documents against our restated schema (docs/atif/), with the
python3-jsonschema package, and checks the rules a JSON Schema cannot state, as Harbor's own
Pydantic models check them: step_ids 1, 2, 3... in order; tool_call_ids unique within a step; an
observation result's source_call_id naming a tool call of its own step; embedded sub-agents each
with a trajectory_id unique among its siblings; a sub-agent reference without trajectory_path
resolving to one of them; timestamps that parse as ISO 8601.

    atif_validate.py SCHEMA.json DOC.json [DOC.json ...]

Prints one line per problem (the document, the JSON path, what is wrong) and exits 1 if any
document has one; exits 0 when every document is valid; 2 when it cannot run (no jsonschema, a
file it cannot read, a schema that is not a valid 2020-12 schema)."""

import datetime
import json
import sys

try:
    import jsonschema
except ImportError:
    print("atif_validate: python3-jsonschema is not installed (apt install python3-jsonschema; ./run setup installs it)",
          file=sys.stderr)
    sys.exit(2)


def path_text(path):
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def results_of(step):
    return (step.get("observation") or {}).get("results") or []


def check_rules(doc, where, problems):
    """The cross-record rules of Harbor's Trajectory and Step validators, recursively."""
    steps = doc.get("steps") or []
    for i, step in enumerate(steps):
        at = f"{where}.steps[{i}]"
        if step.get("step_id") != i + 1:
            problems.append(f"{at}.step_id: expected {i + 1} (sequential from 1), got {step.get('step_id')!r}")
        ts = step.get("timestamp")
        if ts is not None:
            try:
                datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            except (ValueError, AttributeError) as e:
                problems.append(f"{at}.timestamp: not ISO 8601 ({e})")
        ids = [call.get("tool_call_id") for call in step.get("tool_calls") or []]
        for j, cid in enumerate(ids):
            if cid in ids[:j]:
                problems.append(f"{at}.tool_calls[{j}]: duplicate tool_call_id {cid!r}")
        for j, result in enumerate(results_of(step)):
            sid = result.get("source_call_id")
            if sid is not None and sid not in ids:
                problems.append(f"{at}.observation.results[{j}].source_call_id {sid!r} names no tool call of this step")
    subs = doc.get("subagent_trajectories") or []
    embedded = [sub.get("trajectory_id") for sub in subs]
    for i, (sub, tid) in enumerate(zip(subs, embedded)):
        if tid is None:
            problems.append(f"{where}.subagent_trajectories[{i}].trajectory_id: required on an embedded sub-agent")
        elif tid in embedded[:i]:
            problems.append(f"{where}.subagent_trajectories[{i}].trajectory_id {tid!r} is not unique")
        check_rules(sub, f"{where}.subagent_trajectories[{i}]", problems)
    for i, step in enumerate(steps):
        for j, result in enumerate(results_of(step)):
            for k, ref in enumerate(result.get("subagent_trajectory_ref") or []):
                if ref.get("trajectory_path"):
                    continue
                if ref.get("trajectory_id") not in embedded:
                    problems.append(
                        f"{where}.steps[{i}].observation.results[{j}].subagent_trajectory_ref[{k}]: "
                        f"trajectory_id {ref.get('trajectory_id')!r} is not embedded in this trajectory")


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
    except (OSError, ValueError, jsonschema.SchemaError) as e:
        print(f"atif_validate: the schema {argv[1]}: {e}", file=sys.stderr)
        return 2
    validator = jsonschema.Draft202012Validator(schema)
    failed = False
    for name in argv[2:]:
        try:
            with open(name, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"atif_validate: {name}: {e}", file=sys.stderr)
            return 2
        problems = [f"{path_text(e.absolute_path)}: {e.message[:300]}" for e in validator.iter_errors(doc)]
        if isinstance(doc, dict):
            check_rules(doc, "$", problems)
        for p in problems:
            print(f"{name}: {p}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
