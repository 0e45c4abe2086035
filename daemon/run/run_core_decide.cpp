// Deciding a tool call: present (operations, subjects, the mode's decision, tool.requested and the
// deadline), decide (tool.decided and the answer to the vendor), abandoning what is pending, and
// the frame's verdict with its subject globs. Separate: this is the governing decision itself.
#include <algorithm>

#include "adapters/session.hpp"
#include "daemon/run/run_core.hpp"
#include "daemon/run/run_core_impl.hpp"

namespace mh::daemon {

using namespace run_core_detail;

bool subject_glob_matches(std::string_view glob, std::string_view subject) {
  // Iterative matcher with backtracking over the most recent star; `**` may cross '/', `*` may not.
  std::size_t g = 0, s = 0;
  std::size_t star_g = std::string_view::npos, star_s = 0;
  bool star_crosses = false;
  while (s < subject.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star_crosses = g + 1 < glob.size() && glob[g + 1] == '*';
      g += star_crosses ? 2 : 1;
      star_g = g;
      star_s = s;
      continue;
    }
    if (g < glob.size() && glob[g] == subject[s]) {
      ++g;
      ++s;
      continue;
    }
    if (star_g != std::string_view::npos && (star_crosses || subject[star_s] != '/')) {
      ++star_s;
      s = star_s;
      g = star_g;
      continue;
    }
    return false;
  }
  while (g < glob.size() && glob[g] == '*')
    ++g;
  return g == glob.size();
}

RunCore::CallState& RunCore::present(adapters::ToolCall call, std::optional<std::string> at, proto::Seam seam) {
  std::string id = call.call_id;
  CallState& st = calls_[id];
  st.seam = seam;
  auto ops = adapter_.operations_for(call);

  proto::ev::ToolRequested requested;
  requested.call_id = call.call_id;
  requested.name = call.name;
  requested.input = call.input;
  for (const auto& op : ops)
    requested.operations.push_back(op_label(op));
  requested.subjects = adapter_.subjects_for(call);
  requested.seam = seam;
  requested.agent = call.agent;
  requested.escalation = call.escalation;
  st.call = std::move(call);
  st.delivered_at = now_;
  note_last(proto::ev::ToolRequested::kName, &st.call.name);

  auto over_budget = budget_.tool_call();
  effects_.spend_changed(budget_.spend());
  if (seam == proto::Seam::none) {  // a record of a call nobody adjudicates: delivered, never decided
    st.requested_seq = effects_.emit(std::move(requested), std::move(at));
    if (over_budget) exhaust(*over_budget);
    return st;
  }
  if (over_budget) {
    // The call that crosses the budget does not run: it is recorded, refused, and the run stops.
    st.requested_seq = effects_.emit(std::move(requested), std::move(at));
    decide(st, proto::decision::Deny{"the run's budget: " + over_budget->message() + ", so this call did not run"},
           proto::DecidedBy::adapter, seam);
    exhaust(*over_budget);
    return st;
  }

  auto verdict = frame_in_force_ ? frame_refuses(st, ops) : std::nullopt;
  switch (spec_.decisions) {
    case proto::DecisionMode::observe:
      st.requested_seq = effects_.emit(std::move(requested), std::move(at));
      decide(st, proto::decision::Allow{}, proto::DecidedBy::observe, seam);
      return st;
    case proto::DecisionMode::frame:
      if (!frame_in_force_) {
        if (!warned_no_frame_) {
          warned_no_frame_ = true;
          warn("NO_FRAME_IN_FORCE",
               "decisions are taken from the frame and no frame is in force, so "
               "metaharness abstains: the vendor's own permission pipeline decides");
        }
        st.requested_seq = effects_.emit(std::move(requested), std::move(at));
        decide(st, proto::decision::Abstain{}, proto::DecidedBy::adapter, seam);
        return st;
      }
      if (verdict && verdict->uncovered) warn("UNCOVERED_TOOL", verdict->reason);
      st.requested_seq = effects_.emit(std::move(requested), std::move(at));
      if (verdict)
        decide(st, proto::decision::Deny{verdict->reason}, proto::DecidedBy::frame, seam);
      else
        decide(st, proto::decision::Allow{}, proto::DecidedBy::frame, seam);
      return st;
    case proto::DecisionMode::ask:
      // A frame in force narrows what the embedder is asked about: what it refuses is refused
      // at once; what it admits still needs the embedder's answer.
      if (verdict) {
        if (verdict->uncovered) warn("UNCOVERED_TOOL", verdict->reason);
        st.requested_seq = effects_.emit(std::move(requested), std::move(at));
        decide(st, proto::decision::Deny{verdict->reason}, proto::DecidedBy::frame, seam);
        return st;
      }
      requested.decision_required = true;
      requested.deadline_ms = spec_.decision_deadline_ms;
      st.decision_required = true;
      st.requested_seq = effects_.emit(std::move(requested), std::move(at));
      // The deadline runs from delivery, and keeps running whether or not anyone listens.
      st.delivered_at = now_;
      st.deadline_at = now_ + std::chrono::milliseconds(spec_.decision_deadline_ms);
      pending_.insert(id);
      effects_.arm_deadline(id, st.deadline_at);
      return st;
  }
  return st;
}

