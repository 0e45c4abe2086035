#include "cli/verbs.hpp"
namespace mh::cli {
void register_model_verbs(CLI::App&, Context&) {}
}  // namespace mh::cli
