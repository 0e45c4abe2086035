#include "daemon/run/read_buffer.hpp"

#include <memory>

namespace mh::daemon {

char* io_thread_read_buffer() {
  thread_local std::unique_ptr<char[]> buffer(new char[kReadChunk]);
  return buffer.get();
}

}  // namespace mh::daemon
