// One client connection: it moves lines and knows no requests (like the Asio chat_session).
//
// Reading: the socket's bytes are framed with the bounded LineFramer. A line over the bound is
// handed over as soon as it crosses it (a runaway peer hears at once, not when its newline
// arrives, if ever), then discarded up to its newline. Blank lines are skipped. A last line the
// peer half-closed without a newline is refused UNTERMINATED_LINE here, unread. Every other
// line goes to the Handler, one at a time and in order: the next is not read before the
// handler's on_line returns.
//
// Writing: a line sent while the writer sleeps with nothing queued is written at once, as far as
// the socket takes it without blocking. Otherwise (and the rest of a line the socket did not take)
// send() queues it in the outbox; one writer coroutine writes it out, in order. The outbox has
// a high-water mark that a producer with a lot to say (a stream pump) waits on (writable()), so
// a client that stops reading costs the daemon one batch. The reader hands over no further line
// while the answers to requests in the outbox are above kAnswersHighWater (a stream's lines do not
// count), so a client that asks and never reads costs about one answer past it, not one answer
// per request (its writes stop at the socket's buffer).
//
// Half-close: a peer that shut its writing half (`nc -U` does) has said all it will; everything
// it asked is answered, and the connection closes once nothing holds it open (hold/release: a
// stream it asked for runs to its `end`) and the outbox is flushed.
//
// Everything runs on the connection's strand (the socket's executor); the public members are
// called there.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mh::daemon {

using local_socket = boost::asio::local::stream_protocol::socket;

// A wake-up for one waiting coroutine on one strand: notify() before wait() is not lost.
class Signal {
 public:
  explicit Signal(boost::asio::any_io_executor ex);
  void notify();
  boost::asio::awaitable<void> wait();

 private:
  boost::asio::steady_timer timer_;
  bool set_ = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // What the lines mean: the request layer (daemon/server/session.hpp).
  class Handler {
   public:
    virtual ~Handler() = default;
    // One complete, non-blank line, without its newline.
    virtual boost::asio::awaitable<void> on_line(std::string line) = 0;
    // A line over the bound, already discarded; `message` says which and how long it was. Awaited
    // as a line is: what its answer takes (a relay to another host) ends before the next line is
    // handed over, so the answers keep the order of the lines.
    virtual boost::asio::awaitable<void> on_oversized(std::string message) = 0;
  };

  static constexpr std::size_t kOutboxHighWater = 256 * 1024;
  // While the answers to requests waiting in the outbox reach this, no further request line is
  // handled (the peer reads, or nothing more is read from it).
  static constexpr std::size_t kAnswersHighWater = kOutboxHighWater;
  static constexpr std::size_t kMaxLinesPerWrite = 64;  // IOV_MAX is 1024; fewer keeps a write short

  // `on_gone` runs when the connection object goes (the daemon counts open connections).
  Connection(local_socket socket, std::size_t max_line_bytes, std::function<void()> on_gone = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Reads lines for `handler` and writes what is sent, until either side closes.
  void start(std::shared_ptr<Handler> handler);
  // Sends one line and closes: a connection refused before it is served.
  void start_refused(std::string line);

  // Queues one line (the newline is added): an answer to the peer's request (a reply, a refusal),
  // counted against kAnswersHighWater.
  void send(std::string line);
  // Queues one line of a stream the peer asked for (a pump's): not counted as an answer.
  void send_streamed(std::string line);
  // Sends what is queued, then closes; no further line is read.
  void close_after_flush();

  void hold();
  void release();
  // Closes once nothing holds the connection (a stream it asked for has sent its `end`) and
  // the outbox is flushed: the daemon's stop, which must not cut a follower short.
  void finish();

  // The peer is gone or the connection is closing: a producer stops.
  bool closing() const { return closing_; }
  // Waits until the outbox is below its high-water mark; false when the connection is closing.
  boost::asio::awaitable<bool> writable();
  // Whether the peer is gone: closed, or half-closed and since hung up entirely (a producer
  // waiting on something quiet asks now and then). Sets closing() when it is.
  bool peer_gone();

  boost::asio::any_io_executor executor() { return socket_.get_executor(); }

 private:
  boost::asio::awaitable<void> write_loop(std::shared_ptr<Connection> self);
  boost::asio::awaitable<void> read_loop(std::shared_ptr<Connection> self, std::shared_ptr<Handler> handler);
  boost::asio::awaitable<void> discard_then_close(std::shared_ptr<Connection> self);
  void close();
  bool peer_hung_up();
  // Whether the peer's bytes wait unread in the socket (closing now would reset the peer).
  bool unread_input();

  // How long, and how much, a closing connection keeps reading what its peer still sends.
  static constexpr std::chrono::seconds kLingerBound{2};
  static constexpr std::size_t kLingerBytes = 1024 * 1024;

  local_socket socket_;
  std::size_t max_line_bytes_;
  std::function<void()> on_gone_;
  struct Queued {
    std::string bytes;
    bool answer = true;  // an answer to a request, not a stream's line
  };
  void queue(std::string line, bool answer);
  std::deque<Queued> outbox_;
  std::size_t outbox_bytes_ = 0;
  std::size_t answer_bytes_ = 0;  // of outbox_bytes_, the answers'
  Signal wake_writer_;
  Signal drained_;
  bool close_after_flush_ = false;
  bool closed_ = false;
  bool closing_ = false;
  bool peer_done_ = false;       // the peer half-closed: close once what it asked is answered
  bool finishing_ = false;       // finish(): close at the last release
  bool reader_active_ = false;   // a reader still takes in the peer's bytes: it closes the socket
  bool sent_all_ = false;        // the outbox is flushed and our side shut for writing
  bool writer_waiting_ = false;  // the writer sleeps, nothing in flight: send() may write at once
  std::size_t holds_ = 0;
};

}  // namespace mh::daemon
