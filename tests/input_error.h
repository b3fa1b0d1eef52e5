// Small helpers shared by the model tests.
#pragma once

#include "zeromem/types.h"

#include <gtest/gtest.h>

#include <string>

namespace zeromem::testing {

/// Runs `f`, expects InputError, returns its message (a test failure if none).
template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no InputError thrown";
    return "";
}

/// Whether `s` contains `part`.
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace zeromem::testing
