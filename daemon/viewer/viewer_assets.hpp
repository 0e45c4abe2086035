// The viewer page's files (viewer.html, viewer.js, viewer.css beside this header), compiled into
// the daemon by embed_assets.cmake and served under /viewer by the HTTP listener.
#pragma once

#include <span>
#include <string_view>

namespace mh::daemon {

struct ViewerAsset {
  std::string_view name;  // the file's name, e.g. "viewer.js"
  std::string_view content_type;
  std::string_view body;
};

std::span<const ViewerAsset> viewer_assets();

}  // namespace mh::daemon
