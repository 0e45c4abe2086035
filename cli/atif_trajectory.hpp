// A run's event stream as one ATIF trajectory (the Agent Trajectory Interchange Format of the
// Harbor evaluation framework; docs/atif.md has the mapping, docs/atif/ our restatement of the
// schema). Pure: events and the run's spec in, one JSON document out; no I/O, no clock.
//
// ATIF models a conversation (user, agent and system steps; tool calls with their observations;
// token metrics). What it has no field for, above all metaharness's own record of who decided
// each call and what the vendor said that nobody could read, is kept under `extra.metaharness`
// on the object it belongs to, never dropped: every event of the stream lands in exactly one
// place, named by its seq.
#pragma once

#include <string_view>
#include <vector>

#include "protocol/events.hpp"

namespace mh::cli::atif {

// The version this exporter writes: Harbor's current one (ATIF-v1.8 adds audio content parts to
// v1.7, which we never write, so a v1.7 reader takes our documents too).
inline constexpr std::string_view kSchemaVersion = "ATIF-v1.8";

struct Context {
  // The run's spec (spec.json, or `get`'s `spec`): the prompt that opened the run and the model
  // asked for. null when unknown: the trajectory then has no prompt step.
  boost::json::value spec = nullptr;
  // Where the stream was read ("run_dir", "events_file", "daemon"), said in extra.
  std::string source;
};

// The stream, in seq order, as read (a truncated stream is exported as far as it goes, and says
// so in extra.metaharness.stream).
boost::json::object trajectory(const std::vector<protocol::Event>& events, const Context& ctx);

}  // namespace mh::cli::atif
