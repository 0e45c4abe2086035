// Splits a byte stream into lines with a hard bound on line length. A line longer than the
// bound is reported as too long without ever being held whole: its bytes are discarded as they
// arrive (optionally digested on the way, so an oversized vendor record still gets an exact
// `opaque` digest) and the framer resynchronises at the next newline.
//
// An oversized vendor line (digest_oversized) is also read as it passes by a SkeletonReader
// bounded by the line bound, so an adapter can still map the record it was (its long strings cut).
//
// Two ways to report an oversized line: at its end (the default: its whole length and, when
// asked, its digest are known then; the vendor path needs both), or as soon as the bound is
// crossed (report_early: a peer that sends a runaway line hears about it at once, not when its
// newline finally arrives, which may be never).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/digest.hpp"
#include "protocol/record_skeleton.hpp"

namespace mh::protocol {

inline constexpr std::size_t kDefaultMaxLineBytes = 1u << 20;  // 1 MiB
// A vendor's stdout line: the live run's default bound (runs.max_vendor_line_bytes), and the
// bound `translate` reads a retained transcript with, so both read the same records the same way.
inline constexpr std::size_t kDefaultMaxVendorLineBytes = 4u << 20;  // 4 MiB

struct FramedLine {
  std::string_view text;     // the line without its '\n'; empty when too_long
  std::uint64_t number = 0;  // 1-based line number in the stream (blank lines count)
  bool too_long = false;
  std::uint64_t length = 0;   // byte length of the whole line, even when it was discarded
  std::string_view head;      // the first bytes of an oversized line, for the refusal message
  std::string digest;         // SHA-256 of an oversized line, when digests were requested
  bool unterminated = false;  // the stream ended without a final '\n'
  // Reported when the bound was crossed (report_early): `length` is what had arrived by then;
  // the rest of the line, up to its '\n', is discarded with no further report.
  bool early = false;
  // An oversized vendor line read as it passed (digest_oversized): the record with its long
  // strings cut, or null when the line was not one JSON object.
  const RecordSkeleton* skeleton = nullptr;
  // When the host read the chunk the line completed in (wall clock, Unix ms): set by a live run
  // (LineFramer::set_received_at), unset offline. Readers that must place a vendor's relative
  // time (a retry-after) on the clock use it; nothing in protocol/ or adapters/ reads a clock.
  std::optional<std::int64_t> received_unix_ms;
};

class LineFramer {
 public:
  // report_early and digest_oversized exclude each other: a digest needs the whole line.
  explicit LineFramer(std::size_t max_line_bytes = kDefaultMaxLineBytes, bool digest_oversized = false,
                      bool report_early = false)
      : max_(max_line_bytes), digest_oversized_(digest_oversized && !report_early), report_early_(report_early) {}

  std::size_t max_line_bytes() const { return max_; }
  // Stamps the lines completed by the next feed()/finish() with when their chunk was read.
  void set_received_at(std::optional<std::int64_t> unix_ms) { received_unix_ms_ = unix_ms; }
  std::uint64_t lines_seen() const { return line_no_; }
  // Bytes held for an incomplete line; never more than max_line_bytes.
  std::size_t buffered() const { return buffer_.size(); }

  // Feeds a chunk; calls sink(const FramedLine&) for each complete line. Views handed to the
  // sink are valid only during the call.
  template <class Sink>
  void feed(std::string_view chunk, Sink&& sink) {
    while (!chunk.empty()) {
      std::size_t nl = chunk.find('\n');
      std::string_view piece = nl == std::string_view::npos ? chunk : chunk.substr(0, nl);
      if (discarding_) {
        discard(piece);
      } else if (buffer_.size() + piece.size() > max_) {
        start_discarding(piece);
        if (report_early_) emit_too_long(sink, false);
      } else if (nl != std::string_view::npos && buffer_.empty()) {
        emit_text(piece, sink);  // the common case: a whole line inside one chunk, no copy
        chunk.remove_prefix(nl + 1);
        continue;
      } else {
        buffer_.append(piece);
      }
      if (nl == std::string_view::npos) return;
      chunk.remove_prefix(nl + 1);
      if (discarding_) {
        if (early_reported_)
          stop_discarding();
        else
          emit_too_long(sink, false);
      } else {
        emit_text(buffer_, sink);
        buffer_.clear();
      }
    }
  }

  // End of stream: a trailing line without '\n' is still a line (flagged unterminated).
  template <class Sink>
  void finish(Sink&& sink) {
    if (discarding_ && early_reported_) {
      stop_discarding();  // reported already; that it never ended changes nothing
    } else if (discarding_) {
      emit_too_long(sink, true);
    } else if (!buffer_.empty()) {
      FramedLine line;
      line.text = buffer_;
      line.number = ++line_no_;
      line.length = buffer_.size();
      line.unterminated = true;
      line.received_unix_ms = received_unix_ms_;
      sink(static_cast<const FramedLine&>(line));
      buffer_.clear();
    }
  }

 private:
  static constexpr std::size_t kHeadBytes = 96;

  template <class Sink>
  void emit_text(std::string_view text, Sink& sink) {
    FramedLine line;
    line.text = text;
    line.number = ++line_no_;
    line.length = text.size();
    line.received_unix_ms = received_unix_ms_;
    sink(static_cast<const FramedLine&>(line));
  }

  void start_discarding(std::string_view piece) {
    discarding_ = true;
    head_ = buffer_.substr(0, kHeadBytes);
    if (head_.size() < kHeadBytes) head_.append(piece.substr(0, kHeadBytes - head_.size()));
    discarded_ = buffer_.size();
    if (digest_oversized_) {
      if (!hasher_) hasher_.emplace();
      hasher_->update(buffer_);
      skeleton_.emplace(max_);
      skeleton_->feed(buffer_);
    }
    buffer_.clear();
    buffer_.shrink_to_fit();  // an oversized line must not pin a max-sized buffer
    discard(piece);
  }

  void discard(std::string_view piece) {
    discarded_ += piece.size();
    if (digest_oversized_) {
      hasher_->update(piece);
      skeleton_->feed(piece);
    }
  }

  template <class Sink>
  void emit_too_long(Sink& sink, bool unterminated) {
    FramedLine line{.number = ++line_no_,
                    .too_long = true,
                    .length = discarded_,
                    .head = head_,
                    .unterminated = unterminated,
                    .early = report_early_,
                    .received_unix_ms = received_unix_ms_};
    if (digest_oversized_) {
      line.digest = hasher_->finish_hex();
      line.skeleton = skeleton_->finish();
    }
    sink(static_cast<const FramedLine&>(line));
    skeleton_.reset();
    if (report_early_)
      early_reported_ = true;  // the rest is discarded up to the newline, silently
    else
      stop_discarding();
  }

  void stop_discarding() {
    discarding_ = false;
    early_reported_ = false;
    discarded_ = 0;
    head_.clear();
  }

  std::size_t max_;
  bool digest_oversized_;
  bool report_early_;
  bool early_reported_ = false;
  std::string buffer_;
  std::uint64_t line_no_ = 0;
  bool discarding_ = false;
  std::uint64_t discarded_ = 0;
  std::string head_;
  std::optional<Sha256> hasher_;
  std::optional<SkeletonReader> skeleton_;
  std::optional<std::int64_t> received_unix_ms_;
};

}  // namespace mh::protocol
