#include "adapters/adapter_outputs.hpp"

namespace mh::adapters {

std::size_t AdapterOutputs::records_since(std::size_t from) const {
  std::size_t n = 0;
  for (std::size_t i = from; i < list_.size(); ++i)
    if (!std::holds_alternative<out::WriteVendor>(list_[i]) && !std::holds_alternative<out::ReplyHook>(list_[i]) &&
        !std::holds_alternative<out::SessionReady>(list_[i]) && !std::holds_alternative<out::FailRun>(list_[i]) &&
        !std::holds_alternative<out::PostureReported>(list_[i]))
      ++n;
  return n;
}

}  // namespace mh::adapters
