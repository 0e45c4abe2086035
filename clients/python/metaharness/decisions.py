"""The four decisions of metaharness.command/1 (`tool.decide`), as objects.

allow grants (the vendor skips the rest of its own permission pipeline), deny refuses and tells
the model why (the reason is required: it is the only part the model can act on), replace runs
the call with another input, abstain claims nothing and lets the vendor's own pipeline decide."""

from .errors import MalformedLine


class Decision:
    kind = None

    def to_wire(self):
        return {"decision": self.kind}

    def __eq__(self, other):
        return isinstance(other, Decision) and self.to_wire() == other.to_wire()

    def __hash__(self):
        return hash(repr(self))

    def __repr__(self):
        return f"{type(self).__name__}()"

    @staticmethod
    def from_wire(value):
        """A decision as the wire writes it: the object form, or the bare strings "allow" and
        "abstain" (the seeds' own example writes those). Anything else is MalformedLine."""
        if value == "allow":
            return Allow()
        if value == "abstain":
            return Abstain()
        if not isinstance(value, dict):
            raise MalformedLine(f"a decision is an object with a \"decision\" key, not {value!r}")
        kind = value.get("decision")
        if kind == "allow":
            return Allow()
        if kind == "abstain":
            return Abstain()
        if kind == "deny":
            reason = value.get("reason")
            if not isinstance(reason, str) or not reason.strip():
                raise MalformedLine(f"a deny needs a non-empty reason: {value!r}")
            return Deny(reason)
        if kind == "replace":
            if "input" not in value:
                raise MalformedLine(f"a replace needs an input: {value!r}")
            return Replace(value["input"])
        raise MalformedLine(f"unknown decision {kind!r}; the decisions are allow, deny, replace, abstain")


class Allow(Decision):
    kind = "allow"


class Abstain(Decision):
    kind = "abstain"


class Deny(Decision):
    kind = "deny"

    def __init__(self, reason):
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a deny needs a non-empty reason: it is the only part the model can act on")
        self.reason = reason

    def to_wire(self):
        return {"decision": "deny", "reason": self.reason}

    def __repr__(self):
        return f"Deny({self.reason!r})"


class Replace(Decision):
    kind = "replace"

    def __init__(self, input):  # noqa: A002 - the wire's own name
        self.input = input

    def to_wire(self):
        return {"decision": "replace", "input": self.input}

    def __repr__(self):
        return f"Replace({self.input!r})"


def make_decision(decision, reason=None, input=None):  # noqa: A002
    """A Decision from what `decide()` was given: a Decision object, or one of the names
    "allow", "deny" (with `reason`), "replace" (with `input`), "abstain"."""
    if isinstance(decision, Decision):
        if reason is not None or input is not None:
            raise ValueError("reason= and input= go with a decision name, not a Decision object")
        return decision
    if decision == "allow":
        return Allow()
    if decision == "abstain":
        return Abstain()
    if decision == "deny":
        return Deny(reason)
    if decision == "replace":
        if input is None:
            raise ValueError("a replace needs input= (the tool input to run instead)")
        return Replace(input)
    raise ValueError(f"unknown decision {decision!r}; the decisions are allow, deny, replace, abstain")
