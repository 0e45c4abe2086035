// The 7 commands of metaharness.command/1.
#pragma once

#include "protocol/frame.hpp"
#include "protocol/types.hpp"

namespace mh::protocol {

namespace cmd {

struct ToolDecide {
  static constexpr std::string_view kName = "tool.decide";
  std::string call_id;
  Decision decision;
};
BOOST_DESCRIBE_STRUCT(ToolDecide, (), (call_id, decision))

struct FrameSet {
  static constexpr std::string_view kName = "frame.set";
  Frame frame;
  // Additive: how the step this frame's boundary leaves ended, in the embedder's judgement
  // (step.left carries it); without it the step is left with no_verdict.
  std::optional<StepOutcome> step_outcome;
};
BOOST_DESCRIBE_STRUCT(FrameSet, (), (frame, step_outcome))
MH_WIRE_RULES(FrameSet, WireFieldRule{"step_outcome", kOmitNull})

struct MessageInject {
  static constexpr std::string_view kName = "message.inject";
  std::string text;
};
BOOST_DESCRIBE_STRUCT(MessageInject, (), (text))

struct Steer {
  static constexpr std::string_view kName = "steer";
  std::string text;
};
BOOST_DESCRIBE_STRUCT(Steer, (), (text))

struct PermissionSet {
  static constexpr std::string_view kName = "permission.set";
  std::string posture;  // in the vendor's own vocabulary
};
BOOST_DESCRIBE_STRUCT(PermissionSet, (), (posture))

struct Interrupt {
  static constexpr std::string_view kName = "interrupt";
  std::optional<std::string> reason;
};
BOOST_DESCRIBE_STRUCT(Interrupt, (), (reason))

struct Halt {
  static constexpr std::string_view kName = "halt";
  std::optional<std::string> reason;
};
BOOST_DESCRIBE_STRUCT(Halt, (), (reason))

}  // namespace cmd

using CommandPayload = std::variant<cmd::ToolDecide, cmd::FrameSet, cmd::MessageInject, cmd::Steer, cmd::PermissionSet,
                                    cmd::Interrupt, cmd::Halt>;

inline constexpr std::size_t kCommandCount = std::variant_size_v<CommandPayload>;
static_assert(kCommandCount == 7);

// Command names as an enum, for capability tables keyed by command.
enum class CommandName { tool_decide, frame_set, message_inject, steer, permission_set, interrupt, halt };
// The names are the payload types' own kName, in variant order.
MH_ENUM_NAMES(CommandName, cmd::ToolDecide::kName, cmd::FrameSet::kName, cmd::MessageInject::kName, cmd::Steer::kName,
              cmd::PermissionSet::kName, cmd::Interrupt::kName, cmd::Halt::kName);

struct Command {
  std::string id;
  CommandPayload payload;
};

inline CommandName command_name(const CommandPayload& p) {
  return static_cast<CommandName>(p.index());
}

std::string serialize(const Command& command);

}  // namespace mh::protocol
