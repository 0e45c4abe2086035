#include "daemon/server/connection.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <vector>

#include "daemon/server/socket_api.hpp"
#include "protocol/line_framer.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

Signal::Signal(asio::any_io_executor ex) : timer_(ex, std::chrono::steady_clock::time_point::max()) {}

void Signal::notify() {
  set_ = true;
  timer_.cancel();
}

asio::awaitable<void> Signal::wait() {
  if (!set_) co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  set_ = false;
}

namespace {

std::string oversized_message(const protocol::FramedLine& line, std::size_t bound) {
  return "line " + std::to_string(line.number) + " is over the " + std::to_string(bound) + "-byte bound (" +
         std::to_string(line.length) + " bytes had arrived; it began \"" + protocol::excerpt(line.head, 60) +
         "\"); it is refused unread and the rest of it, up to its newline, is discarded";
}

std::string unterminated_refusal(const std::string& text) {
  return refusal_line("UNTERMINATED_LINE",
                      "the connection's last line (" + std::to_string(text.size()) +
                          " bytes) ended without a newline; a line counts only with its '\\n', so it was not "
                          "acted on (it began \"" +
                          protocol::excerpt(text, 60) + "\")",
                      std::nullopt);
}

}  // namespace

Connection::Connection(local_socket socket, std::size_t max_line_bytes, std::function<void()> on_gone)
    : socket_(std::move(socket)),
      max_line_bytes_(max_line_bytes),
      on_gone_(std::move(on_gone)),
      wake_writer_(socket_.get_executor()),
      drained_(socket_.get_executor()) {}

Connection::~Connection() {
  if (on_gone_) on_gone_();
}

void Connection::start(std::shared_ptr<Handler> handler) {
  auto self = shared_from_this();
  asio::co_spawn(socket_.get_executor(), write_loop(self), asio::detached);
  asio::co_spawn(socket_.get_executor(), read_loop(self, std::move(handler)), asio::detached);
}

void Connection::start_refused(std::string line) {
  // Queued before the writer starts: the caller is not on the connection's strand.
  send(std::move(line));
  close_after_flush_ = true;
  reader_active_ = true;
  auto self = shared_from_this();
  asio::co_spawn(socket_.get_executor(), write_loop(self), asio::detached);
  asio::co_spawn(socket_.get_executor(), discard_then_close(self), asio::detached);
}

void Connection::send(std::string line) {
  queue(std::move(line), /*answer=*/true);
}

void Connection::send_streamed(std::string line) {
  queue(std::move(line), /*answer=*/false);
}

void Connection::queue(std::string line, bool answer) {
  line.push_back('\n');
  if (writer_waiting_ && outbox_.empty() && !closed_ && !close_after_flush_) {
    // The writer sleeps with nothing queued or in flight: write now instead of waking it. A
    // line sent this way costs no hand-off to the writer and back (two handlers through the
    // io_context, each a round of its epoll) — most of a quiet controller's lines, and every
    // answer to a decision. What the socket does not take at once is queued as usual; a
    // failure is met again by the writer's own write, which closes the connection.
    const ssize_t n = ::send(socket_.native_handle(), line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(line.size())) return;
    if (n > 0) line.erase(0, static_cast<std::size_t>(n));
  }
  outbox_bytes_ += line.size();
  if (answer) answer_bytes_ += line.size();
  outbox_.push_back(Queued{std::move(line), answer});
  wake_writer_.notify();
}

void Connection::close_after_flush() {
  close_after_flush_ = true;
  wake_writer_.notify();
}

void Connection::hold() {
  ++holds_;
}

void Connection::release() {
  if (holds_ > 0) --holds_;
  if (holds_ == 0 && (peer_done_ || finishing_)) close_after_flush();  // that was the last thing it asked for
}

void Connection::finish() {
  finishing_ = true;
  if (holds_ == 0) close_after_flush();
}

asio::awaitable<bool> Connection::writable() {
  while (outbox_bytes_ >= kOutboxHighWater && !closing_)
    co_await drained_.wait();
  co_return !closing_;
}

bool Connection::peer_gone() {
  if (closing_) return true;
  if (peer_done_ && peer_hung_up()) closing_ = true;  // a half-closed peer that has since gone entirely
  return closing_;
}

asio::awaitable<void> Connection::write_loop(std::shared_ptr<Connection>) {
  for (;;) {
    while (!outbox_.empty()) {
      // Everything queued by now goes in one gathered write (a decision's lines — the reply,
      // tool.decided, command.result — are one sendmsg, not three), up to a bound per write.
      std::vector<std::string> batch;
      std::vector<asio::const_buffer> buffers;
      std::size_t batch_bytes = 0, batch_answer_bytes = 0;
      while (!outbox_.empty() && batch.size() < kMaxLinesPerWrite && batch_bytes < kOutboxHighWater) {
        batch_bytes += outbox_.front().bytes.size();
        if (outbox_.front().answer) batch_answer_bytes += outbox_.front().bytes.size();
        batch.push_back(std::move(outbox_.front().bytes));
        outbox_.pop_front();
      }
      for (const auto& line : batch)
        buffers.emplace_back(asio::buffer(line));
      auto [ec, n] = co_await asio::async_write(socket_, buffers, asio::as_tuple(asio::use_awaitable));
      (void)n;
      outbox_bytes_ -= batch_bytes;
      answer_bytes_ -= batch_answer_bytes;
      drained_.notify();  // each waiter looks again at its own mark (the pump's, the reader's)
      if (ec) {
        close();
        co_return;
      }
    }
    drained_.notify();
    if (closed_) co_return;
    if (close_after_flush_) {
      // Everything is said: the peer reads end of stream. The socket itself closes once the
      // reader has taken in what the peer still sends (discard_then_close), or now.
      boost::system::error_code ec;
      socket_.shutdown(asio::socket_base::shutdown_send, ec);
      sent_all_ = true;
      if (!reader_active_ || !unread_input()) close();
      co_return;
    }
    writer_waiting_ = true;
    co_await wake_writer_.wait();
    writer_waiting_ = false;
  }
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  closing_ = true;  // nobody reads any more: a producer stops
  boost::system::error_code ec;
  socket_.shutdown(asio::socket_base::shutdown_both, ec);
  socket_.close(ec);
  wake_writer_.notify();
  drained_.notify();
}

