// The Claude Code adapter (CLI 2.1.197), driven in bidirectional stream-json mode:
//   claude -p --input-format stream-json --output-format stream-json --verbose
//          --setting-sources "" --strict-mcp-config
// The call seam is an in-band PreToolUse hook callback registered with `initialize` for every
// tool; each decision goes back as a control_response. Facts: ../shared/reference/claude-code-wire.md.
#pragma once

#include <map>

#include "adapters/adapter.hpp"

namespace mh::adapters {

std::unique_ptr<Adapter> make_claude_adapter(const HostConfig& config);

namespace claude {

const proto::CapabilityTable& capabilities();

// Where the pinned CLI lives under a vendor dir (the native binary, so the pid is exact).
std::filesystem::path default_binary(const std::filesystem::path& vendor_dir);

// Claude's permission postures (set_permission_mode), in the vendor's vocabulary.
bool is_known_posture(std::string_view posture);
std::string_view posture_vocabulary();

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
  void read_record(const json::object& record, const proto::FramedLine& line, AdapterSink& sink);

  bool saw_session_start() const { return saw_init_; }
  std::optional<proto::ev::SessionEnded> session_ended() const;
  const std::optional<std::string>& credential_source() const { return credential_source_; }
  // The Agent call that spawned a sub-agent, by the sub-agent's own id (a hook input inside a
  // sub-agent carries `agent_id`; Claude's `system/task_started` pairs it with the call's id).
  std::optional<std::string> spawning_call(std::string_view agent_id) const;

 private:
  void map_init(const json::object& record, const std::optional<std::string>& at, AdapterSink& sink);
  void map_assistant(const json::object& record, const std::optional<std::string>& at, std::uint64_t line_no,
                     AdapterSink& sink);
  void map_user(const json::object& record, const std::optional<std::string>& at, std::uint64_t line_no,
                AdapterSink& sink);
  void map_result(const json::object& record, const std::optional<std::string>& at, std::uint64_t line_no,
                  AdapterSink& sink);
  void map_api_retry(const json::object& record, const proto::FramedLine& line, const std::optional<std::string>& at,
                     AdapterSink& sink);
  void credential_given_up(std::optional<std::string> detail, std::uint64_t line_no,
                           const std::optional<std::string>& at, AdapterSink& sink);

  Launch launch_;
  bool saw_init_ = false;
  std::optional<std::string> credential_source_;
  std::optional<proto::ev::SessionEnded> last_result_;
  std::vector<proto::PermissionDenial> denials_;  // every turn's, in order
  bool any_denial_list_ = false;
  std::string last_usage_message_;
  std::map<std::string, std::string, std::less<>> spawning_calls_;  // sub-agent id -> its Agent call id
  // This turn already reported Claude giving up on the credential (once per give-up, never per
  // retry: the synthetic record and the result report the same one).
  bool turn_auth_expired_ = false;
};

}  // namespace claude
}  // namespace mh::adapters
