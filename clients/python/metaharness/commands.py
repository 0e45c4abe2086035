"""metaharness.command/1 objects: the seven commands, each with the id its one result carries."""

from .decisions import make_decision
from .wire import COMMAND_FORMAT

COMMAND_NAMES = ("tool.decide", "frame.set", "message.inject", "steer", "permission.set", "interrupt", "halt")


def command(command_id, name, **fields):
    if name not in COMMAND_NAMES:
        raise ValueError(f"unknown command {name!r}; the commands are {', '.join(COMMAND_NAMES)}")
    obj = {"format": COMMAND_FORMAT, "id": command_id, "command": name}
    obj.update({k: v for k, v in fields.items() if v is not None})
    return obj


def tool_decide(command_id, call_id, decision, reason=None, input=None):  # noqa: A002
    return command(command_id, "tool.decide", call_id=call_id,
                   decision=make_decision(decision, reason, input).to_wire())


def frame_set(command_id, frame, step_outcome=None):
    """`frame` is a sealed metaharness.frame/1 object (`metaharness frame seal` makes one);
    `step_outcome` says how the step it leaves ended ({"outcome":"completed"}, ...)."""
    if not isinstance(frame, dict):
        raise TypeError("frame.set takes a sealed frame object (a dict), e.g. json.load() of a sealed frame file")
    return command(command_id, "frame.set", frame=frame, step_outcome=step_outcome)


def message_inject(command_id, text):
    return command(command_id, "message.inject", text=text)


def steer(command_id, text):
    return command(command_id, "steer", text=text)


def permission_set(command_id, posture):
    return command(command_id, "permission.set", posture=posture)


def interrupt(command_id, reason=None):
    return command(command_id, "interrupt", reason=reason)


def halt(command_id, reason=None):
    return command(command_id, "halt", reason=reason)
