// One visitor from a set of lambdas, for std::visit over the project's variants (adapter outputs,
// journal inputs): each alternative names its own case, and a visitor without a catch-all fails
// to compile when an alternative is added that it does not take.
#pragma once

namespace mh::protocol {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace mh::protocol
