#include "daemon/stream/stream_redactor.hpp"

namespace mh::daemon {

std::string_view StreamRedactor::feed(std::string_view chunk, const Redactor& redactor) {
  if (redactor.empty() && pending_.empty()) return chunk;
  pending_.append(chunk);
  out_.clear();
  if (redactor.empty()) {
    out_.swap(pending_);
    return out_;
  }
  // Whole lines go out as they are: a secret cannot span a newline in a JSON line (a newline in
  // a value is escaped as "\n"), and every needle is JSON-escaped text.
  const std::size_t last_newline = pending_.rfind('\n');
  if (last_newline != std::string::npos) {
    out_.assign(pending_, 0, last_newline + 1);
    pending_.erase(0, last_newline + 1);
    redactor.redact(out_);
  }
  if (pending_.size() > hold_bound_) {
    // A line too long to hold whole: redact what is held, give out all but a tail in which a
    // secret could still be starting.
    redactor.redact(pending_);
    const std::size_t keep = redactor.longest() > 0 ? redactor.longest() - 1 : 0;
    if (pending_.size() > keep) {
      out_.append(pending_, 0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
    }
  }
  return out_;
}

std::string_view StreamRedactor::finish(const Redactor& redactor) {
  out_.clear();
  out_.swap(pending_);
  redactor.redact(out_);
  return out_;
}

}  // namespace mh::daemon