void RunCore::decide(CallState& st, proto::Decision decision, proto::DecidedBy by, proto::Seam seam,
                     std::optional<proto::PeerIdentity> peer) {
  if (pending_.erase(st.call.call_id)) effects_.cancel_deadline(st.call.call_id);
  proto::ev::ToolDecided decided;
  // Deny-only: an allow would grant and bypass the vendor's own rules, which this run relies on;
  // it is delivered as abstain (the vendor's pipeline decides), and the record says both.
  if (spec_.deny_only && std::holds_alternative<proto::decision::Allow>(decision)) {
    decided.requested = std::move(decision);
    decision = proto::decision::Abstain{};
  }
  census_.count(decision, seam, by);
  decided.call_id = st.call.call_id;
  decided.decision = decision;
  decided.decided_by = by;
  decided.seam = seam;
  if (by == proto::DecidedBy::embedder || by == proto::DecidedBy::deadline || by == proto::DecidedBy::adapter)
    decided.latency_ms = ms_between(st.delivered_at, now_);
  decided.peer = peer;
  st.decision = std::move(decision);
  st.decided_by = by;
  // The decision reaches the vendor before anything else happens (an interrupt or a halt that
  // follows must not overtake it), and the record follows the effect.
  answer_vendor(st);
  effects_.emit(std::move(decided), std::nullopt);
  decided_while_parked(st.call.call_id);
}

void RunCore::answer_vendor(CallState& st) {
  if (!st.reply || st.answered || !st.decision) return;
  st.answered = true;
  adapters::AdapterOutputs outputs;
  session_->answer(*st.reply, st.call, *st.decision, outputs);
  fold(outputs);
}

void RunCore::abandon_pending(std::string_view why) {
  std::vector<std::string> ids(pending_.begin(), pending_.end());
  std::sort(ids.begin(), ids.end(),
            [&](const auto& a, const auto& b) { return calls_.at(a).requested_seq < calls_.at(b).requested_seq; });
  for (const auto& id : ids) {
    CallState& st = calls_.at(id);
    decide(st, proto::decision::Deny{std::string(why) + " before this call was decided, so nothing ran"},
           proto::DecidedBy::adapter, st.seam);
    warn("PENDING_CALL_ABANDONED", id + " was never decided by the embedder");
  }
}

std::optional<RunCore::Verdict> RunCore::frame_refuses(const CallState& st,
                                                       const std::vector<proto::Operation>& ops) const {
  const proto::Frame& frame = *frame_in_force_;
  const std::vector<proto::Operation>* admitted = &frame.operations;
  auto subjects = adapter_.subjects_for(st.call);
  if (!frame.subject_rules.empty() && !subjects.empty()) {
    for (const auto& rule : frame.subject_rules) {
      bool hit = std::any_of(rule.subjects.begin(), rule.subjects.end(), [&](const std::string& glob) {
        return std::any_of(subjects.begin(), subjects.end(),
                           [&](const std::string& s) { return subject_glob_matches(glob, s); });
      });
      if (hit) {
        admitted = &rule.operations;
        break;
      }
    }
  }
  if (ops.empty())
    return Verdict{true, st.call.name +
                             " is outside the operation vocabulary this step was framed with, "
                             "so this step does not admit it"};
  for (const auto& op : ops)
    if (std::binary_search(admitted->begin(), admitted->end(), op)) return std::nullopt;
  std::string admits = "[";
  for (std::size_t i = 0; i < admitted->size(); ++i)
    admits += (i ? ",\"" : "\"") + op_label((*admitted)[i]) + "\"";
  admits += "]";
  std::string is;
  for (std::size_t i = 0; i < ops.size(); ++i)
    is += (i ? "/" : "") + op_label(ops[i]);
  return Verdict{false, "this step admits " + admits + " and " + st.call.name + " is " + is +
                            ", which it does not; a refusal is the answer, not an obstacle"};
}

}  // namespace mh::daemon
