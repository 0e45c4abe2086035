// Include Boost.Process v2 through this header only.
//
// Boost 1.81's process/v2/environment.hpp names an unqualified `remove_pointer` that only
// resolves when boost::filesystem has dragged in Boost.TypeTraits; we use std::filesystem
// (BOOST_PROCESS_USE_STD_FS), so bring the trait in first.
#pragma once

#include <boost/type_traits/remove_pointer.hpp>

#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/stdio.hpp>
#include <boost/process/v2/start_dir.hpp>