asio::awaitable<void> Connection::read_loop(std::shared_ptr<Connection> self, std::shared_ptr<Handler> handler) {
  protocol::LineFramer framer(max_line_bytes_, /*digest_oversized=*/false, /*report_early=*/true);
  // What one read produced, in order: a line, the refusal of a line over the bound, or a last
  // line the peer never terminated.
  struct Item {
    enum Kind { line, oversized, unterminated } kind = line;
    std::string text;
  };
  std::vector<Item> items;
  auto collect = [&](const protocol::FramedLine& line) {
    if (line.too_long)
      items.push_back({Item::oversized, oversized_message(line, framer.max_line_bytes())});
    else if (line.unterminated)
      items.push_back({Item::unterminated, std::string(line.text)});
    else
      items.push_back({Item::line, std::string(line.text)});
  };
  reader_active_ = true;
  std::string buffer(16 * 1024, '\0');
  bool end_of_input = false;
  bool read_failed = false;
  while (!closed_) {
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
    if (n > 0) framer.feed(std::string_view(buffer.data(), n), collect);
    if (ec == asio::error::eof) {
      end_of_input = true;
      framer.finish(collect);
    }
    for (auto& item : items) {
      if (closed_ || close_after_flush_) break;
      // A peer that asks and does not read: its answers wait in the outbox, and its next request
      // is not handled (nor more of its bytes read) until they drain below the mark. Without
      // this, one observer pipelining `list` grew the outbox without bound. Only answers count:
      // a stream's lines (its pump waits on its own mark) never hold a follower's commands (a
      // decision, a halt, a shutdown) back, so a client that writes a long command while its
      // stream is unread is still read.
      while (answer_bytes_ >= kAnswersHighWater && !closing_ && !close_after_flush_)  // closed_ sets closing_
        co_await drained_.wait();
      if (closing_ || close_after_flush_) break;
      if (item.kind == Item::oversized) {
        co_await handler->on_oversized(std::move(item.text));
        continue;
      }
      if (item.text.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (item.kind == Item::unterminated) {
        send(unterminated_refusal(item.text));
        continue;
      }
      co_await handler->on_line(std::move(item.text));
    }
    items.clear();
    if (ec || close_after_flush_) {
      read_failed = ec && ec != asio::error::eof;
      break;
    }
  }
  if (end_of_input && !closed_ && !close_after_flush_ && !peer_hung_up()) {
    // Half-closed (shutdown(SHUT_WR)): the peer has nothing more to say but still reads.
    peer_done_ = true;
    reader_active_ = false;
    if (holds_ == 0) close_after_flush();
    co_return;
  }
  if (close_after_flush_ && !closed_ && !end_of_input && !read_failed) {
    // Closing on our side (FORBIDDEN, say) while the peer may still be writing.
    co_await discard_then_close(self);
    co_return;
  }
  // The peer went away: a controller's departure changes nothing for the run (its deadlines
  // keep running); a producer notices and stops.
  closing_ = true;
  reader_active_ = false;
  if (!close_after_flush_ || sent_all_) close();
}

asio::awaitable<void> Connection::discard_then_close(std::shared_ptr<Connection> self) {
  // Closing a Unix socket that still holds unread bytes resets the peer (ECONNRESET) and can
  // cost it the lines it was sent. So what the peer still sends is read and dropped until it
  // ends, within a bound of bytes and time: a peer that neither reads nor hangs up cannot keep
  // the connection (and its slot under server.max_connections).
  reader_active_ = true;
  closing_ = true;
  asio::steady_timer bound(socket_.get_executor(), kLingerBound);
  auto give_up = [self](boost::system::error_code ec) {
    if (ec) return;
    boost::system::error_code ignored;
    self->socket_.cancel(ignored);
  };
  bound.async_wait(give_up);
  std::string buffer(16 * 1024, '\0');
  std::size_t discarded = 0;
  bool peer_ended = false;
  while (!closed_ && discarded < kLingerBytes) {
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
    discarded += n;
    if (ec) {
      peer_ended = ec == asio::error::eof;
      break;
    }
    if (sent_all_ && !unread_input()) break;  // nothing left that a close would throw away
  }
  bound.cancel();
  reader_active_ = false;
  // A peer that ended cleanly may still be reading what is left to flush: the writer closes then.
  if (sent_all_ || !peer_ended) close();
}

bool Connection::unread_input() {
  int pending = 0;
  return ::ioctl(socket_.native_handle(), FIONREAD, &pending) == 0 && pending > 0;
}

bool Connection::peer_hung_up() {
  if (closed_) return true;
  pollfd p{socket_.native_handle(), POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

}  // namespace mh::daemon
