#include "protocol/record_skeleton.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <optional>

#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "protocol/line_cut.hpp"

namespace mh::protocol {

namespace {

using boost::system::error_code;

// What one kept value costs beyond its bytes (its slot in a container).
constexpr std::size_t kValueBytes = 16;
constexpr std::size_t kMaxKeyBytes = 4096;

// The longest prefix of at most n bytes that ends on a character boundary.
std::size_t boundary(std::string_view s, std::size_t n) {
  if (n >= s.size()) return s.size();
  for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++back)
    --n;
  return n;
}

// Builds the skeleton from the parser's events.
class Builder {
 public:
  explicit Builder(std::size_t budget) : budget_(budget) {}

  RecordSkeleton skeleton;
  bool root_is_object = false;

  void open(bool object) {
    if (!admit(kValueBytes)) return;
    Frame f;
    f.token = next_token();
    f.key_in_parent = std::move(key_);
    key_.clear();
    f.value = object ? json::value(json::object()) : json::value(json::array());
    stack_.push_back(std::move(f));
  }
  void close() {
    if (!keeping_) return;
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    key_ = std::move(f.key_in_parent);
    insert(std::move(f.value));
  }
  void key_part(std::string_view s) {
    if (!keeping_) return;
    if (key_.size() + s.size() > kMaxKeyBytes) {
      give_up(pointer() + "/" + pointer_token(key_));
      return;
    }
    key_.append(s);
  }
  void key_done() { (void)admit(key_.size()); }
  void string_part(std::string_view s) {
    if (!string_open_) {
      string_open_ = true;
      string_bytes_ = 0;
      string_.clear();
      // A string keeps at most a quarter of the budget, and never more than is left.
      std::size_t left = keeping_ && budget_ > used_ + kValueBytes ? budget_ - used_ - kValueBytes : 0;
      string_cap_ = std::min(budget_ / 4, left);
      if (keeping_ && left == 0) give_up(pointer() + "/" + next_token());
    }
    if (!keeping_) return;
    string_bytes_ += s.size();
    hasher_.update(s);
    if (string_.size() < string_cap_) string_.append(s.substr(0, string_cap_ - string_.size()));
  }
  void string_done() {
    string_open_ = false;
    if (!keeping_) return;
    std::string digest = hasher_.finish_hex();
    if (string_bytes_ > string_.size() || string_bytes_ > string_cap_) {
      string_.resize(boundary(string_, std::min(string_.size(), string_cap_)));
      skeleton.cuts.push_back(
          SkeletonCut{pointer() + "/" + next_token(), string_bytes_, string_.size(), std::move(digest)});
    }
    used_ += string_.size() + kValueBytes;
    insert(json::value(json::string(string_)));
  }
  template <class T>
  void scalar(T v) {
    if (!admit(kValueBytes)) return;
    insert(json::value(v));
  }
  void null() {
    if (!admit(kValueBytes)) return;
    insert(json::value(nullptr));
  }

  // What was open when the input ended is folded into its parents (an incomplete skeleton).
  void fold() {
    while (!stack_.empty()) {
      Frame f = std::move(stack_.back());
      stack_.pop_back();
      key_ = std::move(f.key_in_parent);
      insert(std::move(f.value));
    }
  }

 private:
  struct Frame {
    json::value value;
    std::string token;          // its own token in its parent (for pointers)
    std::string key_in_parent;  // its key there, when the parent is an object
  };

  std::string pointer() const {
    std::string p;
    for (std::size_t i = 1; i < stack_.size(); ++i)
      p += "/" + stack_[i].token;
    return p;
  }
  // The token the next value takes in the innermost open container.
  std::string next_token() const {
    if (stack_.empty()) return "";
    const json::value& top = stack_.back().value;
    if (top.is_object()) return pointer_token(key_);
    return std::to_string(top.get_array().size());
  }
  bool admit(std::size_t bytes) {
    if (!keeping_) return false;
    if (used_ + bytes > budget_) {
      give_up(pointer() + "/" + next_token());
      return false;
    }
    used_ += bytes;
    return true;
  }
  void give_up(std::string at) {
    keeping_ = false;
    skeleton.complete = false;
    skeleton.missing_from = std::move(at);
  }
  void insert(json::value v) {
    if (stack_.empty()) {
      if (v.is_object()) {
        root_is_object = true;
        skeleton.record = std::move(v.get_object());
      }
      return;
    }
    json::value& top = stack_.back().value;
    if (top.is_object()) {
      top.get_object()[key_] = std::move(v);
      key_.clear();
    } else {
      top.get_array().push_back(std::move(v));
    }
  }

