"""Offline stand-in for rules_cc: re-exports Bazel 4.2.3's native C++ rules.

Bazel's own @bazel_tools//tools/cpp:BUILD loads this file. Debian's newer
rules_cc package does not work with Bazel 4.2.3, and the real one needs the
network, so the native rules are re-exported unchanged.
"""

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

def objc_library(**kwargs):
    native.objc_library(**kwargs)
