# Precompiled headers (issue 47 item 2; the figures are in docs/install.md).
# The standard library, Eigen and abseil take 3 to 4 s of parsing in every
# translation unit, gRPC with the generated API 5 s more, gtest and gmock 2 s
# more in every test. A few precompiled headers, built once each (about 20 s
# of CPU each), serve every target they fit (PRECOMPILE_HEADERS_REUSE_FROM),
# whose sources then load them in about 1.4 s. Included from the root
# CMakeLists.txt after every add_subdirectory, so that the folders' own
# CMakeLists.txt stay as they are; -DHYPERTUNE_PCH=OFF builds without.
#
# A target is left out, and compiles as before, where a precompiled header
# built with the common flags would not fit it: its folder sets other
# compile options (tests/optimizer/portable, built for a fixed CPU), it sets
# options of its own (hypertune_train_core: -O3) or definitions other than
# the project's HYPERTUNE_*/CHAOS_* paths, which no precompiled header reads
# (hypertune_train_core: EIGEN_DONT_PARALLELIZE), or it has sources other
# than C++ (CUDA). GCC checks the rest: -Winvalid-pch (which CMake adds)
# warns where a header does not fit after all, an error with
# HYPERTUNE_WERROR.
#
# The tests are also compiled with -g1 instead of -g: line tables and
# functions (what a backtrace needs), no local variables; -g took about a
# sixth of a test's compile time. Programs and libraries keep their -g.

# The headers, by what a target links. gRPC's targets add -pthread, so
# that a header built for code that talks gRPC (which defines _REENTRANT)
# does not fit code that does not, and the reverse: one header each, and
# one each with gtest and gmock for the tests (compiled with -g1, below).
set(hypertune_pch_common
  <algorithm> <atomic> <chrono> <cmath> <cstdint> <functional> <limits>
  <map> <memory> <mutex> <optional> <set> <string> <string_view> <thread>
  <utility> <vector>
  <Eigen/Dense>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
  <absl/strings/string_view.h>)
set(hypertune_pch_common_libs
  Eigen3::Eigen absl::status absl::statusor absl::strings)
set(hypertune_pch_grpc
  <absl/synchronization/mutex.h> <google/protobuf/text_format.h>
  <grpcpp/grpcpp.h> <hypertune/v1/hypertune.grpc.pb.h>)
set(hypertune_pch_grpc_libs absl::synchronization hypertune_grpc)
set(hypertune_pch_test <gmock/gmock.h> <gtest/gtest.h>)
set(hypertune_pch_test_libs GTest::gtest GTest::gmock)

# hypertune_pch_target(NAME [GRPC] [TEST]): the target whose precompiled
# header the others reuse.
set(hypertune_pch_targets)
function(hypertune_pch_target name)
  cmake_parse_arguments(ARG "GRPC;TEST" "" "" ${ARGN})
  set(headers ${hypertune_pch_common})
  set(libs ${hypertune_pch_common_libs})
  foreach(part GRPC TEST)
    if(ARG_${part})
      string(TOLOWER ${part} lower)
      list(APPEND headers ${hypertune_pch_${lower}})
      list(APPEND libs ${hypertune_pch_${lower}_libs})
    endif()
  endforeach()
  add_library(${name} OBJECT ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/pch.cc)
  target_link_libraries(${name} PRIVATE ${libs})
  target_precompile_headers(${name} PRIVATE ${headers})
  if(ARG_TEST)
    target_compile_options(${name} PRIVATE -g1)
  endif()
  set(hypertune_pch_targets ${hypertune_pch_targets} ${name} PARENT_SCOPE)
endfunction()
hypertune_pch_target(hypertune_pch)
hypertune_pch_target(hypertune_grpc_pch GRPC)
hypertune_pch_target(hypertune_test_pch TEST)
hypertune_pch_target(hypertune_grpc_test_pch GRPC TEST)

