// The one translation unit that compiles Asio, Beast and Process v2. Everything else includes
// their headers with *_SEPARATE_COMPILATION defined (see daemon/CMakeLists.txt), so on a
// 2-core machine the heavy template bodies are built once, not once per file.
// process_v2.hpp must precede Process v2's sources (see there): keep this order.
// clang-format off
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>

#include "daemon/asio/process_v2.hpp"
#include <boost/process/v2/src.hpp>
// clang-format on
