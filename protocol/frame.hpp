// metaharness.frame/1: the sealed document that says which neutral operations a step admits.
// Load, validate, seal (SHA-256 over the canonical form) and verify; every failure is refused
// by name and nothing is ever repaired.
#pragma once

#include <boost/system/result.hpp>

#include "protocol/types.hpp"

namespace mh::protocol {

// The closed operation vocabulary, in vocabulary order.
enum class OpKind {
  file_read,
  file_write,
  file_edit,
  dir_list,
  search,
  shell,
  web_read,
  skill_load,
  subagent_spawn,
  task_todo,
  mcp_call,
};

MH_ENUM_NAMES(OpKind, std::string_view("file.read"), std::string_view("file.write"), std::string_view("file.edit"),
              std::string_view("dir.list"), std::string_view("search"), std::string_view("shell"),
              std::string_view("web.read"), std::string_view("skill.load"), std::string_view("subagent.spawn"),
              std::string_view("task.todo"), std::string_view("mcp.call"));

struct Operation {
  OpKind op = OpKind::file_read;
  std::string server;  // mcp.call only
  std::string tool;    // mcp.call only

  // Wire name, e.g. "shell"; an mcp.call renders as "mcp.call <server>/<tool>" in text.
  std::string_view wire_name() const { return to_string(op); }
  friend bool operator==(const Operation&, const Operation&) = default;
  friend auto operator<=>(const Operation& a, const Operation& b) {
    if (auto c = a.wire_name() <=> b.wire_name(); c != 0) return c;
    if (auto c = a.server <=> b.server; c != 0) return c;
    return a.tool <=> b.tool;
  }
};

struct FrameNote {  // prior: {text, source}; obligations/reaching: {text, asked_by}
  std::string text;
  std::optional<std::string> attribution;
};

struct Handoff {
  enum class Kind { none, artifact, structured_answer } kind = Kind::none;
  std::string name;                  // artifact
  std::optional<std::string> kind_;  // artifact (`kind` on the wire)
  std::string schema;                // structured_answer
};

struct SubjectRule {
  std::vector<std::string> subjects;  // globs: literals, *, **; scheme-prefixed
  std::vector<Operation> operations;
};

struct Entities {
  std::string source;
  std::vector<std::string> members;
};

struct Frame {
  std::string workflow_id;
  std::string workflow_version;
  std::string node_id;
  StepRef step;
  std::vector<FrameNote> prior;        // attribution = source
  std::vector<FrameNote> obligations;  // attribution = asked_by
  std::vector<FrameNote> reaching;     // attribution = asked_by
  std::vector<std::string> next;       // node ids
  Handoff handoff;
  std::vector<SubjectRule> subject_rules;  // `subjects.rules`; omitted when empty
  std::vector<Operation> operations;       // sorted, de-duplicated (a set)
  std::optional<Entities> entities;
  std::string digest;  // stated digest ("" when unsealed)

  bool admits(const Operation& op) const;
};

MH_NAMED_ENUM(FrameRefusalKind, NotJson, UnknownFormat, Invalid, DigestMismatch, Unreadable);

struct FrameRefusal {
  FrameRefusalKind kind;
  std::string message;
};

// Document text -> frame, checking format, shape and (when require_sealed) the digest.
boost::system::result<Frame, FrameRefusal> load_frame(std::string_view document, bool require_sealed = true);
// The same checks on an already-parsed value (a frame embedded in a frame.set command).
boost::system::result<Frame, FrameRefusal> frame_from_json(const json::value& v, bool require_sealed = true);

// The canonical bytes the digest is taken over (§7.3): compact, keys sorted at every level,
// without `format` and `digest`.
std::string canonical_frame_bytes(const Frame& frame);
std::string compute_frame_digest(const Frame& frame);
// Sets frame.digest to the digest of its canonical form.
void seal(Frame& frame);
// The frame as a JSON object. with_envelope adds `format` and `digest`.
json::value frame_to_json(const Frame& frame, bool with_envelope = true);
// The document form: pretty, sorted keys, trailing newline. Writing never reseals.
std::string frame_document(const Frame& frame);
// The frame as model text (the shared renderer's layout).
std::string render_frame_text(const Frame& frame);

// Makes boost::system::result<T, FrameRefusal>::value() usable.
[[noreturn]] void throw_exception_from_error(const FrameRefusal& e, const boost::source_location& loc);

}  // namespace mh::protocol