# The libraries whose usage requirements (options, definitions) reach a
# target that links `target`: its INTERFACE_LINK_LIBRARIES, and theirs, in
# `out`. A static library's private ones ($<LINK_ONLY:...>) are linked
# only: their options do not reach it.
function(hypertune_usage target out)
  get_property(known GLOBAL PROPERTY hypertune_usage_${target} SET)
  if(known)
    get_property(result GLOBAL PROPERTY hypertune_usage_${target})
    set(${out} ${result} PARENT_SCOPE)
    return()
  endif()
  set(result)
  get_target_property(libs ${target} INTERFACE_LINK_LIBRARIES)
  foreach(lib ${libs})
    if(lib MATCHES "^\\$<" OR NOT TARGET ${lib} OR lib IN_LIST result)
      continue()
    endif()
    list(APPEND result ${lib})
    hypertune_usage(${lib} below)
    list(APPEND result ${below})
  endforeach()
  list(REMOVE_DUPLICATES result)
  set_property(GLOBAL PROPERTY hypertune_usage_${target} ${result})
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The libraries whose usage requirements `target`'s sources compile with.
function(hypertune_linked target out)
  set(result)
  get_target_property(libs ${target} LINK_LIBRARIES)
  foreach(lib ${libs})
    if(lib MATCHES "^\\$<" OR NOT TARGET ${lib})
      continue()
    endif()
    hypertune_usage(${lib} below)
    list(APPEND result ${lib} ${below})
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# Every target defined in `dir` and the folders below it.
function(hypertune_targets_below dir out)
  get_property(found DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir ${subdirs})
    hypertune_targets_below(${subdir} below)
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Whether a precompiled header built with the common flags fits `target`.
function(hypertune_pch_fits target out)
  set(${out} FALSE PARENT_SCOPE)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$")
    return()
  endif()
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_property(dir_options DIRECTORY ${source_dir} PROPERTY COMPILE_OPTIONS)
  get_property(dir_definitions DIRECTORY ${source_dir} PROPERTY COMPILE_DEFINITIONS)
  get_property(root_options DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY COMPILE_OPTIONS)
  if(NOT "${dir_options}" STREQUAL "${root_options}" OR dir_definitions)
    return()
  endif()
  # A target's options start as its folder's.
  get_target_property(options ${target} COMPILE_OPTIONS)
  if(NOT "${options}" STREQUAL "${root_options}")
    return()
  endif()
  get_target_property(definitions ${target} COMPILE_DEFINITIONS)
  if(definitions)
    list(FILTER definitions EXCLUDE REGEX "^(HYPERTUNE|CHAOS)[A-Z0-9_]*(=.*)?$")
    if(definitions)
      return()
    endif()
  endif()
  get_target_property(sources ${target} SOURCES)
  foreach(source ${sources})
    if(NOT source MATCHES "\\.(cc|cpp|h|hpp)$")
      return()
    endif()
  endforeach()
  set(${out} TRUE PARENT_SCOPE)
endfunction()

# Left out by name (none now). GCC 12 may inline differently with a header
# and then warn wrongly (-Warray-bounds of a memcpy in std::string's
# operator+, once in tests/cli/trial_file_test.cc, since rewritten).
set(hypertune_pch_left_out)

hypertune_targets_below(${PROJECT_SOURCE_DIR} hypertune_all_targets)
foreach(target ${hypertune_all_targets})
  if(target IN_LIST hypertune_pch_targets OR target IN_LIST hypertune_pch_left_out)
    continue()
  endif()
  hypertune_pch_fits(${target} fits)
  if(NOT fits)
    continue()
  endif()
  hypertune_linked(${target} linked)
  set(pch hypertune)
  if(linked MATCHES "(^|;)gRPC::")
    string(APPEND pch _grpc)
  endif()
  if(linked MATCHES "(^|;)GTest::")
    string(APPEND pch _test)
    target_compile_options(${target} PRIVATE -g1)
  endif()
  set_target_properties(${target} PROPERTIES
    PRECOMPILE_HEADERS_REUSE_FROM ${pch}_pch)
endforeach()