  std::size_t budget_;
  std::size_t used_ = 0;
  bool keeping_ = true;
  std::vector<Frame> stack_;
  std::string key_;
  bool string_open_ = false;
  std::string string_;
  std::size_t string_cap_ = 0;
  std::uint64_t string_bytes_ = 0;
  Sha256 hasher_;
};

struct Handler {
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);

  Builder* b = nullptr;

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_object_begin(error_code&) { return b->open(true), true; }
  bool on_object_end(std::size_t, error_code&) { return b->close(), true; }
  bool on_array_begin(error_code&) { return b->open(false), true; }
  bool on_array_end(std::size_t, error_code&) { return b->close(), true; }
  bool on_key_part(std::string_view s, std::size_t, error_code&) { return b->key_part(s), true; }
  bool on_key(std::string_view s, std::size_t, error_code&) {
    b->key_part(s);
    b->key_done();
    return true;
  }
  bool on_string_part(std::string_view s, std::size_t, error_code&) { return b->string_part(s), true; }
  bool on_string(std::string_view s, std::size_t, error_code&) {
    b->string_part(s);
    b->string_done();
    return true;
  }
  bool on_number_part(std::string_view, error_code&) { return true; }
  bool on_int64(std::int64_t v, std::string_view, error_code&) { return b->scalar(v), true; }
  bool on_uint64(std::uint64_t v, std::string_view, error_code&) { return b->scalar(v), true; }
  bool on_double(double v, std::string_view, error_code&) { return b->scalar(v), true; }
  bool on_bool(bool v, error_code&) { return b->scalar(v), true; }
  bool on_null(error_code&) { return b->null(), true; }
  bool on_comment_part(std::string_view, error_code&) { return true; }
  bool on_comment(std::string_view, error_code&) { return true; }
};

json::parse_options skeleton_options() {
  json::parse_options o;
  o.max_depth = kMaxJsonDepth;
  return o;
}

}  // namespace

struct SkeletonReader::Impl {
  explicit Impl(std::size_t budget) : builder(budget), parser(skeleton_options()) { parser.handler().b = &builder; }
  Builder builder;
  json::basic_parser<Handler> parser;
  bool failed = false;
  std::optional<RecordSkeleton> done;
};

SkeletonReader::SkeletonReader(std::size_t budget) : impl_(std::make_unique<Impl>(budget)) {}
SkeletonReader::~SkeletonReader() = default;
SkeletonReader::SkeletonReader(SkeletonReader&&) noexcept = default;
SkeletonReader& SkeletonReader::operator=(SkeletonReader&&) noexcept = default;

void SkeletonReader::feed(std::string_view bytes) {
  if (impl_->failed || bytes.empty()) return;
  if (impl_->parser.done()) {  // after the record: only whitespace may follow
    if (bytes.find_first_not_of(" \t\r") != std::string_view::npos) impl_->failed = true;
    return;
  }
  error_code ec;
  std::size_t used = impl_->parser.write_some(true, bytes.data(), bytes.size(), ec);
  if (ec) {
    impl_->failed = true;
    return;
  }
  if (used < bytes.size()) feed(bytes.substr(used));
}

const RecordSkeleton* SkeletonReader::finish() {
  Impl& i = *impl_;
  if (!i.failed && !i.parser.done()) {
    error_code ec;
    i.parser.write_some(false, nullptr, 0, ec);
    if (ec) i.failed = true;
  }
  if (!i.failed) i.builder.fold();  // what the budget left open
  if (i.failed || !i.builder.root_is_object) {
    // Not a whole JSON object: nothing to map (the line stays opaque).
    i.done.reset();
    return nullptr;
  }
  i.done = std::move(i.builder.skeleton);
  return &*i.done;
}

}  // namespace mh::protocol
