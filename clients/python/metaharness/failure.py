"""Why a run failed, typed (docs/socket-api.md, "Failures"): `stream.closed`'s `failure`."""

from dataclasses import dataclass

from .errors import MalformedLine

# The closed vocabulary, in the order the daemon documents it.
FAILURE_CATEGORIES = ("auth", "rate_limit", "budget", "stalled", "vendor_exit", "launch", "halted", "daemon",
                      "upstream")


@dataclass(frozen=True)
class RunFailure:
    """`category` (one of FAILURE_CATEGORIES), `retryable` (the same spec may simply be submitted
    again) and `detail` (metaharness's words, or the vendor's quoted). A category this client does
    not know (a newer daemon's) is kept as it is: `known` says whether it is in the vocabulary."""

    category: str
    retryable: bool
    detail: str

    @property
    def known(self):
        return self.category in FAILURE_CATEGORIES

    @classmethod
    def from_wire(cls, value):
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("category"), str) or not isinstance(
                value.get("retryable"), bool):
            raise MalformedLine(f"stream.closed failure is not {{category, retryable, detail}}: {value!r}")
        return cls(value["category"], value["retryable"], str(value.get("detail", "")))
