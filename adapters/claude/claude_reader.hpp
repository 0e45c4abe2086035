// Claude Code's record reader (CLI 2.1.197): its stream-json stdout records as events, shared by
// live sessions and offline translation. Facts: ../shared/reference/claude-code-wire.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "adapters/adapter_outputs.hpp"
#include "adapters/claude/claude_adapter.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters::claude {

// A vendor line over the bound whose skeleton the reader maps (see Reader::read_skeleton).
bool oversized_record(const proto::FramedLine& line);

// The record reader, shared by live sessions and offline translation.
class Reader {
 public:
  struct Launch {
    proto::HermeticAttestation attestation;
    proto::TranscriptRef transcript;
    std::optional<std::string> inputs_digest;
  };
  explicit Reader(Launch launch) : launch_(std::move(launch)) {}

  // One stdout record that is not control traffic (protocol::classify_vendor_line made opaque what
  // is not a JSON object); `line` is the line as read (its text, its number in the transcript,
  // and when it was read, if live).
  void read_record(const json::object& record, const proto::FramedLine& line, AdapterOutputs& sink);
  // A record over the vendor line bound, read as a skeleton (protocol/record_skeleton.hpp): mapped
  // as any record, each event that holds a cut string saying so in its `cut`, then a warning
  // VENDOR_LINE_CUT naming the line and every cut (and which no event carries).
  void read_skeleton(const proto::RecordSkeleton& skeleton, const proto::FramedLine& line, AdapterOutputs& sink);

  bool saw_session_start() const { return saw_init_; }
  // A resumed process (parking, issue 27 §5) writes system/init for the turn the run loop has
  // already stated: that one init says nothing new.
  void skip_next_turn_start() { skip_turn_start_ = true; }
  std::optional<proto::ev::SessionEnded> session_ended() const;
  const std::optional<std::string>& credential_source() const { return credential_source_; }
  // The Agent call that spawned a sub-agent, by the sub-agent's own id (a hook input inside a
  // sub-agent carries `agent_id`; Claude's `system/task_started` pairs it with the call's id).
  std::optional<std::string> spawning_call(std::string_view agent_id) const;

 private:
  void map_init(const json::object& record, const std::optional<std::string>& at, AdapterOutputs& sink);
  void map_assistant(const json::object& record, const std::optional<std::string>& at, std::uint64_t line_no,
                     AdapterOutputs& sink);
  void map_user(const json::object& record, const std::optional<std::string>& at, std::uint64_t line_no,
                AdapterOutputs& sink);
  void map_result(const json::object& record, const std::optional<std::string>& at, std::uint64_t line_no,
                  AdapterOutputs& sink);
  void turn_usage(const json::object& record, const proto::ev::SessionEnded& mapped,
                  const std::optional<std::string>& at, AdapterOutputs& sink);
  void map_api_retry(const json::object& record, const proto::FramedLine& line, const std::optional<std::string>& at,
                     AdapterOutputs& sink);
  // The skeleton's cuts under `from` (a pointer into the record), re-based onto `to` in the
  // payload's `field`, and marked carried. Empty outside read_skeleton.
  std::vector<proto::CutField> carry(const std::string& from, std::string_view field, std::string_view to);
  void emit(AdapterOutputs& sink, proto::EventPayload payload, const std::optional<std::string>& at,
            std::vector<proto::CutField> cut);
  void credential_given_up(std::optional<std::string> detail, std::uint64_t line_no,
                           const std::optional<std::string>& at, AdapterOutputs& sink);

  Launch launch_;
  bool saw_init_ = false;
  bool skip_turn_start_ = false;
  std::optional<std::string> credential_source_;
  std::optional<proto::ev::SessionEnded> last_result_;
  std::vector<proto::PermissionDenial> denials_;  // every turn's, in order
  bool any_denial_list_ = false;
  std::string last_usage_message_;
  // The session's figures as of the previous result (Claude's modelUsage and total_cost_usd are
  // cumulative): a turn's own are their growth.
  std::map<std::string, proto::TokenUsage> session_models_;
  std::optional<double> session_cost_;
  std::map<std::string, std::string, std::less<>> spawning_calls_;  // sub-agent id -> its Agent call id
  // This turn already reported Claude giving up on the credential (once per give-up, never per
  // retry: the synthetic record and the result report the same one).
  bool turn_auth_expired_ = false;
  // While a skeleton is read: its cuts, and which an event carried.
  const std::vector<proto::SkeletonCut>* skeleton_cuts_ = nullptr;
  std::vector<bool> carried_;
};

}  // namespace mh::adapters::claude
