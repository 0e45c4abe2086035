// Include Boost.Process v2 through this header only.
//
// Boost 1.81's process/v2 headers name boost::optional and unqualified Boost.TypeTraits
// (`remove_pointer`, `is_constructible`) that only resolve when boost::filesystem has dragged
// them in; we use std::filesystem (BOOST_PROCESS_USE_STD_FS), so bring them in first.
#pragma once

// The order is the point of this header.
// clang-format off
#include <boost/asio/detail/throw_error.hpp>
#include <boost/optional.hpp>
#include <boost/type_traits/is_constructible.hpp>
#include <boost/type_traits/remove_pointer.hpp>

#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/stdio.hpp>
#include <boost/process/v2/start_dir.hpp>
// clang-format on
